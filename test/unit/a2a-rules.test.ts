import { describe, expect, it } from "vitest";
import { checkA2aMode, validateChannelA2a } from "../../src/domain/a2a-rules.js";
import { changedColumns } from "../../src/domain/channel-update.js";
import { ApiError } from "../../src/model/errors.js";
import type { ChannelRecord } from "../../src/model/channels.js";

const caught = (f: () => unknown): ApiError => {
  try {
    f();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error("expected an ApiError");
};

describe("the a2a channel field", () => {
  it("is null when not given", () => {
    expect(validateChannelA2a(undefined)).toBeNull();
  });

  it("defaults enabled to false, name and description to the channel's (null), skills to none", () => {
    expect(validateChannelA2a({})).toEqual({ enabled: false, name: null, description: null, skills: [] });
  });

  it("keeps a skill with its tags and examples, and an empty description", () => {
    const a2a = validateChannelA2a({ enabled: true, name: "Summariser", skills: [{ id: "sum.v1", name: "Summarise", tags: ["text"], examples: ["Summarise this"] }] });
    expect(a2a?.skills).toEqual([{ id: "sum.v1", name: "Summarise", description: "", tags: ["text"], examples: ["Summarise this"] }]);
  });

  it("refuses a skill without an id, naming the field", () => {
    const err = caught(() => validateChannelA2a({ skills: [{ name: "x" }] }));
    expect(err.code).toBe("invalid_a2a");
    expect(err.details).toEqual({ field: "a2a.skills[0].id" });
  });

  it("refuses a skill id with spaces", () => {
    expect(caught(() => validateChannelA2a({ skills: [{ id: "a b", name: "x" }] })).details).toEqual({ field: "a2a.skills[0].id" });
  });

  it("refuses two skills with one id", () => {
    const err = caught(() => validateChannelA2a({ skills: [{ id: "a", name: "x" }, { id: "a", name: "y" }] }));
    expect(err.details).toEqual({ field: "a2a.skills[1].id" });
  });

  it("refuses more than 32 skills", () => {
    const skills = Array.from({ length: 33 }, (_, i) => ({ id: `s${i}`, name: "x" }));
    expect(caught(() => validateChannelA2a({ skills })).details).toEqual({ field: "a2a.skills" });
  });

  it("refuses a name over 100 characters", () => {
    expect(caught(() => validateChannelA2a({ name: "n".repeat(101) })).details).toEqual({ field: "a2a.name" });
  });

  it("refuses an empty tag", () => {
    expect(caught(() => validateChannelA2a({ skills: [{ id: "a", name: "x", tags: [""] }] })).details).toEqual({ field: "a2a.skills[0].tags[0]" });
  });

  it("refuses to publish a broadcast channel", () => {
    const a2a = validateChannelA2a({ enabled: true });
    expect(caught(() => checkA2aMode(a2a, "broadcast")).details).toEqual({ field: "a2a.enabled" });
  });

  it("lets a broadcast channel keep settings that are not enabled", () => {
    expect(() => checkA2aMode(validateChannelA2a({ enabled: false }), "broadcast")).not.toThrow();
  });

  it("counts as no change when only the stored key order differs", () => {
    const stored = { skills: [{ tags: [], examples: [], description: "", name: "x", id: "a" }], description: null, name: null, enabled: true };
    const current = { a2a: stored } as unknown as ChannelRecord;
    expect(changedColumns(current, { a2a: validateChannelA2a({ enabled: true, skills: [{ id: "a", name: "x" }] }) })).toEqual({});
  });
});
