'use strict'
// Sessions through the JS API (BRC-193 §7 provider cases) on a real sled store.

const h = require('./helpers/live')
const { ALICE, BOB, admit, remove, openBody, readBody, json, drainSnapshot } = h

let dir, live

async function setup (opts = {}, companion = h.notesCompanion()) {
  dir = h.tempDir()
  live = await h.openLive(dir, opts)
  live.wrap('ls_notes', h.plainService(), companion)
  return live
}

afterEach(async () => {
  if (live) await live.close()
  live = null
})

async function openOk (over, caller = ALICE) {
  const res = await live.open(openBody(over), caller)
  if (res.status !== 200) throw new Error(`open ${res.status}: ${Buffer.from(res.body)}`)
  return json(res)
}

function outpoints (batches) {
  return batches.flatMap(b => b.groups.flatMap(g => g.observations.map(o => `${o.kind}:${(o.payload.evidence || o.payload.outpoint || o.payload.previous).txid}`)))
}

test('an empty collection still yields a completed snapshot batch, then live', async () => {
  await setup()
  const b = await openOk()
  expect(b.phase).toBe('snapshot')
  expect(b.snapshotComplete).toBe(true)
  expect(b.groups).toEqual([])
  expect(b.through).toBe(b.highWater)
  const next = json(await live.read(readBody(b.session, b.cursor), ALICE))
  expect(next.phase).toBe('live')
  expect(next.groups).toEqual([])
})

test('snapshot pages, boundary and live order; mutations before the boundary and during the last page are not lost', async () => {
  await setup()
  for (let i = 0; i < 5; i++) await live.commit([admit(i)])
  const first = await openOk({ limits: { maxBytes: 65536, maxObservations: 2, waitMs: 0 } })
  const W = first.through
  expect(first.snapshotComplete).toBe(false)
  expect(first.groups).toHaveLength(2)
  // A mutation before the boundary: after W, so not in the snapshot.
  await live.commit([admit(100)])
  const second = json(await live.read(readBody(first.session, first.cursor, { maxObservations: 2 }), ALICE))
  // A mutation during the last snapshot page.
  await live.commit([remove(0)])
  const batches = await drainSnapshot(live, second, ALICE, { maxObservations: 2 })
  const all = [first, ...batches]
  const snap = all.flatMap(b => b.groups)
  expect(snap).toHaveLength(5)
  for (const b of all) {
    expect(b.phase).toBe('snapshot')
    expect(b.through).toBe(W)
    for (const g of b.groups) expect(g.sequence).toBe(W)
  }
  expect(all.filter(b => b.snapshotComplete)).toHaveLength(1)
  const last = all[all.length - 1]
  const liveBatch = json(await live.read(readBody(last.session, last.cursor), ALICE))
  expect(liveBatch.phase).toBe('live')
  expect(outpoints([liveBatch])).toEqual([`output:${h.txid(100)}`, `withdraw:${h.txid(0)}`])
  const seqs = liveBatch.groups.map(g => BigInt(g.sequence))
  expect(seqs[0] > BigInt(W)).toBe(true)
  expect(seqs[1] > seqs[0]).toBe(true)
  expect(BigInt(liveBatch.through) <= BigInt(liveBatch.highWater)).toBe(true)
  for (const g of liveBatch.groups) for (const o of g.observations) expect(o.scope).toEqual(liveBatch.scope)
})

test('an identical open retry returns the stored first batch byte for byte, even after reads advanced', async () => {
  await setup()
  await live.commit([admit(1)])
  await live.commit([admit(3)])
  const body = openBody()
  const a = await live.open(body, ALICE)
  const first = json(a)
  await live.read(readBody(first.session, first.cursor), ALICE)
  // The first page's rows change after W, and compaction runs to the end: the retry
  // still answers the first batch as it was (rows at W stay while the session lives).
  await live.commit([admit(2)])
  await live.commit([remove(1)])
  while (await live.compact(1000)) { /* until no work is left */ }
  const b = await live.open(body, ALICE)
  expect(b.status).toBe(200)
  expect(Buffer.from(b.body).equals(Buffer.from(a.body))).toBe(true)
  expect(outpoints([json(b)])).toEqual([`output:${h.txid(1)}`, `output:${h.txid(3)}`])
})

