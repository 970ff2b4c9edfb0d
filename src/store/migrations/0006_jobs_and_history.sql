-- The job queue (decision P2) and the indexes of the history page and the
-- purge job (decision M9).

-- Agenda's table, exactly as @agendajs/postgres-backend 3.0.6 creates it
-- (schema.js: getCreateTableSQL, getMigrationSQL, getCreateIndexesSQL,
-- getUpdateTimestampTriggerSQL). The runner starts the backend with
-- ensureSchema: false, so no replica runs DDL at start and the schema moves
-- forward only through these files. When an Agenda upgrade adds columns,
-- add them in a new migration: test/integration/worker.test.ts compares this
-- table with the one the installed backend would create.
CREATE TABLE agenda_jobs (
  id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name                varchar(255) NOT NULL,
  priority            integer NOT NULL DEFAULT 0,
  next_run_at         timestamptz,
  type                varchar(10) NOT NULL DEFAULT 'normal' CHECK (type IN ('normal', 'single')),
  locked_at           timestamptz,
  last_finished_at    timestamptz,
  failed_at           timestamptz,
  fail_count          integer DEFAULT NULL,
  fail_reason         text,
  repeat_timezone     varchar(100),
  last_run_at         timestamptz,
  repeat_interval     varchar(255),
  data                jsonb DEFAULT '{}'::jsonb,
  repeat_at           varchar(255),
  disabled            boolean DEFAULT false,
  progress            real,
  fork                boolean DEFAULT false,
  last_modified_by    varchar(255),
  debounce_started_at timestamptz,
  start_date          timestamptz,
  end_date            timestamptz,
  skip_days           jsonb,
  created_at          timestamptz DEFAULT now(),
  updated_at          timestamptz DEFAULT now()
);
CREATE INDEX agenda_jobs_find_and_lock_idx ON agenda_jobs (name, next_run_at, priority DESC, locked_at, disabled) WHERE disabled = false;
CREATE UNIQUE INDEX agenda_jobs_single_job_idx ON agenda_jobs (name) WHERE type = 'single';
CREATE INDEX agenda_jobs_locked_at_idx ON agenda_jobs (locked_at) WHERE locked_at IS NOT NULL;
CREATE INDEX agenda_jobs_next_run_at_idx ON agenda_jobs (next_run_at) WHERE next_run_at IS NOT NULL;

CREATE FUNCTION update_agenda_jobs_updated_at() RETURNS trigger AS $$
BEGIN
  NEW.updated_at = NOW();
  RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER agenda_jobs_updated_at_trigger
BEFORE UPDATE ON agenda_jobs
FOR EACH ROW
EXECUTE FUNCTION update_agenda_jobs_updated_at();

-- The history page: newest first with id as the tie-breaker, so the ORDER BY
-- is read straight off the index (no sort step) under any plan.
DROP INDEX message_history_by_channel;
CREATE INDEX message_history_page ON message_history (channel_id, created_at DESC, id DESC);

-- Retention is per channel (retention_days, which the owner may change), so
-- the purge probes each channel's own cutoff rather than scanning every row
-- archived more than a day ago.
DROP INDEX message_history_archived;
CREATE INDEX message_history_retention ON message_history (channel_id, archived_at);
