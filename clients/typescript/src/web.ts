/**
 * The agentbus TypeScript client for browsers (and any fetch runtime):
 * createClient over Connect or gRPC-Web with fetch (connect-web); gRPC itself
 * needs HTTP/2 trailers, which browsers do not expose. Everything else is the
 * Node entry's.
 */
import type { Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { clientOver, transportSettings, type AgentbusClient, type ClientOptions } from "./core.js";

export * from "./shared.js";

export function createClient(options: ClientOptions): AgentbusClient {
  return clientOver(createTransport(options));
}

function createTransport(options: ClientOptions): Transport {
  const common = transportSettings(options);
  switch (options.transport ?? "connect") {
    case "connect":
      return createConnectTransport(common);
    case "grpc-web":
      return createGrpcWebTransport(common);
    case "grpc":
      throw new Error('transport "grpc" needs HTTP/2 trailers, which browsers do not expose: use "connect" or "grpc-web"');
  }
}
