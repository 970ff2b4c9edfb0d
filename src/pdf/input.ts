/**
 * Submission rules of POST /v1/pdf/generate (docs/decisions.md#pdf-jobs), checked before
 * the job exists, so a bad request never becomes a failed job:
 *
 * - `content` is required and must hold something besides whitespace
 *   (422 missing_field / invalid_string); it is stored exactly as sent.
 * - `format` is `html` (the default) or `markdown`; anything else is 422
 *   invalid_format (REST rejects unknown names while decoding; a gRPC caller
 *   may send an unknown enum number, refused here).
 * - `css` is optional, default "".
 * - content and css together at most 10 MiB of UTF-8 (413 payload_too_large),
 *   the body limit the proto declares for this method.
 */
import { PdfFormat } from "../../gen/agentbus/v1/job_service_pb.js";
import { ApiError } from "../model/errors.js";

export const MAX_PDF_SOURCE_BYTES = 10 * 1024 * 1024;

export type PdfSourceFormat = "html" | "markdown";

/** The stored input of a pdf job. */
export interface PdfInput {
  content: string;
  format: PdfSourceFormat;
  css: string;
}

export interface PdfRequestFields {
  content?: string | undefined;
  format: PdfFormat;
  css?: string | undefined;
}

export function validatePdfRequest(request: PdfRequestFields): PdfInput {
  const { content, css = "" } = request;
  if (content === undefined) {
    throw new ApiError("missing_field", "'content' is required: the HTML or Markdown to render", { details: { field: "content" } });
  }
  if (content.trim() === "") {
    throw new ApiError("invalid_string", "'content' must contain at least one non-whitespace character", {
      details: { field: "content" },
      suggestion: "Send the HTML or Markdown document to render in `content`.",
    });
  }
  let format: PdfSourceFormat;
  switch (request.format) {
    case PdfFormat.UNSPECIFIED:
    case PdfFormat.HTML:
      format = "html";
      break;
    case PdfFormat.MARKDOWN:
      format = "markdown";
      break;
    default:
      throw new ApiError("invalid_format", `'format' must be "html" or "markdown" (got enum value ${String(request.format)})`, {
        details: { field: "format" },
      });
  }
  const size = Buffer.byteLength(content, "utf8") + Buffer.byteLength(css, "utf8");
  if (size > MAX_PDF_SOURCE_BYTES) {
    throw new ApiError("payload_too_large", `content and css together exceed ${MAX_PDF_SOURCE_BYTES} bytes`, {
      details: { max_body_bytes: MAX_PDF_SOURCE_BYTES },
      suggestion: "Split the document into several PDF jobs, or shrink embedded images.",
    });
  }
  return { content, format, css };
}
