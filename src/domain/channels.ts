/**
 * Channels: validation and defaults of create and update
 * (docs/decisions.md#channel-fields, #owner-only, #list-pages), and the
 * Channels use cases built on them. The pure functions at the top take plain
 * values (the services map proto requests to them) and throw ApiError with the
 * contract's 422 codes.
 */
import type { Caller } from "../model/caller.js";
import { assertCanUse, assertOwner, namedChannel } from "./channel.js";
import {
  type ChannelAccess,
  type ChannelChanges,
  type ChannelMode,
  type ChannelPatch,
  type ChannelRecord,
  type ChannelResource,
  type ChannelSummary,
  type ChannelView,
  type NewChannel,
} from "../model/channels.js";
import { nameKey } from "./labels.js";
import { camel, updateMaskParser } from "./update-mask.js";
import { ApiError } from "../model/errors.js";
import { quotaExceeded } from "./quotas.js";
import { limitIdsNamed, validateDispatch, validateGroupConcurrency, validateLimitNames, validatePriorityAging } from "./dispatch-rules.js";
import type { JsonObject, JsonValue } from "../model/json.js";
import { schemaCost } from "./json-schema.js";
import { schemaProblemOffThread } from "./json-schema-thread.js";
import { formatTimestamp, parseTimestamp, type Micros } from "../model/time.js";
import { refusedHost } from "../platform/address-policy.js";
import type { ChannelStore } from "../ports/channels.js";


// ---------------------------------------------------------------------------
// Limits

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
const targetsOf = (settings: Partial<WebhookTargets>): WebhookTargets => ({ allowPrivateTargets: settings.allowPrivateTargets ?? false });

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
  };
}

// ---------------------------------------------------------------------------
// Update

/** The ChannelUpdate fields, by their proto (REST) names, in declaration order. */
export const UPDATABLE_FIELDS = [
  "name",
  "mode",
  "access",
  "discoverable",
  "description",
  "metadata_schema",
  "pinned_message",
  "related_channels",
  "retention_days",
  "max_messages",
  "max_writes_per_minute",
  "paused",
  "webhook_url",
  "webhook_secret",
  "max_deliveries",
  "dead_letter_channel",
  "group_concurrency",
  "dispatch",
  "priority_aging_seconds",
  "limits",
] as const;
export type UpdatableField = (typeof UPDATABLE_FIELDS)[number];

/** An update request in domain terms: the create fields but the TTL, and the pause; undefined = unset (a masked unset field means "clear"). */
export type ChannelUpdateInput = Omit<CreateChannelInput, "ttlSeconds"> & { paused: boolean | undefined };

/** The mask's paths as ChannelUpdate fields (proto or JSON names), de-duplicated; 422 invalid_update_mask naming the others. */
export const parseUpdateMask = updateMaskParser(UPDATABLE_FIELDS, "ChannelUpdate");

/** The fields an update without a mask applies: those that are set (gRPC callers without a mask). */
function fieldsSetIn(input: ChannelUpdateInput): UpdatableField[] {
  return UPDATABLE_FIELDS.filter((field) => {
    if (field === "related_channels") return input.relatedChannels.length > 0;
    if (field === "limits") return (input.limits?.length ?? 0) > 0;
    return input[camel(field) as Exclude<keyof ChannelUpdateInput, "relatedChannels" | "limits">] !== undefined;
  });
}

const cannotClear = (code: "invalid_mode" | "invalid_access" | "invalid_discoverable" | "invalid_paused" | "invalid_retention_days", field: string, expected: string) =>
  new ApiError(code, `'${field}' cannot be cleared; send ${expected}`, { details: { field } });

/**
 * Builds the patch of an update. With a mask (always, over REST: the body's
 * keys), exactly the named fields are applied and a named field that is unset
 * (null in JSON) is cleared: pinned_message, webhook_url, webhook_secret,
 * max_messages, max_writes_per_minute, max_deliveries and dead_letter_channel become null; description becomes "",
 * metadata_schema {} and related_channels [] (their defaults); the rest cannot
 * be cleared (422). Without a mask (gRPC callers that send none), the fields
 * that are set are applied — proto3 cannot tell an empty related_channels list
 * from an unset one, so clearing it over gRPC needs a mask.
 */
