// Types for scripts/test-prerequisites.mjs (a plain script so that `npm test` starts it without a build).
export interface Requirement {
  /** What is needed, as a person would name it. */
  need: string;
  /** Which tests need it. */
  why: string;
  probe: { commands?: string[]; python?: string[] };
  /** The Debian packages that bring it. */
  packages: string[];
}

export interface Probes {
  hasCommand(name: string): boolean;
  /** Whether the tests' Python interpreter finds every module. */
  pythonHas(modules: string[]): boolean;
}

export type Plan =
  | { kind: "ready" }
  | { kind: "install"; sudo: boolean; packages: string[] }
  | { kind: "stop"; message: string };

export const REQUIREMENTS: readonly Requirement[];
export function findMissing(requirements: readonly Requirement[], probes: Probes): Requirement[];
export function plan(missing: readonly Requirement[], machine: { isRoot: boolean; canSudo: boolean; hasAptGet: boolean }): Plan;
