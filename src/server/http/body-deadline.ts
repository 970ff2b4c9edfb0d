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
import type { NodeRequest, NodeResponse } from "./rest/transcoder.js";

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
 * it; the socket is destroyed if it lingers. HTTP/2: RST_STREAM(NO_ERROR)
 * tells the client to stop sending the body (RFC 9113 §8.1); the connection
 * and its other streams stay. Node sends it after the response's last DATA
 * frame (the compat response's own 'finish' only comes once the stream is
 * closed, so it cannot be waited for here).
 */
export function releaseAfterResponse(req: NodeRequest, res: NodeResponse, lingerMs = 1_000): void {
  if (req instanceof http2.Http2ServerRequest) {
    if (!req.stream.destroyed) req.stream.close(http2.constants.NGHTTP2_NO_ERROR);
    return;
  }
  const socket = req.socket;
  const release = () => setTimeout(() => socket.destroy(), lingerMs).unref();
  if (res.writableFinished) release();
  else res.once("finish", release);
}
