/**
 * Video transcripts (docs/decisions.md#transcript-jobs): watch page → player response (player
 * API, else the one embedded in the page) → caption tracks → the chosen
 * track's timed text → segments.
 *
 *   input.ts       submission rules: the video id from either URL form, the language
 *   watch-page.ts  reading the watch page: API key, embedded player response, consent and captcha pages
 *   tracks.ts      the caption tracks and the choice of one
 *   timed-text.ts  the caption formats (classic XML, srv3, json3) to segments
 *
 * Every request goes to AGENTBUS_VIDEO_BASE_URL (caption URLs come from the
 * host's answer and are resolved against it) through the guarded client,
 * with the private-address rule as configured: the host's answers steer
 * where the service connects, so they are treated like caller input.
 *
 * Failures (JobFailure):
 * - transcript_unavailable: the video has no caption tracks, is
 *   unavailable, private or age-restricted, or its track is empty;
 * - language_unavailable: tracks exist, none in the language; the message
 *   lists the languages there are;
 * - video_host_blocked: HTTP 429, a captcha page, a consent page that
 *   comes back after the consent cookie, a "confirm you're not a bot"
 *   login wall, or an empty caption document (a proof-of-origin token is
 *   demanded). Not retried: such blocks last longer than a job's retries;
 * - video_host_unavailable: timeouts, connection failures and 5xx
 *   (retryable); answers that cannot be read (not retried).
 */
import type { Config } from "../platform/config.js";
import type { ErrorCode } from "../model/errors.js";
import { JobFailure } from "../model/job-failure.js";
import { createOutboundClient, failureClass, OutboundError, type OutboundClient, type OutboundResponse } from "../outbound/guarded-fetch.js";
import type { TranscriptInput } from "./input.js";
import { parseTimedText, UnreadableCaptions, type TranscriptSegment } from "./timed-text.js";
import { chooseTrack, describeLanguages, tracksFromPlayerResponse } from "./tracks.js";
import { consentCookieValue, embeddedPlayerResponse, innertubeApiKey, isCaptchaPage, isConsentPage, playability } from "./watch-page.js";

export { validateTranscriptRequest, videoIdFromUrl, type TranscriptInput } from "./input.js";
export type { TranscriptSegment } from "./timed-text.js";

export interface TranscriptResult {
  video_id: string;
  /** Language code of the fetched track, as the host names it. */
  language: string;
  /** The segments' texts joined with single spaces. */
  full_text: string;
  segments: TranscriptSegment[];
}

export interface TranscriptFetcherOptions {
  http: OutboundClient;
  /** The video host, without a trailing slash. */
  baseUrl: string;
  /** Deadline of each request to the host. */
  timeoutMs: number;
}

export interface TranscriptFetcher {
  /** Throws JobFailure (its `retryable` says whether another attempt may succeed). */
  fetch(input: TranscriptInput, signal?: AbortSignal): Promise<TranscriptResult>;
  close(): void;
}

export const USER_AGENT = "Mozilla/5.0 (compatible; agentbus/0.1; transcript fetcher)";

/** The client the player API is asked as; its caption URLs need no proof-of-origin token. */
export const INNERTUBE_CONTEXT = { client: { clientName: "ANDROID", clientVersion: "20.10.38" } } as const;

/** A watch page is 1–2 MB of inline scripts; caption documents of long videos reach a few MB. */
const MAX_PAGE_BYTES = 8 * 1024 * 1024;
const MAX_PLAYER_BYTES = 4 * 1024 * 1024;
const MAX_CAPTION_BYTES = 16 * 1024 * 1024;
const RETRYABLE_STATUS = new Set([408, 500, 502, 503, 504]);

