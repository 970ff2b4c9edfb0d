// Builds the web console (console/) into dist/console: one bundled ES module
// (Preact, the generated Connect client, the views), its stylesheet and
// index.html. esbuild, because it bundles TypeScript and JSX in one step with
// no configuration and in well under a second. Run by `npm run build` (so by
// `npm start`) and by the test setup.
import { build } from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";

const out = "dist/console";
mkdirSync(out, { recursive: true });
await build({
  entryPoints: ["console/src/main.tsx"],
  outfile: `${out}/app.js`,
  bundle: true,
  format: "esm",
  target: "es2022",
  platform: "browser",
  minify: true,
  jsx: "automatic",
  jsxImportSource: "preact",
  legalComments: "none",
  logLevel: "warning",
});
copyFileSync("console/app.css", `${out}/app.css`);
copyFileSync("console/index.html", `${out}/index.html`);
