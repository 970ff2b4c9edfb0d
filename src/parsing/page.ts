/**
 * Fetches a job-posting page through the guarded client
 * (docs/decisions.md#outbound-addresses: the address rule on the resolved
 * address, redirects re-checked, a deadline and a byte cap) and decodes it to a
 * string. HTML only.
 *
 * Failures are JobFailures:
 * - refused address → url_not_allowed (permanent);
 * - timeouts, dropped connections, a temporary DNS failure, 408/425/429/5xx
 *   → page_fetch_failed, retryable;
 * - an unknown host, too many redirects, any other non-2xx → page_fetch_failed;
 * - a body beyond the cap → page_too_large; not HTML → unsupported_content_type.
 */
import { JobFailure } from "../model/job-failure.js";
import { failureClass, OutboundError, type OutboundClient } from "../outbound/guarded-fetch.js";

export interface PageFetchOptions {
  timeoutMs: number;
  maxBytes: number;
  signal?: AbortSignal;
}

export interface FetchedPage {
  html: string;
  /** The URL that answered, after redirects. */
  url: string;
}

const RETRYABLE_STATUS = new Set([408, 425, 429, 500, 502, 503, 504]);
const HTML_TYPES = new Set(["text/html", "application/xhtml+xml"]);

export async function fetchPostingPage(http: OutboundClient, url: string, options: PageFetchOptions): Promise<FetchedPage> {
  let res;
  try {
    res = await http.request(url, {
      timeoutMs: options.timeoutMs,
      maxResponseBytes: options.maxBytes,
      headers: {
        accept: "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1",
        "accept-language": "en;q=1.0, *;q=0.5",
      },
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (err) {
    throw fetchFailure(err, url);
  }
  const host = new URL(res.url).host;
  if (res.status < 200 || res.status > 299) {
    throw new JobFailure("page_fetch_failed", `${host} answered HTTP ${res.status} for the posting page`, RETRYABLE_STATUS.has(res.status));
  }
  if (res.truncated) throw new JobFailure("page_too_large", `the posting page is larger than ${options.maxBytes} bytes`);
  const contentType = headerValue(res.headers["content-type"]);
  const mediaType = contentType?.split(";")[0]?.trim().toLowerCase();
  if (mediaType !== undefined && mediaType !== "" ? !HTML_TYPES.has(mediaType) : !looksLikeHtml(res.body)) {
    throw new JobFailure("unsupported_content_type", `the URL serves ${mediaType || "something that is not HTML"}, not an HTML page`);
  }
  return { html: decode(res.body, contentType), url: res.url };
}

function fetchFailure(err: unknown, url: string): JobFailure {
  // Raw error text can name the address connected to (docs/decisions.md#failure-classes): it stays in `cause`, the job shows the class.
  if (!(err instanceof OutboundError)) return new JobFailure("page_fetch_failed", `fetching the posting page failed (${failureClass(err)})`, true, { cause: err });
  const host = safeHost(url);
  switch (err.code) {
    case "blocked_address":
      return new JobFailure("url_not_allowed", `${host} leads to a private or reserved address, which this service does not fetch`, false, { cause: err });
    case "invalid_url":
      return new JobFailure("page_fetch_failed", `the page redirected to a URL the service does not fetch: ${err.message}`, false, { cause: err });
    case "too_many_redirects":
      return new JobFailure("page_fetch_failed", `the posting page redirected too often (${err.message})`, false, { cause: err });
    case "dns_failed": {
      // EAI_AGAIN is a resolver hiccup; ENOTFOUND and friends are a wrong host.
      const transient = (err.cause as NodeJS.ErrnoException | undefined)?.code === "EAI_AGAIN";
      return new JobFailure("page_fetch_failed", `the host ${host} could not be resolved`, transient, { cause: err });
    }
    case "aborted":
      return new JobFailure("page_fetch_failed", "fetching the posting page was interrupted", true, { cause: err });
    default:
      // connect_timeout, timeout, network: worth another try.
      return new JobFailure("page_fetch_failed", `fetching the posting page from ${host} failed: ${err.message}`, true, { cause: err });
  }
}

function safeHost(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return "the host";
  }
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function looksLikeHtml(body: Buffer): boolean {
  const head = body.subarray(0, 1024).toString("latin1").trimStart().toLowerCase();
  return head.startsWith("<!doctype html") || head.startsWith("<html") || /<(head|body|title|meta)[\s>]/.test(head);
}

/** The charset of the Content-Type header, else of a <meta> in the first 4 KiB, else UTF-8. */
function decode(body: Buffer, contentType: string | undefined): string {
  const declared =
    /charset\s*=\s*"?([\w.:-]+)/i.exec(contentType ?? "")?.[1] ??
    /<meta[^>]+charset\s*=\s*["']?([\w.:-]+)/i.exec(body.subarray(0, 4096).toString("latin1"))?.[1];
  try {
    return new TextDecoder(declared ?? "utf-8").decode(body);
  } catch {
    // An unknown charset label.
    return new TextDecoder("utf-8").decode(body);
  }
}
