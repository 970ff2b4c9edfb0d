/** The channels whose work goes to a remote A2A agent (docs/decisions.md#a2a-forward). */
import type { Caller } from "../model/caller.js";
import type { ChannelA2aForward } from "../model/channels.js";

export interface ForwardingChannel {
  id: string;
  forward: ChannelA2aForward;
  /** The channel's owner, as whom the forwarder receives and acknowledges. */
  owner: Caller;
}

export interface ForwardingStore {
  /** Every claimable channel with a forward whose owner's key is not revoked. */
  channels(): Promise<ForwardingChannel[]>;
}
