/**
 * A fake video host on 127.0.0.1 serving the steps a transcript fetcher
 * walks on the real one:
 *
 *   GET  /watch?v=<id>                   the watch page: ytcfg with INNERTUBE_API_KEY and an
 *                                        embedded `var ytInitialPlayerResponse = {…};`
 *   POST /youtubei/v1/player?key=<key>   the player API: the player response with
 *                                        captions.playerCaptionsTracklistRenderer.captionTracks
 *   GET  /api/timedtext?v=&lang=[&kind=asr][&fmt=srv3|json3]   a caption track
 *
 * As on the real host, the caption URLs in the page's embedded player
 * response carry `exp=xpe` and answer an empty document (they demand a
 * proof-of-origin token); the player API's URLs work. A fetcher that skips
 * the player API therefore gets nothing, except for the video whose page
 * has no API key (then the embedded URLs work).
 *
 * The videos (ids are 11 characters, like the real ones) are in VIDEOS.
 */
import type http from "node:http";
import { LoopbackServer, onBody } from "./http.js";

export const API_KEY = "AIzaFakeKey_0123456789";
export const CONSENT_VALUE = "cb.20260101-00-p0.en+FX+123";

export interface FakeSegment {
  /** As it should come out. */
  text: string;
  /** What the host has (markup included) before encoding it; default `text`. */
  source?: string;
  start: number;
  dur: number;
}

export interface FakeTrack {
  languageCode: string;
  name: string;
  asr?: boolean;
  format?: "classic" | "srv3" | "json3";
  segments: FakeSegment[];
  /** Served as the caption document instead of the encoded segments. */
  raw?: string;
}

export interface FakeVideo {
  tracks?: FakeTrack[];
  /** No captions object at all in the player response. */
  noCaptions?: boolean;
  playability?: { status: string; reason?: string };
  /** The watch page has no API key: only the embedded player response. */
  embeddedOnly?: boolean;
  /** The watch page is the consent interstitial: always, or until the CONSENT cookie is sent. */
  consent?: "always" | "until-cookie";
  /** The watch page answers this status (e.g. 429). */
  watchStatus?: number;
  /** The watch page is a captcha page. */
  captcha?: boolean;
  /** The caption documents are empty (a proof-of-origin token is demanded). */
  emptyCaptions?: boolean;
  /** The first n watch-page requests answer 503. */
  flaky?: number;
}

const EN_SEGMENTS: FakeSegment[] = [
  { text: "Hello & welcome to the show", start: 0.5, dur: 2.25 },
  { text: "it's \"quoted\" here", source: "it's \"quoted\" <font color=\"#E5E5E5\">here</font>", start: 2.75, dur: 3 },
  { text: "line one line two", start: 5.75, dur: 1.5 },
];

/** What a fetcher must make of the English track: segments in seconds, markup stripped, entities decoded. */
export const ENGLISH_TRANSCRIPT = {
  language: "en",
  full_text: 'Hello & welcome to the show it\'s "quoted" here line one line two',
  segments: [
    { text: "Hello & welcome to the show", start: 0.5, duration: 2.25 },
    { text: 'it\'s "quoted" here', start: 2.75, duration: 3 },
    { text: "line one line two", start: 5.75, duration: 1.5 },
  ],
};

export const VIDEOS = {
  english: "engCaption1",
  multi: "multiLang01",
  autoOnly: "autoOnly001",
  none: "noCaption01",
  embedded: "embedOnly01",
  json3: "json3Format",
  unavailable: "unavailabl1",
  bot: "botCheck001",
  consentOnce: "consentOk01",
  consentAlways: "consentBad1",
  rateLimited: "rateLimit01",
  captcha: "captchaPg01",
  emptyTrack: "poTokenReq1",
  flaky: "flakyHost01",
} as const;

