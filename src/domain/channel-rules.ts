/**
 * A channel's fields and what each may hold (docs/decisions.md#channel-fields):
 * the pure checks of a create, taking plain values (the services map proto
 * requests to them) and throwing ApiError with the contract's 422 codes.
 */
import type { ChannelA2a, ChannelA2aForward, ChannelAccess, ChannelMode, NewChannel } from "../model/channels.js";
import { checkA2aMode, validateA2aForward, validateChannelA2a, type ChannelA2aForwardInput, type ChannelA2aInput } from "./a2a-rules.js";
import { ApiError } from "../model/errors.js";
import { validateDispatch, validateGroupConcurrency, validateLimitNames, validatePriorityAging } from "./dispatch-rules.js";
import type { JsonObject, JsonValue } from "../model/json.js";
import { schemaCost } from "./json-schema.js";
import { schemaProblemOffThread } from "./json-schema-thread.js";
import { refusedHost } from "../platform/address-policy.js";

// ---------------------------------------------------------------------------
// Bounds

export const MAX_CHANNEL_NAME_LENGTH = 200;
export const MAX_ALIAS_LENGTH = 200;
export const TTL_SECONDS = { min: 300, max: 2_592_000, default: 86_400 } as const;
export const RETENTION_DAYS = { min: 1, max: 365, default: 7 } as const;
export const MAX_MESSAGES = { min: 1, max: 1_000_000 } as const;
export const MAX_WRITES_PER_MINUTE = { min: 1, max: 1_000_000 } as const;
export const MAX_DELIVERIES = { min: 1, max: 1000 } as const;
/** Our own bound: keeps one channel's link list and the create request bounded. */
export const MAX_RELATED_CHANNELS = 100;
/** Our own bound: compiled schemas are cached per process, so their size is bounded. */
export const MAX_METADATA_SCHEMA_BYTES = 64 * 1024;
export const MAX_WEBHOOK_URL_LENGTH = 2048;
export const DISCOVERY_PAGE = { min: 1, max: 100, default: 50 } as const;

// Control, bidi-override, zero-width and line/paragraph-separator characters
// make names that look alike or render misleadingly.
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;
const UUID_SHAPED = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const codePoints = (text: string): number => [...text].length;

/** PostgreSQL cannot store U+0000 in text or jsonb; refusing it here keeps such input a 422, never a 500. */
export function hasNulChar(value: JsonValue): boolean {
  if (typeof value === "string") return value.includes("\u0000");
  if (Array.isArray(value)) return value.some(hasNulChar);
  if (typeof value === "object" && value !== null) return Object.entries(value).some(([k, v]) => k.includes("\u0000") || hasNulChar(v));
  return false;
}

/** Free text (description, pinned_message, …): anything but U+0000, stored verbatim. */
export function validateText(value: string, field: string): string {
  if (hasNulChar(value)) {
    throw new ApiError("invalid_string", `'${field}' must not contain the NUL character (U+0000)`, {
      details: { field },
      suggestion: "Remove the NUL characters from the text.",
    });
  }
  return value;
}
const isBlank = (text: string): boolean => text.trim() === "";

// ---------------------------------------------------------------------------
// Field validators (each throws the contract's code, with details.field)

/** A channel name: required, non-blank, ≤ 200 characters, nothing invisible. Stored verbatim (docs/decisions.md#strings-verbatim). */
export function validateChannelName(value: string | undefined, field = "name"): string {
  if (value === undefined || isBlank(value)) {
    throw new ApiError("missing_field", `'${field}' is required and must not be blank`, { details: { field } });
  }
  if (codePoints(value) > MAX_CHANNEL_NAME_LENGTH) {
    throw new ApiError("invalid_channel_name", `'${field}' must be at most ${MAX_CHANNEL_NAME_LENGTH} characters`, {
      details: { field },
    });
  }
  if (INVISIBLE.test(value)) {
    throw new ApiError("invalid_channel_name", `'${field}' must not contain control, bidi or zero-width characters`, {
      details: { field },
    });
  }
  return value;
}

/**
 * An alias (of a channel or an actor): required, non-blank, ≤ 200 characters,
 * nothing invisible, and not shaped like a UUID — ids are UUIDs and
 * `{identifier}` tries the id first, so such an alias could never be reached
 * or would shadow an id. Compared exactly (case-sensitive), stored verbatim.
 */
