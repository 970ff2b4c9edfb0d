import { describe, expect, it } from "vitest";
import type { ChannelRecord } from "../../src/model/channels.js";
import { buildChannelPatch, changedColumns, clampDiscoveryLimit, parseDiscoveryCursor, parseUpdateMask, sameJson, validateAlias, validateCreateChannel, type CreateChannelInput } from "../../src/domain/channels.js";
import { ApiError } from "../../src/model/errors.js";
import { formatTimestamp } from "../../src/model/time.js";
import { channelUpdateInput, createChannelInput } from "../support/domain.js";
import { thrownBy } from "../support/errors.js";

const base = createChannelInput();
const defaults = { defaultDiscoverable: true };

const noUpdate = channelUpdateInput();

const caught = (fn: () => unknown) => thrownBy(ApiError, fn);

describe("validateCreateChannel defaults", () => {
  it("applies every channel default to a minimal request", () => {
    expect(validateCreateChannel(base, defaults)).toEqual({
      name: "jobs",
      mode: "claimable",
      access: "open",
      discoverable: true,
      description: "",
      metadataSchema: {},
      pinnedMessage: null,
      webhookUrl: null,
      webhookSecret: null,
      relatedChannels: [],
      ttlSeconds: 86_400,
      retentionDays: 7,
      maxMessages: null,
      maxWritesPerMinute: null,
      maxDeliveries: null,
      deadLetterChannelId: null,
      groupConcurrency: null,
      dispatch: "fifo",
      priorityAgingSeconds: null,
      limits: [],
      limitIds: [],
      a2a: null,
      a2aForward: null,
    });
  });

  it("makes an open channel discoverable per the instance setting", () => {
    expect(validateCreateChannel(base, { defaultDiscoverable: false }).discoverable).toBe(false);
    expect(validateCreateChannel(base, { defaultDiscoverable: true }).discoverable).toBe(true);
  });

  it("makes a restricted channel not discoverable unless asked", () => {
    expect(validateCreateChannel({ ...base, access: "restricted" }, defaults).discoverable).toBe(false);
    expect(validateCreateChannel({ ...base, access: "restricted", discoverable: true }, defaults).discoverable).toBe(true);
  });

  it("keeps strings verbatim, including an empty description (strings-verbatim)", () => {
    const channel = validateCreateChannel({ ...base, name: "  padded  ", description: "", pinnedMessage: " pin " }, defaults);
    expect(channel).toMatchObject({ name: "  padded  ", description: "", pinnedMessage: " pin " });
  });

  it("de-duplicates related channels keeping their order", () => {
    expect(validateCreateChannel({ ...base, relatedChannels: ["b", "a", "b"] }, defaults).relatedChannels).toEqual(["b", "a"]);
  });

  it("accepts the range limits of every integer field", () => {
    for (const [ttlSeconds, retentionDays, maxMessages, maxWritesPerMinute] of [
      [300, 1, 1, 1],
      [2_592_000, 365, 1_000_000, 1_000_000],
    ] as const) {
      expect(() => validateCreateChannel({ ...base, ttlSeconds, retentionDays, maxMessages, maxWritesPerMinute }, defaults)).not.toThrow();
    }
  });

  it("counts the name's length in characters, not UTF-16 units", () => {
    expect(() => validateCreateChannel({ ...base, name: "🚀".repeat(200) }, defaults)).not.toThrow();
  });

  it("accepts a valid JSON Schema and an empty one", () => {
    const schema = { type: "object", properties: { priority: { type: "integer", minimum: 1 } }, required: ["priority"] };
    expect(validateCreateChannel({ ...base, metadataSchema: schema }, defaults).metadataSchema).toEqual(schema);
    expect(validateCreateChannel({ ...base, metadataSchema: {} }, defaults).metadataSchema).toEqual({});
  });

  it("accepts a schema with keywords the validator does not know (they are ignored, as annotations)", () => {
    expect(() => validateCreateChannel({ ...base, metadataSchema: { severity: "string" } }, defaults)).not.toThrow();
  });

  it("accepts absolute http and https webhook URLs", () => {
    for (const url of ["http://example.com:8080/hook", "https://example.com/a?b=c", "https://93.184.215.14/hook"]) {
      expect(validateCreateChannel({ ...base, webhookUrl: url }, defaults).webhookUrl).toBe(url);
    }
  });
});

