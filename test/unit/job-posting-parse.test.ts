/**
 * Job-posting parse without the network: submission rules, the main-text
 * extraction of a job-board page, and every normalisation rule of the
 * model's answer.
 */
import { describe, expect, it } from "vitest";
import { ApiError } from "../../src/model/errors.js";
import { validateParseRequest } from "../../src/parsing/input.js";
import { postingUserMessage } from "../../src/parsing/llm.js";
import { capText, extractMainText } from "../../src/parsing/main-text.js";
import { amount, currency, employmentType, JOB_POSTING_JSON_SCHEMA, normalisePosting, summary } from "../../src/parsing/posting-schema.js";
import { BOILERPLATE, LATIN1_POSTING, POSTING_FACTS, postingHtml } from "../fakes/job-board.js";
import { POSTING_FIELDS, schemaProblems } from "../fakes/openai-server.js";

function apiError(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    return err as ApiError;
  }
  throw new Error("expected an ApiError");
}

describe("validateParseRequest", () => {
  const ok = { llmConfigured: true };

  it("needs url or text", () => {
    expect(apiError(() => validateParseRequest({}, ok)).code).toBe("missing_field");
    expect(apiError(() => validateParseRequest({ url: null, text: null }, ok)).code).toBe("missing_field");
  });

  it("refuses a blank text when it is all there is", () => {
    expect(apiError(() => validateParseRequest({ text: "  \n " }, ok)).code).toBe("invalid_string");
  });

  it("accepts text alone, url alone, or both (a blank text beside a url counts as absent)", () => {
    expect(validateParseRequest({ text: "Engineer wanted" }, ok)).toEqual({ url: null, text: "Engineer wanted" });
    expect(validateParseRequest({ url: "https://jobs.example.com/1" }, ok)).toEqual({ url: "https://jobs.example.com/1", text: null });
    expect(validateParseRequest({ url: "https://jobs.example.com/1", text: " " }, ok)).toEqual({ url: "https://jobs.example.com/1", text: null });
    expect(validateParseRequest({ url: "http://jobs.example.com/1", text: "x" }, ok)).toEqual({ url: "http://jobs.example.com/1", text: "x" });
  });

  it.each([
    ["relative", "/jobs/1"],
    ["no scheme", "jobs.example.com/1"],
    ["ftp", "ftp://jobs.example.com/1"],
    ["javascript", "javascript:alert(1)"],
    ["file", "file:///etc/passwd"],
    ["empty", ""],
    ["too long", `https://example.com/${"a".repeat(2100)}`],
  ])("refuses a %s url with 422 invalid_url", (_name, url) => {
    const err = apiError(() => validateParseRequest({ url, text: "a valid text" }, ok));
    expect(err.code).toBe("invalid_url");
    expect(err.status).toBe(422);
  });

  it("answers 503 llm_not_configured without a credential, but only for valid input", () => {
    const err = apiError(() => validateParseRequest({ text: "Engineer wanted" }, { llmConfigured: false }));
    expect(err.code).toBe("llm_not_configured");
    expect(err.status).toBe(503);
    expect(apiError(() => validateParseRequest({ url: "nope" }, { llmConfigured: false })).code).toBe("invalid_url");
  });
});

