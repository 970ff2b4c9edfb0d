/**
 * Structured JSON logs (pino). Request lines carry the request id, the route
 * template, the status and the duration; never headers, keys or bodies, so a
 * secret cannot leak into a log by accident. The redact list is a second net.
 */
import { pino, type Logger } from "pino";

export type { Logger };

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level,
    base: { service: "agentbus" },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: ["key", "*.key", "secret", "*.secret", "password", "*.password", "headers", "*.headers", "authorization"],
      censor: "[redacted]",
    },
    formatters: { level: (label) => ({ level: label }) },
  };
  return destination ? pino(options, destination) : pino(options);
}
