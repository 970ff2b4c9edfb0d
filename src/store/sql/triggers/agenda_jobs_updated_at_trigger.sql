-- Agenda's updated_at stamp (function update_agenda_jobs_updated_at), as
-- @agendajs/postgres-backend 3.0.6 creates it.
CREATE OR REPLACE TRIGGER agenda_jobs_updated_at_trigger
BEFORE UPDATE ON agenda_jobs
FOR EACH ROW
EXECUTE FUNCTION update_agenda_jobs_updated_at();
