'use strict'
// Provider correctness under resets, evictions, shutdown and cancellation (BRC-193 §4, §5, §8),
// on real parts: a real @bsv/overlay Engine (knex + SQLite) with real signed transactions,
// the wrapped notes LookupService and the native sled store.

const fs = require('fs')
const path = require('path')
const h = require('./helpers/live')
const { startEngineNode } = require('./helpers/node')
const { createNotesCompanion } = require('../demo/notes/notesCompanion')
const { NOTES_TOPIC } = require('../demo/notes/notesProtocol')

const { ALICE, readBody, openBody, json } = h
const cleanup = require('./helpers/live').cleanupAfterEach()

async function setup (options = {}) {
  // The node without HTTP; its submit resolves once the group is published.
  const n = await startEngineNode({ dir: options.dir, engineDir: options.engineDir, live: options.live, onInner: options.innerHook })
  let closed = false
  cleanup.push(() => closed ? null : n.live.close())
  cleanup.push(() => n.t.close())
  return { ...n, markClosed: () => { closed = true } }
}

async function snapshotOf (live, caller = ALICE) {
  const res = await live.open(openBody({ query: {} }), caller)
  expect(res.status).toBe(200)
  const batches = await h.drainSnapshot(live, json(res), caller)
  const outputs = batches.flatMap(b => b.groups.flatMap(g => g.observations))
    .filter(o => o.kind === 'output')
    .map(o => `${o.payload.evidence.txid}.${o.payload.evidence.outputIndex}`)
  return { outputs: outputs.sort(), last: batches[batches.length - 1] }
}

async function engineLists (t) {
  const answer = await t.engine.lookup({ service: 'ls_notes', query: {} })
  return answer.outputs.map(o => {
    const { Transaction } = require('@bsv/sdk')
    const tx = Transaction.fromBEEF(o.beef)
    return `${tx.id('hex')}.${o.outputIndex}`
  }).sort()
}

describe('resetEpoch', () => {
  test('starts the new epoch from the Engine: a new snapshot holds every output, an old cursor is reset-required', async () => {
    const { live, t, factory, submit } = await setup()
    const a = await factory.createNotes(['one', 'two'])
    await submit(a)
    const before = await snapshotOf(live)
    expect(before.outputs).toEqual([`${a.txid}.0`, `${a.txid}.1`])
    const epoch = live.epoch
    const next = await live.resetEpoch({ reason: 'test' })
    expect(next).not.toBe(epoch)
    expect(live.epoch).toBe(next)
    const old = await live.read(readBody(before.last.session, before.last.cursor), ALICE)
    expect(old.status).toBe(409)
    expect(json(old).error.code).toBe('reset-required')
    const after = await snapshotOf(live)
    expect(after.outputs).toEqual(before.outputs)
    expect(after.outputs).toEqual(await engineLists(t))
  })

  test('a submit racing the reset is neither lost nor counted twice', async () => {
    const { live, t, factory, submit } = await setup()
    await submit(await factory.createNotes(['first']))
    const racing = await factory.createNotes(['racing'])
    const [, epoch] = await Promise.all([submit(racing), live.resetEpoch()])
    expect(live.epoch).toBe(epoch)
    // Whichever came first, the new epoch's view equals the Engine's: once in the snapshot,
    // or as a live group after it, never missing.
    const open = await live.open(openBody({ query: {} }), ALICE)
    const batches = await h.drainSnapshot(live, json(open))
    const last = batches[batches.length - 1]
    const live1 = json(await live.read(readBody(last.session, last.cursor), ALICE))
    const seen = [...batches, live1].flatMap(b => b.groups.flatMap(g => g.observations))
      .filter(o => o.kind === 'output').map(o => `${o.payload.evidence.txid}.${o.payload.evidence.outputIndex}`).sort()
    expect(seen).toEqual(await engineLists(t))
    expect(seen).toContain(`${racing.txid}.0`)
  })

  test('without an attached Engine it needs the starting rows, and never publishes an empty epoch by accident', async () => {
    const live = await h.openLive(h.tempDir())
    cleanup.push(() => live.close())
    live.wrap('ls_notes', h.plainService(), h.notesCompanion())
    await live.commit([h.admit(1)])
    const epoch = live.epoch
    await expect(live.resetEpoch()).rejects.toThrow(/attached Engine/)
    expect(live.epoch).toBe(epoch)
    await live.resetEpoch({ changes: [h.admit(1), h.admit(2)] })
    const snap = await snapshotOf(live)
    expect(snap.outputs).toEqual([`${h.txid(1)}.0`, `${h.txid(2)}.0`].sort())
  })
})

