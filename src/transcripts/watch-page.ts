/**
 * Reading the video host's watch page, the way established open-source
 * transcript fetchers (youtube-transcript-api and its ports) do:
 *
 * - the page's ytcfg carries INNERTUBE_API_KEY, used to ask the player API
 *   (POST /youtubei/v1/player) for the player response;
 * - the page also embeds a player response (`var ytInitialPlayerResponse =
 *   {…};`), the fallback when there is no key or the API does not answer;
 * - a cookie-consent interstitial (a form posting to consent.youtube.com,
 *   or a redirect there) is answered once with the CONSENT cookie taken
 *   from the form, as those fetchers do; a second one means blocked;
 * - a captcha page (`class="g-recaptcha"`, or Google's /sorry/ page) means
 *   the host has blocked this network.
 */

/** The ytcfg API key of the player API, when the page has one. */
export function innertubeApiKey(html: string): string | undefined {
  return /"INNERTUBE_API_KEY"\s*:\s*"([A-Za-z0-9_-]+)"/.exec(html)?.[1];
}

export function isConsentPage(html: string, finalUrl: string): boolean {
  let host = "";
  try {
    host = new URL(finalUrl).hostname;
  } catch {
    // keep ""
  }
  return host.startsWith("consent.") || /action="https:\/\/consent\.(youtube|google)\.com\/s"/.test(html);
}

/** The value for `CONSENT=YES+<value>`, from the consent form's hidden `v` field. */
export function consentCookieValue(html: string): string | undefined {
  return /name="v"\s+value="([^"]*)"/.exec(html)?.[1];
}

export function isCaptchaPage(html: string, finalUrl: string): boolean {
  let path = "";
  try {
    path = new URL(finalUrl).pathname;
  } catch {
    // keep ""
  }
  return path.startsWith("/sorry/") || html.includes('class="g-recaptcha"');
}

/** The JSON object assigned to `ytInitialPlayerResponse` in the page, parsed; undefined when absent or broken. */
export function embeddedPlayerResponse(html: string): unknown {
  const marker = /ytInitialPlayerResponse\s*=\s*\{/g;
  const match = marker.exec(html);
  if (!match) return undefined;
  const start = match.index + match[0].length - 1;
  const end = matchingBrace(html, start);
  if (end === undefined) return undefined;
  try {
    return JSON.parse(html.slice(start, end + 1));
  } catch {
    return undefined;
  }
}

/** Index of the `}` closing the `{` at `start`, skipping strings; undefined when unbalanced. */
function matchingBrace(text: string, start: number): number | undefined {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (ch === "\\") i++;
      else if (ch === '"') inString = false;
      continue;
    }
    if (ch === '"') inString = true;
    else if (ch === "{") depth++;
    else if (ch === "}") {
      depth--;
      if (depth === 0) return i;
    }
  }
  return undefined;
}

export interface Playability {
  status: string | undefined;
  reason: string | undefined;
}

export function playability(player: unknown): Playability {
  const p = (player as { playabilityStatus?: { status?: unknown; reason?: unknown } } | null)?.playabilityStatus;
  return {
    status: typeof p?.status === "string" ? p.status : undefined,
    reason: typeof p?.reason === "string" ? p.reason : undefined,
  };
}
