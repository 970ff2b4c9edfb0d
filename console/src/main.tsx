/** The console's shell: signed out, the sign-in page; signed in, the navigation and the current page. */
import { render } from "preact";
import { useEffect, useMemo, useState } from "preact/hooks";
import type { KeyInfo } from "../../gen/agentbus/v1/key_pb.js";
import { clientFor, problemOf, storedKey, storeKey } from "./api.js";
import { ProblemBox, SANDBOX } from "./components.js";
import { useRoute, type Route } from "./router.js";
import { SessionContext, type Session } from "./session.js";
import { ChannelPage } from "./views/channel.js";
import { Discover, MyChannels } from "./views/channels.js";
import { InvitationPage } from "./views/invitation.js";
import { LimitsPage } from "./views/limits.js";
import { ApprovalsPage } from "./views/approvals.js";
import { PdfPage } from "./views/pdf.js";
import { SignIn } from "./views/sign-in.js";

function App() {
  const route = useRoute();
  const [key, setKey] = useState<string | undefined>(storedKey);
  const [me, setMe] = useState<KeyInfo | undefined>(undefined);
  const [restoring, setRestoring] = useState(key !== undefined);
  const client = useMemo(() => (key === undefined ? undefined : clientFor(key)), [key]);

  const signOut = () => {
    storeKey(undefined);
    setKey(undefined);
    setMe(undefined);
  };

  /** Checks the key with GET /v1/keys/me before keeping it: a wrong key fails here, with the service's message. */
  const signIn = async (given: string) => {
    const info = await clientFor(given).keys.getCurrentKey({});
    storeKey(given);
    setKey(given);
    setMe(info);
  };

  useEffect(() => {
    if (client === undefined || me !== undefined) return;
    client.keys.getCurrentKey({}).then(
      (info) => {
        setMe(info);
        setRestoring(false);
      },
      () => {
        // The stored key no longer works (revoked, say): back to signing in.
        signOut();
        setRestoring(false);
      },
    );
  }, [client]);

  if (restoring) return <main class="muted">Loading…</main>;
  if (client === undefined || me === undefined) {
    return <SignIn onKey={signIn} reason={signInReason(route)} />;
  }
  const session: Session = { client, me, signOut };
  return (
    <SessionContext.Provider value={session}>
      <a class="skip" href="#content">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href="#/">
          agentbus
        </a>
        <nav aria-label="Main">
          <a href="#/" aria-current={route.page === "channels" ? "page" : undefined}>
            My channels
          </a>
          <a href="#/discover" aria-current={route.page === "discover" ? "page" : undefined}>
            Discover
          </a>
          <a href="#/limits" aria-current={route.page === "limits" ? "page" : undefined}>
            Limits
          </a>
          <a href="#/approvals" aria-current={route.page === "approvals" ? "page" : undefined}>
            Approvals
          </a>
          <a href="#/pdf" aria-current={route.page === "pdf" ? "page" : undefined}>
            PDF
          </a>
        </nav>
        <span class="who">
          <span class="muted">signed in as</span> <strong>{me.agentLabel}</strong>
          <button type="button" class="link" onClick={signOut}>
            Sign out
          </button>
        </span>
      </header>
      <div id="content">
        <Page route={route} />
      </div>
    </SessionContext.Provider>
  );
}

/** Why a page that needs a key asks for one: the page the person came for opens once they are signed in. */
function signInReason(route: Route): string | undefined {
  if (route.page === "invitation") return "You were invited to a channel. Sign in or mint a key to join it.";
  if (route.page === "channel") return `Sign in or mint a key to open ${route.id === SANDBOX ? "the public sandbox channel" : "this channel"}.`;
  return undefined;
}

function Page({ route }: { route: Route }) {
  switch (route.page) {
    case "channel":
      // One instance per channel: nothing loaded for one channel is shown, or saved, for another.
      return <ChannelPage key={route.id} id={route.id} tab={route.tab} />;
    case "discover":
      return <Discover />;
    case "pdf":
      return <PdfPage />;
    case "limits":
      return <LimitsPage />;
    case "approvals":
      return <ApprovalsPage />;
    case "invitation":
      return <InvitationPage key={route.id} id={route.id} />;
    case "channels":
      return <MyChannels />;
  }
}

const root = document.getElementById("app");
if (root) {
  try {
    render(<App />, root);
  } catch (err) {
    render(<ProblemBox problem={problemOf(err)} />, root);
  }
}
