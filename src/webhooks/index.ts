/** Starts this process's webhook dispatcher, as configured, over the adapters the composition root opened. */
import type { Config } from "../platform/config.js";
import type { Clock } from "../model/time.js";
import type { LogLimiter } from "../platform/log-limiter.js";
import type { Logger } from "../platform/logger.js";
import type { OutboundClient } from "../outbound/guarded-fetch.js";
import type { WebhookStore } from "../ports/webhooks.js";
import { WebhookDispatcher, type WebhookDispatcherOptions } from "./dispatcher.js";

export { WebhookDispatcher } from "./dispatcher.js";

export interface WebhookDispatcherDependencies {
  config: Config;
  store: WebhookStore;
  /** The guarded outbound client; closed when the dispatcher has stopped. */
  http: OutboundClient;
  listen: NonNullable<WebhookDispatcherOptions["listen"]>;
  clock: Clock;
  logger: Logger;
  outageLog?: LogLimiter;
}

export async function startWebhookDispatcher(deps: WebhookDispatcherDependencies): Promise<WebhookDispatcher> {
  const { config, http } = deps;
  const dispatcher = new WebhookDispatcher({
    store: deps.store,
    listen: deps.listen,
    clock: deps.clock,
    logger: deps.logger,
    outageLog: deps.outageLog,
    http,
    timeoutMs: config.webhookTimeoutMs,
    retryScheduleMs: config.webhookRetryScheduleMs,
    concurrency: config.webhookConcurrency,
    destinationConcurrency: config.webhookDestinationConcurrency,
    ownerConcurrency: config.webhookOwnerConcurrency,
    breakerThreshold: config.webhookBreakerThreshold,
    breakerOpenMs: config.webhookBreakerOpenMs,
    breakerMaxOpenMs: config.webhookBreakerMaxOpenMs,
    legacySignatureHeader: config.webhookLegacySignatureHeader,
    onStopped: () => http.close(),
  });
  await dispatcher.start();
  return dispatcher;
}
