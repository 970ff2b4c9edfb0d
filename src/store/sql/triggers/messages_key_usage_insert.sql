-- Keeps key_usage in step with messages (function agentbus_key_usage_messages): once per
-- statement, over the rows it inserted.
CREATE OR REPLACE TRIGGER messages_key_usage_insert AFTER INSERT ON messages REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION agentbus_key_usage_messages();
