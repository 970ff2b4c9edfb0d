/**
 * Transcripts without the network: both URL forms and their variants, the
 * language rule, the choice of a caption track, and the three caption
 * formats with entity decoding and whitespace normalisation.
 */
import { describe, expect, it } from "vitest";
import { ApiError } from "../../src/model/errors.js";
import { validateTranscriptRequest, videoIdFromUrl } from "../../src/transcripts/input.js";
import { parseTimedText } from "../../src/transcripts/timed-text.js";
import { chooseTrack, describeLanguages, tracksFromPlayerResponse, type CaptionTrack } from "../../src/transcripts/tracks.js";
import { embeddedPlayerResponse, innertubeApiKey, isCaptchaPage, isConsentPage, consentCookieValue } from "../../src/transcripts/watch-page.js";

const BASE = "https://www.youtube.com";
const ID = "dQw4w9WgXcQ";

describe("videoIdFromUrl", () => {
  it.each([
    `https://www.youtube.com/watch?v=${ID}`,
    `https://youtube.com/watch?v=${ID}`,
    `http://m.youtube.com/watch?v=${ID}`,
    `https://music.youtube.com/watch?v=${ID}&feature=share`,
    `https://www.youtube.com/watch?v=${ID}&t=42s&list=PL123&index=3`,
    `https://www.youtube.com/watch?feature=youtu.be&v=${ID}`,
    `https://www.youtube.com/watch?v=${ID}#comments`,
    `https://youtu.be/${ID}`,
    `https://youtu.be/${ID}?si=AbCdEf123&t=10`,
    `https://youtu.be/${ID}/`,
    `https://www.youtube.com/shorts/${ID}`,
    `https://www.youtube.com/embed/${ID}?start=5`,
    `https://www.youtube.com/live/${ID}`,
    `https://www.youtube-nocookie.com/embed/${ID}`,
    `  https://youtu.be/${ID}  `,
  ])("finds the id in %s", (url) => {
    expect(videoIdFromUrl(url, BASE)).toBe(ID);
  });

  it.each([
    ["no id", "https://www.youtube.com/watch"],
    ["a short id", "https://www.youtube.com/watch?v=abc"],
    ["a long id", `https://www.youtube.com/watch?v=${ID}x`],
    ["bad characters", "https://www.youtube.com/watch?v=dQw4w9WgX%21Q"],
    ["another site", `https://vimeo.com/${ID}`],
    ["a look-alike host", `https://youtube.com.evil.example/watch?v=${ID}`],
    ["a channel page", "https://www.youtube.com/@SomeChannel"],
    ["a nested path", `https://youtu.be/foo/${ID}`],
    ["another scheme", `ftp://youtu.be/${ID}`],
    ["not a URL", ID],
    ["empty", ""],
  ])("finds nothing in %s", (_name, url) => {
    expect(videoIdFromUrl(url, BASE)).toBeUndefined();
  });

  it("accepts both forms on the configured video host", () => {
    expect(videoIdFromUrl(`http://127.0.0.1:4321/watch?v=${ID}`, "http://127.0.0.1:4321")).toBe(ID);
    expect(videoIdFromUrl(`http://127.0.0.1:4321/${ID}`, "http://127.0.0.1:4321")).toBe(ID);
    expect(videoIdFromUrl(`http://127.0.0.1:9999/${ID}`, "http://127.0.0.1:4321")).toBeUndefined();
  });
});