export function createTranscriptFetcher(options: TranscriptFetcherOptions & { onClose?: () => void }): TranscriptFetcher {
  const base = options.baseUrl.replace(/\/+$/, "");

  async function call(step: string, url: string, init: { method?: string; headers?: Record<string, string>; body?: string; maxBytes: number }, signal?: AbortSignal) {
    let res: OutboundResponse;
    try {
      res = await options.http.request(url, {
        method: init.method ?? "GET",
        headers: { "accept-language": "en-US,en;q=0.9", ...init.headers },
        ...(init.body !== undefined ? { body: init.body } : {}),
        timeoutMs: options.timeoutMs,
        maxResponseBytes: init.maxBytes,
        ...(signal ? { signal } : {}),
      });
    } catch (err) {
      throw transportFailure(step, err);
    }
    if (res.status === 429) throw new JobFailure("video_host_blocked", `the video host answered 429 Too Many Requests to the ${step}`);
    if (res.truncated) throw new JobFailure("video_host_unavailable", `the ${step} is larger than ${init.maxBytes} bytes`);
    return res;
  }

  function statusFailure(step: string, status: number, videoId: string): JobFailure {
    if (status === 404 || status === 410) return new JobFailure("transcript_unavailable", `the video host has no ${step} for video ${videoId} (HTTP ${status})`);
    return new JobFailure("video_host_unavailable", `the video host answered HTTP ${status} to the ${step}`, RETRYABLE_STATUS.has(status));
  }

  async function watchPage(videoId: string, signal?: AbortSignal): Promise<string> {
    let cookie: string | undefined;
    for (let attempt = 0; ; attempt++) {
      const res = await call("watch page", `${base}/watch?v=${encodeURIComponent(videoId)}`, {
        headers: { accept: "text/html", ...(cookie ? { cookie } : {}) },
        maxBytes: MAX_PAGE_BYTES,
      }, signal);
      const html = res.body.toString("utf8");
      if (isCaptchaPage(html, res.url)) throw new JobFailure("video_host_blocked", "the video host answered with a captcha page: it has blocked requests from this network");
      if (res.status < 200 || res.status > 299) throw statusFailure("watch page", res.status, videoId);
      if (isConsentPage(html, res.url)) {
        const value = consentCookieValue(html);
        if (attempt > 0 || value === undefined) {
          throw new JobFailure("video_host_blocked", "the video host keeps answering with its cookie-consent page instead of the video");
        }
        cookie = `CONSENT=YES+${value}`;
        continue;
      }
      return html;
    }
  }

  async function playerResponse(videoId: string, html: string, signal?: AbortSignal): Promise<unknown> {
    const key = innertubeApiKey(html);
    let apiFailure: JobFailure | undefined;
    if (key !== undefined) {
      const res = await call("player API", `${base}/youtubei/v1/player?key=${encodeURIComponent(key)}`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify({ context: INNERTUBE_CONTEXT, videoId }),
        maxBytes: MAX_PLAYER_BYTES,
      }, signal);
      if (res.status >= 200 && res.status <= 299) {
        try {
          return JSON.parse(res.body.toString("utf8")) as unknown;
        } catch {
          apiFailure = new JobFailure("video_host_unavailable", "the player API answered with something that is not JSON");
        }
      } else {
        apiFailure = statusFailure("player API", res.status, videoId);
      }
    }
    const embedded = embeddedPlayerResponse(html);
    if (embedded !== undefined) return embedded;
    throw apiFailure ?? new JobFailure("video_host_unavailable", "the watch page carries no player data (the video host's page format may have changed)");
  }

  return {
    async fetch(input, signal) {
      const { video_id: videoId, language } = input;
      const html = await watchPage(videoId, signal);
      const player = await playerResponse(videoId, html, signal);

      const { status, reason } = playability(player);
      if (status !== undefined && status !== "OK") {
        const why = reason ? `: ${reason}` : "";
        if (status === "LOGIN_REQUIRED" && /bot/i.test(reason ?? "")) {
          throw new JobFailure("video_host_blocked", `the video host wants a sign-in to prove this is not a bot${why}`);
        }
        throw new JobFailure("transcript_unavailable", `video ${videoId} cannot be played (${status.toLowerCase()})${why}`);
      }

      const tracks = tracksFromPlayerResponse(player);
      if (tracks === undefined || tracks.length === 0) throw new JobFailure("transcript_unavailable", `video ${videoId} has no captions`);
      const track = chooseTrack(tracks, language);
      if (track === undefined) {
        throw new JobFailure("language_unavailable", `video ${videoId} has no captions in "${language}". Available languages: ${describeLanguages(tracks)}`);
      }

      let captionUrl: string;
      try {
        captionUrl = new URL(track.baseUrl, `${base}/`).toString();
      } catch {
        throw new JobFailure("video_host_unavailable", "the caption track has an unusable URL");
      }
      const res = await call("caption track", captionUrl, { maxBytes: MAX_CAPTION_BYTES }, signal);
      if (res.status < 200 || res.status > 299) throw statusFailure("caption track", res.status, videoId);
      const body = res.body.toString("utf8");
      if (body.trim() === "") {
        throw new JobFailure("video_host_blocked", "the video host sent an empty caption document (it demands a proof-of-origin token from this client)");
      }
      let segments: TranscriptSegment[];
      try {
        segments = parseTimedText(body);
      } catch (err) {
        if (err instanceof UnreadableCaptions) throw new JobFailure("video_host_unavailable", `the caption track cannot be read: ${err.message}`);
        throw err;
      }
      if (segments.length === 0) throw new JobFailure("transcript_unavailable", `the ${track.languageCode} caption track of video ${videoId} is empty`);
      return { video_id: videoId, language: track.languageCode, full_text: segments.map((s) => s.text).join(" "), segments };
    },
    close() {
      options.onClose?.();
    },
  };
}

function transportFailure(step: string, err: unknown): JobFailure {
  const code: ErrorCode = "video_host_unavailable";
  // Raw error text can name the address connected to (docs/decisions.md#failure-classes): it stays in `cause`, the job shows the class.
  if (!(err instanceof OutboundError)) return new JobFailure(code, `the ${step} request failed (${failureClass(err)})`, true, { cause: err });
  switch (err.code) {
    case "blocked_address":
      return new JobFailure(code, `the video host is at a private or reserved address (${err.message}); the operator must set AGENTBUS_VIDEO_BASE_URL to a public host or allow private targets`, false, { cause: err });
    case "invalid_url":
    case "too_many_redirects":
      return new JobFailure(code, `the ${step} led somewhere the service does not follow: ${err.message}`, false, { cause: err });
    default:
      return new JobFailure(code, `the ${step} request failed: ${err.message}`, true, { cause: err });
  }
}

/** The fetcher as configured. */
export function transcriptFetcherFromConfig(config: Config): TranscriptFetcher {
  const http = createOutboundClient({ allowPrivateTargets: config.allowPrivateTargets, userAgent: USER_AGENT });
  return createTranscriptFetcher({ http, baseUrl: config.videoBaseUrl, timeoutMs: config.videoTimeoutMs, onClose: () => http.close() });
}
