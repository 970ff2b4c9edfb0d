/**
 * User-chosen names that stand for an identity (docs/decisions.md#lookalike-names). Two names
 * that look alike must not both be taken, so uniqueness is judged on a
 * normal form while the name is shown as given (trimmed).
 */
import { ApiError } from "../model/errors.js";

/** Control, format (bidi overrides, zero-width), line and paragraph separators: invisible or reordering. */
export const INVISIBLE_CHARACTERS = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;

/**
 * The form names are compared in: NFKC (full-width and other compatibility
 * forms become their plain letters), lower case, trimmed. NFKC again after
 * lower-casing, as lower-casing can leave a string that is not in NFKC.
 */
export function nameKey(value: string): string {
  return value.normalize("NFKC").toLowerCase().normalize("NFKC").trim();
}

/**
 * Trims a name and refuses it when nothing visible is left (422
 * missing_field) or when it holds an invisible character (422 `code`).
 */
export function displayName(value: string, field: string, code: "invalid_agent_label" | "invalid_string", maxLength: number): string {
  const trimmed = value.trim();
  if (trimmed === "" || nameKey(trimmed) === "") {
    throw new ApiError("missing_field", `'${field}' is required and must not be blank`, { details: { field } });
  }
  if (INVISIBLE_CHARACTERS.test(trimmed)) {
    throw new ApiError(code, `'${field}' must not contain control, bidi-override or zero-width characters`, {
      details: { field },
      suggestion: "Use visible characters only: such characters make a name look like another one.",
    });
  }
  if ([...trimmed].length > maxLength) {
    throw new ApiError(code, `'${field}' must be at most ${maxLength} characters`, { details: { field } });
  }
  return trimmed;
}
