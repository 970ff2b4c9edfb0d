/**
 * The error catalog: the one place that defines every error code the service
 * returns, with its HTTP status, its gRPC code and the default advice.
 * Everything throws ApiError with a code from here; the transport renders it
 * as the REST body {error, message, suggestion, ...} or as a gRPC status with
 * an ErrorDetail. /docs/errors is rendered from this table.
 */

import type { JsonValue } from "./json.js";

/** gRPC status names (the transport maps them to numeric codes). */
export type GrpcStatus =
  | "invalid_argument"
  | "unauthenticated"
  | "permission_denied"
  | "not_found"
  | "already_exists"
  | "failed_precondition"
  | "aborted"
  | "resource_exhausted"
  | "unimplemented"
  | "internal"
  | "unavailable";

export interface ErrorSpec {
  readonly status: number;
  readonly grpc: GrpcStatus;
  /** Default human-readable message; a thrower may give a more specific one. */
  readonly message: string;
  /** What the caller can do about it. */
  readonly suggestion?: string;
}

const spec = (status: number, grpc: GrpcStatus, message: string, suggestion?: string): ErrorSpec => ({
  status,
  grpc,
  message,
  ...(suggestion === undefined ? {} : { suggestion }),
});

const INVALID = (what: string, fix: string) => spec(422, "invalid_argument", `Invalid ${what}`, fix);

