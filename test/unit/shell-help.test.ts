/**
 * The shell commands' --help: what a person learns there without the README.
 * Read off the command tree, so a command added later is held to the same.
 */
import { Readable } from "node:stream";
import type { Command } from "commander";
import { describe, expect, it } from "vitest";
import { buildProgram } from "../../src/shell/commands.js";

function program(out: string[] = []): Command {
  return buildProgram({ env: {}, out: (line) => out.push(line), err: () => undefined, stdin: Readable.from([]), outIsTTY: false, errIsTTY: false });
}

function* everyCommand(parent: Command, prefix = ""): Generator<[string, Command]> {
  for (const command of parent.commands) {
    const name = `${prefix}${command.name()}`;
    yield [name, command];
    yield* everyCommand(command, `${name} `);
  }
}

describe("agentbus <command> --help", () => {
  it("shows the global --url and --key on every command", () => {
    const lacking = [...everyCommand(program())].filter(([, c]) => !/--url <url>/.test(c.helpInformation()) || !/--key <key>/.test(c.helpInformation()));
    expect(lacking.map(([name]) => name)).toEqual([]);
  });

  it("offers -o only on the commands that write a file", () => {
    const withOutput = [...everyCommand(program())].filter(([, c]) => c.options.some((o) => o.short === "-o")).map(([name]) => name);
    expect(withOutput.sort()).toEqual(["parse", "pdf", "transcript"]);
  });

  it("states work's exit codes", () => {
    const out: string[] = [];
    const work = program(out).commands.find((c) => c.name() === "work")!;
    work.outputHelp();
    const help = out.join("\n");
    for (const code of [0, 1, 2, 3, 126, 127, 130]) expect(help).toMatch(new RegExp(`^ {2}${code} +\\S`, "m"));
  });
});
