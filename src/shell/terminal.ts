/**
 * What the shell commands print is mostly someone else's text: message
 * content, actor labels, results, channel descriptions, the service's error
 * messages. On a terminal, control characters in it are commands to the
 * terminal (OSC 52 writes the clipboard, OSC 0 the window title, CR and
 * ESC [2J overwrite what was shown, C1 CSI is ESC [ in one byte) and bidi
 * overrides reorder a line, so any poster could write the reader's clipboard
 * or forge what the reader sees (docs/decisions.md#shell-terminal).
 */

/**
 * Every C0 control but newline and tab, DEL, every C1 control, and the bidi
 * embeddings, overrides and isolates.
 */
// eslint-disable-next-line no-control-regex -- control characters are what it looks for
const UNSAFE_ON_A_TERMINAL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/**
 * `text` with each character a terminal would obey or reorder by shown as a
 * JSON-style escape (`\u001b`, `\u009b`, `\u202e`): visible, and a JSON line
 * stays valid JSON that decodes to the exact original (JSON.stringify already
 * escapes C0 but leaves DEL, C1 and bidi characters raw).
 */
export function forTerminal(text: string): string {
  return text.replace(UNSAFE_ON_A_TERMINAL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** Where the shell commands write their lines, and whether each stream is a terminal. */
export interface Io {
  env: NodeJS.ProcessEnv;
  out(line: string): void;
  err(line: string): void;
  stdin: NodeJS.ReadableStream;
  /** stdout is a terminal (else a pipe or a file, which get the bytes as they are). */
  outIsTTY: boolean;
  /** stderr is a terminal. */
  errIsTTY: boolean;
}

/**
 * `io` with every line made safe for the stream it goes to: escaped on a
 * terminal unless `raw()` (the --raw flag), byte-exact to a pipe or a file so
 * scripts see the data as stored. Every line the commands print passes here,
 * so no command can forget it.
 */
export function onTerminal(io: Io, raw: () => boolean): Io {
  const shown = (isTTY: boolean, line: string) => (isTTY && !raw() ? forTerminal(line) : line);
  return {
    ...io,
    out: (line) => io.out(shown(io.outIsTTY, line)),
    err: (line) => io.err(shown(io.errIsTTY, line)),
  };
}
