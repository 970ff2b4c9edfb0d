/**
 * The local files the shell commands read and write. A file that is not
 * there is the user's to fix, not the service's: it ends the command as bad
 * usage naming the file, before anything is sent.
 */
import { readFile, writeFile } from "node:fs/promises";
import { EXIT, Exit } from "./exit.js";

export async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  } catch (err) {
    throw new Exit(EXIT.usage, `cannot read stdin: ${reason(err)}`);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** The text of `file`, or of stdin for `-`. */
export async function readInput(file: string, stdin: NodeJS.ReadableStream): Promise<string> {
  if (file === "-") return readAll(stdin);
  try {
    return await readFile(file, "utf8");
  } catch (err) {
    throw new Exit(EXIT.usage, codeOf(err) === "ENOENT" ? `no such file: ${file}` : `cannot read ${file}: ${reason(err)}`);
  }
}

export async function writeOutput(file: string, data: string | Buffer): Promise<void> {
  try {
    await writeFile(file, data);
  } catch (err) {
    throw new Exit(EXIT.usage, `cannot write ${file}: ${codeOf(err) === "ENOENT" ? "no such directory" : reason(err)}`);
  }
}

const codeOf = (err: unknown) => (err as NodeJS.ErrnoException | undefined)?.code;

const REASONS: Record<string, string> = { EACCES: "permission denied", EISDIR: "it is a directory", ENOTDIR: "a part of the path is not a directory", ENOENT: "no such file" };

function reason(err: unknown): string {
  const code = codeOf(err);
  return (code !== undefined ? REASONS[code] : undefined) ?? (err instanceof Error ? err.message : String(err));
}