describe("webhook URLs and the private-address rule (docs/decisions.md#outbound-addresses)", () => {
  const refused = [
    "http://127.0.0.1:8080/hook",
    "http://127.1/hook", // the URL parser's form of 127.0.0.1
    "http://2130706433/hook", // 127.0.0.1 as one number
    "http://0.0.0.0/hook",
    "http://10.1.2.3/hook",
    "http://192.168.0.10/hook",
    "http://169.254.169.254/latest/meta-data",
    "http://[::1]/hook",
    "http://[::ffff:127.0.0.1]/hook",
    "http://[fd00::1]/hook",
    "http://localhost:8080/hook",
    "http://LOCALHOST./hook",
    "http://api.localhost/hook",
    "http://ip6-localhost/hook",
  ];

  it("refuses loopback, private and other non-public IP literals and localhost names when private targets are not allowed", () => {
    for (const url of refused) {
      const err = caught(() => validateCreateChannel({ ...base, webhookUrl: url }, { ...defaults, allowPrivateTargets: false }));
      expect(err.code, url).toBe("invalid_webhook_url");
      expect(err.status, url).toBe(422);
      expect(err.message, url).toMatch(/^'webhook_url' points at .+, a non-public address that webhooks are never delivered to$/);
      expect(err.suggestion, url).toContain("AGENTBUS_ALLOW_PRIVATE_TARGETS");
    }
  });

  it("refuses them when the setting is not given at all, as delivery does by default", () => {
    expect(caught(() => validateCreateChannel({ ...base, webhookUrl: "http://127.0.0.1/hook" }, { defaultDiscoverable: true })).code).toBe("invalid_webhook_url");
  });

  it("accepts them when private targets are allowed, as delivery then does", () => {
    for (const url of refused) {
      expect(validateCreateChannel({ ...base, webhookUrl: url }, { ...defaults, allowPrivateTargets: true }).webhookUrl, url).toBe(url);
    }
  });

  it("leaves other names to delivery, which checks the addresses they resolve to", () => {
    for (const url of ["https://localhost.example.com/hook", "https://hooks.internal/hook", "http://127.0.0.1.nip.io/hook"]) {
      expect(validateCreateChannel({ ...base, webhookUrl: url }, defaults).webhookUrl, url).toBe(url);
    }
  });

  it("applies the same rule to an update's webhook_url", () => {
    expect(caught(() => buildChannelPatch({ ...noUpdate, webhookUrl: "http://127.0.0.1/hook" }, ["webhook_url"])).code).toBe("invalid_webhook_url");
    expect(buildChannelPatch({ ...noUpdate, webhookUrl: "http://127.0.0.1/hook" }, ["webhook_url"], { allowPrivateTargets: true }).webhookUrl).toBe("http://127.0.0.1/hook");
  });
});