export function defaultVideos(): Record<string, FakeVideo> {
  const english: FakeTrack = { languageCode: "en", name: "English", segments: EN_SEGMENTS };
  const englishAsr: FakeTrack = { languageCode: "en", name: "English (auto-generated)", asr: true, segments: [{ text: "hello and welcome to the show", start: 0.4, dur: 2.3 }] };
  return {
    [VIDEOS.english]: { tracks: [englishAsr, english] },
    [VIDEOS.multi]: {
      tracks: [
        { languageCode: "de", name: "Deutsch", segments: [{ text: "Hallo und willkommen", start: 0, dur: 2 }] },
        { languageCode: "en-GB", name: "English (United Kingdom)", format: "srv3", segments: [{ text: "Hello and welcome, mate", start: 0, dur: 2.5 }, { text: "Cheers", start: 2.5, dur: 1 }] },
        { languageCode: "es", name: "Español", segments: [{ text: "Hola y bienvenidos", start: 0, dur: 2 }] },
        { languageCode: "fr", name: "Français (générés automatiquement)", asr: true, segments: [{ text: "bonjour et bienvenue", start: 0.1, dur: 1.9 }] },
      ],
    },
    [VIDEOS.autoOnly]: { tracks: [englishAsr] },
    [VIDEOS.none]: { noCaptions: true },
    [VIDEOS.embedded]: { embeddedOnly: true, tracks: [{ ...english, format: "srv3" }] },
    [VIDEOS.json3]: { tracks: [{ ...english, format: "json3" }] },
    [VIDEOS.unavailable]: { playability: { status: "ERROR", reason: "Video unavailable" } },
    [VIDEOS.bot]: { playability: { status: "LOGIN_REQUIRED", reason: "Sign in to confirm you’re not a bot" } },
    [VIDEOS.consentOnce]: { consent: "until-cookie", tracks: [english] },
    [VIDEOS.consentAlways]: { consent: "always", tracks: [english] },
    [VIDEOS.rateLimited]: { watchStatus: 429, tracks: [english] },
    [VIDEOS.captcha]: { captcha: true, tracks: [english] },
    [VIDEOS.emptyTrack]: { emptyCaptions: true, tracks: [english] },
    [VIDEOS.flaky]: { flaky: 2, tracks: [english] },
  };
}

export interface HostRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export class FakeVideoHost {
  readonly requests: HostRequest[] = [];
  readonly videos: Record<string, FakeVideo> = defaultVideos();
  private readonly flakyServed = new Map<string, number>();
  private server: LoopbackServer | undefined;

  static async start(): Promise<FakeVideoHost> {
    const host = new FakeVideoHost();
    host.server = await LoopbackServer.listen((req, res) => host.handle(req, res));
    return host;
  }

  /** AGENTBUS_VIDEO_BASE_URL for this host. */
  get baseUrl(): string {
    return `http://127.0.0.1:${this.server!.port}`;
  }

  requestsFor(path: string): HostRequest[] {
    return this.requests.filter((r) => r.path === path);
  }

  close(): Promise<void> {
    return this.server?.close() ?? Promise.resolve();
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    onBody(req, (body) => {
      const url = new URL(req.url ?? "/", this.baseUrl);
      const request: HostRequest = { method: req.method ?? "", path: url.pathname, query: url.searchParams, headers: req.headers, body: body.toString("utf8") };
      this.requests.push(request);
      if (req.method === "GET" && url.pathname === "/watch") return this.watch(request, res);
      if (req.method === "POST" && url.pathname === "/youtubei/v1/player") return this.player(request, res);
      if (req.method === "GET" && url.pathname === "/api/timedtext") return this.timedText(request, res);
      res.writeHead(404, { "content-type": "text/html" }).end("<h1>404</h1>");
    });
  }