describe("validateTranscriptRequest", () => {
  const opts = { videoBaseUrl: BASE };
  const fail = (fields: Parameters<typeof validateTranscriptRequest>[0]): ApiError => {
    try {
      validateTranscriptRequest(fields, opts);
    } catch (err) {
      expect(err).toBeInstanceOf(ApiError);
      return err as ApiError;
    }
    throw new Error("expected an ApiError");
  };

  it("defaults the language to en", () => {
    expect(validateTranscriptRequest({ url: `https://youtu.be/${ID}` }, opts)).toEqual({ video_id: ID, language: "en" });
    expect(validateTranscriptRequest({ url: `https://youtu.be/${ID}`, language: null }, opts)).toEqual({ video_id: ID, language: "en" });
  });

  it("takes language codes with regions and scripts, reading _ as -", () => {
    expect(validateTranscriptRequest({ url: `https://youtu.be/${ID}`, language: "pt_BR" }, opts).language).toBe("pt-BR");
    expect(validateTranscriptRequest({ url: `https://youtu.be/${ID}`, language: "zh-Hans" }, opts).language).toBe("zh-Hans");
  });

  it("answers 422 for a missing or bad url and a bad language", () => {
    expect(fail({}).code).toBe("missing_field");
    const bad = fail({ url: "https://example.com/video" });
    expect(bad.code).toBe("invalid_video_url");
    expect(bad.status).toBe(422);
    expect(fail({ url: `https://youtu.be/${ID}`, language: "english please" }).code).toBe("invalid_language");
    expect(fail({ url: `https://youtu.be/${ID}`, language: "" }).code).toBe("invalid_language");
  });
});

const track = (languageCode: string, generated = false, name = languageCode): CaptionTrack => ({ languageCode, generated, name, baseUrl: `/t?${languageCode}` });

describe("chooseTrack", () => {
  it("prefers a manual track in exactly the language", () => {
    expect(chooseTrack([track("en", true), track("en-GB"), track("en")], "en")).toEqual(track("en"));
  });

  it("then a manual regional variant, before any auto-generated track", () => {
    expect(chooseTrack([track("en", true), track("en-GB")], "en")).toEqual(track("en-GB"));
    expect(chooseTrack([track("en-US", true), track("en")], "en-US")).toEqual(track("en"));
    expect(chooseTrack([track("en-GB"), track("en-US")], "en-us")).toEqual(track("en-US"));
  });

  it("then an auto-generated one, exact before variant", () => {
    expect(chooseTrack([track("en-US", true), track("en", true)], "en")).toEqual(track("en", true));
    expect(chooseTrack([track("de"), track("en-US", true)], "en")).toEqual(track("en-US", true));
  });

  it("never another language", () => {
    expect(chooseTrack([track("de"), track("fr", true)], "en")).toBeUndefined();
    expect(chooseTrack([], "en")).toBeUndefined();
  });

  it("compares codes ignoring case and _", () => {
    expect(chooseTrack([track("pt_BR")], "pt-br")).toEqual(track("pt_BR"));
  });

  it("lists the available languages, manual first, each once", () => {
    expect(describeLanguages([track("fr", true, "French (auto-generated)"), track("de", false, "German"), track("es", false, "Spanish"), track("en", true, "English")])).toBe(
      "de (German), es (Spanish), fr (French (auto-generated)), en (English, auto-generated)",
    );
  });

  it("reads tracks from a player response, names in simpleText or runs", () => {
    const player = {
      captions: {
        playerCaptionsTracklistRenderer: {
          captionTracks: [
            { baseUrl: "https://h/t?a", languageCode: "en", name: { runs: [{ text: "English" }] } },
            { baseUrl: "https://h/t?b", languageCode: "en", kind: "asr", name: { simpleText: "English (auto-generated)" } },
            { languageCode: "xx" },
          ],
        },
      },
    };
    expect(tracksFromPlayerResponse(player)).toEqual([
      { languageCode: "en", name: "English", generated: false, baseUrl: "https://h/t?a" },
      { languageCode: "en", name: "English (auto-generated)", generated: true, baseUrl: "https://h/t?b" },
    ]);
    expect(tracksFromPlayerResponse({ playabilityStatus: { status: "OK" } })).toBeUndefined();
  });
});

