/**
 * `agentbus waitpoint …` and `agentbus release` (docs/decisions.md#waitpoints):
 * a worker parks its task on a waitpoint that a person or another system
 * completes, with the token and no key, from anywhere (`complete` takes the
 * token or the whole complete_url, as a person would paste it).
 */
import { Option, type Command } from "commander";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { WaitpointService } from "../../gen/agentbus/v1/waitpoint_service_pb.js";
import type { JsonObject } from "../model/json.js";
import type { AgentbusApi } from "../server/mcp/api.js";
import { EXIT, Exit } from "./exit.js";

interface Io {
  out(line: string): void;
}

/** A waitpoint's line: id, state, when it times out (or its outcome), its question. */
function waitpointLine(w: JsonObject): string {
  const outcome = w.state === "completed" ? `  ${JSON.stringify(w.data ?? {})}` : w.state === "waiting" ? `  until ${String(w.expires_at)}` : "";
  const waiting = typeof w.waiting_messages === "number" && w.waiting_messages > 0 ? `  ${w.waiting_messages} task(s) waiting` : "";
  return `${String(w.id)}  ${String(w.state)}${outcome}${waiting}${typeof w.description === "string" ? `  ${w.description}` : ""}`;
}

/** The token in what was given: the token itself, or a complete_url that carries it. */
export function tokenIn(given: string): string | undefined {
  return /(wpt_[0-9a-f]{32}_[A-Za-z0-9_-]{43})/.exec(given)?.[1];
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function dataOf(json: string | undefined, approve: boolean | undefined, deny: boolean | undefined, by: string | undefined): JsonObject {
  if (approve && deny) throw new Exit(EXIT.usage, "give --approve or --deny, not both");
  let data: unknown = {};
  if (json !== undefined) {
    try {
      data = JSON.parse(json);
    } catch {
      throw new Exit(EXIT.usage, "--data must be a JSON object, e.g. '{\"approved\": true}'");
    }
    if (typeof data !== "object" || data === null || Array.isArray(data)) throw new Exit(EXIT.usage, "--data must be a JSON object");
  }
  const answer: JsonObject = { ...(data as JsonObject) };
  if (approve || deny) answer.approved = approve === true;
  if (by !== undefined) answer.by = by;
  return answer;
}

export function addWaitpointCommands(program: Command, io: Io, api: (needsKey?: boolean) => Promise<AgentbusApi>): void {
  const waitpoint = program
    .command("waitpoint")
    .description("waitpoints: a task waits (agentbus release --until-waitpoint) until a person or another system completes one, with its token and no key");
  waitpoint
    .command("create")
    .description("create a waitpoint; prints its id, then the URL that completes it (POST, no key: send it to whoever decides). The token is shown this once")
    .requiredOption("--timeout <seconds>", "when it times out unless completed first, 1..2592000 (30 days)", (v) => Number(v))
    .option("--description <text>", "what is asked (at most 1,000 characters); shown on the console's Approvals page")
    .option("--idempotency-key <key>", "a repeat with the same key gives the same waitpoint (and a new token, voiding the old)")
    .option("--json", "print the waitpoint as JSON")
    .action(async (opts: { timeout: number; description?: string; idempotencyKey?: string; json?: boolean }) => {
      const created = await (await api()).call(WaitpointService.method.createWaitpoint, {
        timeout_seconds: opts.timeout,
        ...(opts.description === undefined ? {} : { description: opts.description }),
        ...(opts.idempotencyKey === undefined ? {} : { idempotency_key: opts.idempotencyKey }),
      });
      if (opts.json) return io.out(JSON.stringify(created));
      io.out(String(created.id));
      if (typeof created.complete_url === "string") io.out(created.complete_url);
    });
  waitpoint
    .command("list")
    .description("list your waitpoints, newest first")
    .addOption(new Option("--state <state>", "only those waiting, completed or timed out").choices(["waiting", "completed", "timed_out"]))
    .option("--json", "one JSON object per line")
    .action(async (opts: { state?: string; json?: boolean }) => {
      const page = await (await api()).call(WaitpointService.method.listWaitpoints, opts.state === undefined ? {} : { state: opts.state });
      for (const w of (page.data ?? []) as JsonObject[]) io.out(opts.json ? JSON.stringify(w) : waitpointLine(w));
    });
  waitpoint
    .command("get <id>")
    .description("show one of your waitpoints as JSON")
    .action(async (id: string) => {
      io.out(JSON.stringify(await (await api()).call(WaitpointService.method.getWaitpoint, { id }), null, 2));
    });
  waitpoint
    .command("complete <token-url-or-id>")
    .description("complete a waitpoint: by its token or complete_url with no key, or one of your own by id; the tasks waiting for it are open work again")
    .option("--data <json>", "what to answer, a JSON object (at most 16 KiB)")
    .option("--approve", "answer {approved: true} (with --data, added to it)")
    .option("--deny", "answer {approved: false}")
    .option("--by <name>", "who decided, added as {by}")
    .option("--json", "print the waitpoint as JSON")
    .action(async (given: string, opts: { data?: string; approve?: boolean; deny?: boolean; by?: string; json?: boolean }) => {
      const data = dataOf(opts.data, opts.approve, opts.deny, opts.by);
      const token = tokenIn(given);
      let done: JsonObject;
      if (token !== undefined) done = await (await api(false)).call(WaitpointService.method.completeWaitpoint, { token, data });
      else if (UUID.test(given)) done = await (await api()).call(WaitpointService.method.resolveWaitpoint, { id: given, data });
      else throw new Exit(EXIT.usage, "give a waitpoint's token (wpt_…), its complete_url, or the id of one of yours");
      io.out(opts.json ? JSON.stringify(done) : waitpointLine(done));
    });

  program
    .command("release <message-id>")
    .description("give back a task you hold: open work again at once, after --delay, or when a waitpoint of yours completes or times out (--until-waitpoint)")
    .option("--delay <seconds>", "open work again only this many seconds from now (a retry with back-off)", (v) => Number(v))
    .option("--until-waitpoint <id>", "wait (state waiting) until this waitpoint of yours is completed or times out; the delivery is not counted")
    .option("--actor <actor>", "the actor that holds it, when not your key's own agent")
    .option("--json", "print the message as JSON")
    .action(async (messageId: string, opts: { delay?: number; untilWaitpoint?: string; actor?: string; json?: boolean }) => {
      const { message } = (await (await api()).call(MessageService.method.releaseMessage, {
        message_id: messageId,
        ...(opts.delay === undefined ? {} : { delay_seconds: opts.delay }),
        ...(opts.untilWaitpoint === undefined ? {} : { until_waitpoint: opts.untilWaitpoint }),
        ...(opts.actor === undefined ? {} : { actor: opts.actor }),
      })) as { message: JsonObject };
      io.out(opts.json ? JSON.stringify(message) : `${messageId}: ${String(message.state)}`);
    });
}
