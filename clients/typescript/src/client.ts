/**
 * createClient() for Node: gRPC (HTTP/2), Connect or gRPC-Web over
 * connect-node, around the shared core (core.ts).
 */
import type { Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { clientOver, transportSettings, type AgentbusClient, type ClientOptions } from "./core.js";

export type { AgentbusClient, ClientOptions, TransportKind } from "./core.js";

export function createClient(options: ClientOptions): AgentbusClient {
  return clientOver(createTransport(options));
}

function createTransport(options: ClientOptions): Transport {
  const common = transportSettings(options);
  const httpVersion = options.httpVersion ?? "1.1";
  switch (options.transport ?? "grpc") {
    case "grpc":
      return createGrpcTransport(common);
    case "connect":
      return createConnectTransport({ ...common, httpVersion });
    case "grpc-web":
      return createGrpcWebTransport({ ...common, httpVersion });
  }
}