describe('eviction', () => {
  test('an inner outputEvicted that throws leaves no withdraw in the feed while Engine.lookup still lists the output', async () => {
    let refuse = true
    const { live, t, factory, submit } = await setup({
      innerHook (inner) {
        const original = inner.outputEvicted.bind(inner)
        inner.outputEvicted = async (txid, outputIndex) => {
          if (refuse) throw new Error('eviction refused by the inner service')
          return original(txid, outputIndex)
        }
      }
    })
    const a = await factory.createNotes(['kept', 'other'])
    await submit(a)
    const { last } = await snapshotOf(live)
    const hw = live.highWater
    await expect(t.engine.lookupServices.ls_notes.outputEvicted(a.txid, 0)).rejects.toThrow(/refused/)
    expect(live.highWater).toBe(hw)
    expect(await engineLists(t)).toContain(`${a.txid}.0`)
    const quiet = json(await live.read(readBody(last.session, last.cursor), ALICE))
    expect(quiet.groups).toEqual([])
    // Once the inner service accepts it, the feed and the Engine agree again.
    refuse = false
    await t.engine.lookupServices.ls_notes.outputEvicted(a.txid, 0)
    expect(await engineLists(t)).not.toContain(`${a.txid}.0`)
    const b = json(await live.read(readBody(last.session, last.cursor), ALICE))
    expect(b.groups.map(g => g.observations.map(o => `${o.kind} ${o.payload.outpoint.txid}.${o.payload.outpoint.outputIndex} ${o.payload.reason}`)))
      .toEqual([[`withdraw ${a.txid}.0 evicted`]])
  })

  test('an evicted output stays out after a restart and a reset, although Engine storage keeps it', async () => {
    const dir = h.tempDir('evict-')
    const engineDir = h.tempDir('evict-engine-')
    let n = await setup({ dir, engineDir })
    const a = await n.factory.createNotes(['evicted', 'kept'])
    await n.submit(a)
    await n.t.engine.lookupServices.ls_notes.outputEvicted(a.txid, 0)
    expect((await n.t.engine.storage.findUTXOsForTopic(NOTES_TOPIC)).map(o => `${o.txid}.${o.outputIndex}`)).toContain(`${a.txid}.0`)
    const hw = n.live.highWater
    n.markClosed()
    await n.live.close()
    await n.t.close()
    // The restart reconciles with Engine storage, which still holds the evicted output.
    n = await setup({ dir, engineDir, live: { create: false } })
    expect(n.live.highWater).toBe(hw)
    expect((await snapshotOf(n.live)).outputs).toEqual([`${a.txid}.1`])
    expect(await engineLists(n.t)).toEqual([`${a.txid}.1`])
    await n.live.resetEpoch()
    expect((await snapshotOf(n.live)).outputs).toEqual([`${a.txid}.1`])
  })
})


describe('close', () => {
  const node = require('./helpers/node')
  const STILL_WAITING = Symbol('still waiting')
  // A generous bound, far below the polls' own 20 s wait: a poll answered only at its wait
  // bound shows up as still waiting here.
  const within = (promise, ms = 8000) => Promise.race([promise, new Promise(resolve => setTimeout(() => resolve(STILL_WAITING), ms).unref())])

  test('ends every waiting poll at once with an empty live batch, and later calls get 503 unavailable', async () => {
    const live = await h.openLive(h.tempDir())
    cleanup.push(() => live.close())
    live.wrap('ls_notes', h.plainService(), h.notesCompanion())
    await live.commit([h.admit(1)])
    const first = json(await live.open(openBody({ query: {} }), ALICE))
    const end = (await h.drainSnapshot(live, first)).pop()
    const polls = [0, 1, 2].map(() => live.read(readBody(end.session, end.cursor, { waitMs: 20000 }), ALICE))
    await new Promise(resolve => setTimeout(resolve, 100)) // let them park
    const closing = live.close()
    const answers = await within(Promise.all(polls))
    expect(answers).not.toBe(STILL_WAITING)
    for (const res of answers) {
      expect(res.status).toBe(200)
      const b = json(res)
      expect(b).toMatchObject({ phase: 'live', groups: [], through: end.through, highWater: end.highWater })
    }
    await closing
    const later = await live.read(readBody(end.session, end.cursor), ALICE)
    expect(later.status).toBe(503)
    expect(json(later).error).toMatchObject({ code: 'unavailable', retryable: true, retryAfterMs: 1000 })
    const open = await live.open(openBody({ query: {} }), ALICE)
    expect(open.status).toBe(503)
    expect(json(open).error.code).toBe('unavailable')
  })

  test('a graceful HTTP shutdown does not wait out open long polls', async () => {
    const n = await node.startNode({ authentication: 'none' })
    cleanup.push(() => n.close())
    await n.submit(await n.factory.createNotes(['one']))
    const client = await node.publicClient(n)
    const end = await node.openCaughtUp(client)
    const poll = client.post('read', node.readReq(end, { waitMs: 20000 }))
    await new Promise(resolve => setTimeout(resolve, 150))
    // The host's graceful shutdown: stop the live layer, then let the HTTP server drain.
    const closing = n.live.close()
    const serverClosed = new Promise(resolve => n.srv.server.close(resolve))
    const res = await within(poll)
    expect(await within(closing)).not.toBe(STILL_WAITING)
    expect(res).not.toBe(STILL_WAITING)
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ phase: 'live', groups: [], through: end.through })
    n.srv.server.closeIdleConnections()
    expect(await within(serverClosed)).not.toBe(STILL_WAITING)
  })
})

