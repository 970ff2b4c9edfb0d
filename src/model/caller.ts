/** The authenticated key a request runs as. */
export interface Caller {
  readonly keyId: string;
  readonly agentLabel: string;
  /** Owner of what the key creates; the agent label (keys are not grouped into accounts). */
  readonly ownerId: string;
}
