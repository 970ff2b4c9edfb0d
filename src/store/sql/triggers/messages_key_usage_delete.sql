-- Keeps key_usage in step with messages (function agentbus_key_usage_messages): once per
-- statement, over the rows it deleted.
CREATE OR REPLACE TRIGGER messages_key_usage_delete AFTER DELETE ON messages REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION agentbus_key_usage_messages();
