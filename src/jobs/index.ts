/**
 * Every job kind the workers run. Adding a kind: write src/jobs/<kind>.ts
 * exporting a JobKind, and list it here.
 */
import { analyzeJob } from "./analyze.js";
import { jobPostingJob } from "./job-posting.js";
import { jobSweepJob } from "./job-sweep.js";
import { pdfJob } from "./pdf.js";
import { purgeJob } from "./purge.js";
import { transcriptJob } from "./transcript.js";
import type { JobKind } from "./types.js";
import { webhookSweepJob } from "./webhook-sweep.js";

// Each kind is typed by its own data; the runner only passes data through.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const jobKinds: ReadonlyArray<JobKind<any>> = [purgeJob, analyzeJob, webhookSweepJob, jobSweepJob, pdfJob, jobPostingJob, transcriptJob];