export function validateAlias(value: string | undefined, field = "alias"): string {
  if (value === undefined || isBlank(value)) {
    throw new ApiError("missing_field", `'${field}' is required and must not be blank`, { details: { field } });
  }
  if (UUID_SHAPED.test(value)) {
    throw new ApiError("invalid_string", `'${field}' must not look like a UUID: ids are UUIDs and an alias must not be mistaken for one`, {
      details: { field },
      suggestion: "Choose a readable alias such as \"build-jobs\".",
    });
  }
  if (codePoints(value) > MAX_ALIAS_LENGTH || INVISIBLE.test(value)) {
    throw new ApiError("invalid_string", `'${field}' must be at most ${MAX_ALIAS_LENGTH} visible characters`, {
      details: { field },
      suggestion: "Use a short alias without control, bidi or zero-width characters.",
    });
  }
  return value;
}

export function validateMode(value: ChannelMode | undefined, required: boolean): ChannelMode | undefined {
  if (value === undefined && required) {
    throw new ApiError("missing_field", "'mode' is required: \"broadcast\" or \"claimable\"", { details: { field: "mode" } });
  }
  return value;
}

function intInRange(
  value: number,
  range: { min: number; max: number },
  code: "invalid_ttl_seconds" | "invalid_retention_days" | "invalid_max_messages" | "invalid_max_writes_per_minute" | "invalid_max_deliveries",
  field: string,
): number {
  if (!Number.isInteger(value) || value < range.min || value > range.max) {
    throw new ApiError(code, `'${field}' must be an integer from ${range.min} to ${range.max}`, { details: { field } });
  }
  return value;
}

export const validateTtlSeconds = (value: number): number => intInRange(value, TTL_SECONDS, "invalid_ttl_seconds", "ttl_seconds");
export const validateRetentionDays = (value: number): number =>
  intInRange(value, RETENTION_DAYS, "invalid_retention_days", "retention_days");
export const validateMaxMessages = (value: number): number => intInRange(value, MAX_MESSAGES, "invalid_max_messages", "max_messages");
export const validateMaxWritesPerMinute = (value: number): number =>
  intInRange(value, MAX_WRITES_PER_MINUTE, "invalid_max_writes_per_minute", "max_writes_per_minute");
export const validateMaxDeliveries = (value: number): number => intInRange(value, MAX_DELIVERIES, "invalid_max_deliveries", "max_deliveries");

/** Where webhooks may point: the outbound rule delivery applies (docs/decisions.md#outbound-addresses). */
export interface WebhookTargets {
  /** AGENTBUS_ALLOW_PRIVATE_TARGETS: delivery may reach loopback and private addresses, so a saved URL may name them. */
  allowPrivateTargets: boolean;
}

const PRIVATE_TARGET_SUGGESTION =
  "Use a URL whose host is public: webhooks are never sent to loopback, private or link-local addresses (unless the operator sets AGENTBUS_ALLOW_PRIVATE_TARGETS=true).";

/**
 * An absolute http(s) URL, stored verbatim. Unless private targets are
 * allowed, a host that delivery would refuse whatever DNS says (a loopback or
 * private IP literal, localhost) is refused now, rather than accepted and
 * then failing every delivery; other names are checked when delivery
 * resolves them.
 */
export function validateWebhookUrl(value: string, targets: WebhookTargets, field = "webhook_url"): string {
  const fail = (why: string) =>
    new ApiError("invalid_webhook_url", `'${field}' ${why}`, { details: { field } });
  if (codePoints(value) > MAX_WEBHOOK_URL_LENGTH) throw fail(`must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`);
  // The URL parser forgives surrounding spaces and embedded tabs; we store verbatim, so refuse them.
  if (value !== value.trim() || INVISIBLE.test(value)) throw fail("must not contain spaces or control characters");
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw fail("must be an absolute http:// or https:// URL");
  }
  if ((url.protocol !== "http:" && url.protocol !== "https:") || url.hostname === "") {
    throw fail("must be an absolute http:// or https:// URL");
  }
  const range = targets.allowPrivateTargets ? undefined : refusedHost(url.hostname);
  if (range !== undefined) {
    throw new ApiError("invalid_webhook_url", `'${field}' points at ${url.hostname} (${range}), a non-public address that webhooks are never delivered to`, {
      details: { field, range },
      suggestion: PRIVATE_TARGET_SUGGESTION,
    });
  }
  return value;
}

