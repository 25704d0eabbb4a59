'use strict'
// Engine storage on knex + better-sqlite3: @bsv/overlay's own knex migrations made to run on
// SQLite. @bsv/overlay 0.4.6 fails its "overlay-2" migration there (it moves rows with MySQL's
// `INSERT IGNORE`); these helpers are the fix. @bsv/overlay, knex and better-sqlite3 are the
// host's own dependencies: they are loaded when a helper is first called, not with the package.
const path = require('node:path')

/**
 * Runs @bsv/overlay's knex migrations. They ship as unnamed {up, down} objects; one of them moves
 * rows with MySQL's `INSERT IGNORE`, which SQLite rejects, so raw SQL is rewritten to SQLite's
 * `INSERT OR IGNORE` on the way through (the statement copies nothing on a fresh database anyway).
 * Idempotent: knex records applied migrations, so a reopened database is left as it is.
 */
async function runOverlayMigrations (knex) {
  const { KnexStorageMigrations } = require('@bsv/overlay')
  const migrations = KnexStorageMigrations.default
  const source = {
    getMigrations: async () => migrations.map((m, i) => ({ name: `overlay-${String(i).padStart(3, '0')}`, m })),
    getMigrationName: (entry) => entry.name,
    getMigration: async (entry) => ({
      up: (k) => entry.m.up(sqliteCompatible(k)),
      down: (k) => entry.m.down(sqliteCompatible(k))
    })
  }
  await knex.migrate.latest({ migrationSource: source })
}

function sqliteCompatible (k) {
  return new Proxy(k, {
    get (target, prop, receiver) {
      if (prop === 'raw') {
        return (sql, ...rest) => target.raw(
          typeof sql === 'string' ? sql.replace(/\bINSERT\s+IGNORE\b/gi, 'INSERT OR IGNORE') : sql,
          ...rest)
      }
      const value = Reflect.get(target, prop, receiver)
      return typeof value === 'function' ? value.bind(target) : value
    }
  })
}

/** A knex instance (better-sqlite3) on `<dir>/overlay.sqlite`, migrated. */
async function openSqlite (dir) {
  const Knex = require('knex')
  const knex = Knex({
    client: 'better-sqlite3',
    connection: { filename: path.join(dir, 'overlay.sqlite') },
    useNullAsDefault: true
  })
  try {
    await runOverlayMigrations(knex)
  } catch (e) {
    await knex.destroy()
    throw e
  }
  return knex
}

module.exports = { runOverlayMigrations, openSqlite }