test('changed parameters under the same requestId conflict; reopening after close is expired', async () => {
  await setup()
  const requestId = h.requestId()
  const first = await openOk({ requestId })
  const changed = await live.open(openBody({ requestId, query: { author: 'bob' } }), ALICE)
  expect(changed.status).toBe(409)
  expect(json(changed).error.code).toBe('conflict')
  const closed = await live.closeSession(Buffer.from(JSON.stringify({ version: 1, session: first.session })), ALICE)
  expect(json(closed)).toEqual({ version: 1, closed: true })
  const again = await live.open(openBody({ requestId }), ALICE)
  expect(again.status).toBe(410)
  expect(json(again).error.code).toBe('expired')
  const read = await live.read(readBody(first.session, first.cursor), ALICE)
  expect(json(read).error.code).toBe('expired')
})

test('duplicate pages: repeating a read returns the same ids and contents', async () => {
  await setup()
  for (let i = 0; i < 4; i++) await live.commit([admit(i)])
  const first = await openOk({ limits: { maxBytes: 65536, maxObservations: 1, waitMs: 0 } })
  const r1 = await live.read(readBody(first.session, first.cursor, { maxObservations: 1 }), ALICE)
  const r2 = await live.read(readBody(first.session, first.cursor, { maxObservations: 1 }), ALICE)
  expect(Buffer.from(r1.body).equals(Buffer.from(r2.body))).toBe(true)
  // With other limits the prefix differs, but ids and contents do not.
  const r3 = json(await live.read(readBody(first.session, first.cursor, { maxObservations: 3 }), ALICE))
  expect(r3.groups[0]).toEqual(json(r1).groups[0])
  // Live groups too.
  const done = await drainSnapshot(live, first, ALICE)
  const end = done[done.length - 1]
  await live.commit([admit(50)])
  const l1 = json(await live.read(readBody(end.session, end.cursor), ALICE))
  const l2 = json(await live.read(readBody(end.session, end.cursor), ALICE))
  expect(l1.groups).toEqual(l2.groups)
  expect(l1.groups[0].id).toBe(`l-${l1.groups[0].sequence}`)
})

test('sparse sequences: groups of other services are skipped while through advances', async () => {
  await setup()
  live.wrap('ls_other', h.plainService(), h.notesCompanion())
  const first = await openOk()
  await live.commit([admit(1, { service: 'ls_other' })])
  await live.commit([admit(2)])
  await live.commit([admit(3, { service: 'ls_other' })])
  const b = json(await live.read(readBody(first.session, first.cursor), ALICE))
  expect(b.groups).toHaveLength(1)
  expect(BigInt(b.groups[0].sequence)).toBe(BigInt(first.through) + 2n)
  expect(b.through).toBe(b.highWater)
  expect(BigInt(b.through)).toBe(BigInt(first.through) + 3n)
})

test('a waiting poll wakes on a commit, including one made between waiter registration and sleep', async () => {
  await setup()
  const first = await openOk()
  const poll = live.read(readBody(first.session, first.cursor, { waitMs: 20000 }), ALICE)
  await new Promise(resolve => setTimeout(resolve, 100))
  await live.commit([admit(7)])
  const b = json(await poll)
  expect(outpoints([b])).toEqual([`output:${h.txid(7)}`])

  // The injected commit happens after the waiter subscribed and rescanned, right
  // before it sleeps: it must still wake the poll.
  live.core.injectAfterWaiterRegistered([require('../js/provider/live').toNativeChange(admit(8))])
  const b2 = json(await live.read(readBody(b.session, b.cursor, { waitMs: 25000 }), ALICE))
  expect(outpoints([b2])).toEqual([`output:${h.txid(8)}`])
  // A lost wakeup would sleep until the 25 s deadline; this test's own 15 s timeout
  // turns that into a failure instead of a slow pass.
}, 15000)