/** A signing secret: any non-empty string (an empty one would sign with nothing). */
export function validateWebhookSecret(value: string, field = "webhook_secret"): string {
  if (value === "") {
    throw new ApiError("invalid_string", `'${field}' must be a non-empty string, or null for no signature`, {
      details: { field },
      suggestion: "Send a random secret of at least 16 characters, or null.",
    });
  }
  return validateText(value, field);
}

const SCHEMA_SUGGESTION =
  "Send a JSON Schema object, e.g. {\"type\":\"object\",\"properties\":{\"priority\":{\"type\":\"integer\"}}}, or {} to accept any metadata.";

const schemaError = (why: string) =>
  new ApiError("invalid_object", `'metadata_schema' ${why}`, { details: { field: "metadata_schema" }, suggestion: SCHEMA_SUGGESTION });

/**
 * A metadata schema's cheap checks: its size (bytes, and values with every
 * $ref expanded, which bounds what compiling and validating can cost), and a
 * top-level `type`, if any, that allows an object — metadata is always an
 * object, so any other type would refuse every message. Whether it compiles
 * (with the same validator messages are checked with) is checkMetadataSchema,
 * off the event loop.
 */
export function validateMetadataSchema(value: JsonObject): JsonObject {
  const fail = schemaError;
  if (Buffer.byteLength(JSON.stringify(value)) > MAX_METADATA_SCHEMA_BYTES) {
    throw fail(`must be at most ${MAX_METADATA_SCHEMA_BYTES} bytes of JSON`);
  }
  if (hasNulChar(value)) throw fail("must not contain the NUL character (U+0000)");
  if (Object.keys(value).length === 0) return value;
  const type = value.type;
  if (type !== undefined) {
    const types = Array.isArray(type) ? type : [type];
    if (!types.includes("object")) throw fail("must describe an object (metadata is always a JSON object), so its 'type' must allow \"object\"");
  }
  if (value.$async !== undefined) throw fail("must not be an asynchronous schema ($async)");
  const cost = schemaCost(value);
  if (typeof cost === "string") throw fail(cost);
  return value;
}

/**
 * Compiles the schema on the schema thread, in turn with other keys' jobs
 * (`keyId`: whose turn it takes); invalid_object when it does not compile (or is too costly to).
 */
export async function checkMetadataSchema(keyId: string, value: JsonObject | undefined): Promise<void> {
  if (value === undefined || Object.keys(value).length === 0) return;
  const problem = await schemaProblemOffThread(keyId, value);
  if (problem !== undefined) throw schemaError(problem);
}

/** Channel ids or aliases: non-blank, de-duplicated (order kept), at most MAX_RELATED_CHANNELS. */
export function validateRelatedChannels(refs: readonly string[]): string[] {
  const out: string[] = [];
  refs.forEach((ref, i) => {
    if (isBlank(ref) || hasNulChar(ref)) {
      throw new ApiError("invalid_related_channels", `'related_channels[${i}]' must be a channel id or alias`, {
        details: { field: "related_channels" },
      });
    }
    if (!out.includes(ref)) out.push(ref);
  });
  if (out.length > MAX_RELATED_CHANNELS) {
    throw new ApiError("invalid_related_channels", `'related_channels' may name at most ${MAX_RELATED_CHANNELS} channels`, {
      details: { field: "related_channels" },
    });
  }
  return out;
}

// ---------------------------------------------------------------------------
// Create

/** A create request in domain terms; undefined = not given. */
export interface CreateChannelInput {
  name: string | undefined;
  mode: ChannelMode | undefined;
  access: ChannelAccess | undefined;
  discoverable: boolean | undefined;
  description: string | undefined;
  metadataSchema: JsonObject | undefined;
  pinnedMessage: string | undefined;
  webhookUrl: string | undefined;
  webhookSecret: string | undefined;
  relatedChannels: readonly string[];
  ttlSeconds: number | undefined;
  retentionDays: number | undefined;
  maxMessages: number | undefined;
  maxWritesPerMinute: number | undefined;
  maxDeliveries: number | undefined;
  /** Id, alias or the caller's name of the dead-letter channel. */
  deadLetterChannel: string | undefined;
  groupConcurrency?: number | undefined;
  /** "fifo" or "fair" as sent; anything else is refused. */
  dispatch?: string | undefined;
  priorityAgingSeconds?: number | undefined;
  /** Names of the caller's shared limits. */
  limits?: readonly string[] | undefined;
  /** Publishes a claimable channel as an A2A agent. */
  a2a?: ChannelA2aInput | undefined;
  /** Forwards a claimable channel's work to a remote A2A agent. */
  a2aForward?: ChannelA2aForwardInput | undefined;
}

