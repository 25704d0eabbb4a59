'use strict'
// The benchmark catalogue: one deterministic row per number n, loaded identically into
// (a) the live store, through LiveLookup.commit in groups, and
// (b) the Engine's SQLite storage (outputs, transactions, applied_transactions) and the
//     NotesLookupService table, in bulk through knex's own better-sqlite3 connection (loadBoth).
// Signing a million real transactions would take hours, so every row reuses the locking script
// and the BEEF of one of a few REAL note transactions (built with NoteFactory), with the row
// number stamped into the last 8 BEEF bytes so each row carries distinct evidence (the live
// store shares identical blobs, which would flatter it). Neither Engine.lookup nor the live
// store parses BEEF when answering, so the bytes only need the realistic size.

const crypto = require('node:crypto')
const { normalizeContext } = require('../../js/provider/ingest')
const { NoteFactory } = require('../../__test__/helpers/engine')
const { NOTES_TOPIC } = require('../../demo/notes/notesProtocol')

const SERVICE = 'ls_notes'
const AUTHORS = 4

/** Real note transactions (one per author) whose script and BEEF the rows reuse. */
async function makeTemplates (chainTracker, count = AUTHORS) {
  const templates = []
  for (let i = 0; i < count; i++) {
    const factory = new NoteFactory(chainTracker)
    const built = await factory.createNotes(['template note ' + i])
    const script = Buffer.from(built.tx.outputs[0].lockingScript.toBinary())
    templates.push({
      author: await factory.authorIdentityKey(),
      script,
      scriptHex: script.toString('hex'),
      beef: Buffer.from(built.beef)
    })
  }
  return templates
}

/** Templates made on a throwaway Engine's chain tracker, for sections that need no Engine. */
async function standaloneTemplates (count = AUTHORS) {
  const { createTestEngine } = require('../../__test__/helpers/engine')
  const engine = await createTestEngine({ managers: {} })
  try {
    return await makeTemplates(engine.chainTracker, count)
  } finally {
    await engine.close()
  }
}

function txidOf (n) {
  return crypto.createHash('sha256').update('overlay-lookup-live bench row ' + n).digest('hex')
}

/** Everything both stores hold about row n. */
function row (templates, n, version = 0) {
  const t = templates[n % templates.length]
  const beef = Buffer.from(t.beef)
  beef.writeBigUInt64BE(BigInt(n) + (BigInt(version) << 40n), beef.length - 8)
  return {
    n,
    txid: txidOf(n),
    outputIndex: 0,
    author: t.author,
    text: `bench note ${n}` + (version ? ` v${version}` : ''),
    script: t.script,
    scriptHex: t.scriptHex,
    beef
  }
}

/** The ingest-layer change that the live companion of demo/notes would produce for row r. */
function admitChange (r) {
  return {
    op: 'admit',
    service: SERVICE,
    txid: r.txid,
    outputIndex: r.outputIndex,
    topic: NOTES_TOPIC,
    satoshis: 1000,
    lockingScript: r.scriptHex,
    beef: r.beef,
    attributes: { author: r.author, length: r.text.length },
    context: normalizeContext({ text: r.text }),
    expiresAt: null
  }
}

/** A spend of row r by a made-up spending transaction whose BEEF is the row's own (same size). */
function spendChange (r) {
  return {
    op: 'remove',
    service: SERVICE,
    txid: r.txid,
    outputIndex: r.outputIndex,
    reason: 'spent',
    spend: { spendingTxid: txidOf('spend ' + r.n), beef: r.beef }
  }
}

/**
 * Commits rows [from, to) to the live store in groups of `group` admits, in order. The next group
 * is built in JS while the previous one commits natively (one commit in flight at a time, so the
 * admission order is the row order).
 */
async function loadLive (live, templates, from, to, group = 1000) {
  const build = (start, end) => {
    const changes = []
    for (let n = start; n < end; n++) changes.push(admitChange(row(templates, n)))
    return changes
  }
  let inFlight = null
  for (let start = from, end; start < to; start = end) {
    end = Math.min(to, (Math.floor(start / group) + 1) * group)
    const changes = build(start, end)
    if (inFlight) await inFlight
    inFlight = live.commit(changes)
  }
  if (inFlight) await inFlight
}

/** Prepared inserts for the Engine tables and the notes table on better-sqlite3 connection `db`. */
function sqliteInserter (db, notesTable = 'notes') {
  const insOutput = db.prepare('INSERT INTO outputs (txid, outputIndex, outputScript, topic, satoshis, outputsConsumed, consumedBy, spent, blockHeight, score) VALUES (?, ?, ?, ?, ?, \'[]\', \'[]\', 0, NULL, ?)')
  const insTx = db.prepare('INSERT INTO transactions (txid, beef) VALUES (?, ?)')
  const insApplied = db.prepare('INSERT INTO applied_transactions (txid, topic) VALUES (?, ?)')
  const insNote = db.prepare(`INSERT INTO ${notesTable} (txid, outputIndex, author, text, admittedAt) VALUES (?, ?, ?, ?, ?)`)
  // Rows [a, b) in one transaction; admittedAt is the first row of their live group.
  return db.transaction((templates, a, b, admittedAt) => {
    for (let n = a; n < b; n++) {
      const r = row(templates, n)
      insOutput.run(r.txid, r.outputIndex, r.script, NOTES_TOPIC, 1000, n)
      insTx.run(r.txid, r.beef)
      insApplied.run(r.txid, NOTES_TOPIC)
      insNote.run(r.txid, r.outputIndex, r.author, r.text, admittedAt)
    }
  })
}

/**
 * Loads rows [from, to) into both stores at once: each group is committed to the live store
 * (live.commit, one group per `group` rows, in row order) while the same rows are inserted into
 * the Engine's SQLite tables and the notes table, in one SQLite transaction per group, through
 * prepared statements on knex's own better-sqlite3 connection (knex's query builder would spend
 * most of the time building SQL text). The native commit runs on its own thread, so the SQLite
 * inserts overlap it. In SQLite, score is n and admittedAt is the first row of the live group that
 * admitted row n (rows of a group are admitted together), so the notes service orders rows by
 * (group, txid, outputIndex) exactly as the live store does (admission sequence, then outpoint).
 * Groups are aligned to multiples of `group`, whatever `from` is.
 */
async function loadBoth (live, knex, templates, from, to, group = 1000) {
  const db = await knex.client.acquireConnection()
  // A bulk load needs no per-transaction fsync; the cache setting stays for Engine.lookup too.
  db.pragma('cache_size = -262144')
  db.pragma('synchronous = OFF')
  const insert = sqliteInserter(db)
  let inFlight = null
  try {
    for (let start = from, end; start < to; start = end) {
      end = Math.min(to, (Math.floor(start / group) + 1) * group)
      const changes = []
      for (let n = start; n < end; n++) changes.push(admitChange(row(templates, n)))
      if (inFlight) await inFlight
      inFlight = live.commit(changes)
      insert(templates, start, end, start)
    }
    if (inFlight) await inFlight
  } finally {
    if (inFlight) await inFlight.catch(() => {})
    db.pragma('synchronous = FULL')
    await knex.client.releaseConnection(db)
  }
}

module.exports = { SERVICE, AUTHORS, makeTemplates, standaloneTemplates, txidOf, row, admitChange, spendChange, loadLive, loadBoth }