describe("validateCreateChannel refusals", () => {
  const cases: Array<[string, Partial<CreateChannelInput>, string]> = [
    ["a missing name", { name: undefined }, "missing_field"],
    ["an empty name", { name: "" }, "missing_field"],
    ["a blank name", { name: " \t " }, "missing_field"],
    ["a name over 200 characters", { name: "x".repeat(201) }, "invalid_channel_name"],
    ["a name with a control character", { name: "bell\u0007" }, "invalid_channel_name"],
    ["a name with a bidi override", { name: "abc\u202Edef" }, "invalid_channel_name"],
    ["a name with a zero-width space", { name: "a\u200Bb" }, "invalid_channel_name"],
    ["a name with a line separator", { name: "a\u2028b" }, "invalid_channel_name"],
    ["a missing mode", { mode: undefined }, "missing_field"],
    ["a schema that cannot describe an object", { metadataSchema: { type: "string" } }, "invalid_object"],
    ["a schema with an unresolvable $ref", { metadataSchema: { $ref: "https://example.com/nowhere.json" } }, "invalid_object"],
    ["a relative webhook URL", { webhookUrl: "/hook" }, "invalid_webhook_url"],
    ["a webhook URL that is not a URL", { webhookUrl: "not a url" }, "invalid_webhook_url"],
    ["an ftp webhook URL", { webhookUrl: "ftp://example.com/x" }, "invalid_webhook_url"],
    ["a webhook URL with surrounding spaces", { webhookUrl: " https://example.com" }, "invalid_webhook_url"],
    ["an empty webhook secret", { webhookSecret: "" }, "invalid_string"],
    ["a blank related channel", { relatedChannels: ["ok", " "] }, "invalid_related_channels"],
    ["over 100 related channels", { relatedChannels: Array.from({ length: 101 }, (_, i) => `c${i}`) }, "invalid_related_channels"],
    ["ttl_seconds below 300", { ttlSeconds: 299 }, "invalid_ttl_seconds"],
    ["ttl_seconds above 2592000", { ttlSeconds: 2_592_001 }, "invalid_ttl_seconds"],
    ["retention_days 0", { retentionDays: 0 }, "invalid_retention_days"],
    ["retention_days 366", { retentionDays: 366 }, "invalid_retention_days"],
    ["max_messages 0", { maxMessages: 0 }, "invalid_max_messages"],
    ["max_messages above 1000000", { maxMessages: 1_000_001 }, "invalid_max_messages"],
    ["max_writes_per_minute 0", { maxWritesPerMinute: 0 }, "invalid_max_writes_per_minute"],
    ["max_writes_per_minute above 1000000", { maxWritesPerMinute: 1_000_001 }, "invalid_max_writes_per_minute"],
  ];
  for (const [name, change, code] of cases) {
    it(`refuses ${name} with 422 ${code} and a suggestion`, () => {
      const err = caught(() => validateCreateChannel({ ...base, ...change }, defaults));
      expect(err.code).toBe(code);
      expect(err.status).toBe(422);
      expect(err.suggestion).toEqual(expect.any(String));
    });
  }

});

describe("validateAlias", () => {
  it("refuses a UUID-shaped alias with invalid_string", () => {
    const err = caught(() => validateAlias("0b9c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d"));
    expect(err.code).toBe("invalid_string");
    expect(err.message).toContain("UUID");
  });

  it("refuses a missing or blank alias with missing_field", () => {
    expect(caught(() => validateAlias(undefined)).code).toBe("missing_field");
    expect(caught(() => validateAlias("  ")).code).toBe("missing_field");
  });

  it("refuses invisible characters and overlong aliases with invalid_string", () => {
    expect(caught(() => validateAlias("a\u200Db")).code).toBe("invalid_string");
    expect(caught(() => validateAlias("a".repeat(201))).code).toBe("invalid_string");
  });

  it("keeps a valid alias verbatim", () => {
    expect(validateAlias("Build-Jobs")).toBe("Build-Jobs");
  });
});

describe("buildChannelPatch", () => {
  it("changes nothing for an empty mask", () => {
    expect(buildChannelPatch({ ...noUpdate, name: "ignored", paused: true }, [])).toEqual({});
  });

  it("applies only the masked fields", () => {
    expect(buildChannelPatch({ ...noUpdate, name: "renamed", paused: true }, ["paused"])).toEqual({ paused: true });
  });

  it("applies the fields that are set when there is no mask (gRPC)", () => {
    expect(buildChannelPatch({ ...noUpdate, name: "renamed", mode: "broadcast", relatedChannels: ["x"] }, undefined)).toEqual({
      name: "renamed",
      mode: "broadcast",
      relatedChannels: ["x"],
    });
  });

  it("clears nullable fields named in the mask but unset", () => {
    const mask = ["pinned_message", "max_messages", "max_writes_per_minute", "webhook_url", "webhook_secret"];
    expect(buildChannelPatch(noUpdate, mask)).toEqual({
      pinnedMessage: null,
      maxMessages: null,
      maxWritesPerMinute: null,
      webhookUrl: null,
      webhookSecret: null,
    });
  });

  it("resets description, metadata_schema and related_channels to their defaults when cleared", () => {
    expect(buildChannelPatch(noUpdate, ["description", "metadata_schema", "related_channels"])).toEqual({
      description: "",
      metadataSchema: {},
      relatedChannels: [],
    });
  });

  const uncleared: Array<[string, string]> = [
    ["name", "missing_field"],
    ["mode", "invalid_mode"],
    ["access", "invalid_access"],
    ["discoverable", "invalid_discoverable"],
    ["retention_days", "invalid_retention_days"],
    ["paused", "invalid_paused"],
  ];
  for (const [field, code] of uncleared) {
    it(`refuses to clear ${field} with ${code}`, () => {
      expect(caught(() => buildChannelPatch(noUpdate, [field])).code).toBe(code);
    });
  }

  it("validates masked values with the create codes", () => {
    expect(caught(() => buildChannelPatch({ ...noUpdate, retentionDays: 0 }, ["retention_days"])).code).toBe("invalid_retention_days");
    expect(caught(() => buildChannelPatch({ ...noUpdate, webhookUrl: "x" }, ["webhook_url"])).code).toBe("invalid_webhook_url");
    expect(caught(() => buildChannelPatch({ ...noUpdate, name: "a\u0000" }, ["name"])).code).toBe("invalid_channel_name");
  });
});

