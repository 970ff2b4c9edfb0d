-- Schedules (docs/decisions.md#schedules): a message posted to a channel at
-- each tick of a cron expression, as the key that created the schedule.
-- next_run_at is the next tick (NULL while paused); a tick is taken by one
-- process (the due row locked FOR UPDATE SKIP LOCKED) and recorded in
-- schedule_runs under its (schedule, tick) key in the transaction that posts
-- its message, so it runs once across processes and restarts.
CREATE TABLE schedules (
  id                uuid PRIMARY KEY,
  channel_id        uuid NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
  created_by_key_id text NOT NULL,
  cron              text NOT NULL,
  timezone          text NOT NULL,
  message           jsonb NOT NULL,
  paused            boolean NOT NULL DEFAULT false,
  next_run_at       timestamptz,
  last_run_at       timestamptz,
  last_message_id   uuid,
  last_error        text,
  runs              integer NOT NULL DEFAULT 0,
  created_at        timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL
);
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE next_run_at IS NOT NULL;
CREATE INDEX schedules_channel ON schedules (channel_id, created_at, id);
CREATE INDEX schedules_creator ON schedules (created_by_key_id, created_at, id);

CREATE TABLE schedule_runs (
  schedule_id   uuid NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
  scheduled_for timestamptz NOT NULL,
  ran_at        timestamptz NOT NULL,
  message_id    uuid,
  error         text,
  PRIMARY KEY (schedule_id, scheduled_for)
);
CREATE INDEX schedule_runs_ran_at ON schedule_runs (ran_at);