export function buildChannelPatch(input: ChannelUpdateInput, mask: readonly string[] | undefined, targets: Partial<WebhookTargets> = {}): ChannelPatch {
  const fields = mask === undefined ? fieldsSetIn(input) : parseUpdateMask(mask);
  const patch: ChannelPatch = {};
  for (const field of fields) {
    switch (field) {
      case "name":
        patch.name = validateChannelName(input.name);
        break;
      case "mode":
        if (input.mode === undefined) throw cannotClear("invalid_mode", field, "\"broadcast\" or \"claimable\"");
        patch.mode = input.mode;
        break;
      case "access":
        if (input.access === undefined) throw cannotClear("invalid_access", field, "\"open\" or \"restricted\"");
        patch.access = input.access;
        break;
      case "discoverable":
        if (input.discoverable === undefined) throw cannotClear("invalid_discoverable", field, "true or false");
        patch.discoverable = input.discoverable;
        break;
      case "description":
        patch.description = validateText(input.description ?? "", "description");
        break;
      case "metadata_schema":
        patch.metadataSchema = validateMetadataSchema(input.metadataSchema ?? {});
        break;
      case "pinned_message":
        patch.pinnedMessage = input.pinnedMessage === undefined ? null : validateText(input.pinnedMessage, "pinned_message");
        break;
      case "related_channels":
        patch.relatedChannels = validateRelatedChannels(input.relatedChannels);
        break;
      case "retention_days":
        if (input.retentionDays === undefined) throw cannotClear("invalid_retention_days", field, `an integer from ${RETENTION_DAYS.min} to ${RETENTION_DAYS.max}`);
        patch.retentionDays = validateRetentionDays(input.retentionDays);
        break;
      case "max_messages":
        patch.maxMessages = input.maxMessages === undefined ? null : validateMaxMessages(input.maxMessages);
        break;
      case "max_writes_per_minute":
        patch.maxWritesPerMinute = input.maxWritesPerMinute === undefined ? null : validateMaxWritesPerMinute(input.maxWritesPerMinute);
        break;
      case "paused":
        if (input.paused === undefined) throw cannotClear("invalid_paused", field, "true or false");
        patch.paused = input.paused;
        break;
      case "webhook_url":
        patch.webhookUrl = input.webhookUrl === undefined ? null : validateWebhookUrl(input.webhookUrl, targetsOf(targets));
        break;
      case "webhook_secret":
        patch.webhookSecret = input.webhookSecret === undefined ? null : validateWebhookSecret(input.webhookSecret);
        break;
      case "max_deliveries":
        patch.maxDeliveries = input.maxDeliveries === undefined ? null : validateMaxDeliveries(input.maxDeliveries);
        break;
      case "dead_letter_channel":
        patch.deadLetterChannel = input.deadLetterChannel ?? null;
        break;
      case "group_concurrency":
        patch.groupConcurrency = validateGroupConcurrency(input.groupConcurrency);
        break;
      case "dispatch":
        patch.dispatch = validateDispatch(input.dispatch);
        break;
      case "priority_aging_seconds":
        patch.priorityAgingSeconds = validatePriorityAging(input.priorityAgingSeconds);
        break;
      case "limits":
        patch.limits = validateLimitNames(input.limits);
        break;
    }
  }
  return patch;
}

/** Key-order-insensitive JSON equality (jsonb does not keep key order). */
export function sameJson(a: JsonValue, b: JsonValue): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => sameJson(x, b[i] as JsonValue));
  }
  const ka = Object.keys(a), kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && sameJson(a[k] as JsonValue, b[k] as JsonValue));
}

/** The columns a patch actually changes on `current` (scalar fields only; links are compared separately). */
export function changedColumns(current: ChannelRecord, patch: ChannelPatch, deadLetterChannelId?: string | null, limitIds?: string[]): ChannelChanges {
  const changes: ChannelChanges = {};
  const differs = <K extends keyof ChannelChanges>(key: K, value: ChannelChanges[K] | undefined, now: ChannelChanges[K]) => {
    if (value !== undefined && value !== now) changes[key] = value;
  };
  differs("name", patch.name, current.name);
  differs("mode", patch.mode, current.mode);
  differs("access", patch.access, current.access);
  differs("discoverable", patch.discoverable, current.discoverable);
  differs("description", patch.description, current.description);
  differs("pinnedMessage", patch.pinnedMessage, current.pinnedMessage);
  differs("retentionDays", patch.retentionDays, current.retentionDays);
  differs("maxMessages", patch.maxMessages, current.maxMessages);
  differs("maxWritesPerMinute", patch.maxWritesPerMinute, current.maxWritesPerMinute);
  differs("paused", patch.paused, current.paused);
  differs("webhookUrl", patch.webhookUrl, current.webhookUrl);
  differs("webhookSecret", patch.webhookSecret, current.webhookSecret);
  differs("maxDeliveries", patch.maxDeliveries, current.maxDeliveries);
  differs("deadLetterChannelId", deadLetterChannelId, current.deadLetterChannelId);
  differs("groupConcurrency", patch.groupConcurrency, current.groupConcurrency);
  differs("dispatch", patch.dispatch, current.dispatch);
  differs("priorityAgingSeconds", patch.priorityAgingSeconds, current.priorityAgingSeconds);
  if (limitIds !== undefined && !sameSet(limitIds, current.limitIds)) changes.limitIds = limitIds;
  if (patch.metadataSchema !== undefined && !sameJson(patch.metadataSchema, current.metadataSchema)) {
    changes.metadataSchema = patch.metadataSchema;
  }
  return changes;
}

