/** Small REST helpers for channel and message tests. */
import { expect } from "vitest";
import { rest } from "./server.js";

export interface MessageJson {
  id: string;
  channel_id: string;
  content: string;
  created_at: string;
  expires_at: string;
  claimed_by: { id: string; name: string } | null;
  claimed_by_key_id: string | null;
  claimed_at: string | null;
  acknowledged_by: Array<{ id: string; name: string; occurred_at: string; metadata: Record<string, unknown> }>;
  result: string | null;
  mentions: Array<{ id: string; name: string }>;
  active: boolean;
  /** ready, delayed, in_flight, acknowledged, dead_lettered, expired, … (docs/decisions.md#message-state). */
  state: string;
  [key: string]: unknown;
}

/** One item of a receive answer: `{data: [ReceivedJson]}`. */
export interface ReceivedJson {
  message: MessageJson;
  lease_token: string;
  lease_expires_at: string;
  /** The messages it depended on, with their results (docs/decisions.md#dependencies). */
  parents: Array<{ message_id: string; channel_id: string; result: string | null }>;
}

export interface PageJson {
  data: MessageJson[];
  limit: number;
  next_cursor: string | null;
}

export async function createChannel(base: string, key: string, body: Record<string, unknown> = {}): Promise<string> {
  const res = await rest<{ id: string }>(base, "POST", "/v1/channels", {
    key,
    body: { name: `ch-${Math.random().toString(36).slice(2, 8)}`, mode: "claimable", ...body },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.id;
}

export async function postMessage(base: string, key: string, channel: string, body: Record<string, unknown>): Promise<MessageJson> {
  const res = await rest<{ message: MessageJson }>(base, "POST", `/v1/channels/${channel}/messages`, { key, body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.message;
}

export async function listMessages(base: string, key: string, channel: string, query = ""): Promise<PageJson> {
  const res = await rest<PageJson>(base, "GET", `/v1/channels/${channel}/messages${query}`, { key });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}
