/**
 * Aliases live in one global namespace per kind (channels, actors), each in
 * its own table keyed by the alias and pointing at its owner. Both kinds add
 * an alias the same way, so the statement is written once here.
 */
import type { Db } from "./db.js";

/** The tables of one alias namespace (fixed names, never input). */
export interface AliasNamespace {
  aliasTable: "channel_aliases" | "actor_aliases";
  ownerColumn: "channel_id" | "actor_id";
  ownerTable: "channels" | "actors";
}

/**
 * Adds an alias without raising a unique violation (safe inside a caller's
 * transaction): "added", "exists" (this owner already has it) or "conflict"
 * (another owner has it). Adding one moves the owner's updated_at.
 */
export async function insertAlias(db: Db, ns: AliasNamespace, ownerId: string, alias: string, aliasKey: string): Promise<"added" | "exists" | "conflict"> {
  const { rows } = await db.query<{ inserted: boolean }>(
    `WITH ins AS (
       INSERT INTO ${ns.aliasTable} (alias, ${ns.ownerColumn}, alias_key) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING alias
     ), bump AS (
       UPDATE ${ns.ownerTable} SET updated_at = greatest(clock_timestamp(), updated_at + interval '1 microsecond')
       WHERE id = $2 AND EXISTS (SELECT 1 FROM ins)
     )
     SELECT EXISTS (SELECT 1 FROM ins) AS inserted`,
    [alias, ownerId, aliasKey],
  );
  if (rows[0]?.inserted) return "added";
  // A fresh statement sees the holder even when it committed after the INSERT's snapshot.
  const holder = await db.query<{ owner_id: string }>(`SELECT ${ns.ownerColumn} AS owner_id FROM ${ns.aliasTable} WHERE alias = $1`, [alias]);
  return holder.rows[0]?.owner_id === ownerId ? "exists" : "conflict";
}

/** Removes an alias from its owner: true when the owner held it. Removing one moves the owner's updated_at. */
export async function deleteAlias(db: Db, ns: AliasNamespace, ownerId: string, alias: string): Promise<boolean> {
  const { rows } = await db.query<{ deleted: boolean }>(
    `WITH del AS (
       DELETE FROM ${ns.aliasTable} WHERE alias = $1 AND ${ns.ownerColumn} = $2 RETURNING alias
     ), bump AS (
       UPDATE ${ns.ownerTable} SET updated_at = greatest(clock_timestamp(), updated_at + interval '1 microsecond')
       WHERE id = $2 AND EXISTS (SELECT 1 FROM del)
     )
     SELECT EXISTS (SELECT 1 FROM del) AS deleted`,
    [alias, ownerId],
  );
  return rows[0]?.deleted === true;
}