describe('cancellation', () => {
  const node = require('./helpers/node')

  test('an open whose HTTP client goes away before it reaches the store scans nothing and stores nothing', async () => {
    const base = require('../demo/notes/notesCompanion').createNotesCompanion()
    let release
    const gate = new Promise(resolve => { release = resolve })
    let selecting
    const selected = new Promise(resolve => { selecting = resolve })
    const companion = { ...base, async select (query) { selecting(); await gate; return base.select(query) } }
    const n = await node.startNode({ authentication: 'none', companion })
    cleanup.push(() => n.close())
    await n.live.commit(Array.from({ length: 500 }, (_, i) => h.admit(i)))
    // Record the signal the router hands the open, to know when it saw the disconnect.
    const realOpen = n.live.open.bind(n.live)
    let signal
    n.live.open = (body, caller, options) => { signal = options.signal; return realOpen(body, caller, options) }
    const client = await node.publicClient(n)
    const before = n.live.stats()
    const ac = new AbortController()
    const req = node.openReq()
    const abandoned = client.post('open', req, { signal: ac.signal }).catch(e => e)
    await selected
    ac.abort()
    expect((await abandoned).name).toBe('AbortError')
    if (!signal.aborted) await new Promise(resolve => signal.addEventListener('abort', resolve, { once: true }))
    release()
    const res = await realOpen(Buffer.from(JSON.stringify(req)), { principal: '', authenticated: false }, { signal })
    expect(res.status).toBe(503)
    expect(json(res).error.code).toBe('cancelled')
    const after = n.live.stats()
    expect(after.scanExamined).toBe(before.scanExamined)
    expect(after.sessions).toBe(before.sessions)
    // Nothing was stored for its requestId: the same open now runs afresh and succeeds.
    n.live.open = realOpen
    const again = await client.post('open', req)
    expect(again.status).toBe(200)
    expect(again.body.groups.length).toBeGreaterThan(0)
    expect(n.live.stats().scanExamined).toBeGreaterThan(after.scanExamined)
  })

  test('a read whose caller is cancelled before its snapshot page is built scans nothing', async () => {
    const live = await h.openLive(h.tempDir())
    cleanup.push(() => live.close())
    live.wrap('ls_notes', h.plainService(), h.notesCompanion())
    await live.commit(Array.from({ length: 300 }, (_, i) => h.admit(i)))
    const first = json(await live.open(openBody({ query: {}, limits: { maxBytes: 65536, maxObservations: 10, waitMs: 0 } }), ALICE))
    expect(first.snapshotComplete).toBe(false)
    const ac = new AbortController()
    ac.abort()
    const before = live.stats().scanExamined
    const res = await live.read(readBody(first.session, first.cursor, { maxObservations: 10 }), ALICE, { signal: ac.signal })
    expect(res.status).toBe(503)
    expect(json(res).error.code).toBe('cancelled')
    expect(live.stats().scanExamined).toBe(before)
    // The cursor is untouched: the same read, not cancelled, continues the snapshot.
    const ok = json(await live.read(readBody(first.session, first.cursor, { maxObservations: 10 }), ALICE))
    expect(ok.groups.length).toBe(10)
    expect(live.stats().scanExamined).toBeGreaterThan(before)
  })
})

