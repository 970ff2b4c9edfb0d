/**
 * Job-posting parse (docs/decisions.md#parse-jobs): the text of a posting, given or fetched
 * from its page and reduced to the main text, goes to the language model;
 * its answer is checked and normalised into the eleven fields.
 *
 *   input.ts          submission rules (422 / 503 before a job exists)
 *   page.ts           fetching the page through the guarded client
 *   main-text.ts      Readability over linkedom, plus JSON-LD JobPosting data
 *   llm.ts            the model call (openai SDK, strict JSON schema)
 *   posting-schema.ts the schema and the normalisation of the answer
 */
import type { Config } from "../platform/config.js";
import { JobFailure } from "../model/job-failure.js";
import { createOutboundClient, type OutboundClient } from "../outbound/guarded-fetch.js";
import type { ParseInput } from "./input.js";
import { createOpenAiPostingModel, type PostingModel } from "./llm.js";
import { capText, extractMainText } from "./main-text.js";
import { fetchPostingPage } from "./page.js";
import type { JobPostingResult } from "./posting-schema.js";

export { validateParseRequest, type ParseInput } from "./input.js";
export type { JobPostingResult } from "./posting-schema.js";

export interface JobPostingParserOptions {
  /** Fetches posting pages; applies the private-address rule as configured. */
  http: OutboundClient;
  model: PostingModel;
  fetchTimeoutMs: number;
  maxPageBytes: number;
  maxTextChars: number;
}

export interface JobPostingParser {
  /** Throws JobFailure (its `retryable` says whether another attempt may succeed). */
  parse(input: ParseInput, signal?: AbortSignal): Promise<JobPostingResult>;
  close(): void;
}

export const USER_AGENT = "agentbus/0.1 (job-posting parser)";

export function createJobPostingParser(options: JobPostingParserOptions & { onClose?: () => void }): JobPostingParser {
  return {
    async parse(input, signal) {
      let text: string;
      let structuredData: string | null = null;
      let sourceUrl = input.url;
      if (input.text !== null) {
        text = input.text.trim();
      } else if (input.url !== null) {
        const page = await fetchPostingPage(options.http, input.url, {
          timeoutMs: options.fetchTimeoutMs,
          maxBytes: options.maxPageBytes,
          ...(signal ? { signal } : {}),
        });
        sourceUrl = page.url;
        const main = extractMainText(page.html);
        structuredData = main.structuredData;
        text = [main.title, main.text].filter((part): part is string => part !== null && part !== "").join("\n\n");
        if (text.trim() === "" && structuredData === null) {
          throw new JobFailure("page_fetch_failed", "the posting page has no readable text (it may need JavaScript or a login); send the posting as text");
        }
      } else {
        throw new JobFailure("invalid_field", "the job has neither url nor text");
      }
      const capped = capText(text, options.maxTextChars);
      return options.model.extract({ text: capped.text, sourceUrl, structuredData, truncated: capped.truncated }, signal);
    },
    close() {
      options.onClose?.();
    },
  };
}

/** The parser as configured: pages under the private-address rule; the provider is the operator's own address (see llm.ts). */
export function jobPostingParserFromConfig(config: Config): JobPostingParser | undefined {
  if (config.openaiApiKey === undefined) return undefined;
  const pages = createOutboundClient({ allowPrivateTargets: config.allowPrivateTargets, userAgent: USER_AGENT });
  const provider = createOutboundClient({ allowPrivateTargets: true, userAgent: USER_AGENT });
  const model = createOpenAiPostingModel({
    apiKey: config.openaiApiKey,
    baseUrl: config.openaiBaseUrl,
    model: config.llmModel,
    timeoutMs: config.llmTimeoutMs,
    http: provider,
  });
  return createJobPostingParser({
    http: pages,
    model,
    fetchTimeoutMs: config.parseFetchTimeoutMs,
    maxPageBytes: config.parseMaxPageBytes,
    maxTextChars: config.parseMaxTextChars,
    onClose: () => {
      pages.close();
      provider.close();
    },
  });
}
