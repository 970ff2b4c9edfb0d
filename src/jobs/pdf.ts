/**
 * Renders a pdf job's document (docs/decisions.md#pdf-jobs): the input becomes one HTML
 * document (src/pdf/document.ts: Markdown converted and sanitised, extra CSS
 * last) and this process's Chromium prints it (src/pdf/renderer.ts). The PDF
 * is stored with the job; the result is its download path.
 */
import { JobFailure } from "../model/job-failure.js";
import type { PdfInput } from "../pdf/input.js";
import { asyncJobKind } from "./async-job.js";

export const pdfJob = asyncJobKind({
  kind: "pdf",
  // As many Agenda runs as the renderer takes at once (the runner adds the
  // reserved slot, and so does the renderer), so queued jobs stay unlocked
  // for other workers rather than waiting here.
  concurrency: (deps) => deps.pdf?.concurrency ?? 1,
  async process(input: PdfInput, { jobId, ownerKeyId, signal }, { pdf }) {
    if (!pdf) throw new JobFailure("pdf_renderer_unavailable", "This worker has no PDF renderer", true);
    // Loaded with the first pdf job, not at start-up: marked and sanitize-html take ~0.4 s to load.
    const { buildDocument } = await import("../pdf/document.js");
    const document = await buildDocument(input, (markdown) => pdf.markdown.convert(markdown));
    return { result: { url: `/v1/pdf/${jobId}` }, pdf: await pdf.render(document, signal, ownerKeyId) };
  },
});
