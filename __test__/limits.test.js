'use strict'
// Groups bounded by the provider's own limits, and expiry applied by a timer (issue 21 items
// 3, 4, 5; BRC-193 §3, §8) — through the JS API, on real sled stores and a real Engine.

const h = require('./helpers/live')
const { createTestEngine, NoteFactory } = require('./helpers/engine')
const { NotesLookupService } = require('../demo/notes/NotesLookupService')
const { NotesTopicManager } = require('../demo/notes/NotesTopicManager')
const { createNotesCompanion } = require('../demo/notes/notesCompanion')
const { NOTES_TOPIC } = require('../demo/notes/notesProtocol')
const { startEngineNode } = require('./helpers/node')
const { ALICE, admit, openBody, readBody, json, drainSnapshot } = h

const cleanup = require('./helpers/live').cleanupAfterEach()

async function setup (opts = {}, dir = h.tempDir()) {
  const logged = []
  const live = await h.openLive(dir, { log: (e) => logged.push(e), ...opts })
  live.wrap('ls_notes', h.plainService(), h.notesCompanion())
  cleanup.push(() => live.close())
  return { live, logged, dir }
}

/** A live store (LiveLookup.open options `opts`) on a real Engine, attached; `logged` its log. */
async function engineNode (opts) {
  const logged = []
  const n = await startEngineNode({ live: { ...opts, log: (e) => logged.push(e) } })
  cleanup.push(() => n.close())
  return { ...n, logged }
}

/** A session drained to its live phase; returns the last snapshot batch. */
async function liveSession (live, limits = {}) {
  const res = await live.open(openBody({ limits: { maxBytes: 65536, maxObservations: 100, waitMs: 0, ...limits } }), ALICE)
  expect(res.status).toBe(200)
  const batches = await drainSnapshot(live, json(res), ALICE, limits)
  return batches[batches.length - 1]
}

/** Reads until `through` reaches highWater; returns every batch (status 200 required). */
async function drainLive (live, from, limits) {
  const batches = []
  let b = from
  for (;;) {
    const res = await live.read(readBody(b.session, b.cursor, limits), ALICE)
    if (res.status !== 200) throw new Error(`read ${res.status}: ${Buffer.from(res.body)}`)
    b = json(res)
    batches.push(b)
    if (b.groups.length === 0 || b.through === b.highWater) return batches
  }
}

function bigAdmit (n, bytes) {
  return admit(n, { beef: Buffer.alloc(bytes, n) })
}

