/**
 * The fonts every PDF is printed with, from npm packages (all OFL-1.1), so
 * that a machine without any system fonts prints Latin, CJK and emoji text
 * instead of empty boxes, and every machine prints the same glyphs.
 *
 * Chromium finds fonts through fontconfig only; a private fonts.conf
 * (FONTCONFIG_FILE, which must be an absolute path) lists the packages' font
 * folders and maps the generic families (sans-serif, serif, monospace,
 * system-ui, emoji) onto them. monospace gets a monospaced font first (Noto
 * Sans Mono), so code lines up; the proportional fonts follow it only for
 * the scripts it lacks (CJK). The colour emoji font and Noto Sans Mono are
 * published as WOFF only, which fontconfig does not read: they are
 * converted to TTF once.
 */
import { createHash, randomBytes } from "node:crypto";
import { readFile, rename, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { inflateSync } from "node:zlib";
import { npmPackage } from "./npm-package.js";

/** Latin (Noto Sans), Simplified Chinese with kana (Noto Sans SC), Korean (Noto Sans KR). */
const FONT_PACKAGES = ["@embedpdf/fonts-latin", "@embedpdf/fonts-sc", "@embedpdf/fonts-kr"] as const;
const EMOJI_PACKAGE = "@fontsource/noto-color-emoji";
const EMOJI_WOFF = "files/noto-color-emoji-emoji-400-normal.woff";
const MONO_PACKAGE = "@fontsource/noto-sans-mono";
/**
 * The package splits the font by script, one file per subset and weight.
 * fontconfig finds a character in whichever file of the family has it, so
 * together they are one font. Regular and bold: code is rarely anything else
 * (a missing weight would be synthesised by smearing the regular one).
 */
const MONO_SUBSETS = ["latin", "latin-ext", "cyrillic", "cyrillic-ext", "greek", "greek-ext", "vietnamese"];
const MONO_WEIGHTS = [400, 700];
/** The monospaced family; CSS asking for `monospace` gets it. */
export const MONOSPACE_FAMILY = "Noto Sans Mono";
/** Tried in this order for every character: a script's own font first, emoji last. */
const FALLBACKS = ["Noto Sans", "Noto Sans S Chinese", "Noto Sans Korean", "Noto Color Emoji"];

/** What the start-up line says about the fonts. */
export const FONTS_SUMMARY = "Noto Sans, Noto Sans Mono, Noto Sans CJK (SC, KR), Noto Color Emoji";

/**
 * Writes (once) the emoji TTF and a fonts.conf under `dir`; returns the
 * fonts.conf's absolute path. Safe against other processes doing the same at
 * once: every file appears whole (written under a temporary name, renamed).
 */
export async function prepareFonts(dir: string): Promise<string> {
  const emoji = npmPackage(EMOJI_PACKAGE);
  const emojiTtf = path.join(dir, `NotoColorEmoji-${emoji.version}.ttf`);
  if (!(await exists(emojiTtf))) {
    await writeWhole(emojiTtf, woffToSfnt(await readFile(path.join(emoji.dir, EMOJI_WOFF))));
  }
  const mono = npmPackage(MONO_PACKAGE);
  for (const subset of MONO_SUBSETS) {
    for (const weight of MONO_WEIGHTS) {
      const ttf = path.join(dir, `NotoSansMono-${subset}-${weight}-${mono.version}.ttf`);
      if (await exists(ttf)) continue;
      await writeWhole(ttf, woffToSfnt(await readFile(path.join(mono.dir, "files", `noto-sans-mono-${subset}-${weight}-normal.woff`))));
    }
  }
  // The package folders depend on where this checkout lives, so the file is
  // named after its content: two checkouts never overwrite each other's.
  const dirs = [...FONT_PACKAGES.map((name) => path.join(npmPackage(name).dir, "fonts")), dir];
  const conf = fontsConf(dirs, path.join(dir, "cache"));
  const file = path.join(dir, `fonts-${createHash("sha256").update(conf).digest("hex").slice(0, 12)}.conf`);
  if (!(await exists(file))) await writeWhole(file, conf);
  return file;
}

/**
 * Hinting off for every font. Chromium takes hinting from fontconfig (its
 * --font-render-hinting=none does not reach the fonts), and hinted glyphs
 * advance by whole pixels, each rounded its own way: in Noto Sans Mono at
 * 13 px an "i" advanced 7 px and a "W" 8 px, so code columns drifted apart.
 * Unhinted, every glyph advances by its design width, as printed type should.
 */
const NO_HINTING = `  <match target="font"><edit name="hinting" mode="assign"><bool>false</bool></edit><edit name="hintstyle" mode="assign"><const>hintnone</const></edit></match>`;

function fontsConf(dirs: string[], cacheDir: string): string {
  const families = (list: string[]) => list.map((family) => `<family>${escapeXml(family)}</family>`).join("");
  const alias = (generic: string, first: string[] = []) => `  <alias binding="same"><family>${generic}</family><prefer>${families([...first, ...FALLBACKS])}</prefer></alias>`;
  return [
    `<?xml version="1.0"?>`,
    `<!DOCTYPE fontconfig SYSTEM "fonts.dtd">`,
    `<fontconfig>`,
    ...dirs.map((d) => `  <dir>${escapeXml(d)}</dir>`),
    `  <cachedir>${escapeXml(cacheDir)}</cachedir>`,
    ...["sans-serif", "serif", "system-ui"].map((generic) => alias(generic)),
    alias("monospace", [MONOSPACE_FAMILY]),
    `  <alias binding="same"><family>emoji</family><prefer><family>Noto Color Emoji</family></prefer></alias>`,
    NO_HINTING,
    `</fontconfig>`,
    ``,
  ].join("\n");
}

/**
 * WOFF 1.0 → the sfnt (TTF/OTF) it wraps: each table zlib-inflated and laid
 * out behind a fresh table directory (the WOFF spec, section 5). No library
 * converts WOFF 1.0 without native code; this is the whole format.
 */
export function woffToSfnt(woff: Buffer): Buffer {
  if (woff.toString("latin1", 0, 4) !== "wOFF") throw new Error("not a WOFF 1.0 file");
  const flavor = woff.readUInt32BE(4);
  const numTables = woff.readUInt16BE(12);
  const tables: Array<{ tag: number; checksum: number; data: Buffer }> = [];
  for (let i = 0; i < numTables; i++) {
    const entry = 44 + i * 20;
    const offset = woff.readUInt32BE(entry + 4);
    const compressed = woff.readUInt32BE(entry + 8);
    const original = woff.readUInt32BE(entry + 12);
    let data = woff.subarray(offset, offset + compressed);
    if (compressed < original) data = inflateSync(data);
    if (data.length !== original) throw new Error("a WOFF table does not have its declared length");
    tables.push({ tag: woff.readUInt32BE(entry), checksum: woff.readUInt32BE(entry + 16), data });
  }
  let entrySelector = 0;
  while (1 << (entrySelector + 1) <= numTables) entrySelector++;
  const searchRange = (1 << entrySelector) * 16;
  const padded = (n: number) => (n + 3) & ~3;
  const out = Buffer.alloc(tables.reduce((size, t) => size + padded(t.data.length), 12 + 16 * numTables));
  out.writeUInt32BE(flavor, 0);
  out.writeUInt16BE(numTables, 4);
  out.writeUInt16BE(searchRange, 6);
  out.writeUInt16BE(entrySelector, 8);
  out.writeUInt16BE(numTables * 16 - searchRange, 10);
  let position = 12 + 16 * numTables;
  tables.forEach((table, i) => {
    const entry = 12 + i * 16;
    out.writeUInt32BE(table.tag, entry);
    out.writeUInt32BE(table.checksum, entry + 4);
    out.writeUInt32BE(position, entry + 8);
    out.writeUInt32BE(table.data.length, entry + 12);
    table.data.copy(out, position);
    position += padded(table.data.length);
  });
  return out;
}

/** Writes under a temporary name and renames, so no reader ever sees half a file. */
async function writeWhole(file: string, content: Buffer | string): Promise<void> {
  const temporary = `${file}.${process.pid}-${randomBytes(4).toString("hex")}.tmp`;
  await writeFile(temporary, content, { mode: 0o644 });
  await rename(temporary, file);
}

async function exists(file: string): Promise<boolean> {
  return stat(file).then(() => true, () => false);
}

function escapeXml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}
