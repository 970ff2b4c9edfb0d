-- Keeps key_usage in step with message_history (function agentbus_key_usage_history): once per
-- statement, over the rows it inserted.
CREATE OR REPLACE TRIGGER message_history_key_usage_insert AFTER INSERT ON message_history REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION agentbus_key_usage_history();