test('polls woken together each get their own whole body, across the chunks of a delivery', async () => {
  // One commit answers every poll in one pass; the answers reach JS packed end to end in
  // 252 KiB chunks (src/node/delivery.rs). 48 bodies of about 60 KiB fill many chunks and
  // leave room in each that the next body does not fit, so settleCalls must find every
  // body at the start of the next region.
  await setup()
  const callers = Array.from({ length: 48 }, (_, i) => ({ principal: '02' + i.toString(16).padStart(64, '0'), authenticated: true }))
  const firsts = await Promise.all(callers.map((c) => openOk({}, c)))
  const polls = callers.map((c, i) => live.read(readBody(firsts[i].session, firsts[i].cursor, { waitMs: 20000 }), c))
  while (live.stats().waiters < callers.length) await new Promise(resolve => setTimeout(resolve, 20))
  await live.commit([admit(9, { beef: Buffer.alloc(45000, 0xbe) })])
  const bodies = await Promise.all(polls)
  bodies.forEach((res, i) => {
    expect(res.status).toBe(200)
    expect(res.body.length).toBeGreaterThan(60000)
    const b = json(res)
    expect(b.session).toBe(firsts[i].session)
    expect(outpoints([b])).toEqual([`output:${h.txid(9)}`])
  })
}, 20000)

test('a chunk JS has finished with is reused, never one that a kept body still views', async () => {
  // Chunks come back to the provider when V8 collects their last view (src/node/delivery.rs)
  // and carry later deliveries; the chunk the first wake left open can carry on into the
  // second. Bodies kept from the first wake must stay intact after the second wake has
  // written after them and reused the chunks of the bodies that were dropped.
  const v8 = require('node:v8')
  v8.setFlagsFromString('--expose-gc')
  const gc = require('node:vm').runInNewContext('gc')
  await setup()
  const callers = Array.from({ length: 48 }, (_, i) => ({ principal: '03' + i.toString(16).padStart(64, '0'), authenticated: true }))
  const sessions = await Promise.all(callers.map((c) => openOk({}, c)))
  const wake = async (n, fill) => {
    const polls = callers.map((c, i) => live.read(readBody(sessions[i].session, sessions[i].cursor, { waitMs: 20000 }), c))
    while (live.stats().waiters < callers.length) await new Promise(resolve => setTimeout(resolve, 20))
    await live.commit([admit(n, { beef: Buffer.alloc(45000, fill) })])
    const got = await Promise.all(polls)
    got.forEach((res, i) => {
      expect(res.status).toBe(200)
      sessions[i].cursor = json(res).cursor
    })
    return got
  }
  let first = await wake(20, 0xbe)
  const kept = first.slice(0, 24).map((res) => res.body)
  const copies = kept.map((body) => Buffer.from(body))
  first = null
  for (let i = 0; i < 3; i++) {
    gc()
    await new Promise(resolve => setImmediate(resolve))
  }
  const second = await wake(21, 0xcd)
  second.forEach((res) => expect(outpoints([json(res)])).toEqual([`output:${h.txid(21)}`]))
  kept.forEach((body, i) => {
    expect(body.equals(copies[i])).toBe(true)
    expect(outpoints([JSON.parse(body.toString('utf8'))])).toEqual([`output:${h.txid(20)}`])
  })
}, 30000)

test('an outstanding poll keeps Node running until it is answered; an answered one does not', async () => {
  // Reads are answered through one shared, weak callback (src/node/delivery.rs); JS holds it
  // only while reads are outstanding. Too weak, and the child exits before the answer;
  // too strong, and it never exits.
  const { spawn } = require('child_process')
  const child = spawn(process.execPath, [require('path').join(__dirname, 'fixtures/poll-child.js'), h.tempDir()], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (d) => { out += d })
  // A child that never exits is killed, so the failure is an exit code, not a hung run.
  const kill = setTimeout(() => child.kill('SIGKILL'), 12000)
  const code = await new Promise((resolve) => child.on('exit', resolve))
  clearTimeout(kill)
  expect(code).toBe(0)
  const got = JSON.parse(out)
  expect(got).toMatchObject({ status: 200, phase: 'live', groups: 0 })
  expect(got.waitedMs).toBeGreaterThanOrEqual(1400)
}, 20000)

