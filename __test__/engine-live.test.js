'use strict'
// The whole ingest path on real parts: a real @bsv/overlay Engine (knex + SQLite),
// real signed transactions, the wrapped notes LookupService, and the native sled
// store. What the Engine does reaches live sessions as BRC-193 groups.

const { Transaction, Utils } = require('@bsv/sdk')
const h = require('./helpers/live')
const { createTestEngine, NoteFactory } = require('./helpers/engine')
const { NotesLookupService } = require('../demo/notes/NotesLookupService')
const { NotesTopicManager } = require('../demo/notes/NotesTopicManager')
const { createNotesCompanion } = require('../demo/notes/notesCompanion')
const { startEngineNode, expiringNotesCompanion } = require('./helpers/node')
const { NOTES_TOPIC } = require('../demo/notes/notesProtocol')

const { ALICE, readBody, openBody, json } = h
const cleanup = require('./helpers/live').cleanupAfterEach()

async function setup (options = {}) {
  // The node without HTTP; its submit resolves once the group is published.
  const n = await startEngineNode({ companion: options.companion, innerModes: options.innerModes })
  cleanup.push(() => n.close())
  return n
}

async function openSession (live, query = {}) {
  const res = await live.open(openBody({ query }), ALICE)
  expect(res.status).toBe(200)
  const first = json(res)
  const batches = await h.drainSnapshot(live, first)
  return batches[batches.length - 1]
}

async function next (live, batch) {
  const res = await live.read(readBody(batch.session, batch.cursor, { waitMs: 5000 }), ALICE)
  expect(res.status).toBe(200)
  return json(res)
}

function summary (batch) {
  return batch.groups.map(g => g.observations.map(o => {
    if (o.kind === 'output') return `output ${o.payload.evidence.txid}.${o.payload.evidence.outputIndex}`
    if (o.kind === 'spend') return `spend ${o.payload.previous.txid}.${o.payload.previous.outputIndex} by ${o.payload.spendingTxid}`
    return `withdraw ${o.payload.outpoint.txid}.${o.payload.outpoint.outputIndex} ${o.payload.reason}`
  }))
}

test('one submit commits one group whose outputs carry verifiable evidence and the note as context', async () => {
  const { live, factory, submit } = await setup()
  const end = await openSession(live)
  const created = await factory.createNotes(['first note', 'second note'])
  await submit(created)
  const b = await next(live, end)
  expect(summary(b)).toEqual([[`output ${created.txid}.0`, `output ${created.txid}.1`]])
  const out = b.groups[0].observations[0].payload
  // The evidence is the Engine's own BEEF of the admitted transaction.
  const tx = Transaction.fromBEEF(Utils.toArray(out.evidence.beef, 'base64'), created.txid)
  expect(tx.id('hex')).toBe(created.txid)
  expect(out.context.schema).toBe('https://bsv.brc.dev/apps/0192#legacy-lookup-context-json-v1')
  expect(JSON.parse(Buffer.from(out.context.bytes, 'base64').toString('utf8'))).toEqual({ text: 'first note' })
})

test('spending a member and creating its replacement is one group: withdraw, spend, output', async () => {
  const { live, factory, submit, inner, t } = await setup()
  const created = await factory.createNotes(['v1'])
  await submit(created)
  const end = await openSession(live)
  const replaced = await factory.replaceNote(created.notes[0], 'v2')
  await submit(replaced)
  const b = await next(live, end)
  expect(summary(b)).toEqual([[
    `withdraw ${created.txid}.0 spent`,
    `spend ${created.txid}.0 by ${replaced.txid}`,
    `output ${replaced.txid}.0`
  ]])
  // The spend evidence is the spending transaction itself.
  const spend = b.groups[0].observations[1].payload
  expect(Transaction.fromBEEF(Utils.toArray(spend.beef, 'base64'), replaced.txid).id('hex')).toBe(replaced.txid)
  // The inner service saw every hook in its own mode and holds only the new note.
  const rows = await t.knex('notes').select('txid', 'text')
  expect(rows.map(r => r.text)).toEqual(['v2'])
  expect(inner).toBeTruthy()
})

