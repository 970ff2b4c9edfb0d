/**
 * Time as the service sees it: integer microseconds since the Unix epoch.
 *
 * Cursors are timestamps that must round-trip exactly (docs/decisions.md#json-timestamps), and
 * PostgreSQL keeps microseconds, so nothing here goes through a JS Date
 * (milliseconds). A double holds every microsecond up to the year 2255.
 */
export type Micros = number;

/** A pending setTimer call; cancelling a timer that has fired does nothing. */
export interface Timer {
  cancel(): void;
}

export interface TimerOptions {
  /** The pending timer does not keep the process alive (Node's unref). */
  unref?: boolean;
}

/**
 * Every reading of time a rule depends on (deadlines, heartbeats, leases,
 * throttles, backoff), so that tests can drive it instead of sleeping.
 */
export interface Clock {
  /** Wall-clock time, for what is stored or compared with stored stamps. */
  now(): Micros;
  /**
   * Milliseconds on a scale that never jumps (unrelated to now()), for
   * measuring intervals: deadlines and recheck periods.
   */
  monotonicMs(): number;
  /** Calls fn once, `ms` later on the monotonic scale. */
  setTimer(ms: number, fn: () => void, options?: TimerOptions): Timer;
}

/**
 * Wall-clock time, as the database's clock_timestamp() sees it on the same
 * host (the monotonic performance clock drifts away from it over hours), with
 * the sub-millisecond part taken from the high-resolution timer.
 */
export const systemClock: Clock = {
  now: () => Date.now() * 1000 + (Math.floor(performance.now() * 1000) % 1000),
  monotonicMs: () => performance.now(),
  setTimer(ms, fn, options) {
    const timer = setTimeout(fn, ms);
    if (options?.unref) timer.unref();
    return { cancel: () => clearTimeout(timer) };
  },
};

export const MICROS_PER_SECOND = 1_000_000;

const pad = (n: number, width: number) => String(n).padStart(width, "0");

/** RFC 3339 in UTC with exactly six fractional digits: 2026-11-21T03:14:39.743512Z. */
export function formatTimestamp(us: Micros): string {
  // The hot path (every timestamp of every rendered message and every query
  // parameter): whole microseconds from 1970 on (safe integers end in 2255),
  // with the part up to the second cached; anything else takes the general path.
  if (!Number.isSafeInteger(us) || us < 0) return formatTimestampByDate(us);
  const seconds = Math.floor(us / MICROS_PER_SECOND);
  const slot = seconds % PREFIX_SLOTS;
  let prefix = prefixText[slot];
  if (prefixSecond[slot] !== seconds || prefix === undefined) {
    prefix = secondPrefix(seconds);
    prefixSecond[slot] = seconds;
    prefixText[slot] = prefix;
  }
  // 1_000_000 + fraction has seven digits; the last six are the zero-padded fraction.
  return `${prefix}${String(MICROS_PER_SECOND + (us - seconds * MICROS_PER_SECOND)).slice(1)}Z`;
}

/**
 * "2026-11-21T03:14:39." by second, direct-mapped: the timestamps of a page
 * (created_at, expires_at, claimed_at…) mostly share a handful of seconds.
 */
const PREFIX_SLOTS = 256;
const prefixSecond = new Float64Array(PREFIX_SLOTS).fill(-1);
const prefixText: Array<string | undefined> = new Array<string | undefined>(PREFIX_SLOTS).fill(undefined);
const TWO_DIGITS = Array.from({ length: 100 }, (_, i) => String(i).padStart(2, "0"));

function secondPrefix(seconds: number): string {
  const days = Math.floor(seconds / 86_400);
  const inDay = seconds - days * 86_400;
  const { year, month, day } = civilFromDays(days);
  const hour = Math.floor(inDay / 3600);
  const minute = Math.floor((inDay - hour * 3600) / 60);
  const second = inDay - hour * 3600 - minute * 60;
  return `${pad(year, 4)}-${TWO_DIGITS[month]}-${TWO_DIGITS[day]}T${TWO_DIGITS[hour]}:${TWO_DIGITS[minute]}:${TWO_DIGITS[second]}.`;
}

/** The general form, through a JS Date (for whatever formatTimestamp's fast path does not take). */
function formatTimestampByDate(us: Micros): string {
  const ms = Math.floor(us / 1000);
  const date = new Date(ms);
  const fraction = us - Math.floor(us / MICROS_PER_SECOND) * MICROS_PER_SECOND;
  return (
    `${pad(date.getUTCFullYear(), 4)}-${pad(date.getUTCMonth() + 1, 2)}-${pad(date.getUTCDate(), 2)}` +
    `T${pad(date.getUTCHours(), 2)}:${pad(date.getUTCMinutes(), 2)}:${pad(date.getUTCSeconds(), 2)}` +
    `.${pad(fraction, 6)}Z`
  );
}

/** Proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's civil_from_days). */
function civilFromDays(days: number): { year: number; month: number; day: number } {
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  return { year: yoe + era * 400 + (month <= 2 ? 1 : 0), month, day };
}

/** Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146_097 + doe - 719_468;
}

/** Parses an RFC 3339 timestamp with any offset; undefined when it is not one. */
export function parseTimestamp(text: string): Micros | undefined {
  const fast = parseFixedPositions(text, false);
  return fast === NOT_FAST ? parseTimestampByRegex(text) : fast;
}