describe('restore', () => {
  /** A node on (dataDir, engineDir); `close()` stops it like a host shutting down. */
  async function nodeOn (dataDir, engineDir, live = {}) {
    const n = await setup({ dir: dataDir, engineDir, live })
    return { ...n, async close () { n.markClosed(); await n.live.close(); await n.t.close() } }
  }

  async function liveBatch (live, batch) {
    const res = await live.read(readBody(batch.session, batch.cursor), ALICE)
    expect(res.status).toBe(200)
    return json(res)
  }

  test('a data directory restored from an older copy pauses serving, then starts a new epoch re-seeded from the Engine', async () => {
    const root = h.tempDir('restore-')
    const dataDir = path.join(root, 'live')
    const engineDir = h.tempDir('restore-engine-')
    let n = await nodeOn(dataDir, engineDir)
    await n.submit(await n.factory.createNotes(['before the copy']))
    const { last: end } = await snapshotOf(n.live)
    const epoch = n.live.epoch
    await n.close()
    const copy = path.join(root, 'copy')
    fs.cpSync(dataDir, copy, { recursive: true })

    // Five more groups after the copy; the session reads them.
    n = await nodeOn(dataDir, engineDir)
    expect(n.live.epoch).toBe(epoch) // an ordinary restart: same epoch, the session resumes
    for (let i = 0; i < 5; i++) await n.submit(await n.factory.createNotes([`after the copy ${i}`]))
    const served = await liveBatch(n.live, end)
    expect(served.groups.length).toBe(5)
    await n.close()

    // The operator restores the older copy.
    fs.rmSync(dataDir, { recursive: true })
    fs.cpSync(copy, dataDir, { recursive: true })
    const events = []
    const live = await h.openLive(dataDir, { create: false, log: (e) => events.push(e) })
    let closed = false
    cleanup.push(() => closed ? null : live.close())
    live.wrap('ls_notes', h.plainService(), createNotesCompanion())
    expect(live.epoch).toBe(epoch)
    expect(events).toContainEqual(expect.objectContaining({ op: 'restore', action: 'serving-paused' }))
    // Nothing is served from the rolled-back store: not the old cursor, not a new snapshot.
    for (const res of [await live.read(readBody(end.session, end.cursor), ALICE), await live.open(openBody({ query: {} }), ALICE)]) {
      expect(res.status).toBe(503)
      expect(json(res).error).toMatchObject({ code: 'unavailable', retryable: true })
    }
    await live.close()
    closed = true

    // Attached to the Engine, the node starts a new epoch from the Engine's state.
    n = await nodeOn(dataDir, engineDir, { create: false })
    expect(n.live.epoch).not.toBe(epoch)
    const old = await n.live.read(readBody(end.session, end.cursor), ALICE)
    expect(old.status).toBe(409)
    expect(json(old).error.code).toBe('reset-required')
    const snap = await snapshotOf(n.live)
    expect(snap.outputs).toEqual(await engineLists(n.t))
    expect(snap.outputs.length).toBe(6)
    // Five other groups now are new sequences of the new epoch, read by new sessions only.
    for (let i = 0; i < 5; i++) await n.submit(await n.factory.createNotes([`after the restore ${i}`]))
    expect((await liveBatch(n.live, snap.last)).groups.length).toBe(5)
  })

  test('a clean close records what was published, even after anchor passes that had nothing to write', async () => {
    const root = h.tempDir('anchor-close-')
    const dataDir = path.join(root, 'live')
    const copy = path.join(root, 'copy')
    let live = await h.openLive(dataDir, { anchorIntervalMs: 100 })
    await live.close()
    fs.cpSync(dataDir, copy, { recursive: true })
    live = await h.openLive(dataDir, { create: false, anchorIntervalMs: 100 })
    // Several timer passes find nothing new to record before the commits come.
    await new Promise(resolve => setTimeout(resolve, 350))
    for (let i = 0; i < 5; i++) await live.commit([h.admit(i)])
    await live.close()

    fs.rmSync(dataDir, { recursive: true })
    fs.cpSync(copy, dataDir, { recursive: true })
    const events = []
    live = await h.openLive(dataDir, { create: false, log: (e) => events.push(e) })
    cleanup.push(() => live.close())
    expect(events).toContainEqual(expect.objectContaining({ op: 'restore', action: 'serving-paused' }))
    expect((await live.open(openBody({ query: {} }), ALICE)).status).toBe(503)
  })

  test('an operator can declare a restore: the next attach starts a new epoch re-seeded from the Engine', async () => {
    const dataDir = h.tempDir('declared-')
    const engineDir = h.tempDir('declared-engine-')
    let n = await nodeOn(dataDir, engineDir)
    await n.submit(await n.factory.createNotes(['one', 'two']))
    const epoch = n.live.epoch
    await n.close()
    n = await nodeOn(dataDir, engineDir, { create: false, restored: 'restored from last night\'s backup' })
    expect(n.live.epoch).not.toBe(epoch)
    expect((await snapshotOf(n.live)).outputs).toEqual(await engineLists(n.t))
  })
})
