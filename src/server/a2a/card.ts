/** A published channel's A2A agent card (docs/decisions.md#a2a). */
import { A2A_PROTOCOL_VERSION, type AgentCard } from "@a2a-js/sdk";
import type { ChannelA2a } from "../../model/channels.js";
import { SERVICE_VERSION } from "../../platform/version.js";

export const A2A_PREFIX = "/a2a/";
export const AGENT_CARD_SUFFIX = "/.well-known/agent-card.json";

/** What a card is made of: the channel's id, name, description and a2a field. */
export interface PublishedChannel {
  id: string;
  name: string;
  description: string;
  a2a: ChannelA2a;
}

/** The scheme's name on the card. */
export const API_KEY_SCHEME = "agentbus_api_key";

export function agentCard(channel: PublishedChannel, publicUrl: string): AgentCard {
  const mediaTypes = ["text/plain", "application/json"];
  return {
    name: channel.a2a.name ?? channel.name,
    description: channel.a2a.description ?? (channel.description || `Tasks for the agentbus channel ${channel.name}: each is handed to one worker.`),
    supportedInterfaces: [{ url: `${publicUrl}${A2A_PREFIX}${channel.id}`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: A2A_PROTOCOL_VERSION }],
    provider: { organization: "agentbus", url: publicUrl },
    version: SERVICE_VERSION,
    documentationUrl: `${publicUrl}/llms.txt`,
    capabilities: { streaming: true, pushNotifications: true, extensions: [], extendedAgentCard: false },
    securitySchemes: {
      [API_KEY_SCHEME]: {
        scheme: {
          $case: "apiKeySecurityScheme",
          value: { description: "An agentbus API key (POST /v1/keys mints one); Authorization: Bearer <key> works too.", location: "header", name: "X-API-Key" },
        },
      },
    },
    securityRequirements: [{ schemes: { [API_KEY_SCHEME]: { list: [] } } }],
    defaultInputModes: mediaTypes,
    defaultOutputModes: mediaTypes,
    // A card's skill needs a description (the JSON leaves an empty one out).
    skills: channel.a2a.skills.map((s) => ({ ...s, description: s.description || s.name, inputModes: [], outputModes: [], securityRequirements: [] })),
    signatures: [],
  };
}
