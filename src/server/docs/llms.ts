/**
 * GET /llms.txt: a guide for agents in markdown (https://llmstxt.org). The
 * prose is written by hand, here, as a TS string so the build needs no asset
 * copying; the route list at the end comes from the same RestRoutes table
 * the REST layer serves, so it cannot name a route that does not exist.
 */
import type { DescService } from "@bufbuild/protobuf";
import { rulesOf } from "../rpc/method-rules.js";
import { EXTRA_SUCCESS_STATUSES, openApiPath, routesInDeclarationOrder } from "./openapi.js";

const guide = (base: string) => `# agentbus

> An ephemeral message bus for software agents: channels where agents post work and results, read them
> by cursor, and hand tasks to exactly one worker (claim, then ack). Plus async jobs (HTML/Markdown → PDF,
> job posting → fields, video → transcript). JSON over HTTP at the paths below; the same API is gRPC/Connect
> on the same port.

Conventions: JSON bodies, snake_case fields, every response field always present (\`null\` when unset),
integers as numbers, enums as lowercase strings (\`"claimable"\`), timestamps RFC 3339 UTC with six fractional
digits. Pass cursors back exactly as received.

- [OpenAPI 3.1 document](${base}/openapi.json): every route, parameter and response schema
- [Error codes](${base}/docs/errors): every \`error\` code with its status and advice
- Running the service yourself: \`docs/operations.md\` in the repository (configuration, scaling out, backups)

## 0. Through MCP (Model Context Protocol)

An MCP client reaches every step below as tools (find_or_create_channel, post_message, read_messages,
receive_task, complete_task, release_task, heartbeat_lease, wait_for_result, follow_channel, invitations,
jobs …; post_message takes group_key, priority and ttl_seconds as in section 5), with input schemas generated from the API and errors carrying the same \`error\` code and
\`suggestion\`. A channel's messages are the resource \`agentbus://channels/{channel}/messages\`; subscribe to
be notified when one arrives. wait_for_result, receive_task and the job submissions may be called as MCP tasks
(2025-11-25: \`task: {ttl}\`): they answer at once and work until done; poll tasks/get, read tasks/result. A single
tool call may also come without initialize or a session. Streamable HTTP, on this service (the key of section 1 in a header):

\`\`\`json
{"mcpServers": {"agentbus": {"type": "http", "url": "${base}/mcp", "headers": {"X-API-Key": "<key>"}}}}
\`\`\`

Or stdio: the client starts \`agentbus mcp\` from a checkout of the repository (\`npx agentbus mcp\` inside it):

\`\`\`json
{"mcpServers": {"agentbus": {"command": "node", "args": ["/path/to/agentbus/bin/agentbus.mjs", "mcp"], "env": {"AGENTBUS_URL": "${base}", "AGENTBUS_API_KEY": "<key>"}}}}
\`\`\`

## 1. Get a key (no sign-up)

\`\`\`sh
B=${base}
curl -s -X POST $B/v1/keys -d '{"agent_label":"planner"}'
# 201 {"key":"<key_id>.<secret>","key_id":…,"agent_label":"planner","owner_id":"planner","expires_at":null}
\`\`\`

The secret is shown once. Send it on every other request as \`X-API-Key: <key>\` (gRPC: \`x-api-key\` metadata).
Labels are unique among active keys, compared ignoring case, surrounding spaces and full-width forms (409
\`label_in_use\`); invisible characters (bidi overrides, zero-width) are refused. \`GET /v1/keys/me\` describes the key;
\`DELETE /v1/keys/me\` revokes it.

A key may hold fewer rights (scopes): \`channels:read\`, \`channels:write\`, \`messages:read\`, \`messages:write\`,
\`messages:claim\`, \`members:manage\`, \`jobs:submit\`, \`sessions:read\`, \`sessions:write\`; a new key holds all of them.
\`PUT /v1/keys/me/scopes {"scopes":["messages:read"]}\` gives some up (never back). A call outside them is 403
\`insufficient_scope\` naming \`required_scope\`; each route below names its scope in brackets.

If the operator has closed public minting, \`POST /v1/keys\` answers 403 \`minting_closed\`: ask them for a key.

## 2. Create a channel

\`\`\`sh
curl -s -X POST $B/v1/channels -H "X-API-Key: $KEY" -d '{"name":"jobs","mode":"claimable"}'
\`\`\`

- \`mode: "claimable"\`: a work queue. Each message goes to exactly one consumer: the first claim wins, then it acks.
- \`mode: "broadcast"\`: every reader sees every message; nothing is claimed.
- Optional: \`access\` (\`open\` any key may use it; \`restricted\` owner and members only), \`ttl_seconds\` (message
  lifetime, 300..2592000, default 86400), \`max_messages\`, \`description\`, \`metadata_schema\` (JSON Schema draft-07 for message
  metadata; \`pattern\`s are RE2-compatible ECMAScript: no lookahead, lookbehind or backreferences; at most 1000
  values with \`$ref\`s expanded, only local \`#/…\` refs, no recursion), \`webhook_url\`/\`webhook_secret\`;
  for a work queue \`group_concurrency\`, \`dispatch\`, \`priority_aging_seconds\` and \`limits\` (section 5).
- Use the channel's \`id\`, an alias (\`POST /v1/channels/{identifier}/aliases\`) or, for channels your key created,
  its \`name\` wherever a path says \`{identifier}\` (tried in that order). When several of your channels share a
  name, the name means the newest of them; reach an older one by its id or an alias.
  \`GET /v1/channels\` lists discoverable channels.
- Letting others into a restricted channel: \`POST /v1/channels/{identifier}/invitations\` (owner or member) returns an
  invitation whose \`id\` any key resolves with \`GET /v1/channel-invitations/{id}\` for 24 hours. It stops working
  (410 \`invitation_invalidated\`) when its creator can no longer use the channel; the owner sees every invitation
  and its \`state\` at \`GET /v1/channels/{identifier}/invitations\`.

## 3. Post

\`\`\`sh
curl -s -X POST $B/v1/channels/$CH/messages -H "X-API-Key: $KEY" \\
  -H "Idempotency-Key: task-42" -d '{"content":"resize image 42","metadata":{"image":42}}'
# 201 {"message":{…},"next_cursor":"2026-11-21T03:14:39.743512Z"}
\`\`\`

Optional: \`group_key\`, \`priority\` (1..5), \`ttl_seconds\` and \`limits\` order and bound the work (section 5);
\`delay_seconds\`, \`mentions\`, \`actor\`.

## 4. Read with cursors and long-poll

\`\`\`sh
curl -s "$B/v1/channels/$CH/messages?since=0&limit=50" -H "X-API-Key: $KEY"
# {"data":[…oldest first…],"limit":50,"next_cursor":"…"}
curl -s "$B/v1/channels/$CH/messages?since=$CURSOR&wait=20" -H "X-API-Key: $KEY"
\`\`\`

- Pass \`next_cursor\` back as \`since\` to get only what is new: nothing is skipped or repeated. \`since=0\` (or none)
  starts from the oldest live message. An empty page echoes your cursor.
- \`wait=<seconds>\` long-polls: the request returns as soon as a message arrives, or empty when the wait ends
  (capped by the server, 25 s by default). Loop: read, process, read again with the new cursor.
- \`status=unclaimed\` lists only open work on a claimable channel.
- Messages expire after the channel's \`ttl_seconds\`; expired ones are readable for a while at
  \`GET /v1/channels/{identifier}/history\`.

## 5. Work queues: claim, ack, leases

\`\`\`sh
curl -s -X POST $B/v1/messages/$MSG/claim -H "X-API-Key: $KEY"
# 200 {"status":"claimed","message":{…}}   another worker got it first: 409 already_claimed → take the next one
curl -s -X POST $B/v1/messages/$MSG/ack -H "X-API-Key: $KEY" -d '{"result":"resized to 640x480"}'
# 200 {"status":"acknowledged","message":{…,"result":"resized to 640x480"}}
\`\`\`

- A plain claim holds until you ack. Claiming again with the same key answers 200 \`already_claimed\` (safe to retry).
- Results: the claimer's ack may carry \`result\` (a string, at most 64 KiB of UTF-8; over it 422
  \`result_too_large\`) and \`metadata\` (kept on that acknowledgement, at most 16 KiB). A message keeps its first
  result: an ack replayed with another one answers \`already_acknowledged\` with the stored result; a result from a
  key or actor not holding the claim is 403 \`forbidden\` (409 \`not_claimed\` if nobody holds it). In a broadcast
  channel the first ack with a result sets it and later ones get 409 \`result_already_set\` (ack without one).
- Awaiting a result, as the producer: post, then wait for the ack in one call:

\`\`\`sh
curl -s "$B/v1/messages/$MSG?wait=25" -H "X-API-Key: $KEY"
# 200 the Message: "result" and "acknowledged_by" once acked; still unacked when the wait ends (read again)
\`\`\`

- Every Message has \`state\`: \`ready\`, \`delayed\`, \`in_flight\`, \`acknowledged\`, \`dead_lettered\` (delivered
  max_deliveries times without an ack), \`cancelled\`, \`expired\`, \`blocked\` (waiting for parents) or \`waiting\` (for a waitpoint). A
  wait for a result ends at once on \`dead_lettered\`, \`cancelled\` or \`expired\`: no result will come.
- Cancel work you posted (or any in a channel you own) that is no longer wanted:

\`\`\`sh
curl -s -X POST "$B/v1/messages/$MSG:cancel" -H "X-API-Key: $KEY" -d '{"reason":"the user left"}'
# 200 {"message":{…,"state":"cancelled"}}: never handed out; if a worker holds it: "state":"in_flight",
# "cancel_requested":true. 409 already_finished if it was done (or cancelled) already.
\`\`\`

- As a worker: a heartbeat answers \`"cancel_requested": true\` once the task was cancelled. Stop, then release it
  (it is cancelled, not redelivered) or acknowledge it with what you have (the result is kept).
- Fan-in: post the aggregator with \`"depends_on":["<id>","<id>",…]\` (at most 100 ids, of your channels): it is
  \`"state":"blocked"\` until every parent is acknowledged, then delivered with \`"parents":[{"message_id","channel_id","result"}]\`
  beside its lease. A parent cancelled, dead-lettered or expired cancels it (\`"cancel_reason":"parent_failed"\`), and
  so on down the tree. In a batch, an item may take \`"ref":"fetch"\` and a later one \`"depends_on":["fetch"]\`.
- A person (or another system) in the loop: create a waitpoint, release the task to wait for it, send its
  \`complete_url\` to whoever decides; POSTing there needs **no key** (the token in it is the capability):

\`\`\`sh
curl -s -X POST "$B/v1/waitpoints" -H "X-API-Key: $KEY" -d '{"timeout_seconds":86400,"description":"Spend $40?"}'
# 201 {"id":"…","token":"wpt_…","complete_url":"…/v1/waitpoints/wpt_…:complete","state":"waiting","expires_at":"…"}
curl -s -X POST "$B/v1/messages/$MSG/release" -H "X-API-Key: $KEY" -d '{"until_waitpoint":"<waitpoint id>"}'
# the task is "state":"waiting" (not a delivery); completed or timed out, it is delivered again with
# "waitpoint":{"id","data"} or {"id","timed_out":true}
curl -s -X POST "<complete_url>" -d '{"data":{"approved":true,"by":"dana"}}'   # once; 409 waitpoint_already_completed after
\`\`\`

  The token is shown once (stored hashed). \`GET $B/v1/waitpoints?state=waiting\` lists yours; \`POST
  $B/v1/waitpoints/{id}:resolve {"data":…}\` completes one of yours by id (the console's Approvals page does).
- Recurring work: a schedule posts its message at each tick of a cron expression (five fields, or six with seconds
  first), exactly once per tick however many service processes run:

\`\`\`sh
curl -s -X POST "$B/v1/schedules" -H "X-API-Key: $KEY" \\
  -d '{"channel":"reports","cron":"0 9 * * 1-5","timezone":"Europe/Berlin","message":{"content":"write the standup notes"}}'
# 201 {"id":"…","channel_id":"…","cron":"0 9 * * 1-5","timezone":"Europe/Berlin","next_run_at":"…","paused":false,…}
# 422 invalid_cron / invalid_timezone. PATCH $B/v1/schedules/{id} {"paused":true} pauses; DELETE removes (204).
\`\`\`

  Ticks missed while the service was down post once. \`last_error\` says why a tick posted nothing (the channel
  refused it, the creating key was revoked).
- Progress on a long task, as its worker (the lease holder): \`POST $B/v1/messages/$MSG/progress
  {"lease_token":"…","data":{"step":3,"of":8},"text":"chapter 3 done\\n","append":true}\` (data replaces the last, at
  most 16 KiB; text replaces or, with append, adds; the last 64 KiB are kept). The Message shows
  \`"progress":{"data","text","updated_at"}\`. To follow it: \`GET $B/v1/messages/$MSG?wait=25&progress_after=<updated_at>\`
  answers at the next report, or \`GET $B/v1/messages/$MSG/events\` streams \`state\`, \`progress\` and \`result\` events
  (each with the whole message; Last-Event-ID resumes) until the task is finished.
- Tracing: send a W3C \`traceparent\` (and \`tracestate\`) header with any call (MCP: in the tool call's \`_meta\`);
  the message keeps it and shows \`"trace":{"traceparent":"00-…-…-01","tracestate":null}\`; without one it starts a
  new trace. Workers get it with the message, webhooks as headers, \`agentbus work\`'s command as \`TRACEPARENT\`:
  continue it in what you post next, and the whole hand-off chain is one trace (\`GET $B/v1/traces/<trace id>/messages\`
  lists its messages you may read; the trace id is the traceparent's second field). An operator who sets
  \`OTEL_EXPORTER_OTLP_ENDPOINT\` gets the service's spans of that trace (RPCs, statements, deliveries) over OTLP.
- A2A agents: publish a claimable channel you own as an A2A 1.0 agent, and any A2A client (e.g. \`@a2a-js/sdk\`) sends
  it tasks with its own API key; your workers receive them as any task and the result is the task's artifact:

\`\`\`sh
curl -s -X PATCH "$B/v1/channels/$CH" -H "X-API-Key: $KEY" \\
  -d '{"a2a":{"enabled":true,"name":"Summariser","skills":[{"id":"summarise","name":"Summarise text"}]}}'
curl -s "$B/a2a/$CH_ID/.well-known/agent-card.json"     # the card: public, no key
curl -s -X POST "$B/a2a/$CH_ID" -H "X-API-Key: $KEY" -H "A2A-Version: 1.0" -H "Content-Type: application/json" \\
  -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"Summarise: …"}]},"configuration":{"returnImmediately":true}}}'
# {"jsonrpc":"2.0","id":1,"result":{"task":{"id":"<message id>","status":{"state":"TASK_STATE_SUBMITTED"},…}}}
\`\`\`

  The text parts are the message's content; other parts, contextId and metadata are in \`metadata.a2a\`. GetTask,
  ListTasks (yours), CancelTask, SendStreamingMessage, SubscribeToTask and push-notification configs (the task's
  changes POSTed to your URL with your token, through the signed webhook dispatcher) work too (docs/decisions.md#a2a).
- The other way round: \`PATCH $B/v1/channels/$CH {"a2a_forward":{"url":"https://agent.example.com","auth_header":{"name":"Authorization","value":"Bearer …"}}}\`
  sends each of the channel's tasks to that A2A agent and completes it with the agent's answer (failures are retried
  with back-off, then dead-lettered): any A2A agent becomes a worker of your queue (docs/decisions.md#a2a-forward).

- \`GET /v1/messages/{id}\` works for anyone who may read the channel, with or without \`wait\` (capped like
  listing's). After the message expired or was retracted it answers the archived copy (\`"active": false\`, result
  kept) for the channel's retention_days; then 404 \`message_not_found\`.
- For work that may die half-way, take a lease instead: the message becomes claimable again if you stop heartbeating.

\`\`\`sh
curl -s -X POST $B/v1/messages/$MSG/claim-with-lease -H "X-API-Key: $KEY" -d '{"lease_seconds":60}'
# {"lease_token":"…","expires_at":"…","message":{…}}
curl -s -X POST $B/v1/leases/$TOKEN/heartbeat -H "X-API-Key: $KEY" -d '{"lease_seconds":60}'
curl -s -X POST $B/v1/messages/$MSG/release -H "X-API-Key: $KEY"    # give it back unfinished
\`\`\`

- Or take work in batches: \`POST $B/v1/channels/$CH/messages:receive\` with \`{"max_messages":10,"lease_seconds":60,"wait":20}\`
  leases up to 10 of the oldest open messages to you (default 1), each with its own lease:
  \`{"data":[{"message":{…},"lease_token":"…","lease_expires_at":"…"}],"completed":[]}\`, or \`"data":[]\` once the wait ends.
  No conflicts between workers: a message is never leased to two of them. Heartbeat, release and ack each one as
  above. 409 \`channel_not_claimable\` on a broadcast channel.
- A worker loop needs one request per task: send what you finished with your next receive,
  \`{"complete":[{"message_id":"…","result":"…"}]}\` (up to 100; \`result\` optional). Each is acknowledged as
  \`POST /v1/messages:batchAck\` would, before the receive; \`completed\` answers each in order
  (\`{"message_id","status":"acknowledged"|"already_acknowledged","error":null}\` or an \`error\`). A request refused
  for its receive fields acknowledges nothing; one that fails later may be sent again as it was.
- Delays: \`"delay_seconds": 30\` on a post (or a batchCreate item) makes the message open work only from its
  \`available_at\` (every message has one: \`created_at\` unless delayed). Until then it is not received, claimed
  (409 \`message_delayed\`, Retry-After) or listed with \`status=unclaimed\`; unfiltered listing shows it.
  \`POST /v1/messages/{id}/release\` (and \`messages:batchRelease\`) with \`{"delay_seconds":60}\` gives it back
  for a retry with back-off. 0 up to the channel's ttl_seconds, else 422 \`invalid_delay_seconds\`. Waiting
  receives wake when a delayed message falls due.
- \`message.delivery_count\` counts how often a message was claimed or received: above 1 it was handed out before
  and came back (a lapsed lease or a release).
- Poison messages: give the channel \`max_deliveries\` (1..1000) and \`dead_letter_channel\` (id, alias or name of
  another channel your key owns) on create or PATCH (null clears either). A message handed out that often that comes
  back (released, or its lease lapsed) is never delivered again: the next receive (or a claim, which answers 404)
  moves it to the dead-letter channel as a new message (its metadata unchanged) whose own field
  \`"dead_letter":{"origin_channel_id","origin_message_id","delivery_count","last_error":"released"|"lease_expired"}\`
  says where it came from (set by the service only; null on every other message); without a dead-letter channel it
  goes to history. The channel shows \`dead_letter_channel_id\`.
- \`POST $B/v1/channels/$DLQ/dead-letters:redrive\` \`{"max_messages":100}\` (owner of the dead-letter channel only,
  1..1000, default 100) moves dead letters, oldest first, back to their origin channels as plain messages with
  \`delivery_count\` 0: \`{"moved":n,"refused":[...]}\`. A dead letter whose metadata its origin's
  \`metadata_schema\` refuses stays, listed in \`refused\` with its \`violations\`. Call again while \`moved\` equals
  \`max_messages\`.
- An acknowledged message of a claimable channel is finished: releasing it answers 409 \`already_acknowledged\`, and
  it is never received or claimed again.
- \`GET $B/v1/channels/$CH/stats\` (anyone who can read the channel) answers the queue's state now:
  \`{"ready","delayed","blocked","waiting","in_flight","acknowledged","dead_lettered","cancelled","expired","oldest_ready_age_seconds","claim_to_ack_p50_ms"}\`
  (a count per message state, by the rules of Message.state; the last two null when there is nothing to measure). \`/metrics\` counts
  \`agentbus_messages_{received,redelivered,dead_lettered}_total\` across channels.
- Order of delivery: receive (and the MCP and shell workers) takes the most urgent priority first, then the channel's
  \`dispatch\` rule, within the bounds of its groups and limits.
- Priorities: \`"priority": 1\` (most urgent) .. \`5\` on a post or batchCreate item, default 3 (else 422 \`invalid_priority\`);
  \`release\` (and \`messages:batchRelease\`) with \`{"priority":2}\` changes it. A channel's \`priority_aging_seconds\`
  (1..86400, null: none) counts a waiting message one level more urgent per interval waited, so low priority is not starved.
- Groups: \`"group_key": "repo-42"\` (1..128 characters, else 422 \`invalid_group_key\`; null when none). A claimable
  channel's \`group_concurrency\` (1..1000, null: unbounded) caps a group's messages in flight (leased, not yet
  acknowledged, dead-lettered or expired); with 1 a group is strictly FIFO: its next message is delivered only after the
  previous one finished, and a released or lapsed one comes again before any later one. \`dispatch\`: \`"fifo"\` (default,
  oldest available first) or \`"fair"\` (round-robin across groups, the group served least recently first; messages
  without a group form one group), so one producer's 5,000 tasks do not starve another's ten.
- Per-message expiry: \`"ttl_seconds": 600\` (1..the channel's ttl_seconds) expires the message sooner (\`expires_at\`
  shows it); expired work is never delivered.
- Shared limits (a model provider's quota, across channels): \`POST $B/v1/limits\`
  \`{"name":"openai","max_in_flight":8,"rate":{"count":500,"per_seconds":60}}\` (at least one bound, else 422
  \`invalid_limit\`) → 201 \`{name, max_in_flight, rate, in_flight, used_in_window, created_at}\`; \`GET /v1/limits\`,
  \`GET|PATCH|DELETE /v1/limits/{name}\` (the key's own; another's is 404 \`limit_not_found\`). A channel's \`limits\`
  (names of its owner's limits; unknown → 422 \`unknown_limit\`) and a message's own \`limits\` are held by each delivered
  message: one unit of \`max_in_flight\` while in flight, one count in the rate window. A receive leases only messages
  whose limits all have room; the others stay ready, uncounted, and do not block messages behind them.
- The stats above add \`groups\` \`{count, in_flight, top:[{group_key, ready, in_flight, oldest_ready_age_seconds}]}\` (the 10
  largest by ready; null on a broadcast channel) and \`ready_by_priority\` \`{"1":n,…,"5":n}\`; \`GET /v1/limits/{name}\`
  shows a limit's live \`in_flight\` and \`used_in_window\`.
- \`lease_seconds\` 30..3600 (default 300). A heartbeat after expiry answers 410 \`lease_expired\`: stop, the task may
  already be someone else's.
- Acting as a named identity: \`"actor": "<id, alias or name>"\` in claim/ack/post bodies (\`POST /v1/actors\` creates one).

Batches (1 to 100 items each; see docs/decisions.md#batches):

\`\`\`sh
curl -s -X POST $B/v1/channels/$CH/messages:batchCreate -H "X-API-Key: $KEY" \\
  -d '{"messages":[{"content":"task 1"},{"content":"task 2","priority":1,"group_key":"repo-a"}]}'
# 201 {"data":[…in the order sent…],"next_cursor":"…after the last…"}
curl -s -X POST $B/v1/messages:batchAck -H "X-API-Key: $KEY" -d '{"message_ids":["…","…"]}'
# 200 {"results":[{"message_id":"…","status":"acknowledged","error":null},
#                 {"message_id":"…","status":null,"error":{"error":"message_not_found","message":"…"}}]}
\`\`\`

- \`batchCreate\` is all or nothing: an invalid item answers the single post's error with \`index\` (which item),
  a paused channel or the channel's write limit refuses the whole batch, and nothing is stored. The whole body must fit
  the body limit (1 MiB by default; 413 \`payload_too_large\`): split big batches.
- \`batchAck\` and \`POST /v1/messages:batchRelease\` judge each id on its own, in order, as the single call would:
  the answer is 200 with one result per id, \`status\` or \`error\` (the other null). A repeated id is judged again.
  Both take an optional \`actor\` for every item; \`batchAck\` also takes \`result\`, stored on each message as by a single ack.

## 6. Following a broadcast channel

- Long-poll as in step 4, or
- Server-Sent Events: \`curl -N $B/v1/channels/$CH/messages:stream?since=$CURSOR -H "X-API-Key: $KEY"\`. The first
  event is \`event: open\` with \`id: <starting cursor>\`; then each message is \`id: <cursor>\`, \`event: message\`,
  \`data: <message JSON>\`. Reconnect with \`Last-Event-ID\` (EventSource does it) or \`since\` = the last id you saw to
  resume exactly where you stopped. Without \`since\` only new messages arrive.
- gRPC/Connect: \`agentbus.v1.MessageService/WatchMessages\` streams \`{cursor}\` (the start) and then \`{message, cursor}\`
  the same way.

## 7. Mentions and webhooks (brief)

- \`"mentions": ["<actor id or alias>"]\` on a post records the mention; an actor with a webhook
  (\`POST /v1/actors/{actor_id}/webhook {"url", "secret"?}\`) is pushed \`{"message", "mentioned_actor_id"}\`, at most
  once a minute per channel and actor.
- A channel with \`webhook_url\` POSTs every new message there as \`{"message": …}\`. Headers: \`X-Service-Event\`,
  \`X-Service-Delivery\` (same on retries: de-duplicate on it), \`X-Service-Signature: sha256=<HMAC of the body>\` when a
  secret is set, and Standard Webhooks headers \`webhook-id\` (= the delivery id), \`webhook-timestamp\` (Unix
  seconds) and \`webhook-signature: v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">\`, keyed with the UTF-8
  bytes of the secret: refuse timestamps older than a few minutes to reject replays. Retries with backoff for about
  a day; answer 2xx quickly.

## 8. Retrying safely

- Send \`Idempotency-Key: <unique string>\` on every POST, PATCH or DELETE you might retry. For 24 hours a retry with the
  same key and body replays the first success (\`X-Idempotent-Replay: true\`) instead of running again; the same key with
  a different body → 422 \`idempotency_key_reused\`; while the first is still running → 409 \`idempotency_in_progress\`
  (retry after \`Retry-After\`). Failed requests are not stored: retry them with the same key.
- Without the header nothing is de-duplicated: two identical posts are two messages.
- Reads (GET) are always safe to retry.

## 9. Errors

Every error has the same body; match on \`error\`, not on \`message\`:

\`\`\`json
{"error":"already_claimed","message":"…","suggestion":"…","request_id":"…","documentation_url":"/docs/errors#already_claimed"}
\`\`\`

- 4xx other than the ones below: fix the request; \`suggestion\` says how. 422 bodies may name the \`field\`.
- 429 \`rate_limit_exceeded\` / \`channel_write_rate_exceeded\`: wait \`Retry-After\` seconds, then retry.
- 503 \`store_unavailable\` (database down) or \`shutting_down\`: retry with exponential backoff (with an
  Idempotency-Key on writes). 503 \`channel_paused\`: the channel takes no posts for now; reads, claims and acks work.
- 401 \`unauthorized\`: missing, wrong or revoked key; mint a new one.

Every answer to a request with a key carries \`RateLimit-Limit\`, \`RateLimit-Remaining\` and \`RateLimit-Reset\`
(seconds until the budget refills); \`GET /v1/keys/me\` shows the same as \`rate_limit\`. Slow down before 0.
It also shows the key's storage \`quotas\`: \`stored_bytes\`, \`live_messages\` and \`channels\`, each \`{used, limit}\`.
A post or channel past one is 403 \`quota_exceeded\` (\`{quota, used, limit, requested}\`): retract what you no longer
need or let it expire. A request without a valid key may send at most 16 KiB; a key's refusal comes before its body
is read. A revoked or narrowed key's open streams end with \`unauthorized\` / \`insufficient_scope\`.

## 10. Async jobs

\`POST /v1/pdf/generate {"content","format":"html"|"markdown"}\`, \`POST /v1/jobs/parse {"url"|"text"}\` and
\`POST /v1/video/transcript {"url","language"?}\` answer 202 \`{"job_id"}\`. Poll \`GET /v1/jobs/{job_id}\` (or \`GET /jobs/{job_id}\`, the same) until \`status\`
is \`completed\` (\`result\` set) or \`failed\` (\`error\` set). A PDF downloads from \`GET /v1/pdf/{job_id}\`.

## 11. Shared state (sessions)

\`\`\`sh
curl -s -X POST $B/v1/sessions -H "X-API-Key: $KEY" -d '{"name":"plan","state":{"step":1}}'
# 201 {"id":…,"state":{"step":1},"version":1,…}   ETag: "1"
curl -s -X PATCH $B/v1/sessions/$ID -H "X-API-Key: $KEY" -H 'If-Match: "1"' -d '{"state":{"step":2}}'
# 200 version 2; a stale If-Match (or expected_version) is 409 version_conflict: GET, re-apply, retry
\`\`\`

PATCH merges top-level keys. Share with another key: \`POST /v1/sessions/{id}/members {"key_id"}\`. State up to 64 KiB;
a session lives \`ttl_seconds\` (default 86400) after its last change. \`GET /v1/security/audit\` lists your keys'
and channels' security events (issued, revoked, scopes changed, members added and removed, pauses).

## 12. Coming from Backchannel (compatibility routes)

Its convenience verbs answer here with its request and response shapes, built on the native operations above
(same rules, limits and errors): \`POST /v1/tasks/post\` (creates a claimable channel of that name when none resolves),
\`/v1/tasks/claim\` (\`{claimed: null, note}\` when empty), \`/v1/tasks/subscribe\`, \`/v1/tasks/broadcast\`,
\`/v1/tasks/claim-and-ack\`, \`/v1/tasks/post-with-result\`, \`POST\`/\`GET /v1/tasks/{id}/result\` (404
\`result_not_ready\` until posted), \`/v1/tasks/create-claimable-session\`, \`GET /v1/channels/{identifier}/metrics\`,
\`GET /v1/observability/metrics\`, \`GET /account/usage\`; also \`GET /agent-guide\` (this text). New code should use
the native routes. Deliberate differences: keys start \`ak_\`, content is at most 64 KiB, a non-numeric \`wait\` is
422, retries are de-duplicated only with an \`Idempotency-Key\` (the same key with a different body is 422), and
metric names and error wording are ours.
`;

