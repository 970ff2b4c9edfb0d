/** A2A push-notification configs (docs/decisions.md#a2a): where a task's changes go, per task and per key. */
export interface PushConfig {
  /** The client's name for it (A2A's config id). */
  id: string;
  taskId: string;
  url: string;
  token: string | null;
  authScheme: string | null;
}

export interface NewPushConfig extends PushConfig {
  channelId: string;
  keyId: string;
  /** Write-only. */
  authCredentials: string | null;
}

export interface A2aPushStore {
  /** Stores (or replaces, by task and id) the config and marks the task's message; "too_many" past `max` configs of the task. */
  put(config: NewPushConfig, max: number): Promise<"stored" | "too_many">;
  get(taskId: string, keyId: string, id: string): Promise<PushConfig | undefined>;
  list(taskId: string, keyId: string): Promise<PushConfig[]>;
  delete(taskId: string, keyId: string, id: string): Promise<boolean>;
}
