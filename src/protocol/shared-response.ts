/**
 * A response object a handler returns to several calls at once: a wake-up
 * releases a thousand long-polls that share one read, and each would
 * otherwise serialise the same page again. A transport serialises a shared
 * response once and sends the bytes to every call that returns it; the
 * object must not change after it is shared.
 */

/** Shared responses, with their serialised form once a transport made it (null until then). */
const serialised = new WeakMap<object, Buffer | null>();

export function shareResponse<T extends object>(response: T): T {
  serialised.set(response, null);
  return response;
}

/** `serialise(response)`, made once per shared response and every time for any other. */
export function serialiseOnce(response: object, serialise: (response: object) => Buffer): Buffer {
  const cached = serialised.get(response);
  if (cached === undefined) return serialise(response);
  if (cached !== null) return cached;
  const bytes = serialise(response);
  serialised.set(response, bytes);
  return bytes;
}
