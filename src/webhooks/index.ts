/** Starts this process's webhook dispatcher with the guarded outbound client, as configured. */
import type { Config } from "../platform/config.js";
import type { Clock } from "../model/time.js";
import type { LogLimiter } from "../platform/log-limiter.js";
import type { Logger } from "../platform/logger.js";
import { createOutboundClient } from "../outbound/guarded-fetch.js";
import type { Db } from "../store/db.js";
import { WebhookDispatcher } from "./dispatcher.js";
import { USER_AGENT } from "./payload.js";

export { WebhookDispatcher } from "./dispatcher.js";

export async function startWebhookDispatcher(deps: { config: Config; db: Db; clock: Clock; logger: Logger; outageLog?: LogLimiter }): Promise<WebhookDispatcher> {
  const { config, db } = deps;
  const http = createOutboundClient({ allowPrivateTargets: config.allowPrivateTargets, userAgent: USER_AGENT });
  const dispatcher = new WebhookDispatcher({
    db,
    connectionString: db.pool.options.connectionString,
    clock: deps.clock,
    logger: deps.logger,
    outageLog: deps.outageLog,
    http,
    timeoutMs: config.webhookTimeoutMs,
    retryScheduleMs: config.webhookRetryScheduleMs,
    concurrency: config.webhookConcurrency,
    destinationConcurrency: config.webhookDestinationConcurrency,
    breakerThreshold: config.webhookBreakerThreshold,
    breakerOpenMs: config.webhookBreakerOpenMs,
    breakerMaxOpenMs: config.webhookBreakerMaxOpenMs,
    onStopped: () => http.close(),
  });
  await dispatcher.start();
  return dispatcher;
}
