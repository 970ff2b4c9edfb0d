/** REST helpers for the membership tests: members, invitations, access requests, channel events. */
import { expect } from "vitest";
import { MICROS_PER_SECOND, parseTimestamp } from "../../src/model/time.js";
import { createChannel } from "./fixtures.js";
import { mintKey, rest, type JsonResponse } from "./server.js";

export interface MemberJson {
  id: string;
  channel_id: string;
  key_id: string;
  agent_label: string;
  granted_at: string;
  granted_via_invitation_id: string | null;
}

export interface InvitationJson {
  id: string;
  owner_id: string;
  created_by_key_id: string;
  created_at: string;
  expires_at: string;
  revoked_at: string | null;
  active: boolean;
  channel: { id: string; name: string; mode: string; description: string };
  state: "active" | "revoked" | "expired" | "invalidated";
  uses: number;
}

export interface InvitationsPageJson {
  data: InvitationJson[];
  limit: number;
  next_cursor: string | null;
}

export interface AccessRequestJson {
  id: string;
  channel_id: string;
  requester_key_id: string;
  reason: string;
  status: string;
  created_at: string;
}

export interface EventJson {
  id: string;
  channel_id: string;
  event_type: string;
  actor_key_id: string;
  subject_key_id: string | null;
  invitation_id: string | null;
  metadata: Record<string, unknown>;
  created_at: string;
  expires_at: string;
}

export interface EventsPageJson {
  data: EventJson[];
  limit: number;
  next_cursor: string | null;
}

export interface ErrorJson {
  error: string;
  message: string;
  suggestion?: string;
  [key: string]: unknown;
}

export const TIMESTAMP_6 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Invitations and channel events live for days; their timestamps are compared in microseconds. */
export const DAY_MICROS = 24 * 60 * 60 * MICROS_PER_SECOND;
export const micros = (ts: string): number => parseTimestamp(ts) as number;

export const keyIdOf = (key: string): string => key.split(".")[0] as string;

/** Asserts a refusal: status, catalog code and a non-empty suggestion. */
export function expectError(res: JsonResponse<unknown>, status: number, code: string): ErrorJson {
  const body = res.body as ErrorJson;
  expect(res.status, JSON.stringify(body)).toBe(status);
  expect(body.error).toBe(code);
  expect(body.suggestion).toEqual(expect.any(String));
  expect(body.suggestion?.length).toBeGreaterThan(0);
  return body;
}

export async function addMember(base: string, ownerKey: string, channel: string, keyId: string): Promise<MemberJson> {
  const res = await rest<MemberJson>(base, "POST", `/v1/channels/${channel}/members`, { key: ownerKey, body: { key_id: keyId } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

/** A fresh owner key and a restricted channel it owns. */
export async function restrictedChannel(base: string): Promise<{ owner: string; ch: string }> {
  const owner = await mintKey(base);
  const ch = await createChannel(base, owner, { access: "restricted" });
  return { owner, ch };
}

/** A restricted channel whose owner has added one other fresh key as a member. */
export async function restrictedChannelWithMember(base: string): Promise<{ owner: string; member: string; ch: string }> {
  const { owner, ch } = await restrictedChannel(base);
  const member = await mintKey(base);
  await addMember(base, owner, ch, keyIdOf(member));
  return { owner, member, ch };
}

export async function createInvitation(base: string, key: string, channel: string): Promise<InvitationJson> {
  const res = await rest<InvitationJson>(base, "POST", `/v1/channels/${channel}/invitations`, { key, body: {} });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

/** GET /v1/channel-invitations/{id}; `address` becomes X-Forwarded-For (the server must trust it). */
export function resolveInvitation(base: string, key: string | undefined, id: string, address: string): Promise<JsonResponse<InvitationJson & ErrorJson>> {
  return rest<InvitationJson & ErrorJson>(base, "GET", `/v1/channel-invitations/${encodeURIComponent(id)}`, {
    key,
    headers: { "X-Forwarded-For": address },
  });
}

export async function listEvents(base: string, ownerKey: string, channel: string, query = "?since=0"): Promise<EventsPageJson> {
  const res = await rest<EventsPageJson>(base, "GET", `/v1/channels/${channel}/events${query}`, { key: ownerKey });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

/** The status of reading the channel's messages with this key: 200 when it may read, 403 when not. */
export async function readStatus(base: string, key: string, channel: string): Promise<number> {
  return (await rest(base, "GET", `/v1/channels/${channel}/messages?since=0`, { key })).status;
}

let addressCounter = 0;
/** A source address no other test in this process uses (for per-address limits). */
export function freshAddress(): string {
  addressCounter++;
  return `10.${(addressCounter >> 8) & 255}.${addressCounter & 255}.${1 + (process.pid % 250)}`;
}
