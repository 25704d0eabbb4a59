'use strict'
// The admission gate (docs/design.md "Admission gate", issue 46): every change reaches the log
// in the order the host made it, through the prohibition filter, whatever its entrance; a
// prohibition survives restarts without making opens fail; an oversize request is answered at
// once. Through the public API: a real @bsv/overlay Engine with real transactions, real sled
// stores, real Express over loopback (the explicit public mode, plain fetch).

const http = require('node:http')
const { Transaction } = require('@bsv/sdk')
const { startNode, startEngineNode, publicClient, openAndDrain, readReq } = require('./helpers/node')
const h = require('./helpers/live')
const { createNotesCompanion } = require('../demo/notes/notesCompanion')
const { NOTES_TOPIC } = require('../demo/notes/notesProtocol')

const cleanup = h.cleanupAfterEach()

async function node (options = {}) {
  const n = await startNode({ authentication: 'none', ...options })
  cleanup.push(() => n.close())
  return n
}

/** `txid.outputIndex` of every output observation of `batches`, in order. */
function outputsOf (batches) {
  return batches.flatMap(b => b.groups.flatMap(g => g.observations))
    .filter(o => o.kind === 'output')
    .map(o => `${o.payload.evidence.txid}.${o.payload.evidence.outputIndex}`)
}

/** Applies the observations of `batches` to `members` (a Set of `txid.outputIndex`). */
function follow (members, batches) {
  for (const o of batches.flatMap(b => b.groups.flatMap(g => g.observations))) {
    if (o.kind === 'output') members.add(`${o.payload.evidence.txid}.${o.payload.evidence.outputIndex}`)
    if (o.kind === 'withdraw') members.delete(`${o.payload.outpoint.txid}.${o.payload.outpoint.outputIndex}`)
  }
  return members
}

/** Live reads from `from` until caught up; every batch. */
async function readCaughtUp (client, from) {
  const batches = []
  let b = from
  for (;;) {
    const r = await client.post('read', readReq(b))
    if (r.status !== 200) throw new Error(`read ${r.status}: ${r.raw}`)
    b = r.body
    batches.push(b)
    if (b.groups.length === 0 && b.through === b.highWater) return { batches, end: b, raw: batches.map(x => JSON.stringify(x)).join('') }
  }
}

/** What Engine.lookup lists for ls_notes, as `txid.outputIndex`, sorted. */
async function engineListed (t) {
  const answer = await t.engine.lookup({ service: 'ls_notes', query: {} })
  return answer.outputs.map(o => `${Transaction.fromBEEF(o.beef).id('hex')}.${o.outputIndex}`).sort()
}

/** A new session's snapshot: its members (sorted) and its raw bytes. */
async function snapshotOf (client) {
  const r = await client.post('open', { version: 1, requestId: h.requestId(), service: 'ls_notes', query: {}, limits: { maxBytes: 65536, maxObservations: 100, waitMs: 0 } })
  if (r.status !== 200) return { status: r.status, error: r.body && r.body.error }
  const { batches } = await openDrained(client, r.body)
  return { status: 200, members: outputsOf(batches).sort(), raw: r.raw + batches.slice(1).map(b => JSON.stringify(b)).join('') }
}

async function openDrained (client, first) {
  const batches = [first]
  let b = first
  while (!b.snapshotComplete) {
    const r = await client.post('read', readReq(b))
    if (r.status !== 200) throw new Error(`read ${r.status}: ${r.raw}`)
    b = r.body
    batches.push(b)
  }
  return { batches, end: b }
}

