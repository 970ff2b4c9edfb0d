/** Identifier shapes. Resource ids are UUIDs; anything else cannot name one. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True when text can be compared with a uuid column without a cast error. */
export const isUuid = (text: string): boolean => UUID.test(text);
