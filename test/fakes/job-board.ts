/**
 * A local job board on 127.0.0.1: a posting page wrapped in the usual
 * navigation, cookie banner, side bar of similar jobs and footer, plus the
 * pages that make a fetch fail.
 *
 *   /jobs/senior-backend-engineer   the posting (HTML, with JSON-LD JobPosting data)
 *   /jobs/latin1                    a (German) posting in ISO-8859-1, charset in the header
 *   /jobs/redirect                  302 to the posting
 *   /jobs/gone                      404
 *   /jobs/flaky                     503 for the first `flakyFailures` requests, then the posting
 *   /jobs/pdf                       application/pdf
 *   /jobs/huge                      an HTML page of `hugeBytes`
 *   /jobs/empty                     an HTML page with no text (a JavaScript app shell)
 */
import type http from "node:http";
import { LoopbackServer } from "./http.js";

/** Sentences of the posting that must reach the model; the boilerplate must not. */
export const POSTING_FACTS = {
  title: "Senior Backend Engineer",
  intro: "Nordwind Logistics GmbH is hiring a Senior Backend Engineer for its routing platform in Hamburg.",
  salary: "The salary is €72,000 – €88,000 per year, depending on experience.",
  requirement: "5+ years building backend services with Node.js and TypeScript",
  benefit: "30 days of paid vacation",
};

export const BOILERPLATE = {
  nav: "Browse all 12,345 jobs",
  cookie: "We use cookies to improve your experience",
  similar: "Similar job: Junior Frontend Developer in Munich",
  footer: "© 2026 JobBoard Ltd. Imprint. Privacy policy.",
};

