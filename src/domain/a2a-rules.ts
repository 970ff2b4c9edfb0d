/**
 * The `a2a` field of a claimable channel (docs/decisions.md#a2a): what its
 * A2A agent card says. Bounded so that a card stays small: it is served to
 * anyone who asks, and rendered on every read of the channel.
 */
import type { A2aSkill, ChannelA2a, ChannelA2aForward, ChannelMode } from "../model/channels.js";
import { ApiError } from "../model/errors.js";

/** The field as a request carries it; undefined = not given. */
export interface ChannelA2aInput {
  enabled?: boolean | undefined;
  name?: string | undefined;
  description?: string | undefined;
  skills?: readonly A2aSkillInput[] | undefined;
}

export interface A2aSkillInput {
  id?: string | undefined;
  name?: string | undefined;
  description?: string | undefined;
  tags?: readonly string[] | undefined;
  examples?: readonly string[] | undefined;
}

export const A2A_LIMITS = {
  name: 100,
  description: 2000,
  skills: 32,
  skillId: 64,
  skillName: 100,
  skillDescription: 1000,
  tags: 16,
  tag: 64,
  examples: 8,
  example: 500,
} as const;

const SKILL_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

const invalid = (field: string, problem: string) => new ApiError("invalid_a2a", `'${field}' ${problem}`, { details: { field } });

function text(value: string | undefined, field: string, max: number, required: boolean): string | null {
  if (value === undefined || value === "") {
    if (required) throw invalid(field, "is required");
    return null;
  }
  if ([...value].length > max) throw invalid(field, `must be at most ${max} characters`);
  return value;
}

function list(values: readonly string[] | undefined, field: string, maxItems: number, maxChars: number): string[] {
  const out = [...(values ?? [])];
  if (out.length > maxItems) throw invalid(field, `may hold at most ${maxItems} entries`);
  out.forEach((v, i) => text(v, `${field}[${i}]`, maxChars, true));
  return out;
}

function skill(input: A2aSkillInput, at: string): A2aSkill {
  const id = text(input.id, `${at}.id`, A2A_LIMITS.skillId, true) as string;
  if (!SKILL_ID.test(id)) throw invalid(`${at}.id`, "must be letters, digits, '.', '_' or '-', starting with a letter or digit");
  return {
    id,
    name: text(input.name, `${at}.name`, A2A_LIMITS.skillName, true) as string,
    description: text(input.description, `${at}.description`, A2A_LIMITS.skillDescription, false) ?? "",
    tags: list(input.tags, `${at}.tags`, A2A_LIMITS.tags, A2A_LIMITS.tag),
    examples: list(input.examples, `${at}.examples`, A2A_LIMITS.examples, A2A_LIMITS.example),
  };
}

/** A request's `a2a` → the stored field; undefined (not given) → null. Skill ids are unique. */
export function validateChannelA2a(input: ChannelA2aInput | undefined): ChannelA2a | null {
  if (input === undefined) return null;
  const skills = input.skills ?? [];
  if (skills.length > A2A_LIMITS.skills) throw invalid("a2a.skills", `may hold at most ${A2A_LIMITS.skills} skills`);
  const validated = skills.map((s, i) => skill(s, `a2a.skills[${i}]`));
  const ids = new Set<string>();
  validated.forEach((s, i) => {
    if (ids.has(s.id)) throw invalid(`a2a.skills[${i}].id`, `repeats the skill id "${s.id}"`);
    ids.add(s.id);
  });
  return {
    enabled: input.enabled ?? false,
    name: text(input.name, "a2a.name", A2A_LIMITS.name, false),
    description: text(input.description, "a2a.description", A2A_LIMITS.description, false),
    skills: validated,
  };
}

/** The field as a request carries it. */
export interface ChannelA2aForwardInput {
  url?: string | undefined;
  authHeader?: { name?: string | undefined; value?: string | undefined } | undefined;
}

/** Header names a forward may not set: the request's own framing and routing, and the trace context (ours). */
const RESERVED_HEADERS = new Set(["host", "content-length", "content-type", "transfer-encoding", "connection", "traceparent", "tracestate", "a2a-version", "a2a-extensions", "cookie"]);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/;
export const MAX_FORWARD_HEADER_VALUE = 4096;

/**
 * A request's `a2a_forward` → the stored field (docs/decisions.md#a2a-forward); undefined → null. The URL follows
 * the webhook URL's rules (`checkUrl`: absolute http(s), private targets refused unless allowed); the header is a
 * token name and a value of printable characters.
 */
export function validateA2aForward(input: ChannelA2aForwardInput | undefined, checkUrl: (url: string, field: string) => string): ChannelA2aForward | null {
  if (input === undefined) return null;
  if (input.url === undefined || input.url === "") throw new ApiError("invalid_a2a_forward", "'a2a_forward.url' is required", { details: { field: "a2a_forward.url" } });
  let url: string;
  try {
    url = checkUrl(input.url, "a2a_forward.url");
  } catch (err) {
    // The webhook URL's rules, under this field's code.
    if (!(err instanceof ApiError)) throw err;
    throw new ApiError("invalid_a2a_forward", err.message, { details: err.details, ...(err.suggestion === undefined ? {} : { suggestion: err.suggestion }) });
  }
  if (input.authHeader === undefined) return { url, authHeader: null };
  const { name, value } = input.authHeader;
  const bad = (field: string, why: string) => new ApiError("invalid_a2a_forward", `'${field}' ${why}`, { details: { field } });
  if (name === undefined || !HEADER_NAME.test(name)) throw bad("a2a_forward.auth_header.name", "must be an HTTP header name (1..64 token characters)");
  if (RESERVED_HEADERS.has(name.toLowerCase())) throw bad("a2a_forward.auth_header.name", `may not be ${name}: the forwarder sets it`);
  if (value === undefined || value === "") throw bad("a2a_forward.auth_header.value", "is required with a header name (it is never shown again)");
  if (value.length > MAX_FORWARD_HEADER_VALUE || !/^[\x20-\x7e\t]*$/.test(value)) {
    throw bad("a2a_forward.auth_header.value", `must be at most ${MAX_FORWARD_HEADER_VALUE} printable ASCII characters`);
  }
  return { url, authHeader: { name, value } };
}

/** Only a work queue can be an agent: a broadcast channel has nobody to hand a task to. */
export function checkA2aMode(a2a: ChannelA2a | null, mode: ChannelMode, forward: ChannelA2aForward | null = null): void {
  if (a2a?.enabled === true && mode !== "claimable") {
    throw invalid("a2a.enabled", "needs a claimable channel: an A2A agent hands each task to one worker");
  }
  if (forward !== null && mode !== "claimable") {
    throw new ApiError("invalid_a2a_forward", "'a2a_forward' needs a claimable channel: each task goes to the remote agent once", { details: { field: "a2a_forward" } });
  }
}
