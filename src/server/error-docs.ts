/** /docs/errors: every error code of the catalog, rendered from the catalog itself. */
import { errorCatalog, type ErrorSpec } from "../model/errors.js";

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export function renderErrorDocs(): string {
  const rows = Object.entries(errorCatalog)
    .map(([code, entry]: [string, ErrorSpec]) =>
      `<tr id="${code}"><td><code>${code}</code></td><td>${entry.status}</td><td><code>${entry.grpc.toUpperCase()}</code></td>` +
      `<td>${escape(entry.message)}</td><td>${escape(entry.suggestion ?? "")}</td></tr>`,
    )
    .join("\n");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>agentbus error codes</title>
<style>body{font-family:system-ui,sans-serif;margin:2rem;max-width:70rem}td,th{padding:.3rem .6rem;text-align:left;vertical-align:top;border-bottom:1px solid #ddd}tr:target{background:#ffd}</style></head>
<body><h1>Error codes</h1>
<p>Every error body is <code>{"error", "message", "suggestion", "request_id", "documentation_url"}</code>, sometimes with extra fields
(<code>retry_after</code>, <code>fields</code>, <code>violations</code>). gRPC and Connect callers get the status below and an
<code>agentbus.v1.ErrorDetail</code> carrying the same <code>error</code> and <code>suggestion</code>. The codes are stable; match on them, not on messages.</p>
<table><thead><tr><th>error</th><th>HTTP</th><th>gRPC</th><th>meaning</th><th>suggestion</th></tr></thead>
<tbody>
${rows}
</tbody></table></body></html>
`;
}

export function renderErrorDocsJson(): Record<string, ErrorSpec> {
  return errorCatalog;
}