test('an output evicted as soon as its submit resolves stays withdrawn, eight times over: Engine.lookup, a follower and a new snapshot agree', async () => {
  const n = await node()
  const client = await publicClient(n)
  const { end } = await openAndDrain(client)
  const evicted = []
  for (let i = 0; i < 8; i++) {
    const built = await n.factory.createNotes([`evict me ${i}`])
    await n.t.engine.submit({ beef: built.beef, topics: [NOTES_TOPIC] })
    // What an admin eviction endpoint does, right after the submit resolved (its group is
    // published only later): the eviction lands after it.
    await n.t.engine.lookupServices.ls_notes.outputEvicted(built.txid, 0)
    evicted.push(`${built.txid}.0`)
  }
  await n.live.published()
  expect(await engineListed(n.t)).toEqual([])
  const followed = follow(new Set(), (await readCaughtUp(client, end)).batches)
  expect([...followed]).toEqual([])
  expect((await snapshotOf(client)).members).toEqual([])
  // A later attach does not bring them back either (the evictions are remembered).
  await n.live.attach(n.t.engine)
  expect((await snapshotOf(client)).members).toEqual([])
})

test('a filter prohibition holds for outputs the Engine admits later: a waiting poll and a new snapshot never carry their bytes', async () => {
  const n = await node()
  const client = await publicClient(n)
  const { end } = await openAndDrain(client)
  // Notes of 9 characters may no longer be disclosed.
  await n.live.prohibit({ service: 'ls_notes', where: { eq: ['length', 9] } })
  const poll = client.post('read', readReq(end, { waitMs: 15000 }))
  const bad = await n.factory.createNotes(['forbidden'])
  await n.t.engine.submit({ beef: bad.beef, topics: [NOTES_TOPIC] })
  const good = await n.factory.createNotes(['acceptable'])
  await n.t.engine.submit({ beef: good.beef, topics: [NOTES_TOPIC] })
  await n.live.published()
  const woke = await poll
  expect(woke.status).toBe(200)
  const rest = await readCaughtUp(client, woke.body)
  const served = woke.raw + rest.raw
  expect(served).not.toContain(bad.txid)
  expect(follow(new Set(), [woke.body, ...rest.batches])).toEqual(new Set([`${good.txid}.0`]))
  const snap = await snapshotOf(client)
  expect(snap.members).toEqual([`${good.txid}.0`])
  expect(snap.raw).not.toContain(bad.txid)
  // The Engine keeps the output (a prohibition is about serving it).
  expect(await engineListed(n.t)).toEqual([`${bad.txid}.0`, `${good.txid}.0`].sort())
})

test('a prohibition survives a restart without making opens fail: attach reconciles with the Engine, every open succeeds, no prohibited byte is served', async () => {
  const dir = h.tempDir()
  const engineDir = h.tempDir('engine-')
  let n = await startNode({ authentication: 'none', dir, engineDir })
  const bad = await n.factory.createNotes(['forbidden'])
  await n.submit(bad)
  const named = await n.factory.createNotes(['named by outpoint'])
  await n.submit(named)
  const good = await n.factory.createNotes(['acceptable'])
  await n.submit(good)
  await n.live.prohibit({ service: 'ls_notes', where: { eq: ['length', 9] } })
  await n.live.prohibit({ service: 'ls_notes', outpoints: [`${named.txid}.0`] })
  await n.close()

  n = await node({ dir, engineDir, chainTracker: n.factory.chainTracker })
  const client = await publicClient(n)
  for (let i = 0; i < 3; i++) {
    const snap = await snapshotOf(client)
    expect(snap.status).toBe(200)
    expect(snap.members).toEqual([`${good.txid}.0`])
    expect(snap.raw).not.toContain(bad.txid)
    expect(snap.raw).not.toContain(named.txid)
  }
  // A matching output submitted after the restart is not served either.
  const later = await n.factory.createNotes(['forbidden'])
  await n.submit(later)
  const snap = await snapshotOf(client)
  expect(snap.members).toEqual([`${good.txid}.0`])
  expect(snap.raw).not.toContain(later.txid)
})

