/**
 * The parsed job posting: the JSON schema the model must answer with, and
 * the checks and normalisation its answer goes through before it becomes a
 * job result. The schema keeps the model close; normalisation makes the
 * result exact whatever the model (or an OpenAI-compatible server that
 * ignores response_format) sent:
 *
 * - all eleven fields present; unknown → null, lists → [];
 * - strings trimmed with whitespace collapsed; "", "n/a", "unknown",
 *   "not specified" → null;
 * - salary_min / salary_max are numbers ("85,000", "€85k", "85.000,50" are
 *   read as numbers); zero, negative or unreadable → null; swapped when
 *   min > max;
 * - salary_currency is an ISO 4217 code in upper case (the unambiguous
 *   symbols € £ ₹ … are mapped; "$" is not, it names a dozen currencies),
 *   else null;
 * - employment_type is full-time, part-time, contract or freelance, from
 *   the usual spellings (FULL_TIME, "Full time", contractor, fixed-term,
 *   temporary, freelancer), else null;
 * - lists: strings only, trimmed, empty ones dropped, duplicates (ignoring
 *   case) dropped, at most 50 items of 500 characters;
 * - description_summary: at most three sentences (the model is asked for
 *   two or three; a longer answer is cut, a shorter one kept).
 *
 * An answer that is not a JSON object with at least one of the fields is
 * rejected (llm_invalid_response): it is not a posting.
 */
import { z } from "zod";

export interface JobPostingResult {
  title: string | null;
  company: string | null;
  location: string | null;
  salary_min: number | null;
  salary_max: number | null;
  salary_currency: string | null;
  employment_type: EmploymentType | null;
  requirements: string[];
  skills: string[];
  benefits: string[];
  description_summary: string | null;
}

export const EMPLOYMENT_TYPES = ["full-time", "part-time", "contract", "freelance"] as const;
export type EmploymentType = (typeof EMPLOYMENT_TYPES)[number];

export const POSTING_FIELDS = [
  "title",
  "company",
  "location",
  "salary_min",
  "salary_max",
  "salary_currency",
  "employment_type",
  "requirements",
  "skills",
  "benefits",
  "description_summary",
] as const satisfies ReadonlyArray<keyof JobPostingResult>;

const nullableString = (description: string) => ({ type: ["string", "null"], description });
const nullableNumber = (description: string) => ({ type: ["number", "null"], description });
const stringList = (description: string) => ({ type: "array", items: { type: "string" }, description });

/** The response_format schema (OpenAI structured outputs, strict: every field required, no others). */
export const JOB_POSTING_JSON_SCHEMA = {
  type: "object",
  additionalProperties: false,
  required: [...POSTING_FIELDS],
  properties: {
    title: nullableString("The job title, as stated. null when not stated."),
    company: nullableString("The hiring company's name. null when not stated."),
    location: nullableString("Where the job is: a city (with country when stated), \"Remote\", or \"Hybrid, <city>\". null when not stated."),
    salary_min: nullableNumber("Lowest salary amount stated, as a plain number (85000, not \"85k\"). A single figure is both min and max; \"up to X\" has no min. null when not stated."),
    salary_max: nullableNumber("Highest salary amount stated, as a plain number. \"from X\" has no max. null when not stated."),
    salary_currency: nullableString("ISO 4217 code of the salary's currency, upper case (EUR, USD, GBP). null when no salary or no currency is stated."),
    employment_type: {
      type: ["string", "null"],
      enum: [...EMPLOYMENT_TYPES, null],
      description: "full-time, part-time, contract or freelance; null when not stated or anything else.",
    },
    requirements: stringList("Required qualifications and experience, one per item, short. [] when none are stated."),
    skills: stringList("Skills, technologies and tools named, one per item (e.g. \"TypeScript\", \"PostgreSQL\"). [] when none."),
    benefits: stringList("Benefits and perks offered, one per item. [] when none are stated."),
    description_summary: nullableString("A neutral summary of the role in 2 to 3 sentences. null when the text is not a job posting."),
  },
} as const;

/** The answer must be an object carrying at least one posting field; each field is then normalised on its own. */
const answerSchema = z
  .record(z.string(), z.unknown())
  .refine((answer) => POSTING_FIELDS.some((field) => field in answer), "none of the eleven posting fields is present");

export class InvalidPostingAnswer extends Error {
  override readonly name = "InvalidPostingAnswer";
}

/** Validates and normalises the model's parsed JSON answer; throws InvalidPostingAnswer when it is not a posting. */
export function normalisePosting(answer: unknown): JobPostingResult {
  const parsed = answerSchema.safeParse(answer);
  if (!parsed.success) throw new InvalidPostingAnswer(parsed.error.issues[0]?.message ?? "not a JSON object");
  const a = parsed.data;
  let salaryMin = amount(a.salary_min);
  let salaryMax = amount(a.salary_max);
  if (salaryMin !== null && salaryMax !== null && salaryMin > salaryMax) [salaryMin, salaryMax] = [salaryMax, salaryMin];
  return {
    title: text(a.title, 300),
    company: text(a.company, 300),
    location: text(a.location, 300),
    salary_min: salaryMin,
    salary_max: salaryMax,
    salary_currency: currency(a.salary_currency),
    employment_type: employmentType(a.employment_type),
    requirements: list(a.requirements),
    skills: list(a.skills),
    benefits: list(a.benefits),
    description_summary: summary(a.description_summary),
  };
}

