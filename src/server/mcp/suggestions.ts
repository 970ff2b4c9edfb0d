/**
 * What an agent on MCP is told to do about an error. The catalog's
 * suggestions (src/model/errors.ts) are written for REST callers: they name
 * routes, headers and query parameters, none of which an agent on MCP can
 * use. Here each such code gets the MCP way instead: the tool, and the
 * argument, to call. Codes whose catalog text is protocol-neutral are not
 * listed and keep it. test/unit/mcp-suggestions.test.ts walks the whole
 * catalog, so a new code whose text names a route fails there until it has
 * an entry here.
 */
import { errorCatalog, isErrorCode, type ErrorCode } from "../../model/errors.js";
import type { JsonObject } from "../../model/json.js";
import type { ApiErrorBody } from "./api.js";

const RECONFIGURE = "no tool can fix that: ask whoever set up this MCP server to configure it with a valid agentbus API key (the shell's `agentbus login` mints one), then start a new session.";
const LIMITS_ELSEWHERE = "Shared limits are created, listed and changed with the shell (agentbus limit), the web console's Limits page, or the API (LimitService), not through MCP tools";
const RETRY_AFTER = "Wait for the number of seconds in retry_after, then call the tool again.";

export const MCP_SUGGESTIONS: Readonly<Partial<Record<ErrorCode, string>>> = {
  invalid_json: "Pass the tool's arguments as one JSON object, as its input schema describes.",
  invalid_protobuf: "Pass the arguments the tool's input schema describes; strings must be valid UTF-8.",
  unauthorized: `This session's API key is missing, invalid or revoked; ${RECONFIGURE}`,
  api_key_required: `This session has no API key; ${RECONFIGURE}`,
  admin_unauthorized: "This needs the operator's admin token, which MCP sessions never carry; ask the operator.",
  channel_access_denied: "Ask the owner for access with request_access (identifier, reason), or join with resolve_invitation (invitation_id) if you were given an invitation.",
  minting_closed: "Ask the operator for an API key.",
  origin_not_allowed: "Connect from an MCP client outside the browser, or ask the operator to allow this origin.",
  actor_forbidden: "Pass one of your own actors (id or alias) as 'actor', or leave 'actor' out to act as your key's own agent.",
  insufficient_scope: "This session's key lacks the scope named in required_scope; whoami lists the scopes it holds. A key cannot widen its own scopes: ask whoever set up this MCP server for a key that holds it.",
  quota_exceeded: "whoami shows this key's quotas and what it uses. Free room by completing tasks and letting messages expire (their channel's ttl_seconds), or ask the operator to raise this key's quota.",
  not_found: "tools/list shows the tools this server offers.",
  channel_not_found: "Check the identifier: a channel id, an alias, or the name of a channel your key created. list_my_channels and discover_channels list the channels you can use; find_or_create_channel creates one.",
  message_not_found: "Check the message_id: read_messages (identifier) lists a channel's messages with their ids.",
  actor_not_found: "Check 'actor' (an id or alias of one of your own actors), or leave it out to act as your key's own agent.",
  access_request_not_found: "Ask again with request_access (identifier, reason).",
  webhook_not_found: "No webhook is registered for this actor; over MCP, follow_channel (identifier) notifies you of new messages instead.",
  mcp_session_not_found: "The MCP session ended (idle too long, closed, or its key was revoked): reconnect to start a new one.",
  session_not_found: "Use a session id your key's owner created or was given; sessions expire ttl_seconds after their last change.",
  limit_not_found: `No limit of this key has that name. ${LIMITS_ELSEWHERE}.`,
  key_not_found: "Use the key's public id (ak_…), as whoami shows it in key_id.",
  method_not_allowed: "tools/list shows the tools this server offers and the arguments each takes.",
  label_in_use: "Choose another agent_label (e.g. add a suffix), or keep using the key that holds it.",
  limit_exists: `This key already has a limit with that name: choose another name or change the existing limit. ${LIMITS_ELSEWHERE}.`,
  unknown_limit: `Name only limits the channel's owner created. ${LIMITS_ELSEWHERE}.`,
  already_claimed: "Another worker holds this task: take another with receive_task (identifier), or list open work with read_messages (identifier, status: \"unclaimed\").",
  receive_required: "This channel hands out work in its own order, within its group and limit bounds: take the next task with receive_task (identifier) instead of a chosen one.",
  message_delayed: "Take it at or after available_at (in retry_after seconds), or call receive_task (identifier), which hands out due tasks only.",
  not_claimed: "Take the task with receive_task (identifier) first: only a task you received can be completed or released.",
  already_acknowledged: "A completed task is final and is not handed out again: post new work with post_message, or read its result with wait_for_result (message_id).",
  schedule_not_found: "Use a schedule id from create_schedule or list_schedules (channel); schedules of channels you cannot use are not shown.",
  too_many_schedules: "Delete schedules you no longer need (delete_schedule; list_schedules lists yours), then create again.",
  waitpoint_not_found: "Use the id of a waitpoint your key created (list_waitpoints lists them); create one with create_waitpoint.",
  waitpoint_already_completed: "The waitpoint was completed already: get_waitpoint (id) shows its data.",
  waitpoint_timed_out: "The waitpoint timed out before anyone completed it: create a new one with create_waitpoint if the question still stands.",
  too_many_waitpoints: "Complete (complete_waitpoint) or let time out the waitpoints you no longer need; list_waitpoints with state 'waiting' lists them.",
  already_finished: "The task is finished (completed, dead-lettered, cancelled or expired): read how it ended, and any result, with wait_for_result (message_id).",
  alias_not_found: "get_channel (identifier) lists the aliases the channel holds.",
  result_not_ready: "The task has no result yet: call wait_for_result (message_id, wait) to wait for it.",
  result_already_set: "Read it with wait_for_result (message_id); a message keeps the first result it was completed with.",
  access_request_resolved: "The owner already decided this request; get_channel (identifier) shows whether you may use the channel now.",
  version_conflict: "The session changed since you read it: read it again, apply your change to its current state, and send it with its current version as expected_version.",
  too_many_session_members: "Remove a member you no longer need from the session first.",
  idempotency_in_progress: "The same call is still running: wait a moment, check whether it took effect (e.g. read_messages), and call again only if it did not.",
  job_not_completed: "Call get_job (job_id) every second or two until its status is completed.",
  job_failed: "Read the reason in get_job's error (job_id), fix the input and submit a new job.",
  message_expired: "The message outlived its channel's ttl_seconds and can no longer be received or completed; post it again with post_message if the work is still needed.",
  lease_expired: "The lease ran out or does not exist: take the task again with receive_task (identifier), and extend long work with heartbeat_lease (lease_token) before lease_expires_at.",
  invalid_fields: "Remove the fields listed in `fields`; the tool's input schema (tools/list) names the ones it takes.",
  invalid_wait: "Pass wait as a number of seconds, e.g. 20, or leave it out to answer at once.",
  invalid_video_url: "Pass the video's watch-page URL (with its v parameter) or its short link.",
  metadata_validation_failed: "Fix the fields listed in `violations`; get_channel (identifier) shows the channel's metadata_schema.",
  idempotent_wait: "A call that is stored once cannot also wait: leave 'wait' out (or 0).",
  idempotency_key_reused: "Make it a new tool call: each one is stored under a key of its own.",
  rate_limit_exceeded: RETRY_AFTER,
  too_many_request_bytes: "Wait for your other calls with large arguments to finish (retry_after seconds), or send fewer of them at once, then call the tool again.",
  too_many_waiters: "This key holds as many waiting calls as it may: wait for its other calls with 'wait' to answer, or unfollow_channel channels you no longer need, then call again.",
  channel_write_rate_exceeded: RETRY_AFTER,
  too_many_mcp_sessions: "Close MCP sessions you no longer use, or let idle ones expire, then connect again.",
  too_many_sessions: "Delete sessions you no longer need, or let them expire, then create one again.",
  too_many_limits: `Delete limits this key no longer needs, then create again. ${LIMITS_ELSEWHERE}.`,
  job_limit_exceeded: "Wait for your unfinished jobs to finish (get_job, job_id) or for the seconds in retry_after, then submit again.",
  schema_checks_busy: "Send fewer posts to channels with a metadata_schema at once: wait for the ones in flight, or for the seconds in retry_after, then call again.",
  server_busy: RETRY_AFTER,
};