describe("parseUpdateMask", () => {
  it("accepts proto and JSON names and de-duplicates them", () => {
    expect(parseUpdateMask(["max_messages", "maxMessages", "name"])).toEqual(["max_messages", "name"]);
  });

  it("refuses paths that ChannelUpdate does not have, listing them all", () => {
    const err = caught(() => parseUpdateMask(["name", "ttl_seconds", "owner_id"]));
    expect(err.code).toBe("invalid_update_mask");
    expect(err.details).toEqual({ fields: ["ttl_seconds", "owner_id"] });
  });
});

describe("changedColumns", () => {
  const current: ChannelRecord = {
    id: "id",
    name: "jobs",
    mode: "claimable",
    access: "open",
    discoverable: true,
    description: "",
    ownerId: "o",
    createdByKeyId: "k",
    metadataSchema: { type: "object", required: ["a"] },
    pinnedMessage: null,
    webhookUrl: null,
    webhookSecret: null,
    maxDeliveries: null,
    deadLetterChannelId: null,
    ttlSeconds: 86_400,
    retentionDays: 7,
    maxMessages: null,
    maxWritesPerMinute: null,
    paused: false,
    createdAt: 1,
    updatedAt: 1,
    groupConcurrency: null,
    dispatch: "fifo",
    priorityAgingSeconds: null,
    limitIds: [],
    limits: [],
    limitedMessages: false,
    a2a: null,
    a2aForward: null,
  };

  it("reports nothing when every patched value equals the current one", () => {
    expect(changedColumns(current, { name: "jobs", paused: false, maxMessages: null, metadataSchema: { required: ["a"], type: "object" } })).toEqual({});
  });

  it("reports only the values that differ", () => {
    expect(changedColumns(current, { name: "jobs", paused: true, pinnedMessage: "hi" })).toEqual({ paused: true, pinnedMessage: "hi" });
  });
});

describe("sameJson", () => {
  it("ignores key order but not array order", () => {
    expect(sameJson({ a: 1, b: [1, 2] }, { b: [1, 2], a: 1 })).toBe(true);
    expect(sameJson({ b: [2, 1] }, { b: [1, 2] })).toBe(false);
  });
});

describe("discovery paging", () => {
  it("clamps an out-of-range limit into 1..100 and defaults to 50 (list-pages)", () => {
    expect(clampDiscoveryLimit(undefined)).toBe(50);
    expect(clampDiscoveryLimit(0)).toBe(1);
    expect(clampDiscoveryLimit(-7)).toBe(1);
    expect(clampDiscoveryLimit(1000)).toBe(100);
    expect(clampDiscoveryLimit(42)).toBe(42);
  });

  it("round-trips a next_cursor exactly", () => {
    const cursor = "2026-11-21T03:14:39.743512Z";
    const micros = parseDiscoveryCursor(cursor);
    expect(micros).toBeDefined();
    expect(formatTimestamp(micros as number)).toBe(cursor);
  });

  it("accepts any RFC 3339 offset", () => {
    expect(parseDiscoveryCursor("2026-11-21T04:14:39.743512+01:00")).toBe(parseDiscoveryCursor("2026-11-21T03:14:39.743512Z"));
  });

  it("treats an absent or empty cursor as the newest page", () => {
    expect(parseDiscoveryCursor(undefined)).toBeUndefined();
    expect(parseDiscoveryCursor("")).toBeUndefined();
  });

  it("refuses a malformed cursor with 422 invalid_cursor", () => {
    const err = caught(() => parseDiscoveryCursor("yesterday"));
    expect(err.code).toBe("invalid_cursor");
    expect(err.status).toBe(422);
  });
});
