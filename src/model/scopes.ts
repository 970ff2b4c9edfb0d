/**
 * Key scopes (docs/decisions.md#scopes). Which scope each method needs is
 * declared in the proto ((agentbus.v1.rules).scope); this is the list of
 * names a key can hold.
 */
export const KEY_SCOPES = [
  "channels:read",
  "channels:write",
  "messages:read",
  "messages:write",
  "messages:claim",
  "members:manage",
  "jobs:submit",
  "sessions:read",
  "sessions:write",
] as const;

export type KeyScope = (typeof KEY_SCOPES)[number];

/** A key's scopes: a chosen set, or null for every scope (including ones a later version adds). */
export type KeyScopes = readonly KeyScope[] | null;

const KNOWN = new Set<string>(KEY_SCOPES);

export const isKeyScope = (name: string): name is KeyScope => KNOWN.has(name);

/** What a key holds, in catalogue order: every scope when unrestricted. */
export const effectiveScopes = (scopes: KeyScopes): readonly KeyScope[] => scopes ?? KEY_SCOPES;

export const holdsScope = (scopes: KeyScopes, scope: KeyScope): boolean => scopes === null || scopes.includes(scope);
