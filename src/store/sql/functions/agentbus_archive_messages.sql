-- Moves live messages to message_history with a reason (archived at p_now)
-- and returns how many moved. The caller holds their rows and keeps the
-- channel's stored_messages count.
--
-- One copy of "which columns history keeps" for the stored functions
-- (agentbus_dead_letter, agentbus_redrive); the service's own copy is
-- MESSAGE_FIELDS in store/message-rows.ts. Columns are named, not taken by
-- position: columns added later sit at different positions in the tables.
CREATE OR REPLACE FUNCTION agentbus_archive_messages(p_ids uuid[], p_now timestamptz, p_reason text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  n integer;
BEGIN
  INSERT INTO message_history (id, channel_id, author_key_id, actor_id, actor_name, actor_label, content, metadata, mentions,
    created_at, expires_at, claimed_by_key_id, claimed_by_actor_id, claimed_by_actor_name, claimed_at, claim_metadata,
    lease_token, lease_expires_at, acknowledged_by, result, delivery_count, available_at, dead_letter, group_key, priority, limit_ids, held_limit_ids,
    cancel_requested_at, cancel_reason, cancel_expires_at, progress_data, progress_text, progress_updated_at,
    depends_on, blocked_by, dependents_count, waitpoint_id, waitpoint_outcome, trace_parent, trace_state, a2a_push, archived_at, reason)
  SELECT id, channel_id, author_key_id, actor_id, actor_name, actor_label, content, metadata, mentions,
    created_at, expires_at, claimed_by_key_id, claimed_by_actor_id, claimed_by_actor_name, claimed_at, claim_metadata,
    lease_token, lease_expires_at, acknowledged_by, result, delivery_count, available_at, dead_letter, group_key, priority, limit_ids, held_limit_ids,
    cancel_requested_at, cancel_reason, cancel_expires_at, progress_data, progress_text, progress_updated_at,
    depends_on, blocked_by, dependents_count, waitpoint_id, waitpoint_outcome, trace_parent, trace_state, a2a_push, p_now, p_reason
  FROM messages m WHERE m.id = ANY (p_ids);
  -- Their own edges to their parents are done with (docs/decisions.md#dependencies).
  DELETE FROM message_dependencies d WHERE d.message_id = ANY (p_ids);
  DELETE FROM messages m WHERE m.id = ANY (p_ids);
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END;
$$;
