-- Stamps agenda_jobs.updated_at on every update (the trigger
-- agenda_jobs_updated_at_trigger calls it).
--
-- Agenda's own: @agendajs/postgres-backend 3.0.6 creates exactly this
-- (schema.js, getUpdateTimestampTriggerSQL), but the runner starts the
-- backend with ensureSchema: false so that no replica runs DDL at start;
-- the schema it expects is kept here instead. Compare on an Agenda upgrade.
CREATE OR REPLACE FUNCTION update_agenda_jobs_updated_at() RETURNS trigger AS $$
BEGIN
  NEW.updated_at = NOW();
  RETURN NEW;
END;
$$ LANGUAGE plpgsql;
