-- A task with push configs changed (agentbus_a2a_push_enqueue); every other
-- message pays only this WHEN.
CREATE OR REPLACE TRIGGER messages_a2a_push
AFTER UPDATE ON messages
FOR EACH ROW
WHEN (NEW.a2a_push AND (OLD.claimed_by_key_id IS DISTINCT FROM NEW.claimed_by_key_id OR OLD.acknowledged_by IS DISTINCT FROM NEW.acknowledged_by
  OR OLD.cancel_requested_at IS DISTINCT FROM NEW.cancel_requested_at OR OLD.progress_updated_at IS DISTINCT FROM NEW.progress_updated_at
  OR OLD.a2a_push IS DISTINCT FROM NEW.a2a_push))
EXECUTE FUNCTION agentbus_a2a_push_enqueue();
