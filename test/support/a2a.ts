/** @a2a-js/sdk's own client against this service's A2A endpoint, for the A2A tests. */
import { Role, type Message } from "@a2a-js/sdk";
import { ClientFactory, JsonRpcTransportFactory, type Client } from "@a2a-js/sdk/client";

/** An SDK client of the agent at `channel` of the service at `base`, calling with `key`. */
export function a2aClient(base: string, channel: string, key: string): Promise<Client> {
  const withKey: typeof fetch = (input, init) => fetch(input, { ...init, headers: { ...Object.fromEntries(new Headers(init?.headers).entries()), "X-API-Key": key } });
  return new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl: withKey })] }).createFromUrl(`${base}/a2a/${channel}/`);
}

/** A user's A2A message of one text part, with a fresh messageId. */
export const userMessage = (text: string, extra: Partial<Message> = {}): Message => ({
  messageId: `m-${Math.random().toString(36).slice(2)}`,
  contextId: "",
  taskId: "",
  role: Role.ROLE_USER,
  parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "text/plain" }],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
  ...extra,
});
