/**
 * Connect's router reads a universal handler's routing facts (protocol names, service, method,
 * path, allowed methods, content types) from properties of the function itself, so a layer that
 * wraps a handler has to carry them over to its wrapper.
 */
import type { UniversalHandler } from "@connectrpc/connect/protocol";

export function wrapHandler(handler: UniversalHandler, wrapped: (req: Parameters<UniversalHandler>[0]) => ReturnType<UniversalHandler>): UniversalHandler {
  return Object.assign(wrapped, {
    protocolNames: handler.protocolNames,
    service: handler.service,
    method: handler.method,
    requestPath: handler.requestPath,
    allowedMethods: handler.allowedMethods,
    supportedContentType: handler.supportedContentType,
  });
}