describe('groups the provider makes itself fit its limits (item 3)', () => {
  test('30 rows expiring together reach a maxObservations-10 provider as groups of at most 10, in order', async () => {
    const { live } = await setup({ maxObservations: 10 })
    const now = Math.floor(Date.now() / 1000)
    const rows = []
    for (let i = 0; i < 30; i++) rows.push(admit(i, { expiresAt: now + 30 }))
    for (let i = 0; i < 30; i += 10) await live.commit(rows.slice(i, i + 10))
    const start = await liveSession(live, { maxObservations: 10 })
    live.core.advanceClockMs(60_000)
    const batches = await drainLive(live, start, { maxObservations: 10 })
    const groups = batches.flatMap(b => b.groups)
    expect(groups.length).toBeGreaterThanOrEqual(3)
    for (const g of groups) expect(g.observations.length).toBeLessThanOrEqual(10)
    const withdrawn = groups.flatMap(g => g.observations.map(o => [o.kind, o.payload.reason, o.payload.outpoint.txid]))
    // Ordered by (expiresAt, service, outpoint): by txid here.
    expect(withdrawn).toEqual(rows.map(r => ['withdraw', 'expired', r.txid]).sort((a, b) => a[2] < b[2] ? -1 : 1))
  })

  test('changes without atomicity (proof refreshes, a starting state) are committed as groups that fit, published together', async () => {
    const { live } = await setup({ maxObservations: 10 })
    for (let i = 0; i < 25; i += 5) await live.commit([0, 1, 2, 3, 4].map(k => admit(i + k)))
    const start = await liveSession(live)
    const refreshes = []
    for (let i = 0; i < 25; i++) refreshes.push({ op: 'refresh', service: 'ls_notes', txid: h.txid(i), outputIndex: 0, beef: Buffer.from('proven-' + i) })
    const before = BigInt(live.highWater)
    const last = await live.commitDivisible(refreshes)
    expect(BigInt(last) - before).toBe(3n)
    const groups = (await drainLive(live, start, { maxObservations: 10 })).flatMap(b => b.groups)
    expect(groups.map(g => g.observations.length)).toEqual([10, 10, 5])
    expect(groups.flatMap(g => g.observations.map(o => o.payload.evidence.txid))).toEqual(refreshes.map(r => r.txid))
  })

  test('a producer group larger than maxObservations is refused at admission, logged, and nothing is written', async () => {
    const { live, logged } = await setup({ maxObservations: 5 })
    const hw = live.highWater
    const six = [0, 1, 2, 3, 4, 5].map(i => admit(i))
    const err = await live.commit(six).then(() => null, e => e)
    expect(err).toMatchObject({ code: 'limited', limit: { kind: 'permanent-group' } })
    expect(err.message).toContain('maxObservations 5')
    expect(live.highWater).toBe(hw)
    expect(logged).toContainEqual(expect.objectContaining({ op: 'commit', action: 'refused', changes: 6 }))
    // Five fit.
    expect(await live.commit(six.slice(0, 5))).not.toBeNull()
  })

  test('a producer group larger than maxBytes is refused at admission; one that fits commits', async () => {
    const { live } = await setup({ maxBytes: 65536 })
    const hw = live.highWater
    const err = await live.commit([bigAdmit(1, 20_000), bigAdmit(2, 20_000), bigAdmit(3, 20_000)]).then(() => null, e => e)
    expect(err).toMatchObject({ code: 'limited', limit: { kind: 'permanent-group' } })
    expect(live.highWater).toBe(hw)
    // Two of them fit 64 KiB with their envelope, and a session reads them.
    const start = await liveSession(live)
    await live.commit([bigAdmit(1, 20_000), bigAdmit(2, 20_000)])
    const [b] = await drainLive(live, start, { maxBytes: 65536 })
    expect(b.groups[0].observations).toHaveLength(2)
  })

  // The Engine has no rollback: by the time the group is measured, Engine storage and the inner
  // service hold the transaction. Refusing it would leave Engine.lookup and the feed apart.
  test.each([
    ['maxObservations 5, six outputs', { maxObservations: 5 }, 6],
    ['maxBytes 65536, forty outputs', { maxBytes: 65536 }, 40]
  ])('an Engine.submit whose group exceeds the provider limits (%s) is recorded: the Engine and the feed agree', async (_, limits, outputs) => {
    const { live, t, factory, logged } = await engineNode(limits)
    const before = await liveSession(live)
    const big = await factory.createNotes(Array.from({ length: outputs }, (_, i) => `note ${i}`))
    await t.engine.submit({ beef: big.beef, topics: [NOTES_TOPIC] })
    await live.published()

    const listed = (await t.engine.lookup({ service: 'ls_notes', query: {} })).outputs.map(o => o.outputIndex).sort((a, b) => a - b)
    expect(listed).toEqual(Array.from({ length: outputs }, (_, i) => i))
    // A new session holds exactly what the Engine lists.
    const snap = await drainSnapshot(live, json(await live.open(openBody(), ALICE)), ALICE)
    const members = snap.flatMap(b => b.groups.flatMap(g => g.observations)).map(o => `${o.payload.evidence.txid}.${o.payload.evidence.outputIndex}`)
    expect(members.sort()).toEqual(listed.map(i => `${big.txid}.${i}`).sort())
    // A session that reaches the group is told plainly it can never be served, whatever it asks.
    for (const maxObservations of [5, 1024]) {
      const res = await live.read(readBody(before.session, before.cursor, { maxObservations, maxBytes: 4 * 1024 * 1024 }), ALICE)
      expect(res.status).toBe(413)
      expect(json(res).error).toMatchObject({ code: 'limited', limit: { kind: 'permanent-group' } })
    }
    expect(logged).toContainEqual(expect.objectContaining({ op: 'commit', action: 'unservable', groups: 1 }))
    expect(live.stats().unservableGroups).toBe(1)
    // The next transaction that fits is an ordinary group.
    const small = await factory.createNotes(['small'])
    await t.engine.submit({ beef: small.beef, topics: [NOTES_TOPIC] })
    await live.published()
    expect(live.stats().unservableGroups).toBe(1)
  })
})

