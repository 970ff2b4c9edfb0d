/**
 * gRPC server reflection (grpc.reflection.v1 and the older v1alpha, which
 * many tools still call first), so grpcurl, grpcui, Postman and `buf curl`
 * can discover and call the API without a copy of proto/.
 *
 * Connect-ES has no reflection package (connectrpc/connect-es#507), so this
 * answers from the descriptors protobuf-es already embeds in gen/: every
 * served service's file and, transitively, its imports (google/api,
 * google/protobuf). The schema is public (it is in the repository), so
 * reflection bypasses the call pipeline: no API key, no rate limit.
 */
import {
  create,
  createRegistry,
  fromBinary,
  toBinary,
  type DescEnum,
  type DescExtension,
  type DescFile,
  type DescMessage,
  type DescService,
  type MessageInitShape,
  type Registry,
} from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import * as v1 from "../../gen/grpc/reflection/v1/reflection_pb.js";
import * as v1alpha from "../../gen/grpc/reflection/v1alpha/reflection_pb.js";

type ReflectionRequest = v1.ServerReflectionRequest;
type ReflectionResponse = MessageInitShape<typeof v1.ServerReflectionResponseSchema>;

/** Answers reflection requests about a fixed set of services. */
export class Reflector {
  private readonly files = new Map<string, DescFile>();
  private readonly encoded = new Map<string, Uint8Array>();
  private readonly registry: Registry;
  readonly serviceNames: readonly string[];

  constructor(services: readonly DescService[]) {
    const add = (file: DescFile): void => {
      if (this.files.has(file.proto.name)) return;
      this.files.set(file.proto.name, file);
      for (const dep of file.dependencies) add(dep);
    };
    for (const service of services) add(service.file);
    this.registry = createRegistry(...this.files.values());
    this.serviceNames = services.map((s) => s.typeName);
  }

  answer(request: ReflectionRequest): ReflectionResponse {
    const base = { validHost: request.host, originalRequest: request };
    const files = (file: DescFile): ReflectionResponse => ({
      ...base,
      messageResponse: { case: "fileDescriptorResponse", value: { fileDescriptorProto: this.withDependencies(file) } },
    });
    const notFound = (message: string): ReflectionResponse => ({
      ...base,
      messageResponse: { case: "errorResponse", value: { errorCode: Code.NotFound, errorMessage: message } },
    });

    const req = request.messageRequest;
    switch (req.case) {
      case "listServices":
        return {
          ...base,
          messageResponse: { case: "listServicesResponse", value: { service: this.serviceNames.map((name) => ({ name })) } },
        };
      case "fileByFilename": {
        const file = this.files.get(req.value);
        return file ? files(file) : notFound(`file not found: ${req.value}`);
      }
      case "fileContainingSymbol": {
        const file = this.fileOfSymbol(req.value);
        return file ? files(file) : notFound(`symbol not found: ${req.value}`);
      }
      case "fileContainingExtension": {
        const extendee = this.registry.getMessage(req.value.containingType);
        const extension = extendee && this.registry.getExtensionFor(extendee, req.value.extensionNumber);
        return extension
          ? files(extension.file)
          : notFound(`extension not found: ${req.value.containingType} ${req.value.extensionNumber}`);
      }
      case "allExtensionNumbersOfType": {
        if (!this.registry.getMessage(req.value)) return notFound(`type not found: ${req.value}`);
        const numbers: number[] = [];
        for (const type of this.registry) if (type.kind === "extension" && type.extendee.typeName === req.value) numbers.push(type.number);
        return {
          ...base,
          messageResponse: { case: "allExtensionNumbersResponse", value: { baseTypeName: req.value, extensionNumber: numbers } },
        };
      }
      default:
        // What grpc-go answers: a request without a question ends the stream.
        throw new ConnectError("invalid reflection request: no message_request set", Code.InvalidArgument);
    }
  }

  /**
   * The file first, then everything it imports, transitively. Sending the
   * whole closure each time (as grpc-java does) rather than only what this
   * stream has not seen keeps each answer self-contained; the files are small.
   */
  private withDependencies(file: DescFile): Uint8Array[] {
    const seen = new Set<string>();
    const out: Uint8Array[] = [];
    const visit = (f: DescFile): void => {
      if (seen.has(f.proto.name)) return;
      seen.add(f.proto.name);
      out.push(this.encode(f));
      for (const dep of f.dependencies) visit(dep);
    };
    visit(file);
    return out;
  }

  private encode(file: DescFile): Uint8Array {
    let bytes = this.encoded.get(file.proto.name);
    if (!bytes) {
      bytes = toBinary(FileDescriptorProtoSchema, file.proto);
      this.encoded.set(file.proto.name, bytes);
    }
    return bytes;
  }

  /** Types, services and extensions by name; methods, fields, oneofs and enum values through their parent. */
  private fileOfSymbol(symbol: string): DescFile | undefined {
    const direct = this.registry.get(symbol);
    if (direct) return direct.file;
    const dot = symbol.lastIndexOf(".");
    if (dot <= 0) return undefined;
    const parentName = symbol.slice(0, dot);
    const member = symbol.slice(dot + 1);
    const parent = this.registry.get(parentName);
    if (parent?.kind === "service") return parent.methods.some((m) => m.name === member) ? parent.file : undefined;
    if (parent?.kind === "message" && (parent.fields.some((f) => f.name === member) || parent.oneofs.some((o) => o.name === member))) {
      return parent.file;
    }
    // Enum values are scoped like siblings of their enum (C++ scoping rules).
    for (const type of this.registry) {
      if (type.kind === "enum" && scopeOf(type) === parentName && type.values.some((v) => v.name === member)) return type.file;
    }
    return undefined;
  }
}

function scopeOf(desc: DescEnum | DescMessage | DescExtension): string {
  return desc.typeName.slice(0, Math.max(0, desc.typeName.lastIndexOf(".")));
}

/**
 * Registers both reflection services on the router, describing `services`
 * and the reflection services themselves. Returns the request paths it added,
 * for a caller that routes by path before handing requests to Connect.
 */
export function registerReflection(router: ConnectRouter, services: readonly DescService[]): string[] {
  const reflector = new Reflector([...services, v1.ServerReflection, v1alpha.ServerReflection]);

  router.service(v1.ServerReflection, {
    async *serverReflectionInfo(requests) {
      for await (const request of requests) yield reflector.answer(request);
    },
  });
  // v1alpha has the same fields under other type names: translate through the wire format.
  router.service(v1alpha.ServerReflection, {
    async *serverReflectionInfo(requests) {
      for await (const request of requests) {
        const asV1 = fromBinary(v1.ServerReflectionRequestSchema, toBinary(v1alpha.ServerReflectionRequestSchema, request));
        const answer = toBinary(v1.ServerReflectionResponseSchema, create(v1.ServerReflectionResponseSchema, reflector.answer(asV1)));
        yield fromBinary(v1alpha.ServerReflectionResponseSchema, answer);
      }
    },
  });

  return [v1.ServerReflection, v1alpha.ServerReflection].map((s) => `/${s.typeName}/${s.method.serverReflectionInfo.name}`);
}