describe("extractMainText", () => {
  it("keeps the posting and drops navigation, banners, side bars and footers", () => {
    const main = extractMainText(postingHtml());
    for (const fact of Object.values(POSTING_FACTS)) expect(main.text + main.title).toContain(fact);
    for (const noise of Object.values(BOILERPLATE)) expect(main.text).not.toContain(noise);
    expect(main.text).not.toContain("dataLayer");
  });

  it("keeps lists as lines and decodes entities", () => {
    const { text } = extractMainText(postingHtml());
    expect(text).toContain(`- ${POSTING_FACTS.requirement}`);
    expect(text).toContain(`- ${POSTING_FACTS.benefit}`);
    expect(text).toContain("design, build & operate");
    expect(text).not.toMatch(/[ \t]{2,}/);
  });

  it("keeps the JSON-LD JobPosting data, with its description as text", () => {
    const { structuredData } = extractMainText(postingHtml());
    const data = JSON.parse(structuredData!) as Record<string, unknown>;
    expect(data["@type"]).toBe("JobPosting");
    expect(data.employmentType).toBe("FULL_TIME");
    expect(data.description).toBe("Build & run our routing platform.");
    expect(data["@context"]).toBeUndefined();
  });

  it("finds JobPosting objects inside @graph", () => {
    const html = `<html><head><script type="application/ld+json">{"@context":"https://schema.org","@graph":[{"@type":"WebPage"},{"@type":"JobPosting","title":"Baker"}]}</script></head><body><p>Baker wanted.</p></body></html>`;
    expect(JSON.parse(extractMainText(html).structuredData!)).toEqual({ "@type": "JobPosting", title: "Baker" });
  });

  it("falls back to the body without boilerplate when there is no article", () => {
    const html = `<html><body><nav>Menu</nav><div>Baker wanted in Lyon.</div><footer>Footer</footer></body></html>`;
    const { text, structuredData } = extractMainText(html);
    expect(text).toContain("Baker wanted in Lyon.");
    expect(text).not.toContain("Menu");
    expect(structuredData).toBeNull();
  });

  it("reads a page decoded from Latin-1", () => {
    const { text, title } = extractMainText(LATIN1_POSTING);
    expect(title).toContain("Bäckerei");
    expect(text).toContain("Zürich, Großmünsterplatz");
  });

  it("caps the text at a line or word boundary", () => {
    const capped = capText(`${"word ".repeat(100)}end`, 203);
    expect(capped.truncated).toBe(true);
    expect(capped.text.length).toBeLessThanOrEqual(203);
    expect(capped.text.endsWith("word")).toBe(true);
    expect(capText("short", 10)).toEqual({ text: "short", truncated: false });
  });
});

describe("the response schema", () => {
  it("is strict and names all eleven fields", () => {
    expect(schemaProblems({ type: "json_schema", json_schema: { name: "job_posting", strict: true, schema: JOB_POSTING_JSON_SCHEMA as unknown as Record<string, unknown> } })).toEqual([]);
    expect(Object.keys(JOB_POSTING_JSON_SCHEMA.properties)).toEqual(POSTING_FIELDS);
  });

  it("puts the source, the JSON-LD data and the text in the user message", () => {
    const message = postingUserMessage({ text: "Baker wanted", sourceUrl: "https://jobs.example.com/1", structuredData: '{"title":"Baker"}', truncated: true });
    expect(message).toContain("Source URL: https://jobs.example.com/1");
    expect(message).toContain('{"title":"Baker"}');
    expect(message).toContain("Baker wanted");
    expect(message).toContain("cut to length");
  });
});