test('a full retention budget breaks no promise: submits never fail, the open session resumes through every group, new opens get 503 until compaction frees unpromised history', async () => {
  const { live, t, factory, logged } = await engineNode({ maxRetainedBytes: 65536, compactionIntervalMs: 0 })
  const session = await liveSession(live) // opened on the empty collection: it holds all history back
  let built = await factory.createNotes(['v0'])
  await t.engine.submit({ beef: built.beef, topics: [NOTES_TOPIC] })
  await live.published()
  const txids = [built.txid]
  // Each replacement spends the last note; its evidence carries the whole unconfirmed chain,
  // so the retained log grows past the budget. No submit fails on the way.
  for (let i = 1; i <= 40 && !live.stats().overRetentionBudget; i++) {
    built = await factory.replaceNote(built.notes[0], `v${i}`)
    await t.engine.submit({ beef: built.beef, topics: [NOTES_TOPIC] })
    await live.published()
    txids.push(built.txid)
  }
  const over = live.stats()
  expect(over.overRetentionBudget).toBe(true)
  expect(over.retainedBytes).toBeGreaterThan(65536)
  expect(over.maxRetainedBytes).toBe(65536)
  expect(logged).toContainEqual(expect.objectContaining({ op: 'retention', action: 'over-budget', maxRetainedBytes: 65536 }))
  // Beyond the budget, the Engine's changes are still recorded.
  built = await factory.replaceNote(built.notes[0], 'beyond the budget')
  await t.engine.submit({ beef: built.beef, topics: [NOTES_TOPIC] })
  await live.published()
  txids.push(built.txid)
  // The session opened before resumes through every group it was promised, in order.
  const batches = await drainLive(live, session, {})
  const outputs = batches.flatMap(b => b.groups.flatMap(g => g.observations)).filter(o => o.kind === 'output')
  expect(outputs.map(o => o.payload.evidence.txid)).toEqual(txids)
  // A new open is refused as a capacity condition with a bounded retry hint.
  const refused = await live.open(openBody(), ALICE)
  expect(refused.status).toBe(503)
  const err = json(refused).error
  expect(err.code).toBe('unavailable')
  expect(err.retryAfterMs).toBeGreaterThan(0)
  expect(err.retryAfterMs).toBeLessThanOrEqual(60_000)
  expect(live.stats().retentionRefusals).toBe(1)
  // Once the session is closed no promise covers the history: compaction brings the store
  // back under the budget, and opens are served again, with what the Engine lists.
  const last = batches[batches.length - 1]
  await live.closeSession(Buffer.from(JSON.stringify({ version: 1, session: last.session })), ALICE)
  await live.compactInBackground()
  expect(live.stats().overRetentionBudget).toBe(false)
  expect(logged).toContainEqual(expect.objectContaining({ op: 'retention', action: 'under-budget' }))
  const listed = await t.engine.lookup({ service: 'ls_notes', query: {} })
  expect(listed.outputs).toHaveLength(1)
  const snap = await drainSnapshot(live, json(await live.open(openBody(), ALICE)), ALICE)
  expect(snap.flatMap(b => b.groups.flatMap(g => g.observations)).map(o => o.payload.evidence.txid)).toEqual([built.txid])
})

test('a backfill larger than maxObservations reaches a session already open as groups that fit', async () => {
  const live = await h.openLive(h.tempDir(), { maxObservations: 2 })
  cleanup.push(() => live.close())
  let inner
  const t = await createTestEngine({
    managers: { [NOTES_TOPIC]: new NotesTopicManager() },
    lookupServices: async (knex) => {
      inner = new NotesLookupService(knex)
      await inner.init()
      return { ls_notes: inner }
    }
  })
  cleanup.push(() => t.close())
  // Outputs the Engine admitted before the live plugin was installed.
  const factory = new NoteFactory(t.chainTracker)
  const notes = []
  for (const text of ['a', 'b', 'c', 'd', 'e']) {
    const built = await factory.createNotes([text])
    await t.engine.submit({ beef: built.beef, topics: [NOTES_TOPIC] })
    notes.push(`${built.txid}.0`)
  }
  t.engine.lookupServices.ls_notes = live.wrap('ls_notes', inner, { ...createNotesCompanion(), topics: [NOTES_TOPIC] })
  const start = await liveSession(live, { maxObservations: 2 })
  await live.attach(t.engine)
  const groups = (await drainLive(live, start, { maxObservations: 2 })).flatMap(b => b.groups)
  for (const g of groups) expect(g.observations.length).toBeLessThanOrEqual(2)
  expect(groups.flatMap(g => g.observations.map(o => `${o.payload.evidence.txid}.${o.payload.evidence.outputIndex}`)).sort()).toEqual(notes.sort())
})