export const errorCatalog = {
  // 400
  invalid_json: spec(400, "invalid_argument", "The request body is not valid JSON", "Send a JSON object, e.g. -d '{\"name\":\"jobs\"}'."),
  bad_request: spec(400, "invalid_argument", "The request is not valid HTTP", "Check the request line, the headers and their encoding."),
  invalid_protobuf: spec(400, "invalid_argument", "The request is not a valid protobuf message of the method's request type", "Encode the request with the message types in /proto (or from gRPC reflection); strings must be valid UTF-8."),
  // 401
  unauthorized: spec(401, "unauthenticated", "Missing or invalid API key", "Send X-API-Key: <key> (gRPC metadata x-api-key). Mint a key with POST /v1/keys {\"agent_label\":\"my-agent\"}."),
  api_key_required: spec(401, "unauthenticated", "Resolving an invitation needs an API key", "Mint a key with POST /v1/keys {\"agent_label\":\"my-agent\"}, then repeat this request with X-API-Key. A person can open redirect_to in a browser: the web console asks for a key or mints one, then joins."),
  admin_unauthorized: spec(401, "unauthenticated", "Missing or wrong admin token", "Send the operator token in X-Admin-Token."),
  // 403
  channel_access_denied: spec(403, "permission_denied", "You are not a member of this channel", "Ask the owner for access with POST /v1/channels/{identifier}/access-requests, or resolve an invitation."),
  forbidden: spec(403, "permission_denied", "Only the channel owner may do this", "Use the key that created the channel."),
  minting_closed: spec(403, "permission_denied", "Public key minting is closed on this service", "Ask the operator for a key (they issue them with POST /v1/admin/keys), or try again later."),
  origin_not_allowed: spec(403, "permission_denied", "Requests from this Origin are not allowed", "Call /mcp from a client outside the browser, or have the operator add the origin to AGENTBUS_CORS_ORIGINS."),
  actor_forbidden: spec(403, "permission_denied", "That actor belongs to another owner", "Act as one of your own actors, or create one with POST /v1/actors."),
  admin_disabled: spec(403, "permission_denied", "Admin routes are disabled on this instance", "Set AGENTBUS_ADMIN_TOKEN to enable them."),
  insufficient_scope: spec(403, "permission_denied", "This key's scopes do not allow this call", "Use a key that holds the scope in required_scope; GET /v1/keys/me lists what this key holds. A key cannot widen its own scopes: the operator mints scoped keys with POST /v1/admin/keys."),
  scope_widening: spec(403, "permission_denied", "A key can give up scopes but not gain them", "Send a subset of granted_scopes; for more rights use a key that holds them."),
  quota_exceeded: spec(403, "resource_exhausted", "This key's storage quota does not allow this", "See your quotas at GET /v1/keys/me. Free room by deleting channels or retracting messages you no longer need, or wait for messages to expire (their TTL) and their history to pass its retention; the operator can raise this key's quota (PUT /v1/admin/keys/{key_id}/quotas)."),
  // 404
  not_found: spec(404, "not_found", "No such route", "See /openapi.json for the routes this service offers."),
  channel_not_found: spec(404, "not_found", "Channel not found", "Check the channel id, alias or name (names resolve only for channels your key created); discover channels with GET /v1/channels."),
  message_not_found: spec(404, "not_found", "Message not found", "List the channel's messages with GET /v1/channels/{identifier}/messages."),
  actor_not_found: spec(404, "not_found", "Actor not found", "Create the actor with POST /v1/actors, or use its id or alias."),
  invitation_not_found: spec(404, "not_found", "Invitation not found", "Ask the channel owner for a new invitation."),
  access_request_not_found: spec(404, "not_found", "Access request not found", "List pending requests with GET /v1/channels/{identifier}/access-requests."),
  webhook_not_found: spec(404, "not_found", "No webhook registered", "Register one with POST /v1/actors/{actor_id}/webhook."),
  mcp_session_not_found: spec(404, "not_found", "No such MCP session", "Start a new session: send initialize without an Mcp-Session-Id header, with the same API key."),
  session_not_found: spec(404, "not_found", "Session not found", "Use a session id your key's owner created or was given (GET /v1/sessions lists them); sessions expire ttl_seconds after their last change."),
  limit_not_found: spec(404, "not_found", "Limit not found", "Use the name of a limit your key created (GET /v1/limits lists them); another key's limits are not visible to yours."),
  schedule_not_found: spec(404, "not_found", "Schedule not found", "Use the id POST /v1/schedules returned; GET /v1/schedules?channel=<channel> lists a channel's schedules for the keys that may post to it."),
  agent_not_found: spec(404, "not_found", "No A2A agent here", "An agent is a claimable channel whose owner set a2a.enabled; its card is at /a2a/{channel_id}/.well-known/agent-card.json."),
  waitpoint_not_found: spec(404, "not_found", "Waitpoint not found", "Complete a waitpoint with the token (or complete_url) its create returned, unchanged; read or resolve it by id with the key that created it."),
  result_not_ready: spec(404, "not_found", "The task has no result yet", "Ask again in a moment: the result appears once a worker posts it (POST /v1/tasks/{id}/result). Native clients wait for it instead with GET /v1/messages/{id}?wait=30."),
  job_not_found: spec(404, "not_found", "Job not found", "Use the job_id returned when you submitted the job, with the same key."),
  key_not_found: spec(404, "not_found", "No such key", "Use the key's public id (ak_…), as GET /v1/keys/me or the security audit shows it."),
  // 405
  method_not_allowed: spec(405, "unimplemented", "Method not allowed on this route", "See the Allow header for the methods this route accepts."),
  // 409
  alias_conflict: spec(409, "already_exists", "That alias is already taken", "Choose another alias."),
  alias_not_found: spec(404, "not_found", "The channel holds no such alias", "GET the channel: its aliases field lists the aliases it holds."),
  label_in_use: spec(409, "already_exists", "An active key already uses this agent_label", "Choose another agent_label (e.g. add a suffix), or keep using the key that holds it; revoking that key with DELETE /v1/keys/me frees the label."),
  limit_exists: spec(409, "already_exists", "Your key already has a limit with this name", "Choose another name, or change the existing limit with PATCH /v1/limits/{name}."),
  already_claimed: spec(409, "failed_precondition", "This message has already been claimed", "List open work with GET /v1/channels/{identifier}/messages?status=unclaimed and claim another message."),
  channel_not_claimable: spec(409, "failed_precondition", "Messages of a broadcast channel cannot be claimed", "Read broadcast messages by listing them; only claimable channels hand out claims."),
  message_delayed: spec(409, "failed_precondition", "This message is delayed: it is not open work before its available_at", "Claim it at or after available_at (Retry-After), or receive from the channel, which hands out due messages only."),
  not_claimed: spec(409, "failed_precondition", "This message is not claimed", "Claim it first with POST /v1/messages/{id}/claim."),
  already_acknowledged: spec(409, "failed_precondition", "This message was acknowledged: it is finished", "An acknowledged message is final and is not handed out again; post a new message for new work, or read its result with GET /v1/messages/{message_id}."),
  result_already_set: spec(409, "failed_precondition", "This message already has a result", "Read it with GET /v1/messages/{message_id}; a message keeps the first result sent with an acknowledgement."),
  message_claimed: spec(409, "failed_precondition", "A claimed message cannot be retracted", "Wait for the claimer to release it."),
  not_lease_holder: spec(409, "failed_precondition", "Only the current holder of the message's lease may report its progress", "Report progress with the lease_token of your own, current lease; a lapsed or released lease holds nothing."),
  waitpoint_already_completed: spec(409, "failed_precondition", "This waitpoint was already completed", "Read its outcome with GET /v1/waitpoints/{id} (the creating key); a waitpoint completes once."),
  waitpoint_timed_out: spec(409, "failed_precondition", "This waitpoint timed out before it was completed", "The task waiting for it went on without an answer; ask its creator for a new waitpoint."),
  already_finished: spec(409, "failed_precondition", "This message is finished: acknowledged, dead-lettered, cancelled or expired", "Read how it ended (state, result) with GET /v1/messages/{message_id}; a finished message cannot be cancelled."),
  access_request_resolved: spec(409, "failed_precondition", "This access request was already decided", "List pending requests with GET /v1/channels/{identifier}/access-requests."),
  version_conflict: spec(409, "aborted", "The session changed since you read it", "GET the session again, apply your change to its current state, and retry with its current version in If-Match or expected_version."),
  too_many_session_members: spec(409, "failed_precondition", "The session is shared with as many keys as it may be", "Remove a member you no longer need (DELETE /v1/sessions/{id}/members/{key_id}) first."),
  cannot_remove_owner: spec(409, "failed_precondition", "The owner cannot be removed from the channel", "Delete the channel instead, if it is no longer needed."),
  idempotency_in_progress: spec(409, "aborted", "A request with this Idempotency-Key is still running", "Retry after a moment with the same Idempotency-Key to get its result."),
  job_not_completed: spec(409, "failed_precondition", "The job has not completed yet", "Poll GET /jobs/{job_id} until status is completed."),
  job_failed: spec(409, "failed_precondition", "The job failed, so it has no result", "Read the reason in GET /jobs/{job_id} (`error`), fix the input and submit a new job."),
  // 410
  message_expired: spec(410, "failed_precondition", "The message has expired", "Read it in GET /v1/channels/{identifier}/history."),
  invitation_revoked: spec(410, "failed_precondition", "The invitation was revoked", "Ask the channel owner for a new invitation."),
  invitation_expired: spec(410, "failed_precondition", "The invitation has expired", "Ask the channel owner for a new invitation."),
  invitation_invalidated: spec(410, "failed_precondition", "The invitation's creator may no longer invite to this channel (its key was revoked or removed from the channel)", "Ask the channel owner or a current member for a new invitation."),
  lease_expired: spec(410, "failed_precondition", "The lease has expired or does not exist", "Claim the message again with POST /v1/messages/{id}/claim-with-lease."),
  result_expired: spec(410, "failed_precondition", "The job result has expired", "Results are kept 24 hours; submit the job again."),
  // 413
  payload_too_large: spec(413, "invalid_argument", "The request body is too large", "Send a smaller body."),
  // 408, 431 (answered by the listener when a request cannot be parsed in time or at all)
  request_timeout: spec(408, "unavailable", "The request was not received in time", "Send the whole request promptly, then retry."),
  headers_too_large: spec(431, "invalid_argument", "The request headers are too large", "Send fewer or shorter headers (16 KiB in all at most)."),
  // 422
  missing_field: spec(422, "invalid_argument", "A required field is missing", "Add the field named in the message."),
  invalid_string: INVALID("string", "Send a non-empty string."),
  invalid_field: INVALID("field value", "Send a value of the documented type."),
  invalid_unicode: INVALID("text", "Send well-formed Unicode without NUL (U+0000): no unpaired surrogate escapes such as \\ud800."),
  invalid_fields: INVALID("fields", "Remove the fields listed in `fields`; see /openapi.json for the accepted ones."),
  invalid_json_shape: spec(422, "invalid_argument", "The request body must be a JSON object", "Wrap the fields in an object: {\"field\": value}."),
  invalid_object: INVALID("object", "Send a JSON object."),
  invalid_mode: INVALID("mode", "Use \"broadcast\" or \"claimable\"."),
  invalid_access: INVALID("access", "Use \"open\" or \"restricted\"."),
  invalid_discoverable: INVALID("discoverable", "Send true or false."),
  invalid_paused: INVALID("paused", "Send true or false."),
  invalid_ttl_seconds: INVALID("ttl_seconds", "Use an integer from 300 to 2592000."),
  invalid_retention_days: INVALID("retention_days", "Use an integer from 1 to 365."),
  invalid_max_messages: INVALID("max_messages", "Use an integer from 1 to 1000000, or null for no cap."),
  invalid_max_writes_per_minute: INVALID("max_writes_per_minute", "Use an integer from 1 to 1000000, or null for no limit."),
  invalid_max_deliveries: INVALID("max_deliveries", "Use an integer from 1 to 1000, or null for no limit."),
  invalid_group_key: INVALID("group_key", "Send 1 to 128 characters, or leave group_key out for no group."),
  invalid_group_concurrency: INVALID("group_concurrency", "Use an integer from 1 to 1000 (1: each group strictly in order), or null for no bound."),
  invalid_dispatch: INVALID("dispatch", "Use \"fifo\" (oldest first) or \"fair\" (round-robin across groups)."),
  invalid_priority: INVALID("priority", "Use an integer from 1 (most urgent) to 5; 3 is the default."),
  invalid_trace_id: INVALID("trace_id", "Send the 32 hex digits of a trace id: the second field of a message's trace.traceparent."),
  invalid_push_config: INVALID("push_config", "Send {url (a public http(s) URL), token?, authentication?: {scheme, credentials}}; a task has at most 10."),
  invalid_a2a: INVALID("a2a", "Send {enabled, name?, description?, skills?: [{id, name, description?, tags?, examples?}]} on a claimable channel; see docs/decisions.md#a2a for the bounds."),
  invalid_a2a_forward: INVALID("a2a_forward", "Send {url, auth_header?: {name, value}} on a claimable channel: the remote agent's http(s) URL and a header sent with every request to it."),
  invalid_priority_aging_seconds: INVALID("priority_aging_seconds", "Use an integer from 1 to 86400, or null for priorities that never age."),
  receive_required: spec(409, "failed_precondition", "This channel hands out work by its group bounds and shared limits", "Take work with receive (POST /v1/channels/{identifier}/messages:receive), which keeps the bounds; a claim by id would pass them by."),
  unknown_limit: INVALID("limit", "Name limits your key created (GET /v1/limits lists them; POST /v1/limits creates one)."),
  invalid_dead_letter_channel: INVALID("dead_letter_channel", "Name another channel your key owns (id, alias or name), or null for none."),
  invalid_related_channels: INVALID("related_channels", "Send an array of channel ids or aliases."),
  invalid_channel_name: INVALID("channel name", "Use at most 200 visible characters, without control or invisible characters."),
  invalid_agent_label: INVALID("agent_label", "Use a non-empty string of at most 128 characters."),
  invalid_mentions: INVALID("mentions", "Send an array of actor ids or aliases."),
  invalid_limit: INVALID("limit", "A page's limit: an integer from 1 to 100. A shared limit: a name of 1 to 64 letters, digits, '.', '_', '-' or ':', with max_in_flight (1 to 100000), rate {count: 1 to 1000000, per_seconds: 1 to 86400}, or both."),
  invalid_cursor: INVALID("cursor", "Pass a next_cursor value from a previous page unchanged, an RFC 3339 timestamp, or 0."),
  invalid_since: INVALID("since", "Pass a next_cursor value from a previous page unchanged, an RFC 3339 timestamp, or 0."),
  invalid_wait: INVALID("wait", "Use a number of seconds, e.g. wait=20."),
  invalid_status: INVALID("status", "Use \"unclaimed\" or \"claimed\"."),
  invalid_batch_size: INVALID("batch size", "Send 1 to 100 items; split larger batches."),
  invalid_lease_seconds: INVALID("lease_seconds", "Use an integer from 30 to 3600."),
  invalid_delay_seconds: INVALID("delay_seconds", "Use a number of seconds from 0 up to the channel's ttl_seconds."),
  invalid_webhook_url: INVALID("webhook URL", "Use an absolute http:// or https:// URL."),
  invalid_url: INVALID("URL", "Use an absolute http:// or https:// URL."),
  invalid_video_url: INVALID("video URL", "Use a watch-page URL (…/watch?v=<id>) or a short link (…/<id>)."),
  invalid_format: INVALID("format", "Use \"html\" or \"markdown\"."),
  invalid_language: INVALID("language", "Use a language code such as \"en\", \"de\" or \"pt-BR\"."),
  invalid_job_id: INVALID("job_id", "Use the integer job_id returned at submission."),
  invalid_key_id: INVALID("key_id", "Send the key_id of an API key."),
  invalid_update_mask: INVALID("update_mask", "Name only fields of ChannelUpdate."),
  content_too_large: spec(422, "invalid_argument", "The message content is too large", "Keep content within max_content_bytes, or store large payloads elsewhere and send a link."),
  metadata_too_large: spec(422, "invalid_argument", "The metadata is too large", "Keep metadata within 16 KiB."),
  state_too_large: spec(422, "invalid_argument", "The session state is too large", "Keep a session's state within 64 KiB of JSON; store large data elsewhere and keep a link in the state."),
  invalid_scopes: INVALID("scopes", "Use scope names from valid_scopes, e.g. [\"messages:read\", \"messages:claim\"]."),
  invalid_quota: INVALID("quota", "Give a whole number 0 or more (0: unlimited), or leave the quota out for the service's default."),
  result_too_large: spec(422, "invalid_argument", "The result is too large", "Keep a result within 64 KiB of UTF-8, or store large output elsewhere and send a link."),
  invalid_cron: spec(422, "invalid_argument", "Invalid cron expression", "Give five fields (minute hour day-of-month month day-of-week, e.g. '0 9 * * 1-5') or six with seconds first ('*/30 * * * * *'), one that fires at least once."),
  invalid_timezone: spec(422, "invalid_argument", "Unknown time zone", "Give an IANA time zone name such as 'UTC', 'Europe/Berlin' or 'America/New_York'."),
  invalid_schedule: spec(422, "invalid_argument", "Invalid schedule", "Give channel, cron and message {content, metadata?, group_key?, priority?}; the message is checked as a post to the channel would be."),
  invalid_waitpoint: spec(422, "invalid_argument", "Invalid waitpoint", "Give timeout_seconds from 1 to 2592000 (30 days), a description of at most 1,000 characters, data of at most 16 KiB of JSON; release with until_waitpoint or delay_seconds, not both."),
  invalid_depends_on: spec(422, "invalid_argument", "Invalid depends_on", "Name at most 100 existing messages by id; a message of a batch may also name an earlier item's ref."),
  invalid_progress_after: INVALID("progress_after", "Pass the message's progress.updated_at unchanged (an RFC 3339 time)."),
  invalid_progress: spec(422, "invalid_argument", "A progress report carries data, text or both", "Send data (an object), text, or both; append: true adds text to what was reported before."),
  progress_too_large: spec(422, "invalid_argument", "The progress report is too large", "Keep data within 16 KiB of JSON and each report's text within 64 KiB; send long output as several reports with append: true."),
  invalid_cancel_reason: spec(422, "invalid_argument", "A cancel reason is at most 500 characters", "Shorten the reason; details belong in a message of their own."),
  metadata_validation_failed: spec(422, "invalid_argument", "The metadata does not match the channel's metadata_schema", "Fix the fields listed in `violations`; read the schema with GET /v1/channels/{identifier}."),
  idempotent_wait: spec(422, "invalid_argument", "A request with an Idempotency-Key cannot wait", "Leave 'wait' out (or 0) when sending an Idempotency-Key, or long-poll without the key."),
  idempotency_key_reused: spec(422, "invalid_argument", "This Idempotency-Key was used for a different request", "Use a fresh Idempotency-Key for each distinct operation."),
  invalid_idempotency_key: INVALID("Idempotency-Key", "Use 1 to 255 printable ASCII characters."),
  // Job failures: the `error` of a failed job (GET /jobs/{job_id}); the status is what the failure would be as a response.
  url_not_allowed: spec(422, "invalid_argument", "The URL leads to a private or reserved address", "Use a public http(s) URL, or send the posting as text."),
  page_fetch_failed: spec(502, "unavailable", "The posting page could not be fetched", "Check that the URL opens in a browser without logging in, or send the posting as text."),
  page_too_large: spec(422, "invalid_argument", "The posting page is larger than the service fetches", "Send the posting as text instead."),
  unsupported_content_type: spec(422, "invalid_argument", "The URL does not serve an HTML page", "Use the URL of the posting's web page, or send the posting as text."),
  llm_failed: spec(502, "unavailable", "The language model could not be reached or refused the request", "Submit the job again later."),
  llm_invalid_response: spec(502, "unavailable", "The language model's answer was not a usable posting", "Submit the job again; if it keeps failing, send a shorter text."),
  transcript_unavailable: spec(404, "not_found", "The video has no captions to fetch", "Only videos with captions (manual or auto-generated) have transcripts."),
  language_unavailable: spec(404, "not_found", "The video has no captions in the requested language", "Submit again with one of the languages listed in the message."),
  video_host_blocked: spec(503, "unavailable", "The video host refused the request (consent page, captcha or rate limit)", "Retry later; if it persists, the operator's network is blocked by the video host."),
  video_host_unavailable: spec(502, "unavailable", "The video host did not answer usefully", "Submit the job again later."),
  pdf_render_timeout: spec(422, "invalid_argument", "The document took longer to render than the service allows", "Split the document or simplify it (fewer pages, smaller images), then submit again."),
  pdf_too_large: spec(422, "invalid_argument", "The rendered PDF is larger than the service keeps", "Split the document into several smaller ones."),
  pdf_render_failed: spec(502, "unavailable", "The PDF renderer failed while rendering the document", "Submit the job again; if it keeps failing, simplify the document."),
  // 429
  rate_limit_exceeded: spec(429, "resource_exhausted", "Too many requests", "Wait for the number of seconds in Retry-After, then retry."),
  too_many_request_bytes: spec(429, "resource_exhausted", "This key has too many request bodies arriving at once", "Wait for your other uploads to finish (Retry-After), or send fewer large requests in parallel; docs/operations.md#body-limits lists the limits."),
  too_many_waiters: spec(429, "resource_exhausted", "This key holds as many open watches and long-polls as one key may", "Close a watch stream this key no longer needs (each one is held until closed), then open the new one."),
  channel_write_rate_exceeded: spec(429, "resource_exhausted", "The channel's write limit is reached", "Wait for the number of seconds in Retry-After, then retry."),
  too_many_mcp_sessions: spec(429, "resource_exhausted", "Too many MCP sessions are open", "Close sessions you no longer use (DELETE /mcp with their Mcp-Session-Id) or let idle ones expire, then start again."),
  too_many_follows: spec(429, "resource_exhausted", "This MCP session follows as many channels as one session may", "Unfollow a channel first (unfollow_channel or resources/unsubscribe)."),
  too_many_sessions: spec(429, "resource_exhausted", "This owner has as many live sessions as it may", "Delete sessions you no longer need (DELETE /v1/sessions/{id}) or let them expire, then create again."),
  too_many_schedules: spec(429, "resource_exhausted", "This key has as many schedules as it may", "Delete schedules you no longer need (DELETE /v1/schedules/{id}), then create again."),
  too_many_waitpoints: spec(429, "resource_exhausted", "This key has as many waiting waitpoints as it may", "Complete or let time out the waitpoints you no longer need (GET /v1/waitpoints?state=waiting lists them), then create again."),
  too_many_limits: spec(429, "resource_exhausted", "This key has as many limits as it may", "Delete limits you no longer need (DELETE /v1/limits/{name}), then create again."),
  job_limit_exceeded: spec(429, "resource_exhausted", "This key has as many unfinished jobs as it may", "Wait for your queued jobs to finish (poll GET /jobs/{job_id}) or for the seconds in Retry-After, then submit again."),
  schema_checks_busy: spec(429, "resource_exhausted", "This key has as many metadata schema checks waiting as one key may", "Send fewer posts (and schema changes) to channels with a metadata_schema at once: wait for the ones in flight, or for the seconds in Retry-After, then retry. More at once gains nothing: each key's checks take turns with every other key's."),
  // 500
  internal_error: spec(500, "internal", "Internal error", "Retry later; if it persists, report the request_id."),
  // 501
  not_implemented: spec(501, "unimplemented", "Not implemented yet", "This operation is part of the API but not available on this version of the service."),
  // 503
  channel_paused: spec(503, "unavailable", "The channel is paused", "Wait for the owner to resume the channel; reads still work."),
  store_unavailable: spec(503, "unavailable", "The database is unavailable", "Retry with backoff; the service recovers when the database returns."),
  shutting_down: spec(503, "unavailable", "The service is shutting down", "Retry against another instance or in a moment."),
  server_busy: spec(503, "unavailable", "The server is receiving as many request bodies as it can hold", "Retry after Retry-After seconds."),
  pdf_renderer_unavailable: spec(503, "unavailable", "The PDF renderer is not available", "The operator must install Chromium or set AGENTBUS_CHROMIUM_PATH."),
  llm_not_configured: spec(503, "unavailable", "No language-model credential is configured", "The operator must set OPENAI_API_KEY."),
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof errorCatalog;

export function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(errorCatalog, code);
}


export interface ApiErrorOptions {
  suggestion?: string;
  /** Extra fields of the error body, e.g. {retry_after: 60}. */
  details?: Record<string, JsonValue>;
  /** Response headers the error implies, e.g. Retry-After. */
  headers?: Record<string, string>;
  cause?: unknown;
}

/** An error with a catalog code; safe to show to the caller. */
export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly suggestion: string | undefined;
  readonly details: Record<string, JsonValue>;
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message?: string, options: ApiErrorOptions = {}) {
    const entry: ErrorSpec = errorCatalog[code];
    super(message ?? entry.message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ApiError";
    this.code = code;
    this.suggestion = options.suggestion ?? entry.suggestion;
    this.details = options.details ?? {};
    this.headers = options.headers ?? {};
  }

  get status(): number {
    return errorCatalog[this.code].status;
  }
}
