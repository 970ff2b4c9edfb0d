/**
 * Submission rules of POST /v1/jobs/parse (docs/decisions.md#parse-jobs). Checked before the
 * job exists, so a bad request never becomes a failed job:
 *
 * - At least one of 'url' and 'text'; `null` counts as absent. A 'text' of
 *   only whitespace counts as absent when a 'url' is given, and is 422
 *   invalid_string when it is all there is.
 * - 'url' must be an absolute http(s) URL with a host, at most 2048
 *   characters (422 invalid_url). Whether its address may be reached is
 *   decided when the page is fetched, on the resolved address.
 * - Input errors come first, then 503 llm_not_configured: bad input is never
 *   answered with a 5xx (docs/decisions.md#no-5xx-for-input), and a fixed request would still meet the 503.
 * - Both given: the text is parsed and the URL is only passed to the model
 *   as the posting's source (no fetch). The caller's text is what they want
 *   parsed; fetching the page as well would only add latency and a way to
 *   fail.
 */
import { ApiError } from "../model/errors.js";

export const MAX_URL_LENGTH = 2048;

/** The stored input of a parse job. */
export interface ParseInput {
  url: string | null;
  text: string | null;
}

export interface ParseRequestFields {
  url?: string | null | undefined;
  text?: string | null | undefined;
}

export function validateParseRequest(fields: ParseRequestFields, options: { llmConfigured: boolean }): ParseInput {
  const url = fields.url ?? null;
  const rawText = fields.text ?? null;
  const text = rawText !== null && rawText.trim() !== "" ? rawText : null;

  if (url === null && rawText === null) {
    throw new ApiError("missing_field", "Send 'url' (the posting's page) or 'text' (the posting itself), or both", {
      details: { fields: ["url", "text"] },
    });
  }
  if (url !== null) checkPostingUrl(url);
  else if (text === null) throw new ApiError("invalid_string", "'text' must contain at least one non-whitespace character", { details: { field: "text" } });

  if (!options.llmConfigured) throw new ApiError("llm_not_configured");
  return { url, text };
}

/** 422 invalid_url unless 'url' is an absolute http(s) URL with a host. */
export function checkPostingUrl(url: string): URL {
  const refuse = (why: string) => new ApiError("invalid_url", `'url' ${why}`, { details: { field: "url" } });
  if (url.length > MAX_URL_LENGTH) throw refuse(`is longer than ${MAX_URL_LENGTH} characters`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw refuse("is not an absolute URL");
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") throw refuse(`must use http or https, not ${parsed.protocol.replace(/:$/, "")}`);
  if (parsed.hostname === "") throw refuse("has no host");
  return parsed;
}
