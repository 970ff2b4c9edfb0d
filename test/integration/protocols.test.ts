/**
 * One port, every protocol: the same key works, and the same errors arrive,
 * over Connect (JSON and binary, HTTP/1.1 and HTTP/2), gRPC, gRPC-Web,
 * @grpc/grpc-js, and REST over HTTP/2 with prior knowledge.
 */
import { fromBinary, toBinary, type DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import { describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { KeyService } from "../../gen/agentbus/v1/key_service_pb.js";
import { useTestServer } from "../support/server.js";

const server = useTestServer();

const transports: Array<[string, () => Transport]> = [
  ["Connect JSON over HTTP/1.1", () => createConnectTransport({ baseUrl: server.url, httpVersion: "1.1" })],
  ["Connect binary over HTTP/2", () => createConnectTransport({ baseUrl: server.url, httpVersion: "2", useBinaryFormat: true })],
  ["gRPC over h2c", () => createGrpcTransport({ baseUrl: server.url })],
  ["gRPC-Web over HTTP/1.1", () => createGrpcWebTransport({ baseUrl: server.url, httpVersion: "1.1" })],
];

const label = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2, 10)}`;

describe.each(transports)("%s", (_name, makeTransport) => {
  it("issues a key and authenticates with it through x-api-key metadata", async () => {
    const client = createClient(KeyService, makeTransport());
    const agentLabel = label("rpc");
    const issued = await client.createKey({ agentLabel });
    expect(issued.keyId).toMatch(/^ak_/);
    const me = await client.getCurrentKey({}, { headers: { "x-api-key": issued.key } });
    expect(me).toMatchObject({ keyId: issued.keyId, agentLabel, active: true });
  });

  it("answers Unauthenticated with ErrorDetail error=unauthorized when the key is missing", async () => {
    const client = createClient(KeyService, makeTransport());
    const err = await client.getCurrentKey({}).catch((e: unknown) => ConnectError.from(e));
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.Unauthenticated);
    const [detail] = (err as ConnectError).findDetails(ErrorDetailSchema);
    expect(detail?.error).toBe("unauthorized");
    expect(detail?.suggestion).toContain("POST /v1/keys");
  });

  it("answers AlreadyExists with error=label_in_use for a taken label", async () => {
    const client = createClient(KeyService, makeTransport());
    const agentLabel = label("dup");
    await client.createKey({ agentLabel });
    const err = await client.createKey({ agentLabel }).catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.AlreadyExists);
    expect((err as ConnectError).findDetails(ErrorDetailSchema)[0]?.error).toBe("label_in_use");
  });

  it("treats a revoked key as unauthenticated", async () => {
    const client = createClient(KeyService, makeTransport());
    const issued = await client.createKey({ agentLabel: label("gone") });
    const headers = { "x-api-key": issued.key };
    await client.revokeCurrentKey({}, { headers });
    const err = await client.getCurrentKey({}, { headers }).catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.Unauthenticated);
  });
});

describe("@grpc/grpc-js", () => {
  function grpcJsClient() {
    const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
    for (const method of KeyService.methods as readonly DescMethod[]) {
      definition[method.name] = {
        path: `/${KeyService.typeName}/${method.name}`,
        requestStream: false,
        responseStream: false,
        requestSerialize: (value: unknown) => Buffer.from(toBinary(method.input, value as Parameters<typeof toBinary>[1])),
        requestDeserialize: (bytes: Buffer) => fromBinary(method.input, bytes),
        responseSerialize: (value: unknown) => Buffer.from(toBinary(method.output, value as Parameters<typeof toBinary>[1])),
        responseDeserialize: (bytes: Buffer) => fromBinary(method.output, bytes),
      };
    }
    const Client = grpc.makeGenericClientConstructor(definition as grpc.ServiceDefinition, "KeyService");
    return new Client(new URL(server.url).host, grpc.credentials.createInsecure()) as grpc.Client &
      Record<string, (req: unknown, md: grpc.Metadata, cb: (err: grpc.ServiceError | null, res?: unknown) => void) => void>;
  }

  const call = (client: ReturnType<typeof grpcJsClient>, name: string, req: unknown, md = new grpc.Metadata()) =>
    new Promise<{ err: grpc.ServiceError | null; res: unknown }>((resolve) =>
      client[name]!(req, md, (err, res) => resolve({ err, res })),
    );

  it("issues a key and reads it back with x-api-key metadata", async () => {
    const client = grpcJsClient();
    try {
      const created = await call(client, "CreateKey", { $typeName: "agentbus.v1.CreateKeyRequest", agentLabel: label("grpcjs") });
      expect(created.err).toBeNull();
      const key = (created.res as { key: string }).key;
      const md = new grpc.Metadata();
      md.set("x-api-key", key);
      const me = await call(client, "GetCurrentKey", { $typeName: "agentbus.v1.GetCurrentKeyRequest" }, md);
      expect(me.err).toBeNull();
      expect((me.res as { keyId: string }).keyId).toBe(key.split(".")[0]);
    } finally {
      client.close();
    }
  });

  it("gets UNAUTHENTICATED with the error code in grpc-status-details-bin", async () => {
    const client = grpcJsClient();
    try {
      const { err } = await call(client, "GetCurrentKey", { $typeName: "agentbus.v1.GetCurrentKeyRequest" });
      expect(err?.code).toBe(grpc.status.UNAUTHENTICATED);
      const details = err?.metadata.get("grpc-status-details-bin")[0] as Buffer | undefined;
      expect(details?.toString("latin1")).toContain("unauthorized");
    } finally {
      client.close();
    }
  });
});

describe("REST over HTTP/2 with prior knowledge", () => {
  it("serves the JSON routes on the same port", async () => {
    const session = http2.connect(server.url);
    try {
      const body = JSON.stringify({ agent_label: label("h2") });
      const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
        const stream = session.request({ ":method": "POST", ":path": "/v1/keys", "content-type": "application/json" });
        let status = 0;
        let text = "";
        stream.on("response", (headers) => (status = Number(headers[":status"])));
        stream.setEncoding("utf8");
        stream.on("data", (chunk: string) => (text += chunk));
        stream.on("end", () => resolve({ status, text }));
        stream.on("error", reject);
        stream.end(body);
      });
      expect(status).toBe(201);
      expect(JSON.parse(text)).toHaveProperty("key_id");
    } finally {
      session.close();
    }
  });
});
