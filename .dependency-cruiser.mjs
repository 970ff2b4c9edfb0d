/**
 * The architecture, checked on every `npm run lint`.
 *
 *   entry       src/cli.ts, app.ts, components.ts, database.ts: wires adapters in
 *     ↓         (src/shell: the shell commands, clients of the REST API like the MCP tools)
 *     ↓
 *   transport   src/server: listener, REST transcoder, Connect routes, docs, health
 *     ↓
 *   handlers    src/services (RPCs) · src/jobs, src/webhooks, src/forwarder (background work)
 *     ↓
 *   protocol    src/protocol: call context, serviceEntry, message → protobuf/JSON
 *     ↓
 *   domain      src/domain: rules and use cases
 *     ↓
 *   ports       src/ports: the storage interfaces the domain owns
 *     ↑ implemented by
 *   adapters    src/store (all SQL), src/bus: storage and wake-ups, reached only through ports
 *               src/outbound, pdf, parsing, transcripts: the outbound client and the renderers
 *     ↓
 *   model       src/model: records, JSON, ids, time, errors     (imports nothing of ours)
 *   platform    src/platform: config, logger, version           (imports the model only)
 *   gen         gen/: generated protobuf                        (imports nothing of src)
 *
 * Imports go down the picture only; `mayImport` says exactly which layers
 * each one reaches. The transport and the domain get adapters only as objects
 * the entry passes in; handlers may use the renderers and the outbound client
 * (their input rules live there), never the store or the bus. No cycles,
 * between modules or between folders. The web console (console/) is a
 * browser application: it imports the browser client and gen/, never src/.
 */
const layers = {
  entry: "^src/[^/]+\\.ts$",
  shell: "^src/shell/",
  transport: "^src/server/",
  handlers: "^src/(services|jobs|webhooks|forwarder)/",
  protocol: "^src/protocol/",
  domain: "^src/domain/",
  ports: "^src/ports/",
  storage: "^src/(store|bus)/",
  adapters: "^src/(outbound|pdf|parsing|transcripts)/",
  model: "^src/model/",
  platform: "^src/platform/",
  gen: "^gen/",
};

const mayImport = {
  entry: ["shell", "transport", "handlers", "protocol", "domain", "ports", "storage", "adapters", "model", "platform", "gen"],
  shell: ["transport", "model", "platform", "gen"],
  transport: ["protocol", "domain", "ports", "model", "platform", "gen"],
  handlers: ["protocol", "domain", "ports", "adapters", "model", "platform", "gen"],
  protocol: ["model", "platform", "gen"],
  domain: ["ports", "model", "platform"],
  ports: ["model"],
  storage: ["ports", "model", "platform"],
  adapters: ["ports", "model", "platform", "gen"],
  model: [],
  platform: ["model"],
  gen: [],
};

const layerRules = Object.entries(mayImport).map(([layer, below]) => ({
  name: `${layer}-imports-only-below`,
  severity: "error",
  from: { path: layers[layer] },
  to: { path: "^(src|gen)/", pathNot: [layer, ...below].map((name) => layers[name]) },
}));

// The folders of a layer stay apart, but for these uses.
const folderMayImport = {
  handlers: { services: [], jobs: ["webhooks"], webhooks: [], forwarder: [] },
  storage: {
    store: [],
    bus: ["store"], // its connection helpers
  },
  adapters: {
    outbound: [],
    pdf: [],
    parsing: ["outbound"], // fetches go through the guarded fetch
    transcripts: ["outbound"],
  },
};

const folderRules = Object.entries(folderMayImport).flatMap(([layer, folders]) =>
  Object.entries(folders).map(([folder, uses]) => ({
    name: `${folder}-apart`,
    severity: "error",
    from: { path: `^src/${folder}/` },
    to: { path: layers[layer], pathNot: `^src/(${[folder, ...uses].join("|")})/` },
  })),
);

export default {
  forbidden: [
    ...layerRules,
    ...folderRules,
    { name: "no-circular", severity: "error", from: {}, to: { circular: true } },
    {
      name: "no-circular-folders",
      severity: "error",
      scope: "folder",
      from: {},
      to: { circular: true },
    },
    {
      name: "console-through-the-client",
      comment: "The web console runs in a browser: it reaches the service through the browser client and gen/, never src/.",
      severity: "error",
      from: { path: "^console/" },
      to: { path: "^src/" },
    },
    {
      name: "not-to-unresolvable",
      comment: "Our own imports are relative; one the cruiser cannot resolve would escape every rule above.",
      severity: "error",
      from: {},
      to: { couldNotResolve: true, path: "^[.][.]?/" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsConfig: { fileName: "tsconfig.json" },
    // Type-only imports count: they tie the layers together just the same.
    tsPreCompilationDeps: true,
  },
};