test('a poll times out with an empty live batch and coherent watermarks', async () => {
  await setup()
  const first = await openOk()
  const b = json(await live.read(readBody(first.session, first.cursor, { waitMs: 200 }), ALICE))
  expect(b.phase).toBe('live')
  expect(b.groups).toEqual([])
  expect(b.through).toBe(b.highWater)
})

test('cancellation releases the waiter and consumes nothing', async () => {
  await setup()
  const first = await openOk()
  const ac = new AbortController()
  const poll = live.read(readBody(first.session, first.cursor, { waitMs: 20000 }), ALICE, { signal: ac.signal })
  await new Promise(resolve => setTimeout(resolve, 100))
  expect(live.stats().waiters).toBe(1)
  ac.abort()
  const res = await poll
  expect(json(res).error.code).toBe('cancelled')
  expect(live.stats().waiters).toBe(0)
  await live.commit([admit(9)])
  const b = json(await live.read(readBody(first.session, first.cursor), ALICE))
  expect(outpoints([b])).toEqual([`output:${h.txid(9)}`])
})

test('expiry during the snapshot: the row stays in S and is withdrawn after W in order', async () => {
  await setup()
  const now = Math.floor(Date.now() / 1000)
  await live.commit([admit(1, { expiresAt: now + 30 })])
  await live.commit([admit(2, { expiresAt: now + 20 })])
  await live.commit([admit(3)])
  const first = await openOk({ limits: { maxBytes: 65536, maxObservations: 1, waitMs: 0 } })
  live.core.advanceClockMs(60_000)
  const batches = await drainSnapshot(live, first, ALICE, { maxObservations: 1 })
  expect(batches.flatMap(b => b.groups)).toHaveLength(3)
  const end = batches[batches.length - 1]
  const b = json(await live.read(readBody(end.session, end.cursor), ALICE))
  expect(b.groups).toHaveLength(1)
  const ws = b.groups[0].observations
  expect(ws.map(o => [o.kind, o.payload.outpoint.txid, o.payload.reason])).toEqual([
    ['withdraw', h.txid(2), 'expired'],
    ['withdraw', h.txid(1), 'expired']
  ])
})

test('a large atomic group against small limits is limited, never split, and consumable with a larger limit', async () => {
  await setup()
  const first = await openOk()
  const big = []
  for (let i = 0; i < 20; i++) big.push(admit(200 + i))
  await live.commit(big)
  const small = await live.read(readBody(first.session, first.cursor, { maxObservations: 5 }), ALICE)
  expect(small.status).toBe(413)
  const err = json(small).error
  expect(err.code).toBe('limited')
  expect(err.limit.kind).toBe('group')
  expect(err.limit.minimumObservations).toBe(20)
  expect(Buffer.from(small.body).length).toBeLessThanOrEqual(4096)
  const tinyBytes = await live.read(readBody(first.session, first.cursor, { maxBytes: 3000 }), ALICE)
  expect(json(tinyBytes).error.limit.kind).toBe('group')
  const need = json(tinyBytes).error.limit.minimumBytes
  const ok = await live.read(readBody(first.session, first.cursor, { maxBytes: need }), ALICE)
  if (ok.status !== 200) throw new Error(Buffer.from(ok.body).toString() + ' need=' + need)
  expect(Buffer.from(ok.body).length).toBeLessThanOrEqual(need)
  expect(json(ok).groups[0].observations).toHaveLength(20)
})

test('restart: the store reopens with its epoch and cursors resume', async () => {
  await setup()
  await live.commit([admit(1)])
  const first = await openOk()
  const epoch = live.epoch
  await live.close()
  live = await h.openLive(dir, { create: false })
  live.wrap('ls_notes', h.plainService(), h.notesCompanion())
  expect(live.epoch).toBe(epoch)
  await live.commit([admit(2)])
  const b = json(await live.read(readBody(first.session, first.cursor), ALICE))
  expect(outpoints([b])).toEqual([`output:${h.txid(2)}`])
})

test('a missing store is not silently created', async () => {
  const missing = h.tempDir() + '/nothing-here'
  await expect(h.openLive(missing, { create: false })).rejects.toThrow(/create/)
})

