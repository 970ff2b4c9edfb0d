-- Asynchronous jobs (decisions J-1 to J-4): PDF rendering, job-posting
-- parsing and video transcripts. This table is the record the API reads;
-- the Agenda job (agenda_jobs, data {"job_id": …}) only says "run it",
-- and is written in the same transaction as the row (store/jobs.ts).
CREATE TABLE jobs (
  -- A sequence, so the id is an integer (J-1); never reused.
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  kind         text NOT NULL CHECK (kind IN ('pdf', 'job_posting', 'transcript')),
  -- Only this key sees the job (A5).
  owner_key_id text NOT NULL REFERENCES api_keys (key_id),
  status       text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'processing', 'completed', 'failed')),
  -- The validated request. Cleared once completed, and by the purge once
  -- expired (a failed job keeps it until then, for diagnosis).
  input        jsonb,
  -- The kind's result message as proto JSON (PdfResult, JobPostingResult,
  -- TranscriptResult). Cleared by the purge once expired.
  result       jsonb,
  -- {error, message} of a failed job.
  error        jsonb,
  -- The PDF of a completed pdf job. In the database rather than a file:
  -- every API replica can serve it whichever worker rendered it, it commits
  -- with the status, and expiry is the same purge as everything else.
  pdf          bytea,
  -- Runs started (a claim counts, so a job that crashes its worker is
  -- still given up after the limit).
  attempts     integer NOT NULL DEFAULT 0,
  created_at   timestamptz NOT NULL,
  updated_at   timestamptz NOT NULL,
  completed_at timestamptz,
  -- 24 hours after the job ended (completed or failed); NULL while it runs.
  expires_at   timestamptz,
  CONSTRAINT jobs_expiry_when_done CHECK ((status IN ('completed', 'failed')) = (expires_at IS NOT NULL))
);

-- PDFs are already compressed: store them out of line without trying pglz.
ALTER TABLE jobs ALTER COLUMN pdf SET STORAGE EXTERNAL;

-- The purge: results (and PDFs, inputs) to clear once expired. Cleared rows
-- leave this index, so the purge never walks the rows it already emptied.
CREATE INDEX jobs_payload_expiry ON jobs (expires_at)
  WHERE expires_at IS NOT NULL AND (input IS NOT NULL OR result IS NOT NULL OR pdf IS NOT NULL);
-- The purge: emptied rows deleted after their grace period (404 from then on).
CREATE INDEX jobs_expiry ON jobs (expires_at) WHERE expires_at IS NOT NULL;
-- The job sweep: unfinished jobs whose Agenda job went missing.
CREATE INDEX jobs_unfinished ON jobs (updated_at) WHERE status IN ('queued', 'processing');
