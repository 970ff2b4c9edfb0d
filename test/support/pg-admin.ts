/** Statements about whole databases, for the global setup and the per-file databases alike. */
import pg from "pg";

/** The URL of `database` on the server of `serverUrl`. */
export function databaseUrl(serverUrl: string, database: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

/** CREATE/DROP DATABASE cannot run inside the database concerned, so they go through the server URL's database. */
export async function onServer(serverUrl: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: serverUrl });
  client.on("error", () => {}); // failures surface through the awaited calls
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}
