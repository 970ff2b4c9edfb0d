/**
 * A real OpenAI-compatible HTTP server on 127.0.0.1 standing in for the
 * language-model provider: POST /v1/chat/completions.
 *
 * It checks every request the way the real API would judge it, and more:
 * - Authorization: Bearer <the expected key>          (else 401, like the real API);
 * - the expected model                                 (else 404 model_not_found);
 * - response_format json_schema, strict, with all eleven posting fields
 *   required and described, additionalProperties false (else 400);
 * - every `expectInMessages` string present in the messages (else 400).
 * A failed check is also recorded in `violations`, so a test can assert
 * there were none even when the code under test swallowed the 4xx.
 *
 * It answers a canned completion whose content is `answer` (JSON-encoded
 * when it is not a string), or the statuses queued with failNext(), or
 * hangs for `delayMs`, or until the test lets go of a hold().
 */
import type http from "node:http";
import { LoopbackServer, onBody } from "./http.js";

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
];

export interface ChatRequest {
  headers: http.IncomingHttpHeaders;
  body: {
    model?: string;
    messages?: Array<{ role: string; content: string }>;
    response_format?: { type?: string; json_schema?: { name?: string; strict?: boolean; schema?: Record<string, unknown> } };
    [key: string]: unknown;
  };
  /** All message contents joined. */
  text: string;
}

export class FakeOpenAI {
  readonly requests: ChatRequest[] = [];
  readonly violations: string[] = [];
  /** The content of the next completions: an object (sent as JSON) or a raw string. */
  answer: unknown = {};
  /** Extra fields of the choice, e.g. {finish_reason: "length"} or a refusal on the message. */
  choice: { finish_reason?: string; refusal?: string } = {};
  expectInMessages: string[] = [];
  delayMs = 0;
  private failures: number[] = [];
  private held: Promise<void> | undefined;
  private releaseHeld: (() => void) | undefined;
  private server: LoopbackServer | undefined;

  constructor(
    readonly apiKey = "sk-test-agentbus",
    readonly model = "gpt-test-mini",
  ) {}

  static async start(apiKey?: string, model?: string): Promise<FakeOpenAI> {
    const fake = new FakeOpenAI(apiKey, model);
    fake.server = await LoopbackServer.listen((req, res) => fake.handle(req, res));
    return fake;
  }

  /** The base URL to configure (OPENAI_BASE_URL). */
  get baseUrl(): string {
    return `http://127.0.0.1:${this.server!.port}/v1`;
  }

  /** The next n requests are answered with `status` (default 500), after the checks. */
  failNext(n: number, status = 500): void {
    for (let i = 0; i < n; i++) this.failures.push(status);
  }

  /** Every later request fails with `status` until reset(). */
  failAlways(status: number): void {
    this.failures = new Array<number>(1_000_000).fill(status);
  }

  /**
   * Answers nothing until the returned release() is called: every request
   * from now on stays in flight (a slow model whose answers the test lets
   * go, so the order of what happens meanwhile does not depend on timing).
   */
  hold(): () => void {
    this.held ??= new Promise((resolve) => (this.releaseHeld = resolve));
    return () => this.release();
  }

  reset(): void {
    this.release();
    this.requests.length = 0;
    this.violations.length = 0;
    this.failures = [];
    this.answer = {};
    this.choice = {};
    this.expectInMessages = [];
    this.delayMs = 0;
  }

  close(): Promise<void> {
    this.release();
    return this.server?.close() ?? Promise.resolve();
  }

  private release(): void {
    this.releaseHeld?.();
    this.held = undefined;
    this.releaseHeld = undefined;
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    onBody(req, (raw) => {
      const reply = (status: number, body: unknown) => {
        const send = () => {
          if (res.destroyed) return;
          res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
        };
        // Real time: a slow server for the client's real socket timeout.
        if (this.held) void this.held.then(send);
        else if (this.delayMs > 0) setTimeout(send, this.delayMs);
        else send();
      };
      if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
        reply(404, { error: { message: `no route ${req.method} ${req.url}`, type: "invalid_request_error" } });
        return;
      }
      let body: ChatRequest["body"];
      try {
        body = JSON.parse(raw.toString("utf8")) as ChatRequest["body"];
      } catch {
        this.violations.push("body is not JSON");
        reply(400, { error: { message: "body is not JSON", type: "invalid_request_error" } });
        return;
      }
      const text = (body.messages ?? []).map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content))).join("\n");
      this.requests.push({ headers: req.headers, body, text });

      if (req.headers.authorization !== `Bearer ${this.apiKey}`) {
        this.violations.push(`authorization header was ${JSON.stringify(req.headers.authorization)}`);
        reply(401, { error: { message: "Incorrect API key provided: sk-****", type: "invalid_request_error", code: "invalid_api_key" } });
        return;
      }
      if (body.model !== this.model) {
        this.violations.push(`model was ${JSON.stringify(body.model)}`);
        reply(404, { error: { message: `The model '${String(body.model)}' does not exist`, type: "invalid_request_error", code: "model_not_found" } });
        return;
      }
      const problems = [...schemaProblems(body.response_format), ...this.expectInMessages.filter((s) => !text.includes(s)).map((s) => `messages lack ${JSON.stringify(s.slice(0, 60))}`)];
      if (problems.length > 0) {
        this.violations.push(...problems);
        reply(400, { error: { message: problems.join("; "), type: "invalid_request_error" } });
        return;
      }
      const failure = this.failures.shift();
      if (failure !== undefined) {
        reply(failure, { error: { message: `fake failure ${failure}`, type: failure === 429 ? "rate_limit_exceeded" : "server_error" } });
        return;
      }
      const content = typeof this.answer === "string" ? this.answer : JSON.stringify(this.answer);
      reply(200, {
        id: `chatcmpl-fake-${this.requests.length}`,
        object: "chat.completion",
        created: Math.floor(Date.now() / 1000),
        model: this.model,
        choices: [
          {
            index: 0,
            message: { role: "assistant", content, refusal: this.choice.refusal ?? null },
            finish_reason: this.choice.finish_reason ?? "stop",
            logprobs: null,
          },
        ],
        usage: { prompt_tokens: 100, completion_tokens: 50, total_tokens: 150 },
      });
    });
  }
}

/** What is wrong with a response_format for the posting schema; [] when it is right. */
export function schemaProblems(format: ChatRequest["body"]["response_format"]): string[] {
  const problems: string[] = [];
  if (format?.type !== "json_schema") return [`response_format.type was ${JSON.stringify(format?.type)}`];
  const spec = format.json_schema;
  if (!spec?.name) problems.push("json_schema.name is missing");
  if (spec?.strict !== true) problems.push("json_schema.strict is not true");
  const schema = spec?.schema as { type?: unknown; additionalProperties?: unknown; required?: unknown; properties?: Record<string, unknown> } | undefined;
  if (schema?.type !== "object") problems.push("schema.type is not object");
  if (schema?.additionalProperties !== false) problems.push("schema.additionalProperties is not false");
  const required = Array.isArray(schema?.required) ? (schema.required as string[]) : [];
  const properties = schema?.properties ?? {};
  for (const field of POSTING_FIELDS) {
    if (!required.includes(field)) problems.push(`${field} is not required`);
    if (properties[field] === undefined) problems.push(`${field} has no property schema`);
  }
  const extra = Object.keys(properties).filter((k) => !POSTING_FIELDS.includes(k));
  if (extra.length > 0) problems.push(`unexpected properties ${extra.join(", ")}`);
  return problems;
}
