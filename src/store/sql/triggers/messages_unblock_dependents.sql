-- The acknowledgement of a message others depend on frees them
-- (agentbus_unblock_dependents); other acks pay only this WHEN.
CREATE OR REPLACE TRIGGER messages_unblock_dependents
AFTER UPDATE OF acknowledged_by ON messages
FOR EACH ROW
WHEN (OLD.acknowledged_by = '[]'::jsonb AND NEW.acknowledged_by <> '[]'::jsonb AND NEW.dependents_count > 0)
EXECUTE FUNCTION agentbus_unblock_dependents();