export function postingHtml(): string {
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>${POSTING_FACTS.title} – Nordwind Logistics – JobBoard</title>
  <style>body { font-family: sans-serif }</style>
  <script>window.dataLayer = [{ "event": "pageview" }];</script>
  <script type="application/ld+json">${JSON.stringify({
    "@context": "https://schema.org/",
    "@type": "JobPosting",
    title: POSTING_FACTS.title,
    hiringOrganization: { "@type": "Organization", name: "Nordwind Logistics GmbH" },
    employmentType: "FULL_TIME",
    jobLocation: { "@type": "Place", address: { "@type": "PostalAddress", addressLocality: "Hamburg", addressCountry: "DE" } },
    baseSalary: { "@type": "MonetaryAmount", currency: "EUR", value: { "@type": "QuantitativeValue", minValue: 72000, maxValue: 88000, unitText: "YEAR" } },
    description: "<p>Build &amp; run our routing platform.</p>",
  })}</script>
</head>
<body>
  <div class="cookie-banner">${BOILERPLATE.cookie}. <button>Accept all</button></div>
  <header class="site-header">
    <nav><a href="/">Home</a> <a href="/jobs">${BOILERPLATE.nav}</a> <a href="/companies">Companies</a> <a href="/login">Sign in</a></nav>
    <form action="/search"><input name="q" placeholder="Search jobs"><button>Search</button></form>
  </header>
  <main>
    <article class="job-posting">
      <h1>${POSTING_FACTS.title}</h1>
      <p class="meta">Nordwind Logistics GmbH · Hamburg, Germany (hybrid) · Full-time</p>
      <p>${POSTING_FACTS.intro} You will design, build &amp; operate the services that plan thousands of truck routes every day,
      together with a team of eight engineers and two product managers.</p>
      <p>${POSTING_FACTS.salary}</p>
      <h2>What you bring</h2>
      <ul>
        <li>${POSTING_FACTS.requirement}</li>
        <li>Solid PostgreSQL knowledge, including query tuning</li>
        <li>Experience with message queues such as Kafka or RabbitMQ</li>
        <li>Fluent English; German is a plus</li>
      </ul>
      <h2>What we offer</h2>
      <ul>
        <li>${POSTING_FACTS.benefit}</li>
        <li>Public transport ticket</li>
        <li>Hybrid work: two office days a week</li>
      </ul>
      <p>Apply with your CV; we answer every application within two weeks. Our hiring process has three steps: a short call,
      a technical conversation about a system you built, and a meeting with the team.</p>
    </article>
  </main>
  <aside class="similar-jobs">
    <h3>Similar jobs</h3>
    <ul><li><a href="/jobs/1">${BOILERPLATE.similar}</a></li><li><a href="/jobs/2">Similar job: Data Engineer in Berlin</a></li></ul>
  </aside>
  <footer>${BOILERPLATE.footer} <a href="/terms">Terms</a></footer>
  <script src="/static/app.js"></script>
</body>
</html>`;
}

/** A posting served as ISO-8859-1 (every character below is in Latin-1). */
export const LATIN1_POSTING = `<!doctype html><html><head><title>Bäckerei-Filialleitung (m/w/d)</title></head><body>
<nav>Startseite · Jobs · Anmelden</nav>
<main><article><h1>Bäckerei-Filialleitung (m/w/d)</h1>
<p>Die Bäckerei Müller sucht eine Filialleitung für unsere Filiale in Zürich, Großmünsterplatz. Sie führen ein Team von zwölf Mitarbeitenden und verantworten Umsatz, Einkauf und Dienstpläne.</p>
<p>Gehalt: 72.000 bis 84.000 CHF im Jahr, Vollzeit. Wir bieten fünf Wochen Ferien und vergünstigte Backwaren für das ganze Team.</p>
</article></main><footer>© 2026 Jobbörse</footer></body></html>`;

export class FakeJobBoard {
  readonly requests: Array<{ path: string; headers: http.IncomingHttpHeaders }> = [];
  flakyFailures = 2;
  hugeBytes = 6 * 1024 * 1024;
  private flakyServed = 0;
  private server: LoopbackServer | undefined;

  static async start(): Promise<FakeJobBoard> {
    const board = new FakeJobBoard();
    board.server = await LoopbackServer.listen((req, res) => board.handle(req, res));
    return board;
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.server!.port}${path}`;
  }

  /** The same server under the name "localhost" (resolves to a loopback address). */
  localhostUrl(path: string): string {
    return `http://localhost:${this.server!.port}${path}`;
  }

  close(): Promise<void> {
    return this.server?.close() ?? Promise.resolve();
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const path = new URL(req.url ?? "/", "http://x").pathname;
    this.requests.push({ path, headers: req.headers });
    const html = (body: string | Buffer, contentType = "text/html; charset=utf-8"): void => {
      res.writeHead(200, { "content-type": contentType }).end(body);
    };
    switch (path) {
      case "/jobs/senior-backend-engineer":
        return html(postingHtml());
      case "/jobs/latin1":
        return html(Buffer.from(LATIN1_POSTING, "latin1"), "text/html; charset=ISO-8859-1");
      case "/jobs/redirect":
        res.writeHead(302, { location: "/jobs/senior-backend-engineer" }).end();
        return;
      case "/jobs/flaky":
        if (this.flakyServed++ < this.flakyFailures) {
          res.writeHead(503, { "content-type": "text/plain" }).end("try later");
          return;
        }
        return html(postingHtml());
      case "/jobs/pdf":
        res.writeHead(200, { "content-type": "application/pdf" }).end("%PDF-1.7\n%fake\n");
        return;
      case "/jobs/huge": {
        const filler = `<p>${"lorem ipsum ".repeat(80)}</p>\n`;
        return html(`<!doctype html><html><body>${filler.repeat(Math.ceil(this.hugeBytes / filler.length))}</body></html>`);
      }
      case "/jobs/empty":
        return html(`<!doctype html><html><head><title></title></head><body><div id="root"></div><script src="/app.js"></script></body></html>`);
      default:
        res.writeHead(404, { "content-type": "text/html" }).end("<h1>Not found</h1>");
    }
  }
}
