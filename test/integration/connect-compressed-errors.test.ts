/**
 * Connect gzips an error body over 1 KiB when the client accepts gzip. Such an
 * answer must still arrive (it hung once: the body was read as JSON), and a
 * decoder error among them still gets the catalog's shape.
 */
import { gunzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { useTestServer } from "../support/server.js";

const server = useTestServer();

async function connectJson(body: string): Promise<{ status: number; encoding: string | null; json: Record<string, unknown> }> {
  // fetch would decompress on its own; ask for gzip explicitly and read the raw bytes.
  const { request } = await import("node:http");
  return new Promise((resolve, reject) => {
    const req = request(
      `${server.url}/agentbus.v1.KeyService/CreateKey`,
      { method: "POST", headers: { "Content-Type": "application/json", "Accept-Encoding": "gzip" }, timeout: 5000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const raw = Buffer.concat(chunks);
          const encoding = res.headers["content-encoding"] ?? null;
          const text = (encoding === "gzip" ? gunzipSync(raw) : raw).toString("utf8");
          resolve({ status: res.statusCode ?? 0, encoding, json: JSON.parse(text) as Record<string, unknown> });
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error("no answer within 5 s")));
    req.on("error", reject);
    req.end(body);
  });
}

describe("Connect JSON errors larger than the compression threshold", () => {
  it("answers a large handler error (a long taken label) compressed and complete", async () => {
    const agentLabel = `l${"o".repeat(120)}ng`;
    expect((await connectJson(JSON.stringify({ agentLabel }))).status).toBe(200);
    const res = await connectJson(JSON.stringify({ agentLabel }));
    expect(res.status).toBe(409);
    expect(res.encoding).toBe("gzip");
    expect(res.json).toMatchObject({ code: "already_exists", details: [expect.objectContaining({ type: "agentbus.v1.ErrorDetail" })] });
  });

  it("still rewrites a large decoder error to invalid_protobuf", async () => {
    const res = await connectJson(`{"agentLabel":"x","${"u".repeat(2000)}":1}`);
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ code: "invalid_argument", details: [expect.objectContaining({ type: "agentbus.v1.ErrorDetail" })] });
  });
});