  private watch(req: HostRequest, res: http.ServerResponse): void {
    const id = req.query.get("v") ?? "";
    const video = this.videos[id];
    const html = (status: number, body: string): void => {
      res.writeHead(status, { "content-type": "text/html; charset=utf-8" }).end(body);
    };
    if (video?.flaky) {
      const served = this.flakyServed.get(id) ?? 0;
      this.flakyServed.set(id, served + 1);
      if (served < video.flaky) return html(503, "<h1>Service unavailable</h1>");
    }
    if (video?.watchStatus) return html(video.watchStatus, "<h1>Too many requests</h1><p>Our systems have detected unusual traffic.</p>");
    if (video?.captcha) {
      return html(200, `<html><body><form id="captcha-form"><div class="g-recaptcha" data-sitekey="x"></div></form></body></html>`);
    }
    const consented = (req.headers.cookie ?? "").includes(`CONSENT=YES+${CONSENT_VALUE}`);
    if (video?.consent === "always" || (video?.consent === "until-cookie" && !consented)) {
      return html(
        200,
        `<html><body><form action="https://consent.youtube.com/s" method="POST"><input type="hidden" name="gl" value="DE"><input type="hidden" name="v" value="${CONSENT_VALUE}"><button>Accept all</button></form></body></html>`,
      );
    }
    const embedded = this.playerResponse(id, "web");
    const ytcfg = video?.embeddedOnly ? `{"INNERTUBE_CONTEXT_CLIENT_NAME":1}` : `{"INNERTUBE_API_KEY": "${API_KEY}","INNERTUBE_CLIENT_VERSION":"2.20260101.00.00"}`;
    html(
      200,
      `<!DOCTYPE html><html lang="en"><head><title>${id} - FakeTube</title>
<script nonce="abc">ytcfg.set(${ytcfg});</script></head>
<body><div id="player"></div>
<script nonce="abc">var ytInitialPlayerResponse = ${JSON.stringify(embedded)};var meta = document.createElement('meta');</script>
<script nonce="abc">var ytInitialData = {"contents":{"text":"} not the end {"}};</script>
</body></html>`,
    );
  }

  private player(req: HostRequest, res: http.ServerResponse): void {
    const json = (status: number, body: unknown): void => {
      res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    };
    if (req.query.get("key") !== API_KEY) return json(400, { error: { code: 400, message: "API key not valid." } });
    let body: { context?: { client?: { clientName?: string; clientVersion?: string } }; videoId?: string };
    try {
      body = JSON.parse(req.body) as typeof body;
    } catch {
      return json(400, { error: { code: 400, message: "Invalid JSON payload" } });
    }
    if (!body.context?.client?.clientName || !body.context.client.clientVersion) return json(400, { error: { code: 400, message: "Precondition check failed." } });
    json(200, this.playerResponse(body.videoId ?? "", "api"));
  }

  private playerResponse(id: string, source: "web" | "api"): Record<string, unknown> {
    const video = this.videos[id];
    if (!video) return { playabilityStatus: { status: "ERROR", reason: "This video is unavailable" } };
    const response: Record<string, unknown> = {
      responseContext: {},
      playabilityStatus: video.playability ?? { status: "OK", playableInEmbed: true },
      videoDetails: { videoId: id, title: `Video ${id}`, lengthSeconds: "120" },
    };
    if (video.playability && video.playability.status !== "OK") return response;
    if (video.noCaptions || !video.tracks) return response;
    // The web page's URLs demand a proof-of-origin token, as on the real host, unless the page is all there is.
    const needsToken = source === "web" && !video.embeddedOnly;
    response.captions = {
      playerCaptionsTracklistRenderer: {
        captionTracks: video.tracks.map((t) => {
          const q = new URLSearchParams({ v: id, lang: t.languageCode, caps: "asr", xoaf: "5" });
          if (t.asr) q.set("kind", "asr");
          if (t.format === "srv3" || t.format === "json3") q.set("fmt", t.format);
          if (needsToken) q.set("exp", "xpe");
          return {
            // The real host sends absolute URLs.
            baseUrl: `${this.baseUrl}/api/timedtext?${q.toString()}`,
            name: t.asr ? { simpleText: t.name } : { runs: [{ text: t.name }] },
            vssId: `${t.asr ? "a" : ""}.${t.languageCode}`,
            languageCode: t.languageCode,
            ...(t.asr ? { kind: "asr" } : {}),
            isTranslatable: true,
            trackName: "",
          };
        }),
        audioTracks: [{ captionTrackIndices: [0] }],
        translationLanguages: [{ languageCode: "ja", languageName: { simpleText: "Japanese" } }],
        defaultAudioTrackIndex: 0,
      },
    };
    return response;
  }

