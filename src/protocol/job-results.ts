import { JobPostingResultSchema, PdfResultSchema, TranscriptResultSchema } from "../../gen/agentbus/v1/job_pb.js";

/**
 * The result message of each job kind (the Job's `result` oneof): the workers
 * store a result in this shape and JobService reads it back in it.
 */
export const RESULT_SCHEMAS = {
  pdf: PdfResultSchema,
  job_posting: JobPostingResultSchema,
  transcript: TranscriptResultSchema,
} as const;
