/**
 * Submission rules of POST /v1/video/transcript (and /v1/youtube/transcript),
 * docs/decisions.md#transcript-jobs. Checked before the job exists:
 *
 * - 'url' is required: an absolute http(s) URL on the video host. Accepted
 *   hosts: youtube.com and its www., m. and music. forms, youtube-nocookie.com,
 *   the short-link host youtu.be, and the host of AGENTBUS_VIDEO_BASE_URL
 *   (so a test or a mirror can be addressed by its own URLs). The host
 *   matters: the id is fetched from the configured video host, so a link
 *   to some other site must not be read as one of its videos.
 * - The id: the `v` query parameter (watch page, `/watch?v=<id>`), or the
 *   first path segment (short link, `youtu.be/<id>`), or the segment after
 *   /shorts/, /embed/, /live/, /v/ or /e/. Other query parameters (t, si,
 *   list, feature, …) and a fragment are ignored. An id is 11 characters of
 *   [A-Za-z0-9_-]. Anything else → 422 invalid_video_url.
 * - `language`: default "en"; a language code (BCP 47 shape: "en", "pt-BR",
 *   "zh-Hans"); "_" is read as "-". Else 422 invalid_language.
 */
import { ApiError } from "../model/errors.js";

export interface TranscriptInput {
  video_id: string;
  language: string;
}

export const VIDEO_ID = /^[A-Za-z0-9_-]{11}$/;
const LANGUAGE = /^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{2,8})*$/;
const KNOWN_HOSTS = new Set(["youtube.com", "www.youtube.com", "m.youtube.com", "music.youtube.com", "youtube-nocookie.com", "www.youtube-nocookie.com", "youtu.be"]);
const ID_PREFIXES = new Set(["shorts", "embed", "live", "v", "e"]);

export function validateTranscriptRequest(
  fields: { url?: string | null | undefined; language?: string | null | undefined },
  options: { videoBaseUrl: string },
): TranscriptInput {
  if (fields.url === undefined || fields.url === null) {
    throw new ApiError("missing_field", "'url' is required: a video URL such as https://www.youtube.com/watch?v=<id> or https://youtu.be/<id>", {
      details: { field: "url" },
    });
  }
  const video_id = videoIdFromUrl(fields.url, options.videoBaseUrl);
  if (video_id === undefined) {
    throw new ApiError("invalid_video_url", `'url' is not a video URL of the video host: ${JSON.stringify(fields.url.slice(0, 200))}`, {
      details: { field: "url" },
    });
  }
  const language = fields.language === undefined || fields.language === null ? "en" : fields.language.trim().replace(/_/g, "-");
  if (!LANGUAGE.test(language)) {
    throw new ApiError("invalid_language", `'language' is not a language code: ${JSON.stringify(String(fields.language).slice(0, 50))}`, {
      details: { field: "language" },
    });
  }
  return { video_id, language };
}

/** The video id of a watch-page or short-link URL on the video host; undefined when there is none. */
export function videoIdFromUrl(raw: string, videoBaseUrl: string): string | undefined {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    return undefined;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return undefined;
  if (!KNOWN_HOSTS.has(url.hostname.toLowerCase()) && url.host.toLowerCase() !== new URL(videoBaseUrl).host.toLowerCase()) return undefined;

  const v = url.searchParams.get("v");
  if (v !== null) return VIDEO_ID.test(v) ? v : undefined;
  const segments = url.pathname.split("/").filter((s) => s !== "");
  const candidate = segments.length === 1 ? segments[0] : segments.length === 2 && ID_PREFIXES.has(segments[0]!.toLowerCase()) ? segments[1] : undefined;
  return candidate !== undefined && VIDEO_ID.test(candidate) ? candidate : undefined;
}
