/**
 * gRPC server reflection over real gRPC (h2c, same port, no API key): what
 * grpcurl, grpcui and Postman ask, through @grpc/grpc-js, and `buf curl`
 * (a generic reflection client) discovering and calling the API.
 */
import { create, createFileRegistry, fromBinary, getOption, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema, type FileDescriptorProto } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { http } from "../../gen/google/api/annotations_pb.js";
import * as v1 from "../../gen/grpc/reflection/v1/reflection_pb.js";
import * as v1alpha from "../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { useTestServer } from "../support/server.js";

const server = useTestServer();

const AGENTBUS_SERVICES = [
  "agentbus.v1.ActorService",
  "agentbus.v1.AdminService",
  "agentbus.v1.ChannelService",
  "agentbus.v1.JobService",
  "agentbus.v1.KeyService",
  "agentbus.v1.MessageService",
];

interface Protocol<Req extends DescMessage, Res extends DescMessage> {
  service: string;
  request: Req;
  response: Res;
}
const V1: Protocol<typeof v1.ServerReflectionRequestSchema, typeof v1.ServerReflectionResponseSchema> = {
  service: "grpc.reflection.v1.ServerReflection",
  request: v1.ServerReflectionRequestSchema,
  response: v1.ServerReflectionResponseSchema,
};
const V1ALPHA: Protocol<typeof v1alpha.ServerReflectionRequestSchema, typeof v1alpha.ServerReflectionResponseSchema> = {
  service: "grpc.reflection.v1alpha.ServerReflection",
  request: v1alpha.ServerReflectionRequestSchema,
  response: v1alpha.ServerReflectionResponseSchema,
};

type Question = MessageShape<typeof v1.ServerReflectionRequestSchema>["messageRequest"];

/** Sends the questions on one bidi stream, half-closes, and collects every answer. */
async function reflect<Req extends DescMessage, Res extends DescMessage>(
  protocol: Protocol<Req, Res>,
  questions: Question[],
): Promise<Array<MessageShape<Res>>> {
  const client = new grpc.Client(new URL(server.url).host, grpc.credentials.createInsecure());
  try {
    const call = client.makeBidiStreamRequest(
      `/${protocol.service}/ServerReflectionInfo`,
      (value: MessageShape<Req>) => Buffer.from(toBinary(protocol.request, value)),
      (bytes: Buffer) => fromBinary(protocol.response, bytes),
    );
    const answers: Array<MessageShape<Res>> = [];
    const done = new Promise<void>((resolve, reject) => {
      call.on("data", (answer: MessageShape<Res>) => answers.push(answer));
      call.on("error", reject);
      call.on("end", () => resolve());
    });
    for (const messageRequest of questions) {
      // v1alpha has the same fields as v1: translate through the wire format.
      const asV1 = create(v1.ServerReflectionRequestSchema, { messageRequest });
      call.write(fromBinary(protocol.request, toBinary(v1.ServerReflectionRequestSchema, asV1)));
    }
    call.end();
    await done;
    return answers;
  } finally {
    client.close();
  }
}

type Answer = MessageShape<typeof v1.ServerReflectionResponseSchema>;

function files(answer: Answer): FileDescriptorProto[] {
  if (answer.messageResponse.case !== "fileDescriptorResponse") {
    throw new Error(`expected files, got ${JSON.stringify(answer.messageResponse)}`);
  }
  return answer.messageResponse.value.fileDescriptorProto.map((bytes) => fromBinary(FileDescriptorProtoSchema, bytes));
}

