// Types for js/provider/sqlite.js: @bsv/overlay's knex migrations on SQLite.
/** The part of a knex instance the migrations use (kept structural: knex is the host's dependency). */
export interface KnexLike {
  migrate: { latest (config: { migrationSource: unknown }): Promise<unknown> }
  raw (...args: any[]): any
  destroy (): Promise<void>
}
/** Runs @bsv/overlay's migrations with MySQL's `INSERT IGNORE` rewritten for SQLite; idempotent. */
export declare function runOverlayMigrations (knex: KnexLike): Promise<void>
/**
 * A knex instance (client better-sqlite3, which the host installs with knex) on
 * `<dir>/overlay.sqlite`, migrated. Pass it to @bsv/overlay's KnexStorage.
 */
export declare function openSqlite (dir: string): Promise<any>
