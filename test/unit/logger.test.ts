/** Log formats: JSON lines unless a terminal (or AGENTBUS_LOG_FORMAT) asks for readable lines; secrets redacted in both. */
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger, resolveLogFormat, type LogFormat } from "../../src/platform/logger.js";

function capture(format: LogFormat): { logger: ReturnType<typeof createLogger>; text: () => string } {
  let text = "";
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      text += chunk.toString("utf8");
      done();
    },
  });
  return { logger: createLogger("info", sink, format), text: () => text };
}

describe("log format", () => {
  it("is readable in a terminal and JSON otherwise, unless forced", () => {
    expect(resolveLogFormat("auto", true)).toBe("pretty");
    expect(resolveLogFormat("auto", false)).toBe("json");
    expect(resolveLogFormat("json", true)).toBe("json");
    expect(resolveLogFormat("pretty", false)).toBe("pretty");
  });

  it("json writes one JSON object per event", () => {
    const { logger, text } = capture("json");
    logger.info({ job_id: 7 }, "job completed");
    const lines = text().trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: "info", msg: "job completed", job_id: 7, service: "agentbus" });
  });

  it("pretty writes one readable line per event: time, level, message, fields", () => {
    const { logger, text } = capture("pretty");
    logger.warn({ job_id: 7, attempt: 1, error: { message: "the watch page request failed", code: "video_host_unavailable" } }, "job attempt failed");
    const lines = text().trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] WARN.*: job attempt failed/);
    expect(lines[0]).toContain("video_host_unavailable");
    expect(lines[0]).not.toMatch(/^\{/);
  });

  it.each(["json", "pretty"] as const)("%s never writes a key, secret or password", (format) => {
    const { logger, text } = capture(format);
    logger.info({ key: "ab_live_SECRETKEY", webhook: { secret: "whsec_SECRET" }, password: "hunter2", headers: { authorization: "Bearer X" } }, "event");
    expect(text()).not.toMatch(/SECRETKEY|whsec_SECRET|hunter2|Bearer X/);
    expect(text()).toContain("[redacted]");
  });
});