/**
 * PostgreSQL's text output of timestamptz ("2026-11-21 03:14:39.743512+00";
 * the sessions run in UTC) and of timestamp without time zone
 * ("2026-11-21 03:14:39.743512", which we only ever store in UTC), as
 * microseconds; undefined when it is neither. Any RFC 3339 form is read too.
 */
export function parsePgTimestamp(text: string): Micros | undefined {
  const fast = parseFixedPositions(text, true);
  if (fast !== NOT_FAST) return fast;
  return parseTimestampByRegex(/[+-]\d{2}(:?\d{2})?$|Z$/.test(text) ? text : `${text}Z`);
}

/** parseFixedPositions' answer when the text needs the general parser. */
const NOT_FAST = -1.5;

/**
 * The common forms by character position, without a regex or a Date:
 * "YYYY-MM-DD[T ]HH:MM:SS", an optional fraction of 1 to 9 digits, then Z,
 * +00, ±HH:MM or ±HHMM (or nothing, when `bareIsUtc`). It answers only for a
 * valid date and time in the years 1000–9999, the forms where the result is
 * certain to be the regex parser's; NOT_FAST sends anything else (other
 * years, a leap second, a malformed string) to that parser.
 */
function parseFixedPositions(text: string, bareIsUtc: boolean): Micros | typeof NOT_FAST {
  const length = text.length;
  if (length < 19) return NOT_FAST;
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 2);
  const day = digits(text, 8, 2);
  const hour = digits(text, 11, 2);
  const minute = digits(text, 14, 2);
  const second = digits(text, 17, 2);
  const separator = text.charCodeAt(10);
  if (
    year < 1000 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 ||
    second < 0 || second > 59 ||
    text.charCodeAt(4) !== DASH || text.charCodeAt(7) !== DASH || text.charCodeAt(13) !== COLON || text.charCodeAt(16) !== COLON ||
    (separator !== UPPER_T && separator !== LOWER_T && separator !== SPACE) ||
    day > daysInMonth(year, month)
  ) {
    return NOT_FAST;
  }
  let i = 19;
  let micros = 0;
  if (text.charCodeAt(i) === DOT) {
    const start = ++i;
    while (i < length && isDigit(text.charCodeAt(i))) i++;
    const count = i - start;
    if (count === 0 || count > 9) return NOT_FAST;
    // Digits beyond the sixth are below our precision and are dropped.
    const kept = Math.min(count, 6);
    micros = digits(text, start, kept) * POWERS_OF_TEN[6 - kept]!;
  }
  let offsetMinutes = 0;
  const rest = length - i;
  const sign = text.charCodeAt(i);
  if (rest === 0) {
    if (!bareIsUtc) return NOT_FAST;
  } else if (rest === 1 && (sign === UPPER_Z || (sign === LOWER_Z && !bareIsUtc))) {
    // (The pool's former check for an offset did not know a lowercase z.)
    offsetMinutes = 0;
  } else if (sign === PLUS || sign === MINUS) {
    const offHours = digits(text, i + 1, 2);
    let offMinutes = 0;
    if (rest === 6 && text.charCodeAt(i + 3) === COLON) offMinutes = digits(text, i + 4, 2);
    else if (rest === 5) offMinutes = digits(text, i + 3, 2);
    else if (rest !== 3) return NOT_FAST;
    if (offHours < 0 || offHours > 23 || offMinutes < 0 || offMinutes > 59) return NOT_FAST;
    offsetMinutes = (sign === MINUS ? -1 : 1) * (offHours * 60 + offMinutes);
  } else {
    return NOT_FAST;
  }
  const epochMs = ((epochDays(year, month, day) * 24 + hour) * 60 + minute) * 60_000 + second * 1000;
  return (epochMs - offsetMinutes * 60_000) * 1000 + micros;
}

// The rows of one result mostly share a date: the last one's day count is kept.
let lastDate = -1;
let lastDays = 0;

function epochDays(year: number, month: number, day: number): number {
  const date = (year * 100 + month) * 100 + day;
  if (date !== lastDate) {
    lastDays = daysFromCivil(year, month, day);
    lastDate = date;
  }
  return lastDays;
}

const DASH = 0x2d, COLON = 0x3a, DOT = 0x2e, SPACE = 0x20, PLUS = 0x2b, MINUS = 0x2d;
const UPPER_T = 0x54, LOWER_T = 0x74, UPPER_Z = 0x5a, LOWER_Z = 0x7a;
const POWERS_OF_TEN = [1, 10, 100, 1000, 10_000, 100_000, 1_000_000];

const isDigit = (code: number) => code >= 0x30 && code <= 0x39;

/** The decimal number of `count` digits at `start`; -1 when one of them is not a digit (or missing). */
function digits(text: string, start: number, count: number): number {
  let value = 0;
  for (let i = start; i < start + count; i++) {
    const code = text.charCodeAt(i);
    if (!isDigit(code)) return -1;
    value = value * 10 + (code - 0x30);
  }
  return value;
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

// RFC 3339, plus PostgreSQL's text form ("2026-11-21 03:14:39.743512+00").
const TIMESTAMP =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)$/;

/** The general parser, and the specification of the fast one (the unit tests hold the fast one to it). */
export function parseTimestampByRegex(text: string): Micros | undefined {
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