  private timedText(req: HostRequest, res: http.ServerResponse): void {
    const video = this.videos[req.query.get("v") ?? ""];
    const lang = req.query.get("lang");
    const asr = req.query.get("kind") === "asr";
    const track = video?.tracks?.find((t) => t.languageCode === lang && Boolean(t.asr) === asr);
    if (!video || !track) {
      res.writeHead(404, { "content-type": "text/html" }).end("");
      return;
    }
    if (video.emptyCaptions || req.query.get("exp") === "xpe") {
      res.writeHead(200, { "content-type": "text/xml; charset=UTF-8" }).end("");
      return;
    }
    if (track.raw !== undefined) {
      res.writeHead(200, { "content-type": "text/xml; charset=UTF-8" }).end(track.raw);
      return;
    }
    const format = req.query.get("fmt") ?? "classic";
    if (format === "json3") {
      res.writeHead(200, { "content-type": "application/json; charset=UTF-8" }).end(json3(track.segments));
      return;
    }
    res.writeHead(200, { "content-type": "text/xml; charset=UTF-8" }).end(format === "srv3" ? srv3(track.segments) : classic(track.segments));
  }
}

/** The text as the host writes it inside XML: HTML-escaped, then XML-escaped once more; line breaks inside. */
function hostEscape(text: string): string {
  const html = text.replace(/&/g, "&amp;").replace(/'/g, "&#39;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const xml = html.replace(/&/g, "&amp;");
  return xml.replace(/ line two/, "\nline two");
}

function classic(segments: FakeSegment[]): string {
  const body = segments.map((s) => `<text start="${s.start}" dur="${s.dur}">${hostEscape(s.source ?? s.text)}</text>`).join("");
  return `<?xml version="1.0" encoding="utf-8" ?><transcript>${body}</transcript>`;
}

function srv3(segments: FakeSegment[]): string {
  const body = segments
    .map((s) => {
      const words = hostEscape(s.source ?? s.text).split(" ");
      return `<p t="${Math.round(s.start * 1000)}" d="${Math.round(s.dur * 1000)}" w="1">${words.map((w, i) => (i === 0 ? w : `<s t="${i * 200}"> ${w}</s>`)).join("")}</p>`;
    })
    .join("\n");
  return `<?xml version="1.0" encoding="utf-8" ?><timedtext format="3">\n<head><ws id="0"/></head>\n<body>\n${body}\n</body>\n</timedtext>`;
}

function json3(segments: FakeSegment[]): string {
  const events = [
    { tStartMs: 0, dDurationMs: 120000, id: 1, wpWinPosId: 1, wsWinStyleId: 1 },
    ...segments.map((s) => ({
      tStartMs: Math.round(s.start * 1000),
      dDurationMs: Math.round(s.dur * 1000),
      wWinId: 1,
      segs: (s.source ?? s.text).replace(/ line two/, "\nline two").split(" ").map((w, i) => ({ utf8: i === 0 ? w : ` ${w}` })),
    })),
    { tStartMs: 9000, wWinId: 1, aAppend: 1, segs: [{ utf8: "\n" }] },
  ];
  return JSON.stringify({ wireMagic: "pb3", pens: [{}], wsWinStyles: [{}], wpWinPositions: [{}], events });
}
