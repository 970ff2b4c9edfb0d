/**
 * Caption tracks of a video (from the player response's
 * captions.playerCaptionsTracklistRenderer.captionTracks) and the choice of
 * one for the requested language.
 *
 * Order of preference, first match wins:
 *   1. a manually created track in exactly the requested language;
 *   2. a manually created track in a regional variant of it ("en" asked,
 *      "en-GB" there; or "en-US" asked, "en" or "en-GB" there);
 *   3. an auto-generated (kind "asr") track in exactly the language;
 *   4. an auto-generated track in a variant of it.
 * Within a step, the host's order decides. Language codes compare without
 * case, "_" read as "-".
 *
 * Not a fallback: a track in another language. The caller named a language;
 * answering in a different one would look like success and read like
 * nonsense to a pipeline expecting that language. Instead the job fails
 * with language_unavailable and its message lists every language the video
 * has, so the caller can ask again. Machine translation (the host's tlang)
 * is not offered either.
 */
export interface CaptionTrack {
  /** As the host names it: "en", "en-GB", "pt-BR". */
  languageCode: string;
  /** Human name, e.g. "English (auto-generated)". */
  name: string;
  /** kind "asr". */
  generated: boolean;
  baseUrl: string;
}

export function tracksFromPlayerResponse(player: unknown): CaptionTrack[] | undefined {
  const renderer = (player as { captions?: { playerCaptionsTracklistRenderer?: { captionTracks?: unknown } } } | null)?.captions
    ?.playerCaptionsTracklistRenderer;
  if (!renderer || !Array.isArray(renderer.captionTracks)) return undefined;
  const tracks: CaptionTrack[] = [];
  for (const raw of renderer.captionTracks as unknown[]) {
    const t = raw as { languageCode?: unknown; baseUrl?: unknown; kind?: unknown; name?: { simpleText?: unknown; runs?: Array<{ text?: unknown }> } };
    if (typeof t.languageCode !== "string" || typeof t.baseUrl !== "string" || t.languageCode === "" || t.baseUrl === "") continue;
    const name =
      typeof t.name?.simpleText === "string"
        ? t.name.simpleText
        : Array.isArray(t.name?.runs)
          ? t.name.runs.map((r) => (typeof r.text === "string" ? r.text : "")).join("")
          : t.languageCode;
    tracks.push({ languageCode: t.languageCode, name, generated: t.kind === "asr", baseUrl: t.baseUrl });
  }
  return tracks;
}

const norm = (code: string) => code.toLowerCase().replace(/_/g, "-");
const primary = (code: string) => norm(code).split("-")[0]!;

export function chooseTrack(tracks: readonly CaptionTrack[], language: string): CaptionTrack | undefined {
  const wanted = norm(language);
  const exact = (t: CaptionTrack) => norm(t.languageCode) === wanted;
  const variant = (t: CaptionTrack) => primary(t.languageCode) === primary(wanted);
  const manual = tracks.filter((t) => !t.generated);
  const generated = tracks.filter((t) => t.generated);
  return manual.find(exact) ?? manual.find(variant) ?? generated.find(exact) ?? generated.find(variant);
}

/** "de (German), en (English, auto-generated)": every language once, manual tracks first. */
export function describeLanguages(tracks: readonly CaptionTrack[]): string {
  const seen = new Set<string>();
  const parts: string[] = [];
  for (const t of [...tracks.filter((t) => !t.generated), ...tracks.filter((t) => t.generated)]) {
    const key = `${t.languageCode}:${t.generated}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const name = t.name.replace(/\s+/g, " ").trim();
    const label = t.generated && !/auto/i.test(name) ? `${name}, auto-generated` : name;
    parts.push(label !== "" && label !== t.languageCode ? `${t.languageCode} (${label})` : t.generated ? `${t.languageCode} (auto-generated)` : t.languageCode);
  }
  return parts.join(", ");
}
