-- A task with push configs left the live messages (archived: its final state).
CREATE OR REPLACE TRIGGER messages_a2a_push_archived
AFTER DELETE ON messages
FOR EACH ROW
WHEN (OLD.a2a_push)
EXECUTE FUNCTION agentbus_a2a_push_enqueue();