test('provider reset and rule change give reset-required', async () => {
  await setup()
  const first = await openOk()
  live.wrap('ls_notes', h.plainService(), h.notesCompanion(2))
  const changed = await live.read(readBody(first.session, first.cursor), ALICE)
  expect(json(changed).error.code).toBe('reset-required')
  live.wrap('ls_notes', h.plainService(), h.notesCompanion(1))
  const epoch = live.epoch
  await live.resetEpoch({ changes: [] })
  expect(live.epoch).not.toBe(epoch)
  const reset = await live.read(readBody(first.session, first.cursor), ALICE)
  expect(reset.status).toBe(409)
  expect(json(reset).error.code).toBe('reset-required')
})

test('revocation during a waiting poll ends it with unauthorized', async () => {
  await setup()
  const first = await openOk()
  const poll = live.read(readBody(first.session, first.cursor, { waitMs: 20000 }), ALICE)
  await new Promise(resolve => setTimeout(resolve, 100))
  expect(await live.revoke(ALICE.principal)).toBe(1)
  const res = await poll
  expect(res.status).toBe(401)
  expect(json(res).error.code).toBe('unauthorized')
})

test('another principal cannot read or close the session and learns nothing', async () => {
  await setup()
  const first = await openOk()
  const theirs = await live.read(readBody(first.session, first.cursor), BOB)
  const unknown = await live.read(readBody('ab'.repeat(16), first.cursor), BOB)
  expect(theirs.status).toBe(409)
  expect(json(theirs)).toEqual(json(unknown))
  const closed = await live.closeSession(Buffer.from(JSON.stringify({ version: 1, session: first.session })), BOB)
  expect(json(closed)).toEqual({ version: 1, closed: true })
  const mine = await live.read(readBody(first.session, first.cursor), ALICE)
  expect(mine.status).toBe(200)
})

test('tampered cursors give reset-required; unknown services not-found; rejected queries invalid; rules digest conflict', async () => {
  await setup()
  const first = await openOk()
  const c = first.cursor
  const tampered = c.slice(0, -2) + (c.endsWith('AA') ? 'BB' : 'AA')
  expect(json(await live.read(readBody(first.session, tampered), ALICE)).error.code).toBe('reset-required')
  expect((await live.open(openBody({ service: 'nope' }), ALICE)).status).toBe(404)
  expect(json(await live.open(openBody({ query: { bad: true } }), ALICE)).error.code).toBe('invalid')
  const wrong = await live.open(openBody({ requiredRulesDigest: 'ab'.repeat(32) }), ALICE)
  expect(json(wrong).error.code).toBe('conflict')
})

test.each([
  ['at the request', 'request', (v) => v],
  ['right before serializing (synchronous hook)', 'serialize', (v) => v],
  ['right before serializing (asynchronous hook)', 'serialize', (v) => Promise.resolve(v)]
])('another partition %s ends the session with reset-required, a denial with unauthorized', async (_, when, wrap) => {
  // With 'serialize', only the recheck right before a batch is handed out (BRC-193 §5) sees
  // the change: the request itself is still authorized as 'group-a'.
  let partition = 'group-a'
  await setup({ authorize: ({ stage }) => wrap(when === 'request' || stage === 'serialize' ? (partition && { partition }) : { partition: 'group-a' }) })
  const first = await openOk()
  // A digest of the policy and the partition, never the label itself.
  expect(first.scope.access).toMatch(/^[0-9a-f]{64}$/)
  expect(first.scope.access).toBe(live.accessOf('group-a'))
  expect(first.scope.access).not.toBe(live.accessOf('group-b'))
  expect((await live.read(readBody(first.session, first.cursor), ALICE)).status).toBe(200)
  partition = 'group-b'
  const res = await live.read(readBody(first.session, first.cursor), ALICE)
  expect(res.status).toBe(409)
  expect(json(res).error.code).toBe('reset-required')
  partition = 'group-a'
  // The session stays ended: the client opens a new snapshot under its partition.
  expect(json(await live.read(readBody(first.session, first.cursor), ALICE)).error.code).toBe('reset-required')
  const second = await openOk()
  partition = null
  const denied = await live.read(readBody(second.session, second.cursor), ALICE)
  expect(denied.status).toBe(401)
  expect(json(denied).error.code).toBe('unauthorized')
  partition = 'group-a'
  expect((await live.read(readBody(second.session, second.cursor), ALICE)).status).toBe(401)
})