test('a spend submitted while the admitting submit is still in flight lands after the admission in the live store', async () => {
  const notes = createNotesCompanion()
  let release
  const gate = new Promise(resolve => { release = resolve })
  let reached
  const atGate = new Promise(resolve => { reached = resolve })
  const companion = {
    ...notes,
    async index (output) {
      const indexed = notes.index(output)
      if (indexed && indexed.context.text === 'gated') {
        reached()
        await gate
      }
      return indexed
    }
  }
  const n = await startEngineNode({ companion })
  cleanup.push(() => n.close())
  const opened = await h.drainSnapshot(n.live, h.json(await n.live.open(h.openBody(), h.ALICE)), h.ALICE)
  const created = await n.factory.createNotes(['gated'])
  const first = n.t.engine.submit({ beef: created.beef, topics: [NOTES_TOPIC] })
  await atGate // the output is in Engine storage; its admission is not committed yet
  const spend = await n.factory.spendNotes([created.notes[0]])
  const second = n.t.engine.submit({ beef: spend.beef, topics: [NOTES_TOPIC] })
  // The spending submit resolves first and its group is assembled; then the gate opens.
  await second
  for (let i = 0; i < 50; i++) await new Promise(resolve => setImmediate(resolve))
  release()
  await first
  await n.live.published()
  // A follower sees the admission, then the spend; a new snapshot is empty, like Engine.lookup.
  const seen = []
  let b = opened[opened.length - 1]
  do {
    const res = await n.live.read(h.readBody(b.session, b.cursor), h.ALICE)
    expect(res.status).toBe(200)
    b = h.json(res)
    seen.push(...b.groups.flatMap(g => g.observations.map(o => o.kind)))
  } while (b.groups.length > 0 || b.through !== b.highWater)
  expect(seen).toEqual(['output', 'withdraw', 'spend'])
  const snap = await h.drainSnapshot(n.live, h.json(await n.live.open(h.openBody(), h.ALICE)), h.ALICE)
  expect(outputsOf(snap)).toEqual([])
  expect(await engineListed(n.t)).toEqual([])
})

test('a burst of back-to-back submits on SQLite publishes groups during the burst, not only after it', async () => {
  const n = await startEngineNode()
  cleanup.push(() => n.close())
  const built = []
  for (let i = 0; i < 12; i++) built.push(await n.factory.createNotes([`burst ${i}`]))
  const start = BigInt(n.live.highWater)
  let publishedDuring = 0n
  for (const b of built) {
    await n.t.engine.submit({ beef: b.beef, topics: [NOTES_TOPIC] })
    publishedDuring = BigInt(n.live.highWater) - start
  }
  // The Engine's SQLite answers without I/O, so the loop never waits for the event loop; the
  // groups of earlier submits are published all the same while later ones run.
  expect(Number(publishedDuring)).toBeGreaterThanOrEqual(6)
  await n.live.published()
  expect(BigInt(n.live.highWater) - start).toBe(12n)
})

test('a request declaring a body over 1 MiB that never sends it is answered 413 limited at once', async () => {
  const n = await node()
  const url = new URL(`${n.base}/overlay/v1/lookup/open`)
  const answer = await new Promise((resolve, reject) => {
    const req = http.request({
      host: url.hostname,
      port: url.port,
      path: url.pathname,
      method: 'POST',
      headers: { 'content-type': 'application/json', 'cache-control': 'no-store', 'content-length': String(1024 * 1024 + 1) }
    }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c) => { body += c })
      res.on('end', () => resolve({ status: res.statusCode, body }))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.flushHeaders() // the headers only: the body never comes
    // Fail instead of hanging when no answer comes while the body is missing.
    setTimeout(() => { req.destroy(); reject(new Error('no answer while the declared body was not sent')) }, 20000).unref()
  })
  expect(answer.status).toBe(413)
  expect(JSON.parse(answer.body).error.code).toBe('limited')
  expect(answer.body.length).toBeLessThan(4096)
})

/**
 * The rows `batches` disclose (BRC-193 §8): the outpoint of each output observation and the
 * spent outpoint of each spend (its spending transaction is evidence of that spend).
 */
function disclosed (batches) {
  return batches.flatMap(b => b.groups.flatMap(g => g.observations)).flatMap(o =>
    o.kind === 'output'
      ? [`${o.payload.evidence.txid}.${o.payload.evidence.outputIndex}`]
      : o.kind === 'spend' ? [`${o.payload.previous.txid}.${o.payload.previous.outputIndex}`] : [])
}