describe("grpc.reflection.v1", () => {
  it("lists the six agentbus services and the reflection services", async () => {
    const [answer] = await reflect(V1, [{ case: "listServices", value: "" }]);
    expect(answer?.messageResponse.case).toBe("listServicesResponse");
    const names = answer?.messageResponse.case === "listServicesResponse" ? answer.messageResponse.value.service.map((s) => s.name) : [];
    expect(names).toEqual(expect.arrayContaining([...AGENTBUS_SERVICES, "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"]));
    expect(new Set(names).size).toBe(names.length);
  });

  it("returns the file declaring agentbus.v1.MessageService with its whole import closure", async () => {
    const [answer] = await reflect(V1, [{ case: "fileContainingSymbol", value: "agentbus.v1.MessageService" }]);
    const protos = files(answer!);
    expect(protos[0]?.name).toBe("agentbus/v1/message_service.proto");
    expect(protos[0]?.package).toBe("agentbus.v1");
    const service = protos[0]?.service.find((s) => s.name === "MessageService");
    expect(service?.method.map((m) => m.name)).toEqual(MessageService.methods.map((m) => m.name));
    const names = protos.map((p) => p.name);
    expect(names).toEqual(expect.arrayContaining(["google/api/annotations.proto", "google/api/http.proto", "google/protobuf/descriptor.proto"]));
    expect(new Set(names).size).toBe(names.length);

    // Self-contained: the files build a registry, with the REST mapping readable as an option.
    // Dependencies first, as a FileDescriptorSet must list them. (createFileRegistry's resolver form orders
    // them itself, but wrongly when a file is both a direct import and an import of an import:
    // message_service.proto imports struct.proto, and so does waitpoint.proto through message.proto.)
    const byName = new Map(protos.map((p) => [p.name, p]));
    const ordered: FileDescriptorProto[] = [];
    const place = (name: string): void => {
      const file = byName.get(name);
      if (file === undefined || ordered.includes(file)) return;
      for (const dep of file.dependency) place(dep);
      ordered.push(file);
    };
    place(protos[0]!.name);
    expect(ordered).toHaveLength(protos.length);
    const registry = createFileRegistry(create(FileDescriptorSetSchema, { file: ordered }));
    const claim = registry.getService("agentbus.v1.MessageService")?.methods.find((m) => m.name === "ClaimMessage");
    expect(claim?.methodKind).toBe("unary");
    expect(claim?.input.typeName).toBe("agentbus.v1.ClaimMessageRequest");
    expect(claim && getOption(claim, http).pattern.case).toBe("post");
    const watch = registry.getService("agentbus.v1.MessageService")?.methods.find((m) => m.name === "WatchMessages");
    expect(watch?.methodKind).toBe("server_streaming");
  });

  it("answers by file name, method, message and nested symbol", async () => {
    const answers = await reflect(V1, [
      { case: "fileByFilename", value: "agentbus/v1/key_service.proto" },
      { case: "fileContainingSymbol", value: "agentbus.v1.MessageService.AckMessage" },
      { case: "fileContainingSymbol", value: "agentbus.v1.ClaimMessageRequest" },
      { case: "fileByFilename", value: "google/protobuf/timestamp.proto" },
    ]);
    expect(answers.map((a) => files(a)[0]?.name)).toEqual([
      "agentbus/v1/key_service.proto",
      "agentbus/v1/message_service.proto",
      "agentbus/v1/message_service.proto",
      "google/protobuf/timestamp.proto",
    ]);
  });

  it("finds extensions by extendee and number", async () => {
    const answers = await reflect(V1, [
      { case: "fileContainingExtension", value: create(v1.ExtensionRequestSchema, { containingType: "google.protobuf.MethodOptions", extensionNumber: http.number }) },
      { case: "allExtensionNumbersOfType", value: "google.protobuf.MethodOptions" },
      { case: "fileContainingExtension", value: create(v1.ExtensionRequestSchema, { containingType: "google.protobuf.MethodOptions", extensionNumber: 1 }) },
    ]);
    expect(files(answers[0]!)[0]?.name).toBe("google/api/annotations.proto");
    const numbers = answers[1]?.messageResponse.case === "allExtensionNumbersResponse" ? answers[1].messageResponse.value.extensionNumber : [];
    expect(numbers).toContain(http.number);
    expect(answers[2]?.messageResponse).toMatchObject({ case: "errorResponse", value: { errorCode: grpc.status.NOT_FOUND } });
  });

  it("answers NOT_FOUND for an unknown symbol or file, and the stream goes on", async () => {
    const answers = await reflect(V1, [
      { case: "fileContainingSymbol", value: "agentbus.v1.NoSuchService" },
      { case: "fileByFilename", value: "agentbus/v1/nope.proto" },
      { case: "listServices", value: "" },
    ]);
    expect(answers).toHaveLength(3);
    expect(answers[0]?.messageResponse).toMatchObject({ case: "errorResponse", value: { errorCode: grpc.status.NOT_FOUND } });
    expect(answers[0]?.originalRequest?.messageRequest).toEqual({ case: "fileContainingSymbol", value: "agentbus.v1.NoSuchService" });
    expect(answers[1]?.messageResponse).toMatchObject({ case: "errorResponse", value: { errorCode: grpc.status.NOT_FOUND } });
    expect(answers[2]?.messageResponse.case).toBe("listServicesResponse");
  });
});

describe("grpc.reflection.v1alpha", () => {
  it("lists services and returns the file declaring agentbus.v1.MessageService", async () => {
    const [list, file, missing] = await reflect(V1ALPHA, [
      { case: "listServices", value: "" },
      { case: "fileContainingSymbol", value: "agentbus.v1.MessageService" },
      { case: "fileContainingSymbol", value: "agentbus.v1.Nothing" },
    ]);
    expect(list?.$typeName).toBe("grpc.reflection.v1alpha.ServerReflectionResponse");
    const names = list?.messageResponse.case === "listServicesResponse" ? list.messageResponse.value.service.map((s) => s.name) : [];
    expect(names).toEqual(expect.arrayContaining(AGENTBUS_SERVICES));
    if (file?.messageResponse.case !== "fileDescriptorResponse") throw new Error("expected files");
    const proto = fromBinary(FileDescriptorProtoSchema, file.messageResponse.value.fileDescriptorProto[0]!);
    expect(proto.service[0]?.method.map((m) => m.name)).toEqual(MessageService.methods.map((m) => m.name));
    expect(missing?.messageResponse).toMatchObject({ case: "errorResponse", value: { errorCode: grpc.status.NOT_FOUND } });
  });
});

describe("buf curl (a generic reflection client)", () => {
  const buf = join(import.meta.dirname, "../../node_modules/.bin/buf");
  // Async, never execFileSync: the server runs in this process.
  const run = (args: string[]) => promisify(execFile)(buf, ["curl", "--protocol", "grpc", "--http2-prior-knowledge", ...args]);

  it.each(["grpc-v1", "grpc-v1alpha"])("lists the methods and calls one through %s", async (reflectProtocol) => {
    const listed = await run(["--reflect-protocol", reflectProtocol, "--list-methods", server.url]);
    expect(listed.stdout).toContain("agentbus.v1.MessageService/ClaimMessage");
    expect(listed.stdout).toContain("agentbus.v1.KeyService/CreateKey");

    const label = `reflect-${Math.random().toString(36).slice(2, 10)}`;
    const called = await run(["--reflect-protocol", reflectProtocol, "-d", JSON.stringify({ agentLabel: label }), `${server.url}/agentbus.v1.KeyService/CreateKey`]);
    const issued = JSON.parse(called.stdout) as { keyId?: string; agentLabel?: string };
    expect(issued.keyId).toMatch(/^ak_/);
  });
});
