/**
 * Time as the service sees it: integer microseconds since the Unix epoch.
 *
 * Cursors are timestamps that must round-trip exactly (decision J4), and
 * PostgreSQL keeps microseconds, so nothing here goes through a JS Date
 * (milliseconds). A double holds every microsecond up to the year 2255.
 */
export type Micros = number;

export interface Clock {
  now(): Micros;
}

const performanceOrigin = Math.round(performance.timeOrigin * 1000);

export const systemClock: Clock = {
  now: () => performanceOrigin + Math.floor(performance.now() * 1000),
};

export const MICROS_PER_SECOND = 1_000_000;

const pad = (n: number, width: number) => String(n).padStart(width, "0");

/** RFC 3339 in UTC with exactly six fractional digits: 2026-11-21T03:14:39.743512Z. */
export function formatTimestamp(us: Micros): string {
  const ms = Math.floor(us / 1000);
  const date = new Date(ms);
  const fraction = us - Math.floor(us / MICROS_PER_SECOND) * MICROS_PER_SECOND;
  return (
    `${pad(date.getUTCFullYear(), 4)}-${pad(date.getUTCMonth() + 1, 2)}-${pad(date.getUTCDate(), 2)}` +
    `T${pad(date.getUTCHours(), 2)}:${pad(date.getUTCMinutes(), 2)}:${pad(date.getUTCSeconds(), 2)}` +
    `.${pad(fraction, 6)}Z`
  );
}

// RFC 3339, plus PostgreSQL's text form ("2026-11-21 03:14:39.743512+00").
const TIMESTAMP =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)$/;

/** Parses an RFC 3339 timestamp with any offset; undefined when it is not one. */
export function parseTimestamp(text: string): Micros | undefined {
  const m = TIMESTAMP.exec(text);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s, frac, zulu, sign, oh, om] = m;
  const year = Number(y), month = Number(mo), day = Number(d);
  const hour = Number(h), minute = Number(mi), second = Number(s);
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return undefined;
  const epochMs = Date.UTC(year, month - 1, day, hour, minute, Math.min(second, 59));
  const check = new Date(epochMs);
  if (check.getUTCDate() !== day || check.getUTCMonth() !== month - 1) return undefined;
  let offsetMinutes = 0;
  if (!zulu && sign) {
    const offHours = Number(oh), offMinutes = Number(om ?? "0");
    if (offHours > 23 || offMinutes > 59) return undefined;
    offsetMinutes = (sign === "-" ? -1 : 1) * (offHours * 60 + offMinutes);
  }
  // Digits beyond the sixth are below our precision and are dropped.
  const micros = frac ? Number(frac.slice(0, 6).padEnd(6, "0")) : 0;
  return (epochMs - offsetMinutes * 60_000) * 1000 + micros;
}

/** Splits microseconds into the fields of google.protobuf.Timestamp. */
export function toProtoTimestamp(us: Micros): { seconds: bigint; nanos: number } {
  const seconds = Math.floor(us / MICROS_PER_SECOND);
  return { seconds: BigInt(seconds), nanos: (us - seconds * MICROS_PER_SECOND) * 1000 };
}

export function fromProtoTimestamp(ts: { seconds: bigint; nanos: number }): Micros {
  return Number(ts.seconds) * MICROS_PER_SECOND + Math.floor(ts.nanos / 1000);
}
