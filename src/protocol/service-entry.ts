/**
 * What a service module hands the transport: a proto service and its
 * handlers. The handlers see only the request and the call context, so the
 * same code serves gRPC, Connect and REST.
 */
import type { DescService, Message } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";

export type UnaryHandler = (request: Message, ctx: HandlerContext) => Promise<unknown> | unknown;
export type StreamHandler = (request: Message, ctx: HandlerContext) => AsyncIterable<unknown>;

/** A service implementation: handlers by method localName; missing ones answer not_implemented. */
export type ServiceHandlers = Partial<Record<string, UnaryHandler | StreamHandler>>;

export interface ServiceEntry {
  service: DescService;
  handlers: ServiceHandlers;
}

/**
 * Pairs a service with its handlers, typed against the service's descriptor
 * (requests in, response init shapes out). Missing methods answer not_implemented.
 */
export function serviceEntry<S extends DescService>(service: S, handlers: Partial<ServiceImpl<S>>): ServiceEntry {
  return { service, handlers: handlers as ServiceHandlers };
}
