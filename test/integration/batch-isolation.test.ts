/**
 * Concurrent writes to one channel are batched into one statement. A row the
 * database refuses must fail alone: every other writer's message is stored.
 * The poisoned rows go to the store directly, past the request validation
 * that keeps them out of the API, so the test holds the store to its own word.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { PgMessageStore } from "../../src/store/messages.js";
import type { CreateOutcome, NewMessage } from "../../src/model/messages.js";
import { Db } from "../../src/store/db.js";
import { createChannel } from "../support/fixtures.js";
import { listAllIds } from "../support/load.js";
import { keyIdOf } from "../support/membership.js";
import { mintKey, useTestServer } from "../support/server.js";

const server = useTestServer();
let key: string;

beforeAll(async () => {
  key = await mintKey(server.url);
});

/** Rows PostgreSQL itself refuses: NUL in text, NUL in jsonb, an unpaired surrogate escape in jsonb. */
const POISONS: Array<Pick<NewMessage, "content" | "metadata">> = [
  { content: "nul \u0000 in text", metadata: {} },
  { content: "nul in jsonb", metadata: { note: "a\u0000b" } },
  { content: "lone surrogate in a jsonb key", metadata: { ["k\ud800"]: 1 } },
];

describe("batched message writes", () => {
  it("store every valid message of a burst when other rows of the same batch fail in the database", async () => {
    const channelId = await createChannel(server.url, key, { mode: "broadcast", max_messages: 10_000 });
    const store = new PgMessageStore(new Db(server.app.pool));
    const base = { channelId, authorKeyId: keyIdOf(key), authorLabel: "batch", actor: null, actorLabel: null, mentions: [] };
    const writes = Array.from({ length: 160 }, (_, i) => {
      const poisoned = i % 5 === 3;
      const row: NewMessage = poisoned ? { ...base, ...POISONS[i % POISONS.length]! } : { ...base, content: `valid ${i}`, metadata: { i } };
      return { poisoned, outcome: store.create(row).then((o): CreateOutcome | "failed" => o, () => "failed" as const) };
    });
    const results = await Promise.all(writes.map(async (w) => ({ poisoned: w.poisoned, outcome: await w.outcome })));

    const valid = results.filter((r) => !r.poisoned);
    const createdIds = valid.flatMap((r) => (r.outcome !== "failed" && r.outcome.outcome === "created" ? [r.outcome.message.id] : []));
    expect(createdIds).toHaveLength(valid.length);
    expect(results.filter((r) => r.poisoned).every((r) => r.outcome === "failed")).toBe(true);
    const stored = await listAllIds(server.url, key, channelId);
    expect(stored).toEqual(new Set(createdIds));
  });
});