test('a caught-up read that does not wait is answered without the tokio pool; any other read takes it', async () => {
  await setup()
  const first = await openOk()
  const ticketed = jest.spyOn(live.core, 'readTicketed')
  const caughtUp = json(await live.read(readBody(first.session, first.cursor), ALICE))
  expect(caughtUp.groups).toEqual([])
  expect(ticketed).toHaveBeenCalledTimes(0)
  await live.commit([admit(1)])
  const behind = json(await live.read(readBody(first.session, first.cursor), ALICE))
  expect(behind.groups).toHaveLength(1)
  expect(ticketed).toHaveBeenCalledTimes(1)
  const poll = live.read(readBody(behind.session, behind.cursor, { waitMs: 20 }), ALICE)
  expect(json(await poll).groups).toEqual([])
  expect(ticketed).toHaveBeenCalledTimes(2)
  const bad = await live.read(readBody(first.session, 'not-a-cursor'), ALICE)
  expect(json(bad).error.code).toBe('reset-required')
  expect(ticketed).toHaveBeenCalledTimes(3)
  ticketed.mockRestore()
})

test('stats date the last commit that became visible, between its call and its resolution', async () => {
  await setup()
  expect(live.stats().publishedAgoMs).toBeUndefined()
  const called = performance.now()
  await live.commit([admit(1)])
  const resolved = performance.now()
  const read = performance.now()
  const publishedAt = read - live.stats().publishedAgoMs
  // One monotonic clock on both sides; the slack covers rounding to microseconds.
  expect(publishedAt).toBeGreaterThanOrEqual(called - 0.01)
  expect(publishedAt).toBeLessThanOrEqual(resolved + 0.01)
  // A read changes nothing; only the next commit moves it.
  const first = await openOk()
  expect(performance.now() - live.stats().publishedAgoMs).toBeLessThanOrEqual(resolved + 0.01)
  expect(first.highWater).toBe('1')
})

test('background compaction removes what no session needs and keeps what a session still reads', async () => {
  await setup({ compactionIntervalMs: 20 })
  for (let i = 0; i < 10; i++) await live.commit([admit(i)])
  for (let i = 0; i < 5; i++) await live.commit([remove(i)])
  const first = await openOk()
  const W = first.through
  for (let i = 20; i < 25; i++) await live.commit([admit(i)])
  for (let i = 0; i < 200 && live.stats().compactedThrough !== W; i++) await new Promise(resolve => setTimeout(resolve, 20))
  // Compaction caught up to the oldest retained session's watermark, not past it.
  expect(live.stats().compactedThrough).toBe(W)
  const batches = await drainSnapshot(live, first)
  expect(batches.flatMap(b => b.groups)).toHaveLength(5)
  const end = batches[batches.length - 1]
  const b = json(await live.read(readBody(end.session, end.cursor), ALICE))
  expect(b.groups.map(g => g.observations[0].payload.evidence.txid)).toEqual([20, 21, 22, 23, 24].map(h.txid))
})

