/**
 * A gRPC call with any bytes as its message (HTTP/2, one length-prefixed
 * frame), for sending what no generated client would: garbage, truncated or
 * hand-made protobuf. Answers the status and the decoded ErrorDetail.
 */
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import http2 from "node:http2";
import { ErrorDetailSchema, type ErrorDetail } from "../../gen/agentbus/v1/errors_pb.js";

export interface RawGrpcAnswer {
  httpStatus: number;
  grpcStatus: number;
  grpcMessage: string;
  detail: ErrorDetail | undefined;
}

export function grpcFrame(payload: Uint8Array): Buffer {
  const frame = Buffer.alloc(5 + payload.byteLength);
  frame.writeUInt32BE(payload.byteLength, 1);
  frame.set(payload, 5);
  return frame;
}

/** One session for many calls; close() it when done. */
export class RawGrpcClient {
  private readonly session: http2.ClientHttp2Session;

  constructor(baseUrl: string) {
    this.session = http2.connect(baseUrl);
    this.session.on("error", () => {});
  }

  call(path: string, body: Uint8Array, headers: Record<string, string> = {}, timeoutMs = 15_000): Promise<RawGrpcAnswer> {
    return new Promise((resolve, reject) => {
      const stream = this.session.request({
        ":method": "POST",
        ":path": path,
        "content-type": "application/grpc+proto",
        te: "trailers",
        ...headers,
      });
      // Real time: a bound on a real HTTP/2 stream.
      const timer = setTimeout(() => stream.close(http2.constants.NGHTTP2_CANCEL), timeoutMs);
      let httpStatus = 0;
      const fields: Record<string, string> = {};
      const collect = (h: http2.IncomingHttpHeaders) => {
        for (const [k, v] of Object.entries(h)) if (typeof v === "string") fields[k] = v;
      };
      stream.on("response", (h) => {
        httpStatus = Number(h[":status"]);
        collect(h);
      });
      stream.on("trailers", collect);
      stream.on("data", () => {});
      stream.on("error", (err) => {
        clearTimeout(timer);
        reject(err);
      });
      stream.on("close", () => {
        clearTimeout(timer);
        if (fields["grpc-status"] === undefined) {
          reject(new Error(`no grpc-status (HTTP ${httpStatus}, rst ${stream.rstCode})`));
          return;
        }
        const error = findTrailerError(new Headers(fields));
        const detail: ErrorDetail | undefined = error?.findDetails(ErrorDetailSchema)[0];
        resolve({
          httpStatus,
          grpcStatus: Number(fields["grpc-status"]),
          grpcMessage: decodeURIComponent(fields["grpc-message"] ?? ""),
          detail,
        });
      });
      stream.end(Buffer.from(body));
    });
  }

  close(): void {
    this.session.close();
  }
}