// ---------------------------------------------------------------------------
// Discovery

export interface DiscoveryQuery {
  cursor: string | undefined;
  limit: number | undefined;
}

/** docs/decisions.md#list-pages: an out-of-range numeric limit is clamped into 1..100; default 50. */
/** A page of channel summaries, newest first; the cursor is the last one's created_at. */
async function summaryPage(query: DiscoveryQuery, fetch: (before: Micros | undefined, limit: number) => Promise<ChannelSummary[]>): Promise<DiscoveryPage> {
  const limit = clampDiscoveryLimit(query.limit);
  const data = await fetch(parseDiscoveryCursor(query.cursor), limit);
  const last = data.at(-1);
  return { data, limit, nextCursor: data.length === limit && last ? formatTimestamp(last.createdAt) : null };
}

export function clampDiscoveryLimit(limit: number | undefined): number {
  if (limit === undefined) return DISCOVERY_PAGE.default;
  return Math.min(DISCOVERY_PAGE.max, Math.max(DISCOVERY_PAGE.min, Math.trunc(limit)));
}

/** The discovery cursor: a next_cursor (any RFC 3339 timestamp); "" or absent = the newest page; else 422 invalid_cursor. */
export function parseDiscoveryCursor(cursor: string | undefined): Micros | undefined {
  if (cursor === undefined || cursor === "") return undefined;
  const micros = parseTimestamp(cursor);
  if (micros === undefined) {
    throw new ApiError("invalid_cursor", `'cursor' must be a timestamp such as 2026-11-21T03:14:39.743512Z, not ${JSON.stringify(cursor)}`, {
      details: { field: "cursor" },
      suggestion: "Pass the next_cursor of the previous page unchanged, or omit cursor to start from the newest channels.",
    });
  }
  return micros;
}

// ---------------------------------------------------------------------------
// Resources

export interface DiscoveryPage {
  data: ChannelSummary[];
  limit: number;
  nextCursor: string | null;
}

// ---------------------------------------------------------------------------
// Use cases

export class Channels {
  constructor(
    private readonly store: ChannelStore,
    private readonly defaults: ChannelDefaults,
    /** The channel quota per key (docs/decisions.md#quotas); none by default. */
    private readonly quotas?: { channelLimit(caller: Caller): Promise<number | null> },
  ) {}

  /** Creates a channel owned by the caller's key, which becomes its first member. */
  async create(caller: Caller, input: CreateChannelInput): Promise<ChannelResource> {
    const channel = validateCreateChannel(input, this.defaults);
    await checkMetadataSchema(caller.keyId, channel.metadataSchema);
    const relatedIds = await this.resolveRelated(channel.relatedChannels);
    if (input.deadLetterChannel !== undefined) channel.deadLetterChannelId = await this.resolveDeadLetterChannel(caller, input.deadLetterChannel, undefined);
    channel.limitIds = await limitIdsNamed(channel.limits, (names) => this.store.limitIds(caller.keyId, names));
    const limit = (await this.quotas?.channelLimit(caller)) ?? null;
    const created = await this.store.create(channel, relatedIds, caller, limit);
    if (created === "quota_exceeded") throw quotaExceeded("channels", limit!, limit!, 1);
    // Written and read in one transaction: a miss would mean it was deleted concurrently.
    if (!created) throw channelNotFound(channel.name);
    return created;
  }

  /** Any key for an open channel; the owner and members for a restricted one. */
  async get(caller: Caller, identifier: string): Promise<ChannelResource> {
    const found = namedChannel(await this.store.findResource(identifier, caller.keyId), identifier);
    assertCanUse(found, caller);
    return found;
  }

  /** Discoverable channels of any access, newest first, paged by created_at (unique). */
  async discover(caller: Caller, query: DiscoveryQuery): Promise<DiscoveryPage> {
    return summaryPage(query, (before, limit) => this.store.discover(caller.keyId, before, limit));
  }

  /** The caller's key's channels: created by it or joined, newest first, in pages like discovery's. */
  async listMine(caller: Caller, query: DiscoveryQuery): Promise<DiscoveryPage> {
    return summaryPage(query, (before, limit) => this.store.listForKey(caller.keyId, before, limit));
  }

