/**
 * The job-posting parser against local fakes: a job board (fetched through
 * the guarded client) and an OpenAI-compatible server that checks every
 * request (key, model, strict schema with the eleven fields, the page text
 * in the messages). Also: how each failure is classified (retryable or
 * not), and the private-address rule on posting URLs.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { JobFailure } from "../../src/model/job-failure.js";
import { createOutboundClient, type OutboundClient } from "../../src/outbound/guarded-fetch.js";
import { createJobPostingParser, type JobPostingParser } from "../../src/parsing/index.js";
import { createOpenAiPostingModel } from "../../src/parsing/llm.js";
import { BOILERPLATE, FakeJobBoard, POSTING_FACTS } from "../fakes/job-board.js";
import { FakeOpenAI } from "../fakes/openai-server.js";
import { rejectionOf } from "../support/errors.js";

const ANSWER = {
  title: "Senior Backend Engineer",
  company: "Nordwind Logistics GmbH",
  location: "Hamburg, Germany (hybrid)",
  salary_min: 72000,
  salary_max: 88000,
  salary_currency: "EUR",
  employment_type: "full-time",
  requirements: ["5+ years building backend services with Node.js and TypeScript", "Solid PostgreSQL knowledge"],
  skills: ["Node.js", "TypeScript", "PostgreSQL", "Kafka"],
  benefits: ["30 days of paid vacation", "Public transport ticket"],
  description_summary: "Nordwind Logistics is hiring a senior backend engineer for its routing platform. The role designs, builds and operates routing services in a team of eight.",
};

let board: FakeJobBoard;
let llm: FakeOpenAI;
const clients: OutboundClient[] = [];

function parser(options: { allowPrivateTargets?: boolean; maxTextChars?: number; maxPageBytes?: number; llmTimeoutMs?: number; apiKey?: string; model?: string } = {}): JobPostingParser {
  const pages = createOutboundClient({ allowPrivateTargets: options.allowPrivateTargets ?? true });
  const provider = createOutboundClient({ allowPrivateTargets: true });
  clients.push(pages, provider);
  return createJobPostingParser({
    http: pages,
    model: createOpenAiPostingModel({
      apiKey: options.apiKey ?? llm.apiKey,
      baseUrl: llm.baseUrl,
      model: options.model ?? llm.model,
      timeoutMs: options.llmTimeoutMs ?? 5_000,
      http: provider,
    }),
    fetchTimeoutMs: 5_000,
    maxPageBytes: options.maxPageBytes ?? 5 * 1024 * 1024,
    maxTextChars: options.maxTextChars ?? 30_000,
  });
}

const failure = (promise: Promise<unknown>) => rejectionOf(JobFailure, promise);

beforeAll(async () => {
  board = await FakeJobBoard.start();
  llm = await FakeOpenAI.start();
});
afterEach(() => llm.reset());
afterAll(async () => {
  for (const c of clients) c.close();
  await board?.close();
  await llm?.close();
});

describe("parsing a posting page", () => {
  it("fetches the page, sends its main text with the strict schema, and returns the normalised fields", async () => {
    llm.answer = ANSWER;
    llm.expectInMessages = [POSTING_FACTS.intro, POSTING_FACTS.salary, POSTING_FACTS.requirement, POSTING_FACTS.benefit];
    const result = await parser().parse({ url: board.url("/jobs/senior-backend-engineer"), text: null });
    expect(result).toEqual(ANSWER);
    expect(llm.violations).toEqual([]);
    expect(llm.requests).toHaveLength(1);
    const sent = llm.requests[0]!;
    expect(sent.headers.authorization).toBe(`Bearer ${llm.apiKey}`);
    expect(sent.body.model).toBe(llm.model);
    expect(sent.body.response_format?.json_schema?.strict).toBe(true);
    // The page's furniture stays out of the prompt; the JSON-LD data goes in.
    for (const noise of Object.values(BOILERPLATE)) expect(sent.text).not.toContain(noise);
    expect(sent.text).toContain('"employmentType":"FULL_TIME"');
    expect(sent.text).toContain(`Source URL: ${board.url("/jobs/senior-backend-engineer")}`);
  });

  it("normalises a sloppy answer", async () => {
    llm.answer = {
      title: "  Senior   Backend Engineer ",
      company: "",
      salary_min: "88.000",
      salary_max: "72k",
      salary_currency: "eur",
      employment_type: "FULL_TIME",
      skills: ["TypeScript", "typescript", " "],
      description_summary: "One. Two. Three. Four.",
    };
    const result = await parser().parse({ url: null, text: "Senior Backend Engineer, Hamburg" });
    expect(result).toEqual({
      title: "Senior Backend Engineer",
      company: null,
      location: null,
      salary_min: 72000,
      salary_max: 88000,
      salary_currency: "EUR",
      employment_type: "full-time",
      requirements: [],
      skills: ["TypeScript"],
      benefits: [],
      description_summary: "One. Two. Three.",
    });
  });

  it("parses given text without fetching, with the url only as the source", async () => {
    llm.answer = ANSWER;
    llm.expectInMessages = ["Pasted posting: Baker in Lyon"];
    const before = board.requests.length;
    await parser().parse({ url: board.url("/jobs/gone"), text: "Pasted posting: Baker in Lyon" });
    expect(board.requests.length).toBe(before);
    expect(llm.violations).toEqual([]);
    expect(llm.requests[0]!.text).toContain(`Source URL: ${board.url("/jobs/gone")}`);
  });

  it("follows a redirect and decodes a Latin-1 page", async () => {
    llm.answer = ANSWER;
    llm.expectInMessages = [POSTING_FACTS.intro];
    await parser().parse({ url: board.url("/jobs/redirect"), text: null });
    llm.expectInMessages = ["Zürich, Großmünsterplatz"];
    await parser().parse({ url: board.url("/jobs/latin1"), text: null });
    expect(llm.violations).toEqual([]);
  });

  it("caps the text sent to the model", async () => {
    llm.answer = ANSWER;
    await parser({ maxTextChars: 300 }).parse({ url: null, text: `${"Baker wanted in Lyon. ".repeat(200)}TAIL-MARKER` });
    const sent = llm.requests[0]!.text;
    expect(sent).not.toContain("TAIL-MARKER");
    expect(sent).toContain("cut to length");
  });
});

describe("page failures", () => {
  it("a 404 is permanent, a 503 retryable", async () => {
    const gone = await failure(parser().parse({ url: board.url("/jobs/gone"), text: null }));
    expect(gone).toMatchObject({ code: "page_fetch_failed", retryable: false });
    expect(gone.message).toContain("404");
    board.flakyFailures = 1;
    const flaky = await failure(parser().parse({ url: board.url("/jobs/flaky"), text: null }));
    expect(flaky).toMatchObject({ code: "page_fetch_failed", retryable: true });
    expect(llm.requests).toHaveLength(0);
  });

  it("only HTML is parsed", async () => {
    expect(await failure(parser().parse({ url: board.url("/jobs/pdf"), text: null }))).toMatchObject({ code: "unsupported_content_type", retryable: false });
  });

  it("a page beyond the cap fails with page_too_large", async () => {
    expect(await failure(parser({ maxPageBytes: 64 * 1024 }).parse({ url: board.url("/jobs/huge"), text: null }))).toMatchObject({
      code: "page_too_large",
      retryable: false,
    });
  });

  it("a page without text (a JavaScript shell) fails with advice to send text", async () => {
    const err = await failure(parser().parse({ url: board.url("/jobs/empty"), text: null }));
    expect(err.code).toBe("page_fetch_failed");
    expect(err.message).toContain("send the posting as text");
  });

  it("a closed port is a retryable failure", async () => {
    const closed = await FakeJobBoard.start();
    const url = closed.url("/jobs/senior-backend-engineer");
    await closed.close();
    expect(await failure(parser().parse({ url, text: null }))).toMatchObject({ code: "page_fetch_failed", retryable: true });
  });

  it("private addresses are refused unless allowed (outbound-addresses), by literal and by name", async () => {
    const strict = parser({ allowPrivateTargets: false });
    const literal = await failure(strict.parse({ url: board.url("/jobs/senior-backend-engineer"), text: null }));
    expect(literal).toMatchObject({ code: "url_not_allowed", retryable: false });
    const named = await failure(strict.parse({ url: board.localhostUrl("/jobs/senior-backend-engineer"), text: null }));
    expect(named).toMatchObject({ code: "url_not_allowed", retryable: false });
    expect(llm.requests).toHaveLength(0);
    // The provider is the operator's own address: text parses against the local fake all the same.
    llm.answer = ANSWER;
    await expect(strict.parse({ url: null, text: "Baker wanted" })).resolves.toEqual(ANSWER);
  });
});

describe("model failures", () => {
  it.each([429, 500, 503])("HTTP %i from the provider is retryable", async (status) => {
    llm.failNext(1, status);
    const err = await failure(parser().parse({ url: null, text: "Baker wanted" }));
    expect(err).toMatchObject({ code: "llm_failed", retryable: true });
    expect(err.message).toContain(String(status));
    expect(llm.requests).toHaveLength(1);
  });

  it("a wrong key is permanent and its message does not echo the provider's text", async () => {
    const err = await failure(parser({ apiKey: "sk-wrong" }).parse({ url: null, text: "Baker wanted" }));
    expect(err).toMatchObject({ code: "llm_failed", retryable: false });
    expect(err.message).toContain("OPENAI_API_KEY");
    expect(err.message).not.toContain("sk-");
  });

  it("an unknown model is permanent", async () => {
    const err = await failure(parser({ model: "no-such-model" }).parse({ url: null, text: "Baker wanted" }));
    expect(err).toMatchObject({ code: "llm_failed", retryable: false });
    expect(err.message).toContain("AGENTBUS_LLM_MODEL");
  });

  it("a slow provider times out, retryable", async () => {
    llm.delayMs = 1_500;
    const err = await failure(parser({ llmTimeoutMs: 300 }).parse({ url: null, text: "Baker wanted" }));
    expect(err).toMatchObject({ code: "llm_failed", retryable: true });
  });

  it.each<[string, () => void]>([
    ["not JSON", () => (llm.answer = "Sure! Here is the posting: …")],
    ["not a posting", () => (llm.answer = { foo: "bar" })],
    ["cut off", () => ((llm.answer = '{"title": "Sen'), (llm.choice = { finish_reason: "length" }))],
    ["a refusal", () => ((llm.answer = ""), (llm.choice = { refusal: "I can't help with that." }))],
  ])("an answer that is %s fails with llm_invalid_response", async (_name, arrange) => {
    arrange();
    expect(await failure(parser().parse({ url: null, text: "Baker wanted" }))).toMatchObject({ code: "llm_invalid_response", retryable: false });
  });
});
