/**
 * clients/typescript is an npm package: `npm pack` builds it, and what the
 * tarball installs works for a consumer outside the repository, through both
 * entries (Node: gRPC; `/web`: Connect over fetch, as in a browser), and
 * typechecks against its declarations.
 */
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useTestServer } from "../support/server.js";

const run = promisify(execFile);
const root = join(import.meta.dirname, "../..");
const packageDir = join(root, "clients/typescript");
const server = useTestServer();
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "agentbus-ts-package-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const CONSUMER = `import { ChannelMode, createClient, isAgentbusError } from "@agentbus/client";
import { createClient as createWebClient } from "@agentbus/client/web";

const base = process.argv[2] ?? "";
const { key } = await createClient({ baseUrl: base }).keys.createKey({ agentLabel: "package" });
const bus = createClient({ baseUrl: base, apiKey: key });
const channel = await bus.channels.createChannel({ name: \`package-\${Date.now()}\`, mode: ChannelMode.CLAIMABLE });
const web = createWebClient({ baseUrl: base, apiKey: key });
const posted = await web.messages.createMessage({ identifier: channel.id, content: "from the web entry" });
const received = await bus.messages.receiveMessages({ identifier: channel.id });
let refused = "";
try {
  await web.channels.getChannel({ identifier: "no-such-channel" });
} catch (err) {
  if (isAgentbusError(err)) refused = err.code;
}
console.log(JSON.stringify({ posted: posted.message?.id ?? "", received: received.data.map((d) => d.message?.id ?? ""), refused }));
`;

describe("the TypeScript client package", () => {
  it("packs its built Node and browser entries with the generated code, and works installed outside the repository", async () => {
    const { stdout } = await run("npm", ["pack", "--json", "--pack-destination", dir], { cwd: packageDir, maxBuffer: 10 * 1024 * 1024 });
    const [packed] = JSON.parse(stdout.slice(stdout.indexOf("[\n"))) as Array<{ filename: string; files: Array<{ path: string }> }>;
    const files = packed!.files.map((f) => f.path);
    for (const file of [
      "package.json",
      "README.md",
      "dist/clients/typescript/src/index.js",
      "dist/clients/typescript/src/index.d.ts",
      "dist/clients/typescript/src/web.js",
      "dist/clients/typescript/src/web.d.ts",
      "dist/gen/agentbus/v1/message_service_pb.js",
    ]) {
      expect(files).toContain(file);
    }
    expect(files.filter((f) => f.startsWith("src/") || f.startsWith("test/"))).toEqual([]);

    // Installed as npm would: the tarball under node_modules, its dependencies beside it (this repository's copies).
    const project = join(dir, "consumer");
    const scope = join(project, "node_modules", "@agentbus");
    await mkdir(join(scope, "client"), { recursive: true });
    await run("tar", ["-xzf", join(dir, packed!.filename), "-C", join(scope, "client"), "--strip-components=1"]);
    for (const dep of ["@bufbuild", "@connectrpc", "@types"]) await symlink(join(root, "node_modules", dep), join(project, "node_modules", dep));
    await writeFile(join(project, "package.json"), JSON.stringify({ name: "consumer", type: "module", private: true }));
    await writeFile(join(project, "consumer.ts"), CONSUMER);
    await writeFile(
      join(project, "tsconfig.json"),
      JSON.stringify({ compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true, noEmit: false, outDir: "out", types: ["node"], skipLibCheck: false } }),
    );
    // The declarations typecheck for a strict consumer, and compile it.
    await run(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", project], { cwd: project });
    const out = await run(process.execPath, [join(project, "out/consumer.js"), server.url], { cwd: project });
    const result = JSON.parse(out.stdout) as { posted: string; received: string[]; refused: string };
    expect(result.posted).toMatch(/^[0-9a-f-]{36}$/);
    expect(result.received).toEqual([result.posted]);
    expect(result.refused).toBe("channel_not_found");
  }, 120_000);
});
