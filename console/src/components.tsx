/** Small pieces every view uses: times, errors, empty states, labelled fields. */
import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import { hasSandbox, type Problem } from "./api.js";
import { exactTime, relativeTime } from "./format.js";

/** A relative time that keeps itself current, with the exact time on hover. */
export function Time({ date }: { date: Date | undefined }) {
  const [, tick] = useState(0);
  useEffect(() => {
    const timer = setInterval(() => tick((n) => n + 1), 15_000);
    return () => clearInterval(timer);
  }, []);
  if (date === undefined) return <span class="muted">—</span>;
  return (
    <time dateTime={date.toISOString()} title={exactTime(date)}>
      {relativeTime(date)}
    </time>
  );
}

export function ProblemBox({ problem, onDismiss }: { problem: Problem | undefined; onDismiss?: () => void }) {
  if (problem === undefined) return null;
  return (
    <div class="problem" role="alert">
      <p>
        <strong>{problem.message}</strong> <code>{problem.code}</code>
      </p>
      {problem.suggestion ? <p>{problem.suggestion}</p> : null}
      {onDismiss ? (
        <button type="button" class="link" onClick={onDismiss}>
          Dismiss
        </button>
      ) : null}
    </div>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>;
}

export function Field({ label, hint, narrow, children }: { label: string; hint?: string; narrow?: boolean; children: ComponentChildren }) {
  return (
    <label class={narrow ? "field narrow" : "field"}>
      <span class="label">{label}</span>
      {children}
      {hint ? <span class="hint">{hint}</span> : null}
    </label>
  );
}

export function Badge({ kind, children }: { kind: string; children: ComponentChildren }) {
  return <span class={`badge badge-${kind.replace(/\s+/g, "-")}`}>{children}</span>;
}

/** The identifier the sandbox channel is reached by: its alias, the same on every service that has one. */
export const SANDBOX = "sandbox";

/** Points a newcomer at the public sandbox channel, where they can post and read at once; nothing when the service has none. */
export function SandboxInvite() {
  const [offered, setOffered] = useState(false);
  useEffect(() => {
    let live = true;
    void hasSandbox().then((yes) => live && setOffered(yes));
    return () => {
      live = false;
    };
  }, []);
  if (!offered) return null;
  return (
    <p class="sandbox">
      <a href={`#/channels/${SANDBOX}`}>Try the public sandbox channel</a>: anyone with a key can post and read there, so you can see messages
      arrive before you make a channel of your own.
    </p>
  );
}

/** A settings form's foot: its submit button (and any other), "Saved." once saved, and what went wrong. */
export function SaveRow({ label, busy, saved, problem, children }: { label: string; busy: boolean; saved: boolean; problem: Problem | undefined; children?: ComponentChildren }) {
  return (
    <>
      <div class="row">
        <button type="submit" disabled={busy}>
          {label}
        </button>
        {children}
        {saved ? (
          <span class="ok" role="status">
            Saved.
          </span>
        ) : null}
      </div>
      <ProblemBox problem={problem} />
    </>
  );
}
