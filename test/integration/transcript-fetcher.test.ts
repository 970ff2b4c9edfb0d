/**
 * The transcript fetcher against a fake video host on 127.0.0.1 (watch page,
 * player API, caption tracks in three formats): language choice, both
 * player-response paths, and each failure code with its retry class.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobFailure } from "../../src/model/job-failure.js";
import { createOutboundClient, type OutboundClient } from "../../src/outbound/guarded-fetch.js";
import { createTranscriptFetcher, INNERTUBE_CONTEXT, type TranscriptFetcher } from "../../src/transcripts/index.js";
import { API_KEY, CONSENT_VALUE, ENGLISH_TRANSCRIPT, FakeVideoHost, VIDEOS } from "../fakes/video-host.js";
import { rejectionOf } from "../support/errors.js";

let host: FakeVideoHost;
let fetcher: TranscriptFetcher;
const clients: OutboundClient[] = [];

function fetcherWith(allowPrivateTargets: boolean): TranscriptFetcher {
  const http = createOutboundClient({ allowPrivateTargets });
  clients.push(http);
  return createTranscriptFetcher({ http, baseUrl: host.baseUrl, timeoutMs: 5_000 });
}

const failure = (promise: Promise<unknown>) => rejectionOf(JobFailure, promise);

beforeAll(async () => {
  host = await FakeVideoHost.start();
  fetcher = fetcherWith(true);
});
afterAll(async () => {
  for (const c of clients) c.close();
  await host?.close();
});

describe("fetching a transcript", () => {
  it("walks watch page → player API → manual track → segments in seconds", async () => {
    const result = await fetcher.fetch({ video_id: VIDEOS.english, language: "en" });
    expect(result).toEqual({ video_id: VIDEOS.english, ...ENGLISH_TRANSCRIPT });
    const player = host.requests.filter((r) => r.path === "/youtubei/v1/player").at(-1)!;
    expect(player.query.get("key")).toBe(API_KEY);
    expect(JSON.parse(player.body)).toEqual({ context: INNERTUBE_CONTEXT, videoId: VIDEOS.english });
    const caption = host.requests.filter((r) => r.path === "/api/timedtext").at(-1)!;
    expect(caption.query.get("kind")).toBeNull();
    expect(caption.query.get("exp")).toBeNull();
  });

  it("reads srv3 and json3 tracks the same way", async () => {
    expect(await fetcher.fetch({ video_id: VIDEOS.json3, language: "en" })).toEqual({ video_id: VIDEOS.json3, ...ENGLISH_TRANSCRIPT });
  });

  it("uses the page's embedded player response when the page has no API key", async () => {
    expect(await fetcher.fetch({ video_id: VIDEOS.embedded, language: "en" })).toEqual({ video_id: VIDEOS.embedded, ...ENGLISH_TRANSCRIPT });
  });

  it("takes an auto-generated track when it is all there is", async () => {
    const result = await fetcher.fetch({ video_id: VIDEOS.autoOnly, language: "en" });
    expect(result.language).toBe("en");
    expect(result.segments).toEqual([{ text: "hello and welcome to the show", start: 0.4, duration: 2.3 }]);
  });

  it("chooses among several languages: exact, then regional variant, then auto-generated", async () => {
    const de = await fetcher.fetch({ video_id: VIDEOS.multi, language: "de" });
    expect(de).toMatchObject({ language: "de", full_text: "Hallo und willkommen" });
    const en = await fetcher.fetch({ video_id: VIDEOS.multi, language: "en" });
    expect(en).toMatchObject({ language: "en-GB", full_text: "Hello and welcome, mate Cheers" });
    expect(en.segments).toEqual([
      { text: "Hello and welcome, mate", start: 0, duration: 2.5 },
      { text: "Cheers", start: 2.5, duration: 1 },
    ]);
    const fr = await fetcher.fetch({ video_id: VIDEOS.multi, language: "fr-CA" });
    expect(fr).toMatchObject({ language: "fr", full_text: "bonjour et bienvenue" });
  });

  it("answers a consent page once with the CONSENT cookie", async () => {
    const result = await fetcher.fetch({ video_id: VIDEOS.consentOnce, language: "en" });
    expect(result.full_text).toBe(ENGLISH_TRANSCRIPT.full_text);
    const pages = host.requests.filter((r) => r.path === "/watch" && r.query.get("v") === VIDEOS.consentOnce);
    expect(pages).toHaveLength(2);
    expect(pages[0]!.headers.cookie).toBeUndefined();
    expect(pages[1]!.headers.cookie).toBe(`CONSENT=YES+${CONSENT_VALUE}`);
  });
});

describe("failures", () => {
  it("no captions → transcript_unavailable", async () => {
    expect(await failure(fetcher.fetch({ video_id: VIDEOS.none, language: "en" }))).toMatchObject({ code: "transcript_unavailable", retryable: false });
  });

  it("an unplayable or unknown video → transcript_unavailable", async () => {
    const err = await failure(fetcher.fetch({ video_id: VIDEOS.unavailable, language: "en" }));
    expect(err).toMatchObject({ code: "transcript_unavailable", retryable: false });
    expect(err.message).toContain("Video unavailable");
    expect(await failure(fetcher.fetch({ video_id: "zzzzzzzzzzz", language: "en" }))).toMatchObject({ code: "transcript_unavailable" });
  });

  it("no track in the language → language_unavailable listing the languages there are", async () => {
    const err = await failure(fetcher.fetch({ video_id: VIDEOS.multi, language: "ja" }));
    expect(err).toMatchObject({ code: "language_unavailable", retryable: false });
    expect(err.message).toContain('"ja"');
    expect(err.message).toContain("de (Deutsch), en-GB (English (United Kingdom)), es (Español), fr (Français (générés automatiquement))");
  });

  it.each([
    ["a 429", VIDEOS.rateLimited],
    ["a captcha page", VIDEOS.captcha],
    ["a consent page that comes back", VIDEOS.consentAlways],
    ["a bot check", VIDEOS.bot],
    ["an empty caption document", VIDEOS.emptyTrack],
  ])("%s → video_host_blocked, not retried", async (_name, id) => {
    expect(await failure(fetcher.fetch({ video_id: id, language: "en" }))).toMatchObject({ code: "video_host_blocked", retryable: false });
  });

  it("a 5xx from the host is retryable, and the next attempt succeeds", async () => {
    const first = await failure(fetcher.fetch({ video_id: VIDEOS.flaky, language: "en" }));
    expect(first).toMatchObject({ code: "video_host_unavailable", retryable: true });
    await failure(fetcher.fetch({ video_id: VIDEOS.flaky, language: "en" }));
    expect((await fetcher.fetch({ video_id: VIDEOS.flaky, language: "en" })).full_text).toBe(ENGLISH_TRANSCRIPT.full_text);
  });

  it("an unreachable host is retryable", async () => {
    const http = createOutboundClient({ allowPrivateTargets: true });
    clients.push(http);
    const down = await FakeVideoHost.start();
    const baseUrl = down.baseUrl;
    await down.close();
    const err = await failure(createTranscriptFetcher({ http, baseUrl, timeoutMs: 2_000 }).fetch({ video_id: VIDEOS.english, language: "en" }));
    expect(err).toMatchObject({ code: "video_host_unavailable", retryable: true });
  });

  it("a video host on a private address is refused unless private targets are allowed (outbound-addresses)", async () => {
    const err = await failure(fetcherWith(false).fetch({ video_id: VIDEOS.english, language: "en" }));
    expect(err).toMatchObject({ code: "video_host_unavailable", retryable: false });
    expect(err.message).toContain("AGENTBUS_VIDEO_BASE_URL");
  });
});
