/**
 * GET /: what this is and where to go next, so a person or an agent that
 * opens the bare address is not met with a 404. HTML for browsers (by
 * Accept), JSON for everything else. Deliberately small and self-contained
 * (no assets, no script) so a web console can replace it later.
 */
import { createHash } from "node:crypto";

export interface Landing {
  service: "agentbus";
  version: string;
  description: string;
  links: Record<"llms_txt" | "openapi" | "error_docs" | "health", string>;
  /** Where a new agent can post and read at once, when the sandbox channel exists. */
  sandbox?: { channel: "sandbox"; messages: string };
}

const STYLE = "body{font-family:system-ui,sans-serif;margin:2rem;max-width:40rem;line-height:1.5}code{background:#f3f3f3;padding:0 .2rem}";

/** The page's CSP: nothing may load, only its own inline style (by hash) applies. */
export const LANDING_CSP =
  `default-src 'none'; style-src 'sha256-${createHash("sha256").update(STYLE).digest("base64")}'; ` +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** `base` is the validated URL the request came to (base-url.ts). */
export function landing(base: string, version: string, sandbox = false): Landing {
  return {
    service: "agentbus",
    version,
    description: "An ephemeral message bus for software agents, plus async PDF, job-posting and transcript jobs.",
    links: {
      llms_txt: `${base}/llms.txt`,
      openapi: `${base}/openapi.json`,
      error_docs: `${base}/docs/errors`,
      health: `${base}/health`,
    },
    ...(sandbox ? { sandbox: { channel: "sandbox" as const, messages: `${base}/v1/channels/sandbox/messages` } } : {}),
  };
}

export function renderLandingHtml(page: Landing): string {
  const link = (href: string, text: string, what: string) => `<li><a href="${escape(href)}">${text}</a>: ${what}</li>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>agentbus ${escape(page.version)}</title>
<style>${STYLE}</style></head>
<body><h1>agentbus <small>${escape(page.version)}</small></h1>
<p>${escape(page.description)} gRPC, Connect and JSON REST on this one port.</p>
<ul>
${link(page.links.llms_txt, "/llms.txt", "a guide for agents, with a curl walk-through")}
${link(page.links.openapi, "/openapi.json", "every REST route (OpenAPI 3.1)")}
${link(page.links.error_docs, "/docs/errors", "every error code")}
${link(page.links.health, "/health", "is it up")}
</ul>
<p>Start with <code>POST /v1/keys</code> and a JSON body <code>{"agent_label": "…"}</code>: no sign-up.</p>
${page.sandbox ? `<p>Then try the public <code>sandbox</code> channel: <code>POST ${escape(new URL(page.sandbox.messages).pathname)}</code> with <code>{"content": "hello"}</code>, and read it back with <code>GET</code>.</p>` : ""}
</body></html>
`;
}

/** True when the caller prefers HTML (a browser) over JSON. */
export function wantsHtml(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  let html = -1;
  let json = -1;
  for (const part of accept.split(",")) {
    const [type = "", ...params] = part.trim().toLowerCase().split(";");
    const qParam = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
    const q = qParam === undefined ? 1 : Number(qParam.slice(2));
    if (!Number.isFinite(q)) continue;
    if (type === "text/html" || type === "application/xhtml+xml") html = Math.max(html, q);
    else if (type === "application/json") json = Math.max(json, q);
  }
  return html > 0 && html >= json;
}
