/** Markdown to PDF: submit a job, follow it, then preview and download the file. */
import { useEffect, useRef, useState } from "preact/hooks";
import { JobStatus } from "../../../gen/agentbus/v1/job_pb.js";
import { PdfFormat } from "../../../gen/agentbus/v1/job_service_pb.js";
import { ProblemError } from "../api.js";
import { Field, ProblemBox } from "../components.js";
import { useAction, useSession } from "../session.js";

/** Shown in the empty box as a hint only: text the person did not write is never sent. */
const PLACEHOLDER = "# Title\n\nMarkdown or HTML…";
const POLL_MS = 500;
/** How long the page follows a job before it gives up (the job itself goes on). */
const FOLLOW_MS = 120_000;

export function PdfPage() {
  const { client } = useSession();
  const [markdown, setMarkdown] = useState("");
  const [status, setStatus] = useState<string | undefined>(undefined);
  const [pdfUrl, setPdfUrl] = useState<string | undefined>(undefined);
  useEffect(() => () => (pdfUrl ? URL.revokeObjectURL(pdfUrl) : undefined), [pdfUrl]);
  // Leaving the page stops following the job.
  const leaving = useRef(new AbortController());
  useEffect(() => () => leaving.current.abort(), []);
  const render = useAction(async () => {
    setPdfUrl(undefined);
    setStatus("Queued…");
    const signal = leaving.current.signal;
    const { jobId } = await client.jobs.createPdfJob({ content: markdown, format: PdfFormat.MARKDOWN }, { signal });
    const giveUpAt = Date.now() + FOLLOW_MS;
    for (;;) {
      if (signal.aborted) return;
      if (Date.now() > giveUpAt) {
        setStatus(undefined);
        throw new ProblemError({
          code: "still_running",
          message: `The PDF was not ready within ${FOLLOW_MS / 1000} s`,
          suggestion: `The job goes on: fetch it later with GET /v1/jobs/${jobId}.`,
        });
      }
      const job = await client.jobs.getJob({ jobId }, { signal });
      if (job.status === JobStatus.COMPLETED) break;
      if (job.status === JobStatus.FAILED) {
        setStatus(undefined);
        throw new ProblemError({
          code: job.error?.error || "job_failed",
          message: job.error?.message || "The PDF could not be made",
          suggestion: "Check the Markdown, then try again; /docs/errors describes the code.",
        });
      }
      setStatus(job.status === JobStatus.PROCESSING ? "Rendering…" : "Queued…");
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
    const body = await client.jobs.downloadPdf({ jobId }, { signal });
    const data = new Uint8Array(body.data);
    setPdfUrl(URL.createObjectURL(new Blob([data], { type: "application/pdf" })));
    setStatus(`Ready: ${Math.ceil(data.byteLength / 1024)} KiB.`);
  });
  return (
    <main>
      <h1>Markdown to PDF</h1>
      <form
        class="card"
        aria-label="Make a PDF"
        onSubmit={(e) => {
          e.preventDefault();
          void render.run();
        }}
      >
        <Field label="Markdown">
          <textarea name="markdown" rows={12} required placeholder={PLACEHOLDER} value={markdown} onInput={(e) => setMarkdown(e.currentTarget.value)} />
        </Field>
        <div class="row">
          <button type="submit" disabled={render.busy}>
            Make PDF
          </button>
          {status ? (
            <span role="status" class="muted">
              {status}
            </span>
          ) : null}
          {pdfUrl ? (
            <a class="button" href={pdfUrl} download="agentbus.pdf">
              Download PDF
            </a>
          ) : null}
        </div>
        <ProblemBox problem={render.problem} />
      </form>
      {pdfUrl ? <iframe class="pdf-preview" title="PDF preview" src={pdfUrl} /> : null}
    </main>
  );
}
