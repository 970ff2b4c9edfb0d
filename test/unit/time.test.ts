/**
 * formatTimestamp, parseTimestamp and parsePgTimestamp take their fast paths
 * (cached second prefixes, fixed character positions) for the common forms;
 * here they are held to the general implementations they replaced, kept
 * below as the specification, on hand-picked and seeded random values.
 */
import { describe, expect, it } from "vitest";
import { formatTimestamp, parsePgTimestamp, parseTimestamp, parseTimestampByRegex } from "../../src/model/time.js";
import { mulberry32 } from "../support/random.js";

// ---------------------------------------------------------------------------
// The specification: the implementations before the fast paths.

const pad = (n: number, width: number) => String(n).padStart(width, "0");

function referenceFormat(us: number): string {
  const ms = Math.floor(us / 1000);
  const date = new Date(ms);
  const fraction = us - Math.floor(us / 1_000_000) * 1_000_000;
  return (
    `${pad(date.getUTCFullYear(), 4)}-${pad(date.getUTCMonth() + 1, 2)}-${pad(date.getUTCDate(), 2)}` +
    `T${pad(date.getUTCHours(), 2)}:${pad(date.getUTCMinutes(), 2)}:${pad(date.getUTCSeconds(), 2)}` +
    `.${pad(fraction, 6)}Z`
  );
}

const referenceParse = parseTimestampByRegex;
const referencePgParse = (text: string) => referenceParse(/[+-]\d{2}(:?\d{2})?$|Z$/.test(text) ? text : `${text}Z`);

const MAX_SAFE_MICROS = Number.MAX_SAFE_INTEGER;

describe("formatTimestamp", () => {
  it("formats the contract's example (json-timestamps)", () => {
    expect(formatTimestamp(1795230879743512)).toBe("2026-11-21T03:14:39.743512Z");
    expect(formatTimestamp(1795230879000000)).toBe("2026-11-21T03:14:39.000000Z");
  });

  const picked = [
    0, 1, 999_999, 1_000_000, 86_399_999_999, 86_400_000_000,
    951_782_400_000_000, // 2000-02-29
    951_868_799_999_999, // 2000-02-29T23:59:59.999999
    4_107_542_400_000_000, // 2100-03-01
    1795230879743512, MAX_SAFE_MICROS, MAX_SAFE_MICROS - 1,
    // The general path: before 1970, fractions of a microsecond, not finite.
    -1, -1_000_000, -62_135_596_800_000_000, 1.5, 1e17, Number.NaN, Number.POSITIVE_INFINITY,
  ];

  it("matches the general implementation on picked values", () => {
    for (const us of picked) expect(formatTimestamp(us), String(us)).toBe(referenceFormat(us));
  });

  it("matches it on random values, and again when the second prefix comes from the cache", () => {
    const rnd = mulberry32(7);
    const values = Array.from({ length: 20_000 }, () => Math.floor(rnd() * 4_102_444_800_000_000)); // 1970–2100
    // Neighbours share seconds; values 256 seconds apart share a cache slot.
    values.push(...values.slice(0, 2000).flatMap((us) => [us + 1, us + 256_000_000, us - 999]));
    for (const us of [...values, ...values]) expect(formatTimestamp(us)).toBe(referenceFormat(us));
  });
});

describe("parseTimestamp and parsePgTimestamp", () => {
  const picked = [
    "2026-11-21T03:14:39.743512Z",
    "2026-11-21t03:14:39.743512z",
    "2026-11-21 03:14:39.743512+00",
    "2026-11-21 03:14:39+00",
    "2026-11-21 03:14:39.7+00",
    "2026-11-21T05:14:39.000001+02:00",
    "2026-11-21T05:14:39.000001+0200",
    "2026-11-21T01:14:39.000001-02",
    "2026-11-21T03:14:39.123456789Z",
    "2026-11-21T03:14:39.1234567891Z",
    "2026-11-21T03:14:39.Z",
    "2026-11-21T03:14:60Z",
    "2026-11-21T24:00:00Z",
    "2026-02-29T00:00:00Z",
    "2024-02-29T00:00:00Z",
    "2000-02-29T00:00:00Z",
    "1900-02-29T00:00:00Z",
    "2026-04-31T00:00:00Z",
    "2026-00-10T00:00:00Z",
    "2026-13-10T00:00:00Z",
    "2026-11-00T00:00:00Z",
    "2026-11-21T03:14:39+24:00",
    "2026-11-21T03:14:39+23:60",
    "2026-11-21T03:14:39+2:00",
    "2026-11-21T03:14:39+02:0",
    "2026-11-21T03:14:39+0200x",
    "2026-11-21T03:14:39",
    "2026-11-21 03:14:39.743512",
    "2026-11-21 03:14",
    "0050-01-01T00:00:00Z",
    "0999-12-31T23:59:59Z",
    "1000-01-01T00:00:00Z",
    "1969-12-31T23:59:59.999999Z",
    "9999-12-31T23:59:59.999999Z",
    "12026-11-21T03:14:39Z",
    "2026-11-21 03:14:39.743512 BC",
    "2026-11-21T03:14:39.743512Z ",
    " 2026-11-21T03:14:39.743512Z",
    "2026-11-21X03:14:39Z",
    "2026/11/21T03:14:39Z",
    "2026-1a-21T03:14:39Z",
    "2026-11-21T0a:14:39Z",
    "2026-11-21T03:14:39.74a512Z",
    "2026-11-21T03:14:39,743512Z",
    "２０２６-11-21T03:14:39Z",
    "infinity",
    "",
    "0",
  ];

  it("parseTimestamp matches the regex parser on picked strings", () => {
    for (const text of picked) expect(parseTimestamp(text), text).toBe(referenceParse(text));
  });

  it("parsePgTimestamp matches the pool's former parsing on picked strings", () => {
    for (const text of picked) expect(parsePgTimestamp(text), text).toBe(referencePgParse(text));
  });

  it("both match on random well-formed and near-miss strings", () => {
    const rnd = mulberry32(11);
    const two = (n: number) => String(n).padStart(2, "0");
    for (let i = 0; i < 20_000; i++) {
      const year = String(Math.floor(rnd() * 10_000)).padStart(4, "0");
      const date = `${year}-${two(Math.floor(rnd() * 14))}-${two(Math.floor(rnd() * 33))}`;
      const time = `${two(Math.floor(rnd() * 25))}:${two(Math.floor(rnd() * 61))}:${two(Math.floor(rnd() * 61))}`;
      const fraction = rnd() < 0.7 ? `.${String(Math.floor(rnd() * 1e9)).slice(0, 1 + Math.floor(rnd() * 9))}` : "";
      const offset = ["Z", "+00", "", "+05:30", "-0800", "+23:59", "-24", "z"][Math.floor(rnd() * 8)];
      const text = `${date}${rnd() < 0.5 ? "T" : " "}${time}${fraction}${offset}`;
      expect(parseTimestamp(text), text).toBe(referenceParse(text));
      expect(parsePgTimestamp(text), text).toBe(referencePgParse(text));
    }
  });

  it("round-trips every formatted timestamp", () => {
    const rnd = mulberry32(3);
    for (let i = 0; i < 10_000; i++) {
      const us = Math.floor(rnd() * 4_102_444_800_000_000);
      expect(parseTimestamp(formatTimestamp(us))).toBe(us);
    }
  });
});