describe("normalisePosting", () => {
  it("fills every missing field with null or []", () => {
    expect(normalisePosting({ title: "Baker" })).toEqual({
      title: "Baker",
      company: null,
      location: null,
      salary_min: null,
      salary_max: null,
      salary_currency: null,
      employment_type: null,
      requirements: [],
      skills: [],
      benefits: [],
      description_summary: null,
    });
  });

  it("rejects answers that are not a posting object", () => {
    expect(() => normalisePosting(null)).toThrow();
    expect(() => normalisePosting([1, 2])).toThrow();
    expect(() => normalisePosting("a string")).toThrow();
    expect(() => normalisePosting({ answer: 42 })).toThrow(/none of the eleven/);
  });

  it("trims strings, collapses whitespace and reads placeholders as null", () => {
    const r = normalisePosting({ title: "  Senior \n Engineer ", company: "N/A", location: "unknown", description_summary: "" });
    expect(r.title).toBe("Senior Engineer");
    expect(r.company).toBeNull();
    expect(r.location).toBeNull();
    expect(r.description_summary).toBeNull();
  });

  it("turns non-strings into null and non-lists into []", () => {
    const r = normalisePosting({ title: 42, company: { name: "x" }, skills: "TypeScript", benefits: 7, requirements: null });
    expect(r.title).toBeNull();
    expect(r.company).toBeNull();
    expect(r.skills).toEqual(["TypeScript"]);
    expect(r.benefits).toEqual([]);
    expect(r.requirements).toEqual([]);
  });

  it.each<[unknown, number | null]>([
    [85000, 85000],
    [85000.5, 85000.5],
    ["85000", 85000],
    ["85,000", 85000],
    ["€85,000", 85000],
    ["85.000", 85000],
    ["85.000,50", 85000.5],
    ["85,000.50", 85000.5],
    ["1.234.567", 1234567],
    ["85k", 85000],
    ["85K EUR", 85000],
    ["1.2m", 1200000],
    ["45,5", 45.5],
    ["USD 120 000", 120000],
    ["5000/month", 5000],
    ["85000eur", 85000],
    [0, null],
    [-5, null],
    ["competitive", null],
    [Number.NaN, null],
    [true, null],
    [null, null],
  ])("reads the salary amount %j as %j", (input, expected) => {
    expect(amount(input)).toBe(expected);
  });

  it("keeps salaries as numbers and swaps a reversed range", () => {
    const r = normalisePosting({ salary_min: "90,000", salary_max: 70000 });
    expect(r.salary_min).toBe(70000);
    expect(r.salary_max).toBe(90000);
    expect(typeof r.salary_min).toBe("number");
  });

  it.each<[unknown, string | null]>([
    ["EUR", "EUR"],
    ["eur", "EUR"],
    [" usd ", "USD"],
    ["€", "EUR"],
    ["£", "GBP"],
    ["US$", "USD"],
    ["$", null],
    ["¥", null],
    ["EURO", null],
    ["XYZ", null],
    ["E1R", null],
    ["", null],
    [978, null],
  ])("normalises the currency %j to %j", (input, expected) => {
    expect(currency(input)).toBe(expected);
  });

  it.each<[unknown, string | null]>([
    ["full-time", "full-time"],
    ["Full time", "full-time"],
    ["FULL_TIME", "full-time"],
    ["fulltime", "full-time"],
    ["part-time", "part-time"],
    ["PART_TIME", "part-time"],
    ["Contract", "contract"],
    ["CONTRACTOR", "contract"],
    ["fixed-term", "contract"],
    ["temporary", "contract"],
    ["Freelance", "freelance"],
    ["freelancer", "freelance"],
    ["internship", null],
    ["volunteer", null],
    ["", null],
    [1, null],
  ])("normalises the employment type %j to %j", (input, expected) => {
    expect(employmentType(input)).toBe(expected);
  });

  it("cleans lists: trimmed, bullets and empties dropped, duplicates dropped ignoring case, at most 50", () => {
    const r = normalisePosting({
      skills: [" TypeScript ", "typescript", "", "  ", "- PostgreSQL", "2) Kafka", 42, null, "Node.js"],
      benefits: Array.from({ length: 80 }, (_, i) => `Perk ${i}`),
    });
    expect(r.skills).toEqual(["TypeScript", "PostgreSQL", "Kafka", "Node.js"]);
    expect(r.benefits).toHaveLength(50);
  });

  it("keeps a summary of up to three sentences and cuts a longer one", () => {
    expect(summary("One. Two. Three.")).toBe("One. Two. Three.");
    expect(summary("The role builds routing software. The team is eight people. You report to the CTO. Apply now! We answer fast.")).toBe(
      "The role builds routing software. The team is eight people. You report to the CTO.",
    );
    expect(summary("Just one sentence about the role.")).toBe("Just one sentence about the role.");
    expect(summary("  ")).toBeNull();
  });
});