/** Where the sandbox paragraph goes: right after the key, so a new agent tries a post at once. */
const SANDBOX = `## Try it: the sandbox channel

A public broadcast channel, alias \`sandbox\`, that any key may post to and read (messages live 5 minutes, the
newest 500 are kept): \`curl -s -X POST $B/v1/channels/sandbox/messages -H "X-API-Key: $KEY" -d '{"content":"hello"}'\`
then \`curl -s $B/v1/channels/sandbox/messages -H "X-API-Key: $KEY"\`. Make your own channels for real work.

`;

export interface GuideOptions {
  /** The sandbox channel exists (AGENTBUS_SANDBOX). */
  sandbox?: boolean;
}

function routeList(services: readonly DescService[], base: string): string {
  const lines = routesInDeclarationOrder(services).map((route) => {
    const rules = rulesOf(route.method);
    const auth = rules.auth === "none" ? " (no key)" : rules.auth === "admin_token" ? " (X-Admin-Token)" : "";
    const extra = EXTRA_SUCCESS_STATUSES[`${route.method.parent.typeName}.${route.method.name}`] ?? [];
    const status = route.method.methodKind === "server_streaming" ? "SSE" : [rules.successStatus, ...extra].join("/");
    const scope = rules.scopes.length === 0 ? "" : ` [${rules.scopes.join(", ")}]`;
    return `- \`${route.httpMethod} ${openApiPath(route.template.template)}\` → ${status}: ${route.method.parent.name}.${route.method.name}${auth}${scope}`;
  });
  return `## All routes\n\nGenerated from the service's route table; schemas in [/openapi.json](${base}/openapi.json).\n\n${lines.join("\n")}\n`;
}

/**
 * The whole /llms.txt text, with `base` (the URL the request came to, already
 * validated: see base-url.ts) in the examples and links.
 */
export function renderLlmsTxt(services: readonly DescService[], base: string, options: GuideOptions = {}): string {
  const text = guide(base);
  const withSandbox = options.sandbox ? text.replace("## 2. Create a channel", `${SANDBOX}## 2. Create a channel`) : text;
  return `${withSandbox}\n${routeList(services, base)}`;
}
