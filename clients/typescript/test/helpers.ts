/** Shared pieces of the client tests: a key per test, and a spy on what goes over the wire. */
import type { Interceptor } from "@connectrpc/connect";
import { createClient, type AgentbusClient, type ClientOptions } from "../src/index.js";

let labels = 0;

/** A fresh key (labels are unique among active keys) and a client that sends it. */
export async function clientWithNewKey(baseUrl: string, options: Partial<ClientOptions> = {}): Promise<{ client: AgentbusClient; key: string }> {
  const { key } = await createClient({ baseUrl }).keys.createKey({ agentLabel: `client-test-${process.pid}-${++labels}-${Date.now().toString(36)}` });
  return { client: createClient({ baseUrl, apiKey: key, ...options }), key };
}

export interface SentCall {
  method: string;
  idempotencyKey: string | null;
  apiKey: string | null;
}

/** Records every request as it leaves the client, and lets a test wait for a method's next completed call. */
export function wireSpy(): { interceptor: Interceptor; calls: SentCall[]; completed: (method: string) => Promise<void> } {
  const calls: SentCall[] = [];
  const waiters: Array<{ method: string; resolve: () => void }> = [];
  const interceptor: Interceptor = (next) => async (req) => {
    calls.push({ method: req.method.name, idempotencyKey: req.header.get("idempotency-key"), apiKey: req.header.get("x-api-key") });
    const res = await next(req);
    for (const waiter of waiters.splice(0)) {
      if (waiter.method === req.method.name) waiter.resolve();
      else waiters.push(waiter);
    }
    return res;
  };
  return { interceptor, calls, completed: (method) => new Promise<void>((resolve) => waiters.push({ method, resolve })) };
}