const UNKNOWN = new Set(["", "null", "none", "n/a", "na", "unknown", "not specified", "not stated", "not mentioned", "unspecified", "-"]);

function text(value: unknown, maxChars: number): string | null {
  if (typeof value !== "string") return null;
  const cleaned = value.replace(/\s+/g, " ").trim();
  if (UNKNOWN.has(cleaned.toLowerCase())) return null;
  return cleaned.length > maxChars ? `${cleaned.slice(0, maxChars - 1).trimEnd()}…` : cleaned;
}

/** A salary amount as a positive finite number, from a number or a written amount; else null. */
export function amount(value: unknown): number | null {
  let n: number | null = null;
  if (typeof value === "number") n = value;
  else if (typeof value === "string") n = readAmount(value);
  if (n === null || !Number.isFinite(n) || n <= 0) return null;
  // Amounts are money: cents at most.
  return Math.round(n * 100) / 100;
}

function readAmount(raw: string): number | null {
  // The first number, with its separators and an optional k / m multiplier ("85k", "1.2m").
  const match = /(\d[\d.,]*)(?:(k|mio|m|thousand|million)(?![a-z]))?/.exec(raw.toLowerCase().replace(/(\d)[\s\u00a0\u202f'](?=\d)/g, "$1"));
  if (!match) return null;
  const factor = match[2] === undefined ? 1 : match[2] === "k" || match[2] === "thousand" ? 1_000 : 1_000_000;
  let s = match[1]!.replace(/[.,]$/, "");
  const lastDot = s.lastIndexOf(".");
  const lastComma = s.lastIndexOf(",");
  if (lastDot !== -1 && lastComma !== -1) {
    // Both: the later one is the decimal mark.
    const decimal = lastDot > lastComma ? "." : ",";
    const thousands = decimal === "." ? "," : ".";
    s = s.split(thousands).join("").replace(decimal, ".");
  } else if (lastDot !== -1 || lastComma !== -1) {
    const mark = lastDot !== -1 ? "." : ",";
    const parts = s.split(mark);
    // One mark followed by exactly three digits, or several marks: thousands separators.
    const thousands = parts.length > 2 || parts[parts.length - 1]!.length === 3;
    s = thousands ? parts.join("") : parts.join(".");
  }
  const n = Number(s);
  return Number.isFinite(n) ? n * factor : null;
}

/** Symbols that stand for one currency only. */
const CURRENCY_SYMBOLS: Readonly<Record<string, string>> = {
  "€": "EUR",
  "£": "GBP",
  "₹": "INR",
  "₩": "KRW",
  "₪": "ILS",
  "₺": "TRY",
  "₽": "RUB",
  "₱": "PHP",
  "₴": "UAH",
  "₫": "VND",
  "฿": "THB",
  "US$": "USD",
  "A$": "AUD",
  "AU$": "AUD",
  "C$": "CAD",
  "CA$": "CAD",
  "NZ$": "NZD",
  "HK$": "HKD",
  "S$": "SGD",
  "R$": "BRL",
};

let iso4217: ReadonlySet<string> | undefined;
function isoCurrencies(): ReadonlySet<string> {
  // ICU's list of ISO 4217 codes (Node ships full ICU).
  iso4217 ??= new Set(Intl.supportedValuesOf("currency"));
  return iso4217;
}

export function currency(value: unknown): string | null {
  if (typeof value !== "string") return null;
  const trimmed = value.trim();
  const code = CURRENCY_SYMBOLS[trimmed.toUpperCase()] ?? CURRENCY_SYMBOLS[trimmed] ?? trimmed.toUpperCase();
  return /^[A-Z]{3}$/.test(code) && isoCurrencies().has(code) ? code : null;
}

const EMPLOYMENT_ALIASES: Readonly<Record<string, EmploymentType>> = {
  "full-time": "full-time",
  fulltime: "full-time",
  "full": "full-time",
  "part-time": "part-time",
  parttime: "part-time",
  "part": "part-time",
  contract: "contract",
  contractor: "contract",
  "fixed-term": "contract",
  temporary: "contract",
  temp: "contract",
  freelance: "freelance",
  freelancer: "freelance",
  "self-employed": "freelance",
};

export function employmentType(value: unknown): EmploymentType | null {
  if (typeof value !== "string") return null;
  const key = value.trim().toLowerCase().replace(/[\s_]+/g, "-");
  return EMPLOYMENT_ALIASES[key] ?? null;
}

function list(value: unknown): string[] {
  const items = Array.isArray(value) ? value : typeof value === "string" ? [value] : [];
  const seen = new Set<string>();
  const out: string[] = [];
  for (const item of items) {
    const t = typeof item === "string" ? text(item.replace(/^\s*(?:[-*•·]|\d+[.)])\s+/, ""), 500) : null;
    if (t === null || seen.has(t.toLowerCase())) continue;
    seen.add(t.toLowerCase());
    out.push(t);
    if (out.length === 50) break;
  }
  return out;
}

/** At most three sentences. */
export function summary(value: unknown): string | null {
  const t = text(value, 2000);
  if (t === null) return null;
  const sentences = Array.from(new Intl.Segmenter("en", { granularity: "sentence" }).segment(t), (s) => s.segment.trim()).filter((s) => s !== "");
  return sentences.length <= 3 ? t : sentences.slice(0, 3).join(" ");
}