/** A small deterministic generator (mulberry32), so a failing seed can be replayed. */
function random (seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6D2B79F5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const STEPS = ['submit', 'submit', 'submit-evict', 'spend', 'spend', 'prohibit-outpoint', 'prohibit-filter', 'policy', 'restart']

for (const seed of [46, 4601, 193]) {
  test(`property (seed ${seed}): submits, evictions, spends, prohibitions, policy changes and restarts in random order; after each, a new snapshot is Engine.lookup less the prohibited rows and nothing served carries a prohibited row`, async () => {
    const next = random(seed)
    const pick = (list) => list[Math.floor(next() * list.length)]
    const dir = h.tempDir()
    const engineDir = h.tempDir('engine-')
    let n = await startNode({ authentication: 'none', dir, engineDir })
    let open = n
    cleanup.push(() => open.close())
    const factory = n.factory
    const chainTracker = factory.chainTracker
    const notes = new Map() // txid.0 -> note, for every note ever submitted
    const lengths = [] // prohibited lengths (filters)
    const named = new Set() // prohibited outpoints
    const prohibited = () => new Set([...notes.keys()].filter(k => named.has(k) || lengths.includes(notes.get(k).text.length)))
    let client = await publicClient(n)
    let follower = (await openAndDrain(client)).end
    const text = () => 'n'.repeat(8 + Math.floor(next() * 4)) + String(notes.size)
    const members = async () => (await engineListed(n.t)).filter(k => notes.has(k))
    for (let step = 0; step < 14; step++) {
      const op = pick(STEPS)
      if (op === 'submit' || op === 'submit-evict') {
        const built = await factory.createNotes([text()])
        notes.set(`${built.txid}.0`, built.notes[0])
        await n.t.engine.submit({ beef: built.beef, topics: [NOTES_TOPIC] })
        if (op === 'submit-evict') await n.t.engine.lookupServices.ls_notes.outputEvicted(built.txid, 0)
      } else if (op === 'spend') {
        const current = await members()
        if (current.length > 0) {
          const built = await factory.replaceNote(notes.get(pick(current)), text())
          notes.set(`${built.txid}.0`, built.notes[0])
          await n.t.engine.submit({ beef: built.beef, topics: [NOTES_TOPIC] })
        }
      } else if (op === 'prohibit-outpoint') {
        const current = await members()
        if (current.length > 0) {
          const key = pick(current)
          named.add(key)
          await n.live.prohibit({ service: 'ls_notes', outpoints: [key] })
        }
      } else if (op === 'prohibit-filter') {
        const length = 8 + Math.floor(next() * 4) + String(notes.size).length
        lengths.push(length)
        await n.live.prohibit({ service: 'ls_notes', where: { eq: ['length', length] } })
      } else if (op === 'policy') {
        await n.live.changePolicy()
      } else if (op === 'restart') {
        await n.close()
        n = await startNode({ authentication: 'none', dir, engineDir, chainTracker })
        open = n
        client = await publicClient(n)
      }
      await n.live.published()
      const banned = prohibited()
      const expected = (await members()).filter(k => !banned.has(k))
      const snap = await snapshotOf(client)
      expect({ step, op, status: snap.status }).toEqual({ step, op, status: 200 })
      expect({ step, op, members: snap.members }).toEqual({ step, op, members: expected })
      // The follower: what it is served from here on carries no prohibited row either; a
      // session a prohibition or policy change ended is opened anew.
      let caught
      try {
        caught = await readCaughtUp(client, follower)
      } catch (e) {
        if (!/^read 409/.test(e.message)) throw e
        follower = (await openAndDrain(client)).end
        caught = await readCaughtUp(client, follower)
      }
      follower = caught.end
      expect({ step, op, disclosed: disclosed(caught.batches).filter(k => banned.has(k)) }).toEqual({ step, op, disclosed: [] })
    }
  })
}
