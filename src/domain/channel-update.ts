/**
 * Changing a channel (docs/decisions.md#channel-fields, #owner-only): which
 * fields an update names, the checked patch they make, and the columns that
 * actually change.
 */
import type { ChannelChanges, ChannelPatch, ChannelRecord } from "../model/channels.js";
import { camel, updateMaskParser } from "./update-mask.js";
import { ApiError } from "../model/errors.js";
import { validateDispatch, validateGroupConcurrency, validateLimitNames, validatePriorityAging } from "./dispatch-rules.js";
import { validateA2aForward, validateChannelA2a } from "./a2a-rules.js";
import type { JsonValue } from "../model/json.js";
import {
  RETENTION_DAYS,
  targetsOf,
  validateChannelName,
  validateMaxDeliveries,
  validateMaxMessages,
  validateMaxWritesPerMinute,
  validateMetadataSchema,
  validateRelatedChannels,
  validateRetentionDays,
  validateText,
  validateWebhookSecret,
  validateWebhookUrl,
  type CreateChannelInput,
  type WebhookTargets,
} from "./channel-rules.js";

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
  "a2a",
  "a2a_forward",
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
      case "a2a":
        patch.a2a = validateChannelA2a(input.a2a);
        break;
      case "a2a_forward":
        patch.a2aForward = validateA2aForward(input.a2aForward, (url, name) => validateWebhookUrl(url, targetsOf(targets), name));
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
  if (patch.a2a !== undefined && !sameJson(patch.a2a, current.a2a)) changes.a2a = patch.a2a;
  if (patch.a2aForward !== undefined && !sameJson(patch.a2aForward, current.a2aForward)) changes.a2aForward = patch.a2aForward;
  if (patch.metadataSchema !== undefined && !sameJson(patch.metadataSchema, current.metadataSchema)) {
    changes.metadataSchema = patch.metadataSchema;
  }
  return changes;
}

/** The same ids, in any order. */
export const sameSet = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x) => b.includes(x));
