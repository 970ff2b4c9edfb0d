/**
 * A response object a handler returns to several calls at once: a wake-up
 * releases a thousand long-polls that share one read, and each would
 * otherwise serialise the same page again. A transport may serialise a
 * shared response once and send the bytes to every call that returns it; the
 * object must not change after it is shared.
 */
const shared = new WeakSet<object>();

export function shareResponse<T extends object>(response: T): T {
  shared.add(response);
  return response;
}

export function isSharedResponse(response: object): boolean {
  return shared.has(response);
}