test('an eviction by the host commits a withdraw with reason evicted', async () => {
  const { live, factory, submit, t } = await setup()
  const created = await factory.createNotes(['to evict', 'to keep'])
  await submit(created)
  const end = await openSession(live)
  await t.engine.lookupServices.ls_notes.outputEvicted(created.txid, 0)
  const b = await next(live, end)
  expect(summary(b)).toEqual([[`withdraw ${created.txid}.0 evicted`]])
})

test('an expiry commits an ordered withdraw with reason expired', async () => {
  const companion = expiringNotesCompanion()
  const { live, factory, submit } = await setup({ companion })
  const created = await factory.createNotes(['late', 'early'])
  await submit(created)
  const end = await openSession(live)
  expect(end.groups.length + 0).toBeGreaterThanOrEqual(0)
  live.core.advanceClockMs(300_000)
  const b = await next(live, end)
  expect(summary(b)).toEqual([[`withdraw ${created.txid}.1 expired`, `withdraw ${created.txid}.0 expired`]])
})

/** A real Engine with the notes service unwrapped: what a node runs before installing live. */
async function plainEngine () {
  const t = await createTestEngine({
    managers: { [NOTES_TOPIC]: new NotesTopicManager() },
    lookupServices: async (knex) => {
      const inner = new NotesLookupService(knex)
      await inner.init()
      return { ls_notes: inner }
    }
  })
  cleanup.push(() => t.close())
  return t
}

test('a selective query only sees its own author, and existing outputs are backfilled on attach', async () => {
  const dir = h.tempDir()
  // First run: an Engine with data but no live plugin installed.
  const t = await plainEngine()
  const alice = new NoteFactory(t.chainTracker)
  const bob = new NoteFactory(t.chainTracker)
  const a1 = await alice.createNotes(['alice before install'])
  await t.engine.submit({ beef: a1.beef, topics: [NOTES_TOPIC] })
  // Install: wrap the same inner service and attach; backfill indexes a1.
  const live = await h.openLive(dir)
  cleanup.push(() => live.close())
  t.engine.lookupServices.ls_notes = live.wrap('ls_notes', t.engine.lookupServices.ls_notes, createNotesCompanion())
  await live.attach(t.engine)
  const b1 = await bob.createNotes(['bob after install'])
  await t.engine.submit({ beef: b1.beef, topics: [NOTES_TOPIC] })
  await live.published()
  const aliceKey = await alice.authorIdentityKey()
  const res = await live.open(openBody({ query: { author: aliceKey } }), ALICE)
  const first = json(res)
  expect(first.snapshotComplete).toBe(true)
  expect(summary(first)).toEqual([[`output ${a1.txid}.0`]])
})

test('attach commits what differs from Engine storage even when the store refuses one row: the rest reaches the feed, the refusal is logged', async () => {
  const t = await plainEngine()
  const factory = new NoteFactory(t.chainTracker)
  const built = []
  for (const text of ['good 1', 'bad', 'good 2']) {
    const b = await factory.createNotes([text])
    await t.engine.submit({ beef: b.beef, topics: [NOTES_TOPIC] })
    built.push(b)
  }
  const logged = []
  const live = await h.openLive(h.tempDir(), { log: (e) => logged.push(e) })
  cleanup.push(() => live.close())
  const base = createNotesCompanion()
  // For one note the companion returns an attribute the store refuses (a nested list).
  const companion = { ...base, index (output) { const r = base.index(output); return r && r.context.text === 'bad' ? { ...r, attributes: { ...r.attributes, tags: [['nested']] } } : r } }
  t.engine.lookupServices.ls_notes = live.wrap('ls_notes', t.engine.lookupServices.ls_notes, companion)
  await live.attach(t.engine)
  const first = json(await live.open(openBody({ query: {} }), ALICE))
  expect(summary(first).flat().sort()).toEqual([`output ${built[0].txid}.0`, `output ${built[2].txid}.0`].sort())
  expect(logged).toContainEqual(expect.objectContaining({ op: 'reconcile', action: 'refused', outpoint: `${built[1].txid}.0` }))
})
