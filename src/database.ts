/**
 * The configured external database, or the embedded one under
 * AGENTBUS_DATA_DIR. A module of its own, light to load, so the CLI can
 * start PostgreSQL before it loads the rest of the service.
 */
import type { Config } from "./platform/config.js";
import { LogLimiter } from "./platform/log-limiter.js";
import type { Logger } from "./platform/logger.js";
import { startEmbeddedPostgres } from "./store/embedded.js";

export interface Database {
  url: string;
  stop(): Promise<void>;
}

/** The configured external database, or the embedded one under AGENTBUS_DATA_DIR. */
export async function openDatabase(config: Config, logger: Logger, onFatal?: (err: Error) => void): Promise<Database> {
  if (config.databaseUrl) return { url: config.databaseUrl, stop: async () => {} };
  logger.info({ data_dir: config.dataDir }, "starting embedded PostgreSQL (set DATABASE_URL to use an external server)");
  const outageLog = new LogLimiter(logger, { intervalMs: config.logRepeatIntervalMs }).child({ component: "embedded-postgres" });
  return startEmbeddedPostgres({
    dataDir: config.dataDir,
    port: config.embeddedPgPort,
    log: (level, msg) => {
      // PostgreSQL's FATAL lines come once per refused connection while it
      // starts or after a crash ("the database system is starting up"): one
      // condition each, without the timestamp and pid that make them unique.
      const repeated = /^postgres: .*?\[\d+\] (FATAL|WARNING):\s+(.*)$/.exec(msg);
      if (repeated && level !== "info") outageLog[level](`postgres: ${repeated[1]}: ${repeated[2]}`);
      else logger[level]({ component: "embedded-postgres" }, msg);
    },
    onGiveUp: (err) => {
      logger.fatal({ component: "embedded-postgres" }, err.message);
      onFatal?.(err);
    },
  });
}

