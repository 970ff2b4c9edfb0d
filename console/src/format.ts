/** How times, states and enums read on the page. */
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { ChannelAccess, ChannelMode } from "../../gen/agentbus/v1/channel_pb.js";
import { MessageState as ServiceState, type Message } from "../../gen/agentbus/v1/message_pb.js";

export const toDate = (ts: Timestamp | undefined): Date | undefined => (ts === undefined ? undefined : timestampDate(ts));

const UNITS: Array<[Intl.RelativeTimeFormatUnit, number]> = [
  ["day", 86_400],
  ["hour", 3_600],
  ["minute", 60],
  ["second", 1],
];
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });

/** "3 minutes ago", "in 20 seconds". */
export function relativeTime(date: Date, now = Date.now()): string {
  const seconds = Math.round((date.getTime() - now) / 1000);
  if (Math.abs(seconds) < 5) return "just now";
  for (const [unit, size] of UNITS) {
    if (Math.abs(seconds) >= size || unit === "second") return relative.format(Math.trunc(seconds / size), unit);
  }
  return date.toISOString();
}

export const exactTime = (date: Date): string => date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });

export const modeName = (mode: ChannelMode): string => (mode === ChannelMode.CLAIMABLE ? "claimable" : "broadcast");
export const accessName = (access: ChannelAccess): string => (access === ChannelAccess.RESTRICTED ? "restricted" : "open");

/** Channel lists count a channel's messages only this far: the service stops there, so the number means "at least". */
export const COUNT_CAP = 1000;

/** A channel list's count: "1000+" when the service stopped counting. */
export const countText = (n: number): string => (n >= COUNT_CAP ? `${COUNT_CAP}+` : String(n));

export type MessageState = "acknowledged" | "in flight" | "delayed" | "ready" | "posted" | "dead-lettered" | "expired" | "cancelled" | "blocked" | "waiting";

/** The states the service decides that no clock in the page can change: shown as it says. */
const SETTLED: Partial<Record<ServiceState, MessageState>> = {
  [ServiceState.DEAD_LETTERED]: "dead-lettered",
  [ServiceState.EXPIRED]: "expired",
  [ServiceState.CANCELLED]: "cancelled",
  [ServiceState.BLOCKED]: "blocked",
  [ServiceState.WAITING]: "waiting",
};

/**
 * Where a message stands: the same words the queue statistics use. The
 * service's state (Message.state) where it is settled; otherwise worked out
 * here, so a delay running out or a claim made in this page shows at once.
 */
export function messageState(message: Message, claimable: boolean, now = Date.now()): MessageState {
  if (message.acknowledgedBy.length > 0) return "acknowledged";
  const settled = SETTLED[message.state];
  if (settled !== undefined) return settled;
  if (message.claimedBy !== undefined && message.claimedBy.id !== "") return "in flight";
  const available = toDate(message.availableAt);
  if (available !== undefined && available.getTime() > now) return "delayed";
  return claimable ? "ready" : "posted";
}

/** Who posted a message, as people know them: the posting key's agent label (the key id only if a label is missing). */
export const authorName = (message: Message): string => message.authorLabel || message.authorKeyId;

/** The actor the poster named, if any: a registered actor's name, or the free-text actor_label. */
export const actorOf = (message: Message): string | undefined => message.actor?.name || message.actorLabel || undefined;

/** Priorities run from 1, the most urgent, to 5; a message posted without one has 3. */
export const DEFAULT_PRIORITY = 3;
export const PRIORITIES = [1, 2, 3, 4, 5] as const;

/** A priority's hover text. */
export const priorityTitle = (priority: number): string => `Priority ${priority} of 1 (most urgent) to 5 (least)${priority === DEFAULT_PRIORITY ? ", the default" : ""}`;

/** An actor that claimed or acknowledged: its name (a key's default actor is named after its label). */
export const refName = (ref: { id: string; name: string }): string => ref.name || ref.id;
