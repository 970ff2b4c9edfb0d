/**
 * Structured logs (pino). Request lines carry the request id, the route
 * template, the status and the duration; never headers, keys or bodies, so a
 * secret cannot leak into a log by accident. The redact list is a second net,
 * applied before either format is written.
 *
 * Two formats of the same events: JSON lines (for pipes, files and log
 * collectors; tests and operators parse them) and, in a terminal, one
 * readable line per event (pino-pretty, in this thread, so nothing is lost
 * at process.exit).
 */
import { pino, type Logger } from "pino";
import { PinoPretty } from "pino-pretty";

export type { Logger };

export type LogFormat = "json" | "pretty";

/** `auto` is pretty when stdout is a terminal. */
export function resolveLogFormat(setting: "auto" | LogFormat, stdoutIsTTY: boolean): LogFormat {
  return setting === "auto" ? (stdoutIsTTY ? "pretty" : "json") : setting;
}

export function createLogger(level: string, destination?: pino.DestinationStream, format: LogFormat = "json"): Logger {
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
  if (format === "pretty") {
    const pretty = PinoPretty({
      destination: destination ?? 1,
      sync: true,
      colorize: destination === undefined && process.stdout.isTTY === true,
      singleLine: true,
      // Only `err` (an unexpected error, with its stack) spans lines; an
      // expected failure's `error: {message, code}` stays on its event's line.
      errorLikeObjectKeys: ["err"],
      translateTime: "SYS:HH:MM:ss.l",
      ignore: "service,pid,hostname",
    });
    return pino(options, pretty);
  }
  return destination ? pino(options, destination) : pino(options);
}
