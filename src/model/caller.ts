import type { KeyScopes } from "./scopes.js";

/** The authenticated key a request runs as. */
export interface Caller {
  readonly keyId: string;
  readonly agentLabel: string;
  /** Owner of what the key creates; the agent label (keys are not grouped into accounts). */
  readonly ownerId: string;
}

/** A caller as the call pipeline authenticated it, with what its key may do. */
export interface AuthenticatedCaller extends Caller {
  readonly scopes: KeyScopes;
}