/**
 * Whether a suggestion speaks HTTP: a route or service path, an HTTP method,
 * a header, a query parameter or a curl option. A thrower's own suggestion
 * (more specific than the catalog's) reaches the agent unless it does.
 */
export function speaksHttp(text: string): boolean {
  return (
    /\/v1\/|\/api\/|\/jobs\/|\/openapi\.json|\/proto\b|\/mcp\b/.test(text) ||
    /\b(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS)\b/.test(text) ||
    /\b(X-API-Key|X-Admin-Token|Idempotency-Key|If-Match|Retry-After|Mcp-Session-Id|Allow header|Authorization)\b/.test(text) ||
    /[?&][a-z_]+=|\b[a-z_]+=\d/.test(text) ||
    /(^|\s)-d '/.test(text)
  );
}

/**
 * The suggestion an agent on MCP sees for `code`, given the one the service
 * sent: the MCP text for the catalog's own; a thrower's more specific one as
 * it came, unless it speaks HTTP.
 */
export function mcpSuggestion(code: string, sent: string | undefined): string | undefined {
  const catalog: string | undefined = isErrorCode(code) ? errorCatalog[code].suggestion : undefined;
  const own = isErrorCode(code) ? MCP_SUGGESTIONS[code] : undefined;
  if (sent !== undefined && sent !== "" && sent !== catalog && !speaksHttp(sent)) return sent;
  if (own !== undefined) return own;
  return catalog !== undefined && !speaksHttp(catalog) ? catalog : undefined;
}

/** A REST error body as a tool error: the MCP suggestion, the details kept, the REST-only documentation link left out. */
export function mcpErrorBody(body: ApiErrorBody): JsonObject {
  const { error, message, suggestion, documentation_url: _link, ...details } = body;
  const advice = mcpSuggestion(error, suggestion);
  const out: JsonObject = { error, message, ...(advice === undefined ? {} : { suggestion: advice }) };
  for (const [name, value] of Object.entries(details)) if (value !== undefined) out[name] = value;
  return out;
}