test('restart of the server process after SIGKILL: fences, sessions and acknowledged groups survive; cursors resume', async () => {
  const { spawn } = require('child_process')
  dir = h.tempDir()
  const child = spawn(process.execPath, [require('path').join(__dirname, 'fixtures/live-child.js'), dir], { stdio: ['ignore', 'pipe', 'inherit'] })
  const lines = []
  await new Promise((resolve, reject) => {
    let buf = ''
    child.stdout.on('data', (c) => {
      buf += c
      const parts = buf.split('\n')
      buf = parts.pop()
      lines.push(...parts.filter(Boolean).map(l => JSON.parse(l)))
      if (lines.length === 2) resolve()
    })
    child.on('exit', (code) => reject(new Error('child exited early with ' + code)))
  })
  child.kill('SIGKILL')
  await new Promise(resolve => child.once('exit', resolve))
  const [opened, committed] = lines
  live = await h.openLive(dir, { create: false })
  live.wrap('ls_notes', h.plainService(), h.notesCompanion())
  expect(live.epoch).toBe(opened.epoch)
  // The identical open retry still returns the stored first batch, byte for byte.
  const retry = await live.open(Buffer.from(opened.body, 'base64'), ALICE)
  expect(Buffer.from(retry.body).toString('base64')).toBe(opened.first)
  const first = JSON.parse(Buffer.from(opened.first, 'base64').toString('utf8'))
  const batches = await drainSnapshot(live, first, ALICE, { maxObservations: 1 })
  expect(batches.flatMap(b => b.groups).map(g => g.observations[0].payload.evidence.txid)).toEqual([0, 1, 2].map(h.txid))
  const end = batches[batches.length - 1]
  const b = json(await live.read(readBody(end.session, end.cursor), ALICE))
  // The group acknowledged just before the kill is there, exactly once.
  expect(b.groups.map(g => g.sequence)).toEqual([committed.committed])
  expect(b.groups[0].observations[0].payload.evidence.txid).toBe(h.txid(3))
})

test('capacity caps answer unavailable with retryAfterMs, and slots are released', async () => {
  await setup({ maxSessionsPerPrincipal: 2, maxWaiters: 1 })
  const a = await openOk()
  await openOk()
  const third = await live.open(openBody(), ALICE)
  expect(third.status).toBe(503)
  expect(json(third).error).toMatchObject({ code: 'unavailable', retryable: true })
  expect(json(third).error.retryAfterMs).toBeGreaterThan(0)
  // Another principal is not affected by Alice's session cap.
  const bobs = await live.open(openBody(), BOB)
  expect(bobs.status).toBe(200)
  const ac = new AbortController()
  const waiting = live.read(readBody(a.session, a.cursor, { waitMs: 20000 }), ALICE, { signal: ac.signal })
  await new Promise(resolve => setTimeout(resolve, 100))
  const b = json(bobs)
  const refused = await live.read(readBody(b.session, b.cursor, { waitMs: 20000 }), BOB)
  expect(refused.status).toBe(503)
  expect(json(refused).error.retryAfterMs).toBeGreaterThan(0)
  ac.abort()
  await waiting
  const again = await live.read(readBody(b.session, b.cursor, { waitMs: 50 }), BOB)
  expect(again.status).toBe(200)
  await live.closeSession(Buffer.from(JSON.stringify({ version: 1, session: a.session })), ALICE)
  expect((await live.open(openBody(), ALICE)).status).toBe(200)
})

test('a configured row cap is an explicit limited error and writes nothing', async () => {
  await setup({ maxRows: 2 })
  await live.commit([admit(1)])
  await live.commit([admit(2)])
  const before = live.highWater
  await expect(live.commit([admit(3), admit(4)])).rejects.toMatchObject({ code: 'limited' })
  expect(live.highWater).toBe(before)
  // Removing makes room again.
  await live.commit([remove(1)])
  await expect(live.commit([admit(3)])).resolves.toBeTruthy()
})

test('woken polls queue for work slots instead of being refused', async () => {
  await setup({ maxConcurrentWork: 2 })
  const ends = []
  for (let i = 0; i < 20; i++) ends.push(await openOk())
  const polls = []
  for (const e of ends) {
    polls.push(live.read(readBody(e.session, e.cursor, { waitMs: 20000 }), ALICE))
    // Park one at a time: a new read that finds both slots busy is refused by design.
    for (let i = 0; i < 50 && live.stats().waiters < polls.length; i++) await new Promise(resolve => setTimeout(resolve, 10))
  }
  expect(live.stats().waiters).toBe(20)
  await live.commit([admit(77)])
  const results = await Promise.all(polls)
  expect(results.map(r => r.status)).toEqual(Array(20).fill(200))
  for (const r of results) expect(outpoints([json(r)])).toEqual([`output:${h.txid(77)}`])
})
