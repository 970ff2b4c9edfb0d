/**
 * Parses a job_posting job's posting (docs/decisions.md#parse-jobs) with this process's
 * parser (src/parsing/): page fetched and reduced to its main text unless
 * text was given, then the model. Retryable failures (timeouts, 429, 5xx)
 * go back to the runner for another attempt; the rest fail the job.
 */
import { JobFailure } from "../model/job-failure.js";
import type { JobPostingResult, ParseInput } from "../parsing/index.js";
import { asyncJobKind, type ResultInit } from "./async-job.js";

/** Model calls and page fetches wait on the network, not the CPU: several at once per worker. */
const CONCURRENCY = 4;

export const jobPostingJob = asyncJobKind({
  kind: "job_posting",
  concurrency: CONCURRENCY,
  async process(input: ParseInput, { signal }, { jobPostingParser }) {
    // A worker without OPENAI_API_KEY (the API replica had one): another worker may have it.
    if (!jobPostingParser) throw new JobFailure("llm_not_configured", "This worker has no language-model credential (OPENAI_API_KEY)", true);
    return { result: postingResult(await jobPostingParser.parse(input, signal)) };
  },
});

/** The normalised posting as the JobPostingResult message (unset = null over REST). */
export function postingResult(p: JobPostingResult): ResultInit<"job_posting"> {
  return {
    title: p.title ?? undefined,
    company: p.company ?? undefined,
    location: p.location ?? undefined,
    salaryMin: p.salary_min ?? undefined,
    salaryMax: p.salary_max ?? undefined,
    salaryCurrency: p.salary_currency ?? undefined,
    employmentType: p.employment_type ?? undefined,
    requirements: p.requirements,
    skills: p.skills,
    benefits: p.benefits,
    descriptionSummary: p.description_summary ?? undefined,
  };
}