describe("parseTimedText", () => {
  it("reads the classic format: seconds, entities decoded twice, markup dropped, whitespace collapsed", () => {
    const xml = `<?xml version="1.0" encoding="utf-8" ?><transcript>
      <text start="0.5" dur="2.25">Hello &amp;amp; welcome</text>
      <text start="2.75" dur="3">it&amp;#39;s &amp;quot;quoted&amp;quot; &amp;lt;font color=&amp;quot;#fff&amp;quot;&amp;gt;here&amp;lt;/font&amp;gt;</text>
      <text start="5.75" dur="1.5">line one
line   two</text>
      <text start="8" dur="1">   </text>
      <text start="9">no duration</text>
    </transcript>`;
    expect(parseTimedText(xml)).toEqual([
      { text: "Hello & welcome", start: 0.5, duration: 2.25 },
      { text: "it's \"quoted\" here", start: 2.75, duration: 3 },
      { text: "line one line two", start: 5.75, duration: 1.5 },
      { text: "no duration", start: 9, duration: 0 },
    ]);
  });

  it("reads srv3: milliseconds to seconds, words joined", () => {
    const xml = `<?xml version="1.0" encoding="utf-8" ?><timedtext format="3"><body>
      <p t="1200" d="3400" w="1">Hello<s t="200"> there</s><s t="400"> &amp;amp; more</s></p>
      <p t="4600" d="1000"></p>
    </body></timedtext>`;
    expect(parseTimedText(xml)).toEqual([{ text: "Hello there & more", start: 1.2, duration: 3.4 }]);
  });

  it("reads json3: events with segments, window events skipped", () => {
    const json = JSON.stringify({
      events: [
        { tStartMs: 0, dDurationMs: 100000, id: 1 },
        { tStartMs: 1200, dDurationMs: 3400, segs: [{ utf8: "Hello" }, { utf8: " world" }] },
        { tStartMs: 4600, aAppend: 1, segs: [{ utf8: "\n" }] },
        { tStartMs: 5000, dDurationMs: 1000, segs: [{ utf8: "Tom &amp; Jerry" }] },
      ],
    });
    expect(parseTimedText(json)).toEqual([
      { text: "Hello world", start: 1.2, duration: 3.4 },
      { text: "Tom & Jerry", start: 5, duration: 1 },
    ]);
  });

  it("refuses documents that are not captions", () => {
    expect(() => parseTimedText("<html><body>nope</body></html>")).toThrow();
    expect(() => parseTimedText("plain text")).toThrow();
    expect(() => parseTimedText("{not json")).toThrow();
    expect(parseTimedText(`<?xml version="1.0"?><transcript></transcript>`)).toEqual([]);
  });
});

describe("the watch page", () => {
  it("finds the API key and the embedded player response (braces inside strings included)", () => {
    const html = `<script>ytcfg.set({"INNERTUBE_API_KEY": "AIza_key-1"});</script><script>var ytInitialPlayerResponse = {"a":{"b":"} { \\" }"},"c":[1,2]};var x = {};</script>`;
    expect(innertubeApiKey(html)).toBe("AIza_key-1");
    expect(embeddedPlayerResponse(html)).toEqual({ a: { b: '} { " }' }, c: [1, 2] });
    expect(embeddedPlayerResponse("<html></html>")).toBeUndefined();
    expect(embeddedPlayerResponse("var ytInitialPlayerResponse = {broken")).toBeUndefined();
  });

  it("recognises consent and captcha pages", () => {
    const consent = `<form action="https://consent.youtube.com/s" method="POST"><input type="hidden" name="v" value="cb.2026"></form>`;
    expect(isConsentPage(consent, "https://www.youtube.com/watch?v=x")).toBe(true);
    expect(isConsentPage("<html></html>", "https://consent.youtube.com/ml?continue=x")).toBe(true);
    expect(isConsentPage("<html></html>", "https://www.youtube.com/watch?v=x")).toBe(false);
    expect(consentCookieValue(consent)).toBe("cb.2026");
    expect(isCaptchaPage('<div class="g-recaptcha"></div>', "https://www.youtube.com/watch")).toBe(true);
    expect(isCaptchaPage("<html></html>", "https://www.google.com/sorry/index?continue=x")).toBe(true);
    expect(isCaptchaPage("<html></html>", "https://www.youtube.com/watch")).toBe(false);
  });
});
