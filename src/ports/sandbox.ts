/** What the sandbox needs from storage: its channel, made once however many replicas start at once. */
import type { NewChannel } from "../model/channels.js";

/** The service's own key that owns the sandbox: nobody holds its secret, so nobody acts as it. */
export interface SandboxOwner {
  keyId: string;
  /** Tried in order: the first label no active key holds is taken. */
  agentLabels: readonly string[];
  secretHash: Buffer;
  labelKey: (label: string) => string;
}

export type SandboxOutcome = "created" | "exists" | "alias_taken";

export interface SandboxStore {
  /**
   * The channel holding `alias`, created with its owner key when no channel holds it; "alias_taken"
   * when a channel of someone else's holds it already (nothing is created then).
   */
  ensure(channel: NewChannel, owner: SandboxOwner, alias: string, aliasKey: string): Promise<SandboxOutcome>;
}
