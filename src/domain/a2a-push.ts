/**
 * A2A push-notification configs (docs/decisions.md#a2a): a caller that may
 * read a task (a message of a published channel) names a URL its changes are
 * POSTed to, through the webhook dispatcher (its address rules, retries and
 * signatures). Each key sees and changes only its own configs.
 */
import type { Caller } from "../model/caller.js";
import { ApiError } from "../model/errors.js";
import type { A2aPushStore, PushConfig } from "../ports/a2a-push.js";
import { validateWebhookUrl, type WebhookTargets } from "./channel-rules.js";
import type { Messages } from "./messages.js";

/** Configs per task, all keys together. */
export const MAX_PUSH_CONFIGS_PER_TASK = 10;
const MAX_ID = 128;
const MAX_TOKEN = 512;
const MAX_CREDENTIALS = 4096;
const PRINTABLE = /^[\x20-\x7e]*$/;

export interface PushConfigInput {
  taskId: string;
  id: string;
  url: string;
  token: string;
  authScheme: string;
  authCredentials: string;
}

const invalid = (field: string, why: string) => new ApiError("invalid_push_config", `'${field}' ${why}`, { details: { field } });

function text(value: string, field: string, max: number): string | null {
  if (value === "") return null;
  if (value.length > max || !PRINTABLE.test(value)) throw invalid(field, `must be at most ${max} printable ASCII characters`);
  return value;
}

export class A2aPush {
  constructor(
    private readonly store: A2aPushStore,
    private readonly messages: Messages,
    private readonly targets: WebhookTargets,
    private readonly newId: () => string,
  ) {}

  /** The task, if the caller may read it and it is a message of this channel; else 404 message_not_found, as for none. */
  private async task(caller: Caller, channelId: string, taskId: string): Promise<void> {
    const found = await this.messages.get(caller, taskId);
    if (found.message.channelId !== channelId) throw new ApiError("message_not_found");
  }

  async set(caller: Caller, channelId: string, input: PushConfigInput): Promise<PushConfig> {
    await this.task(caller, channelId, input.taskId);
    const id = input.id === "" ? this.newId() : input.id;
    if (id.length > MAX_ID || !PRINTABLE.test(id)) throw invalid("id", `must be at most ${MAX_ID} printable ASCII characters`);
    const url = validateWebhookUrl(input.url, this.targets, "url");
    const token = text(input.token, "token", MAX_TOKEN);
    const authScheme = text(input.authScheme, "authentication.scheme", 64);
    const authCredentials = text(input.authCredentials, "authentication.credentials", MAX_CREDENTIALS);
    if (authScheme !== null && !/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(authScheme)) throw invalid("authentication.scheme", "must be an HTTP auth scheme, e.g. Bearer");
    const stored = await this.store.put({ id, taskId: input.taskId, channelId, keyId: caller.keyId, url, token, authScheme, authCredentials }, MAX_PUSH_CONFIGS_PER_TASK);
    if (stored === "too_many") {
      throw new ApiError("invalid_push_config", `A task has at most ${MAX_PUSH_CONFIGS_PER_TASK} push-notification configs`, { details: { max: MAX_PUSH_CONFIGS_PER_TASK } });
    }
    return { id, taskId: input.taskId, url, token, authScheme };
  }

  async get(caller: Caller, channelId: string, taskId: string, id: string): Promise<PushConfig | undefined> {
    await this.task(caller, channelId, taskId);
    return this.store.get(taskId, caller.keyId, id);
  }

  async list(caller: Caller, channelId: string, taskId: string): Promise<PushConfig[]> {
    await this.task(caller, channelId, taskId);
    return this.store.list(taskId, caller.keyId);
  }

  async delete(caller: Caller, channelId: string, taskId: string, id: string): Promise<boolean> {
    await this.task(caller, channelId, taskId);
    return this.store.delete(taskId, caller.keyId, id);
  }
}
