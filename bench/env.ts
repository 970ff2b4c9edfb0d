/** A number from the environment variable `name`, at least `min`; `fallback` when unset or blank. Anything else stops the bench. */
export function numberVar(name: string, fallback: number, min: number): number {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min) throw new Error(`${name} must be a number ≥ ${min} (got ${JSON.stringify(raw)})`);
  return value;
}
