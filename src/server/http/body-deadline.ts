/**
 * A request body must arrive whole within a deadline (HTTP/1.1 and HTTP/2
 * alike). Without it a client trickling a body holds a connection for Node's
 * requestTimeout (5 min) on HTTP/1.1 and for ever on an HTTP/2 stream, with
 * whatever the handler has buffered so far.
 *
 * Only receiving the request counts: once the client has sent its last byte
 * (END_STREAM on HTTP/2, the end of the message on HTTP/1.1) the response may
 * take as long as it likes (long-polls, WatchMessages streams).
 */
import http2 from "node:http2";
import type { NodeRequest, NodeResponse } from "./node-http.js";

/** Whether the client has sent the whole request, read by the handler or not. */
export function bodyReceived(req: NodeRequest): boolean {
  if (req instanceof http2.Http2ServerRequest) {
    const stream = req.stream;
    // remoteClose: the peer half-closed the stream (END_STREAM received).
    return stream.destroyed || stream.state.remoteClose === 1;
  }
  return req.complete;
}

/**
 * Calls onExpired once if the body is still incomplete after ms. The caller
 * answers (408) and then calls `release` on the request so that the
 * connection (HTTP/1.1) or the stream (HTTP/2) is freed.
 */
export function watchBodyDeadline(req: NodeRequest, res: NodeResponse, ms: number, onExpired: () => void): void {
  const timer = setTimeout(() => {
    if (!bodyReceived(req) && !res.writableEnded) onExpired();
  }, ms);
  // Only the timer of a request the process is serving anyway.
  timer.unref();
  res.once("close", () => clearTimeout(timer));
}

/**
 * Frees what an unfinished request holds once its answer is out. HTTP/1.1:
 * the answer carries `Connection: close` and Node closes the connection after
 * it; the socket is destroyed if it lingers. HTTP/2: RST_STREAM tells the
 * client to stop sending the body (RFC 9113 §8.1); the connection and its
 * other streams stay. It is sent a moment after the answer (graceMs), and
 * only if the client is still sending by then: a small request's last frame
 * may simply not have been read yet, and a client reset before it read the
 * answer reports the call as cancelled. The code is CANCEL, not the NO_ERROR
 * the RFC suggests: Node, closing a stream whose answer it has sent, sends
 * no RST_STREAM(NO_ERROR) at all, so a client still sending (its window
 * full) would wait for ever. An answer that ends with trailers (gRPC's
 * status) is followed by the reset once they are sent, or the client would
 * never see its status. Meanwhile the unread stream holds at most its flow
 * control window.
 */
export function releaseAfterResponse(req: NodeRequest, res: NodeResponse, options: { lingerMs?: number; graceMs?: number; trailers?: boolean } = {}): void {
  if (req instanceof http2.Http2ServerRequest) {
    const stream = req.stream;
    if (stream.destroyed) return;
    const reset = () => {
      if (!stream.destroyed && stream.state.remoteClose !== 1) stream.close(http2.constants.NGHTTP2_CANCEL);
    };
    const later = () => setTimeout(reset, options.graceMs ?? 500).unref();
    // Listeners run in order: the compat response's own, which sends the trailers, comes first.
    if (options.trailers === true) stream.once("wantTrailers", later);
    else later();
    return;
  }
  const socket = req.socket;
  // The socket may be detached from the request by then (null): it is closing anyway.
  const release = () => setTimeout(() => socket?.destroy(), options.lingerMs ?? 1_000).unref();
  if (res.writableFinished) release();
  else res.once("finish", release);
}

/**
 * Lets the client send its body, for a request that asked first
 * (Expect: 100-continue; see listener.ts): called once the request is
 * admitted and its body is about to be read.
 */
export function continueBody(req: NodeRequest, res: NodeResponse): void {
  if (req.httpVersionMajor === 1 && /100-continue/i.test(String(req.headers.expect ?? "")) && !res.headersSent) (res as { writeContinue(): void }).writeContinue();
}
