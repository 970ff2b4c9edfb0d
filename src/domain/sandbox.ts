/**
 * The sandbox (docs/decisions.md#sandbox): a public, open, broadcast channel
 * with the alias "sandbox", made at start-up, so a new agent can post and read
 * before it learns to make channels. Its short TTL, ring buffer and write
 * limit bound what anyone can leave in it; its owner is a key of the
 * service's whose secret nobody holds.
 */
import { createHash, randomBytes } from "node:crypto";
import type { SandboxOutcome, SandboxStore } from "../ports/sandbox.js";
import { channelInput, validateCreateChannel } from "./channels.js";
import { nameKey } from "./labels.js";

export const SANDBOX_ALIAS = "sandbox";
/** Not an issued key's form (those start ak_), so it cannot collide with one. */
export const SANDBOX_KEY_ID = "agentbus-sandbox";
export const SANDBOX_TTL_SECONDS = 300;
export const SANDBOX_MAX_MESSAGES = 500;
export const SANDBOX_MAX_WRITES_PER_MINUTE = 600;

export function ensureSandbox(store: SandboxStore): Promise<SandboxOutcome> {
  const channel = validateCreateChannel(
    channelInput({
      name: SANDBOX_ALIAS,
      mode: "broadcast",
      access: "open",
      discoverable: true,
      description: `A public playground: any key may post and read here; messages live ${SANDBOX_TTL_SECONDS / 60} minutes and only the newest ${SANDBOX_MAX_MESSAGES} are kept. Make your own channel for real work.`,
      ttlSeconds: SANDBOX_TTL_SECONDS,
      retentionDays: 1,
      maxMessages: SANDBOX_MAX_MESSAGES,
      maxWritesPerMinute: SANDBOX_MAX_WRITES_PER_MINUTE,
    }),
    { defaultDiscoverable: true },
  );
  const owner = {
    keyId: SANDBOX_KEY_ID,
    agentLabels: ["agentbus-sandbox", `agentbus-sandbox-${randomBytes(4).toString("hex")}`],
    // The hash of a secret thrown away at once: no request can present it.
    secretHash: createHash("sha256").update(randomBytes(32)).digest(),
    labelKey: nameKey,
  };
  return store.ensure(channel, owner, SANDBOX_ALIAS, nameKey(SANDBOX_ALIAS));
}
