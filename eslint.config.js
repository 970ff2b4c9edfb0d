import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["gen/**", "dist/**", "clients/typescript/dist/**", "node_modules/**", ".proto-deps/**", "clients/python/**", "coverage/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
    },
  },
  {
    files: ["scripts/**/*.mjs", ".ci/**/*.mjs", "bin/*.mjs", "*.js"],
    languageOptions: { globals: { process: "readonly", console: "readonly", fetch: "readonly", Buffer: "readonly", setTimeout: "readonly" } },
  },
);