/** A create request naming only `fields`, every other field left out as a client leaving it out would: for use cases that create channels themselves. */
export const channelInput = (fields: Partial<CreateChannelInput>): CreateChannelInput => ({
  name: undefined,
  mode: undefined,
  access: undefined,
  discoverable: undefined,
  description: undefined,
  metadataSchema: undefined,
  pinnedMessage: undefined,
  webhookUrl: undefined,
  webhookSecret: undefined,
  relatedChannels: [],
  ttlSeconds: undefined,
  retentionDays: undefined,
  maxMessages: undefined,
  maxWritesPerMinute: undefined,
  maxDeliveries: undefined,
  deadLetterChannel: undefined,
  ...fields,
});

export interface ChannelDefaults extends Partial<WebhookTargets> {
  /** Whether an open channel is discoverable when its creator does not say (AGENTBUS_DEFAULT_DISCOVERABLE). */
  defaultDiscoverable: boolean;
}

/** Absent, private targets are refused, as delivery refuses them by default. */
export const targetsOf = (settings: Partial<WebhookTargets>): WebhookTargets => ({ allowPrivateTargets: settings.allowPrivateTargets ?? false });

/** Validates a create request in field order and applies the defaults (docs/decisions.md#channel-fields). */
export function validateCreateChannel(input: CreateChannelInput, defaults: ChannelDefaults): NewChannel {
  const name = validateChannelName(input.name);
  const mode = validateMode(input.mode, true) as ChannelMode;
  const access = input.access ?? "open";
  return {
    name,
    mode,
    access,
    discoverable: input.discoverable ?? (access === "open" ? defaults.defaultDiscoverable : false),
    description: validateText(input.description ?? "", "description"),
    metadataSchema: validateMetadataSchema(input.metadataSchema ?? {}),
    pinnedMessage: input.pinnedMessage === undefined ? null : validateText(input.pinnedMessage, "pinned_message"),
    webhookUrl: input.webhookUrl === undefined ? null : validateWebhookUrl(input.webhookUrl, targetsOf(defaults)),
    webhookSecret: input.webhookSecret === undefined ? null : validateWebhookSecret(input.webhookSecret),
    relatedChannels: validateRelatedChannels(input.relatedChannels),
    ttlSeconds: input.ttlSeconds === undefined ? TTL_SECONDS.default : validateTtlSeconds(input.ttlSeconds),
    retentionDays: input.retentionDays === undefined ? RETENTION_DAYS.default : validateRetentionDays(input.retentionDays),
    maxMessages: input.maxMessages === undefined ? null : validateMaxMessages(input.maxMessages),
    maxWritesPerMinute: input.maxWritesPerMinute === undefined ? null : validateMaxWritesPerMinute(input.maxWritesPerMinute),
    maxDeliveries: input.maxDeliveries === undefined ? null : validateMaxDeliveries(input.maxDeliveries),
    deadLetterChannelId: null,
    groupConcurrency: validateGroupConcurrency(input.groupConcurrency),
    dispatch: validateDispatch(input.dispatch),
    priorityAgingSeconds: validatePriorityAging(input.priorityAgingSeconds),
    limits: validateLimitNames(input.limits),
    limitIds: [],
    ...checkedA2a(validateChannelA2a(input.a2a), validateA2aForward(input.a2aForward, (url, field) => validateWebhookUrl(url, targetsOf(defaults), field)), mode),
  };
}

const checkedA2a = (a2a: ChannelA2a | null, a2aForward: ChannelA2aForward | null, mode: ChannelMode) => {
  checkA2aMode(a2a, mode, a2aForward);
  return { a2a, a2aForward };
};

// ---------------------------------------------------------------------------
// Update