  /** Owner only (docs/decisions.md#owner-only). Applies the patch; updated_at moves only when something changed. */
  async update(caller: Caller, identifier: string, input: ChannelUpdateInput, mask: readonly string[] | undefined): Promise<ChannelResource> {
    const patch = buildChannelPatch(input, mask, this.defaults);
    await checkMetadataSchema(caller.keyId, patch.metadataSchema);
    const view = await this.ownedChannel(caller, identifier);
    const relatedIds =
      patch.relatedChannels === undefined ? undefined : (await this.resolveRelated(patch.relatedChannels)).filter((id) => id !== view.id);
    const deadLetterChannelId =
      patch.deadLetterChannel === undefined ? undefined : patch.deadLetterChannel === null ? null : await this.resolveDeadLetterChannel(caller, patch.deadLetterChannel, view.id);
    const limitIds = patch.limits === undefined ? undefined : await limitIdsNamed(patch.limits, (names) => this.store.limitIds(caller.keyId, names));
    const updated = await this.store.update(view.id, (current) => ({
      changes: changedColumns(current.record, patch, deadLetterChannelId, limitIds),
      relatedIds: relatedIds !== undefined && !sameSet(relatedIds, current.relatedIds) ? relatedIds : undefined,
    }));
    if (!updated) throw channelNotFound(identifier);
    return updated;
  }

  /** Owner only. Messages, history, members, links and aliases go with it; the aliases are free again. */
  async delete(caller: Caller, identifier: string): Promise<void> {
    const view = await this.ownedChannel(caller, identifier);
    await this.store.delete(view.id);
  }

  /**
   * Owner only. One global namespace: an alias of another channel → 409
   * alias_conflict; an alias the channel already has → 201 again (idempotent,
   * so a retried request does not fail).
   */
  async addAlias(caller: Caller, identifier: string, alias: string | undefined): Promise<ChannelResource> {
    const valid = validateAlias(alias);
    const view = await this.ownedChannel(caller, identifier);
    const outcome = await this.store.addAlias(view.id, valid, nameKey(valid));
    if (outcome === "conflict") {
      throw new ApiError("alias_conflict", `The alias '${valid}', or one that looks the same (case, spacing, full-width forms), is already taken`, { details: { alias: valid } });
    }
    // The channel was deleted concurrently.
    if (!outcome) throw channelNotFound(view.id);
    return outcome;
  }

  /** Owner only. The alias must be one the channel holds, exactly as it holds it. */
  async removeAlias(caller: Caller, identifier: string, alias: string): Promise<ChannelResource> {
    const view = await this.ownedChannel(caller, identifier);
    const outcome = await this.store.removeAlias(view.id, alias);
    if (outcome === "not_held") {
      throw new ApiError("alias_not_found", `The channel holds no alias '${alias}'`, { details: { alias } });
    }
    if (!outcome) throw channelNotFound(view.id);
    return outcome;
  }

  private async ownedChannel(caller: Caller, identifier: string): Promise<ChannelView> {
    const view = namedChannel(await this.store.findView(identifier, caller.keyId), identifier);
    assertOwner(view, caller);
    return view;
  }

  /**
   * The dead-letter channel's id (docs/decisions.md#dead-letters): resolved like
   * an {identifier}, it must be a channel the caller's key owns and not the
   * channel itself, else 422 invalid_dead_letter_channel. Unknown channels and
   * other keys' channels get the same answer, so the check reveals nothing.
   */
  private async resolveDeadLetterChannel(caller: Caller, identifier: string, selfId: string | undefined): Promise<string> {
    const found = await this.store.findView(identifier, caller.keyId);
    const invalid = (why: string) =>
      new ApiError("invalid_dead_letter_channel", `'dead_letter_channel' ${why}`, { details: { field: "dead_letter_channel", channel: identifier } });
    if (found === undefined || found.createdByKeyId !== caller.keyId) throw invalid("must name a channel your key owns");
    if (found.id === selfId) throw invalid("cannot be the channel itself");
    return found.id;
  }

  /** Channel ids for ids or aliases, in order, de-duplicated; 404 channel_not_found naming the first unknown one. */
  private async resolveRelated(refs: readonly string[]): Promise<string[]> {
    if (refs.length === 0) return [];
    const resolved = await this.store.resolveRefs(refs);
    const ids: string[] = [];
    refs.forEach((ref, i) => {
      const id = resolved[i];
      if (id === undefined || id === null) {
        throw new ApiError("channel_not_found", `Related channel '${ref}' not found`, { details: { field: "related_channels", channel: ref } });
      }
      if (!ids.includes(id)) ids.push(id);
    });
    return ids;
  }
}

const channelNotFound = (identifier: string) => new ApiError("channel_not_found", `Channel '${identifier}' not found`);

const sameSet = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x) => b.includes(x));
