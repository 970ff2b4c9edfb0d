/**
 * Every job kind the workers run. Adding a kind: write src/jobs/<kind>.ts
 * exporting a JobKind, and list it here.
 */
import { purgeJob } from "./purge.js";
import type { JobKind } from "./types.js";
import { webhookSweepJob } from "./webhook-sweep.js";

// Each kind is typed by its own data; the runner only passes data through.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const jobKinds: ReadonlyArray<JobKind<any>> = [purgeJob, webhookSweepJob];
