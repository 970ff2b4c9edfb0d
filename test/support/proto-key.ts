/**
 * Protobuf bytes with a Struct key "__proto__", which no protobuf-es client
 * can send (its encoder drops the key as its decoder does): the message is
 * encoded with a stand-in key of the same length, then the stand-in's bytes
 * are replaced, so every length prefix stays right.
 */
import { create, toBinary, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";

/** Use as an object key where "__proto__" is meant; withProtoKey turns it into "__proto__". */
export const PROTO_STAND_IN = "QQQQQQQQQ";

export function withProtoKey<D extends DescMessage>(desc: D, init: MessageInitShape<D>): Buffer {
  const bytes = Buffer.from(toBinary(desc, create(desc, init)));
  const standIn = Buffer.from(PROTO_STAND_IN);
  const real = Buffer.from("__proto__");
  let at = bytes.indexOf(standIn);
  if (at < 0) throw new Error("the message has no stand-in key");
  for (; at >= 0; at = bytes.indexOf(standIn, at + real.length)) real.copy(bytes, at);
  return bytes;
}
