-- Keeps key_usage in step with message_history (function agentbus_key_usage_history): once per
-- statement, over the rows it deleted.
CREATE OR REPLACE TRIGGER message_history_key_usage_delete AFTER DELETE ON message_history REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION agentbus_key_usage_history();
