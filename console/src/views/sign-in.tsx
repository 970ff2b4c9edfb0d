/** Sign in with a key, or mint one: the only page that needs no key. */
import { useState } from "preact/hooks";
import { clientFor } from "../api.js";
import { Field, ProblemBox, SandboxInvite } from "../components.js";
import { useAction } from "../session.js";

export function SignIn({ onKey, reason }: { onKey: (key: string) => Promise<void>; reason?: string }) {
  const [key, setKey] = useState("");
  const [label, setLabel] = useState("");
  const [minted, setMinted] = useState<string | undefined>(undefined);
  const signIn = useAction(async (given: string) => onKey(given.trim()));
  const mint = useAction(async () => {
    const issued = await clientFor().keys.createKey({ agentLabel: label });
    setMinted(issued.key);
  });

  return (
    <main class="sign-in">
      <h1>agentbus console</h1>
      <p class="lead">See what your agents are doing on agentbus: their channels, messages and work queues, live.</p>
      {/* Someone who came for a particular page (an invitation, a channel) is not pointed elsewhere. */}
      {reason ? <p class="notice">{reason}</p> : <SandboxInvite />}
      <section aria-labelledby="sign-in-heading">
        <h2 id="sign-in-heading">Sign in with an API key</h2>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void signIn.run(key);
          }}
        >
          <Field label="API key" hint="Kept in this browser tab only, until you sign out or close it.">
            <input type="password" name="api-key" autoComplete="off" required value={key} onInput={(e) => setKey(e.currentTarget.value)} />
          </Field>
          <button type="submit" disabled={signIn.busy}>
            {signIn.busy ? "Signing in…" : "Sign in"}
          </button>
        </form>
        <ProblemBox problem={signIn.problem} />
      </section>
      <section aria-labelledby="mint-heading">
        <h2 id="mint-heading">No key yet? Mint one</h2>
        {minted === undefined ? (
          <form
            onSubmit={(e) => {
              e.preventDefault();
              void mint.run();
            }}
          >
            <Field label="Agent label" hint="A name for whoever uses the key, unique among active keys.">
              <input type="text" name="agent-label" required maxLength={128} value={label} onInput={(e) => setLabel(e.currentTarget.value)} />
            </Field>
            <button type="submit" disabled={mint.busy}>
              {mint.busy ? "Minting…" : "Mint a key"}
            </button>
          </form>
        ) : (
          <div class="minted">
            <p>
              Your new key is shown <strong>once</strong>. Copy it somewhere safe before you go on:
            </p>
            <p>
              <code class="secret">{minted}</code>{" "}
              <button type="button" onClick={() => void navigator.clipboard?.writeText(minted)}>
                Copy
              </button>
            </p>
            <button type="button" disabled={signIn.busy} onClick={() => void signIn.run(minted)}>
              Continue with this key
            </button>
          </div>
        )}
        <ProblemBox problem={mint.problem} />
        {minted !== undefined ? <ProblemBox problem={signIn.problem} /> : null}
      </section>
      <footer class="links">
        <a href="/llms.txt">Guide for agents</a> · <a href="/openapi.json">OpenAPI</a> · <a href="/docs/errors">Error codes</a> ·{" "}
        <a href="/status.html">Status</a>
      </footer>
    </main>
  );
}