describe('limited minimums respect the provider limits (item 4)', () => {
  test('a group committed before the provider lowered maxObservations is permanent-group, whatever the retry asks', async () => {
    const { live, dir } = await setup()
    const start = await liveSession(live)
    await live.commit([0, 1, 2, 3, 4, 5].map(i => admit(i)))
    await live.close()
    const reopened = await h.openLive(dir, { create: false, maxObservations: 5 })
    reopened.wrap('ls_notes', h.plainService(), h.notesCompanion())
    cleanup.push(() => reopened.close())
    for (const maxObservations of [5, 6, 1024]) {
      const res = await reopened.read(readBody(start.session, start.cursor, { maxObservations }), ALICE)
      expect(res.status).toBe(413)
      const e = json(res).error
      expect(e.code).toBe('limited')
      expect(e.limit).toEqual({ kind: 'permanent-group' })
      expect(Buffer.from(res.body).length).toBeLessThanOrEqual(4096)
    }
  })

  test('a group larger than the provider maxBytes is permanent-group, never a minimum above it', async () => {
    const { live, dir } = await setup()
    const start = await liveSession(live)
    await live.commit([bigAdmit(1, 20_000), bigAdmit(2, 20_000), bigAdmit(3, 20_000)])
    await live.close()
    const reopened = await h.openLive(dir, { create: false, maxBytes: 65536 })
    reopened.wrap('ls_notes', h.plainService(), h.notesCompanion())
    cleanup.push(() => reopened.close())
    for (const maxBytes of [30_000, 65536, 4 * 1024 * 1024]) {
      const res = await reopened.read(readBody(start.session, start.cursor, { maxBytes }), ALICE)
      expect(res.status).toBe(413)
      expect(json(res).error.limit).toEqual({ kind: 'permanent-group' })
    }
  })
})

describe('expiry is applied by a timer (item 5)', () => {
  test('a row expiring while a poll waits is delivered before the wait bound', async () => {
    const { live } = await setup()
    const due = Math.floor(Date.now() / 1000) + 2
    await live.commit([admit(1, { expiresAt: due })])
    const start = await liveSession(live)
    const poll = live.read(readBody(start.session, start.cursor, { waitMs: 20_000 }), ALICE).then(json)
    // Far below the 20 s bound: only a timer-driven expiry can answer the poll in time.
    let timer
    const late = new Promise(resolve => { timer = setTimeout(() => resolve('still waiting'), 8_000) })
    const got = await Promise.race([poll, late])
    clearTimeout(timer)
    expect(got).not.toBe('still waiting')
    expect(got.groups.flatMap(g => g.observations.map(o => [o.kind, o.payload.reason, o.payload.outpoint.txid])))
      .toEqual([['withdraw', 'expired', h.txid(1)]])
    // A commit made after the due time comes after the withdraw.
    const later = await live.commit([admit(2)])
    expect(BigInt(later) > BigInt(got.groups[0].sequence)).toBe(true)
  }, 15_000)

  test('the withdraw of a due expiry is numbered before a commit made after its due time', async () => {
    const { live } = await setup()
    const now = Math.floor(Date.now() / 1000)
    await live.commit([admit(1, { expiresAt: now + 30 })])
    const start = await liveSession(live)
    live.core.advanceClockMs(60_000) // the row is due now; no request has arrived since
    const seq = await live.commit([admit(2)])
    const [b] = await drainLive(live, start, {})
    const seen = b.groups.map(g => [g.sequence, g.observations.map(o => o.kind + ':' + (o.payload.outpoint || o.payload.evidence).txid)])
    expect(seen).toEqual([
      [expect.any(String), [`withdraw:${h.txid(1)}`]],
      [seq, [`output:${h.txid(2)}`]]
    ])
    expect(BigInt(seen[0][0]) < BigInt(seq)).toBe(true)
  })

  test('the timer keeps no process alive: a script that leaves a far timer pending exits by itself', async () => {
    const { spawn } = require('node:child_process')
    const script = `
      const h = require(${JSON.stringify(require.resolve('./helpers/live'))})
      h.openLive(h.tempDir(), {}).then(async (live) => {
        live.wrap('ls_notes', h.plainService(), h.notesCompanion())
        await live.commit([h.admit(1, { expiresAt: Math.floor(Date.now() / 1000) + 3600 })])
        console.log('committed')
      })`
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (d) => { out += d })
    let timer
    const exited = new Promise(resolve => child.on('exit', (code) => resolve(code)))
    const stuck = new Promise(resolve => { timer = setTimeout(() => resolve('still running'), 8_000) })
    const result = await Promise.race([exited, stuck])
    clearTimeout(timer)
    if (result === 'still running') child.kill('SIGKILL')
    expect(result).toBe(0)
    expect(out).toContain('committed')
  }, 15_000)

  test('close() stops the timer: it returns although a timer is an hour away, and the store reopens', async () => {
    const { live, dir } = await setup()
    await live.commit([admit(1, { expiresAt: Math.floor(Date.now() / 1000) + 3600 })])
    await live.close()
    cleanup.length = 0
    const again = await h.openLive(dir, { create: false })
    cleanup.push(() => again.close())
    expect(again.highWater).toBe('1')
  })
})
