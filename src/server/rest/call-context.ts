/**
 * The HandlerContext of a REST call, built for the per-request cost.
 *
 * connect's createHandlerContext links three AbortControllers (deadline,
 * request, shutdown), adds listeners to the long-lived shutdown signal, copies
 * every Headers it is given, and aborting it at the end of a call (which
 * HandlerContext promises: the signal also fires "when the RPC is completed
 * without error") builds a DOMException with a stack trace. Handlers rarely
 * look at the signal, so here it only exists once one does: it then behaves
 * as connect's would, aborted when the client goes away, when the service
 * shuts down, and when the call ends.
 */
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import type { ContextValues, HandlerContext } from "@connectrpc/connect";
import { getEventListeners } from "node:events";

/**
 * The reason a signal aborts with when its call ends normally: abort() with no
 * reason builds a DOMException and its stack trace, a cost every long-poll
 * (the one handler that listens) would pay on its way out.
 */
const CALL_ENDED = Object.freeze(Object.assign(new Error("the call has ended"), { name: "AbortError" }));

export class RestCallContext implements HandlerContext {
  readonly protocolName = "rest";
  readonly responseHeader = new Headers();
  readonly responseTrailer = new Headers();
  readonly timeoutMs = (): number | undefined => undefined;
  readonly service: DescService;

  private controller: AbortController | undefined;
  private onShutdown: (() => void) | undefined;
  private clientGone = false;
  private ended = false;

  constructor(
    readonly method: DescMethod,
    readonly requestMethod: string,
    readonly requestHeader: Headers,
    readonly values: ContextValues,
    private readonly requestUrl: URL,
    private readonly shutdownSignal: AbortSignal,
  ) {
    this.service = method.parent;
  }

  /** The URL received, serialised on demand (handlers seldom read it). */
  get url(): string {
    return this.requestUrl.toString();
  }

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      const controller = new AbortController();
      this.controller = controller;
      if (this.ended || this.clientGone) controller.abort();
      else if (this.shutdownSignal.aborted) controller.abort(this.shutdownSignal.reason);
      else {
        this.onShutdown = () => controller.abort(this.shutdownSignal.reason);
        this.shutdownSignal.addEventListener("abort", this.onShutdown, { once: true });
      }
    }
    return this.controller.signal;
  }

  /** The client closed the connection before the answer was sent. */
  clientClosed(): void {
    this.clientGone = true;
    this.controller?.abort();
  }

  /**
   * The call is over: a signal handed out aborts, if anything still listens
   * to it (and stops listening for shutdown). Aborting builds and dispatches
   * an Event, a cost every long-poll would pay on its way out although it
   * removed its own listener: with no listener left there is no one to tell.
   */
  end(): void {
    this.ended = true;
    if (this.controller === undefined) return;
    if (this.onShutdown !== undefined) this.shutdownSignal.removeEventListener("abort", this.onShutdown);
    if (getEventListeners(this.controller.signal, "abort").length > 0) this.controller.abort(CALL_ENDED);
  }
}
