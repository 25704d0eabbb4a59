'use strict'
// The edges of BRC-193 §8 (session state, clock and transport): the open's idempotency key,
// its permanent fence, the deadline arithmetic, expiry at the exact second and during a long
// poll, a base path, and a BRC-103 reauthentication resending a read. Store-level cases go
// through the JS API on a real sled store (the provider's clock is moved, never slept on);
// principals, anonymous callers, base paths and reauthentication go over real HTTP.

const { PrivateKey } = require('@bsv/sdk')
const h = require('./helpers/live')
const { startNode, authClient, publicClient, openReq, readReq, openCaughtUp, summary } = require('./helpers/node')
const { ALICE, admit, openBody, readBody, json, drainSnapshot } = h

const SESSION_SECONDS = 600
const REPLAY_SECONDS = 900
const cleanup = require('./helpers/live').cleanupAfterEach()

async function store (dir = h.tempDir(), extra = {}) {
  const live = await h.openLive(dir, { sessionSeconds: SESSION_SECONDS, replaySeconds: REPLAY_SECONDS, compactionIntervalMs: 0, ...extra })
  live.wrap('ls_notes', h.plainService(), h.notesCompanion())
  let closed = false
  cleanup.push(() => closed ? null : live.close())
  return Object.assign(live, { dir, async shut () { closed = true; await live.close() } })
}

async function node (options) {
  const n = await startNode(options)
  cleanup.push(() => n.close())
  return n
}

/** Moves the provider's clock so that its `now` (whole seconds) is `second`, mid-second. */
function clockAt (live, second) {
  live.core.advanceClockMs(second * 1000 + 300 - live.core.nowMs())
}

const nowSeconds = (live) => Math.floor(live.core.nowMs() / 1000)

describe('the open and its fence', () => {
  test('one requestId used by two principals opens two independent sessions', async () => {
    const n = await node()
    await n.submit(await n.factory.createNotes(['shared']))
    const alice = await authClient(n)
    const bob = await authClient(n)
    const req = openReq()
    const a = await alice.post('open', req)
    const b = await bob.post('open', req)
    expect([a.status, b.status]).toEqual([200, 200])
    expect(b.body.session).not.toBe(a.body.session)
    // Each principal's retry is its own saved first batch.
    expect((await alice.post('open', req)).body).toEqual(a.body)
    expect((await bob.post('open', req)).body).toEqual(b.body)
    // Neither can use the other's session.
    const cross = await bob.post('read', readReq(a.body))
    expect(cross.status).toBe(409)
    expect(cross.body.error.code).toBe('reset-required')
    expect(n.live.stats().sessions).toBe(2)
  })

  test('an anonymous open retried returns the saved first batch byte for byte, even after a commit', async () => {
    const n = await node({ authentication: 'none' })
    await n.submit(await n.factory.createNotes(['one', 'two', 'three']))
    const client = await publicClient(n)
    const req = openReq({}, { maxObservations: 1 })
    const first = await client.post('open', req)
    expect(first.status).toBe(200)
    await n.submit(await n.factory.createNotes(['after the open']))
    const again = await client.post('open', req)
    expect(again.raw).toBe(first.raw)
    expect(n.live.stats().sessions).toBe(1)
  })

  test('concurrent identical opens make one session and one snapshot', async () => {
    const live = await store()
    for (let i = 0; i < 20; i++) await live.commit([admit(i)])
    const body = openBody({ limits: { maxBytes: 65536, maxObservations: 5, waitMs: 0 } })
    const answers = await Promise.all(Array.from({ length: 8 }, () => live.open(body, ALICE)))
    const bodies = answers.map(r => Buffer.from(r.body).toString('utf8'))
    expect(answers.every(r => r.status === 200)).toBe(true)
    expect(new Set(bodies).size).toBe(1)
    expect(live.stats().sessions).toBe(1)
    // One snapshot: its pages hold each row once, at one watermark.
    const batches = await drainSnapshot(live, JSON.parse(bodies[0]), ALICE, { maxObservations: 5 })
    const rows = batches.flatMap(summary).flat()
    expect(rows).toHaveLength(20)
    expect(new Set(rows).size).toBe(20)
    expect(new Set(batches.map(b => b.through)).size).toBe(1)
  })

  test('an open retried after its session expired, after compaction and after a restart answers expired, never a new snapshot', async () => {
    const live = await store()
    await live.commit([admit(1)])
    const body = openBody()
    const first = json(await live.open(body, ALICE))
    const expectExpired = async (l) => {
      const res = await l.open(body, ALICE)
      expect(res.status).toBe(410)
      expect(json(res).error.code).toBe('expired')
    }
    clockAt(live, first.expiresAt)
    await expectExpired(live)
    // Past replayUntil compaction forgets the session itself; the fence stays.
    clockAt(live, Number(first.replayUntil) + 1)
    while (await live.compact()) { /* until caught up */ }
    expect(live.stats().sessions).toBe(0)
    await expectExpired(live)
    await live.shut()
    const reopened = await store(live.dir, { create: false })
    clockAt(reopened, Number(first.replayUntil) + 1)
    await expectExpired(reopened)
    expect(reopened.stats().sessions).toBe(0)
  })
})

describe('deadlines', () => {
  test('expiresAt = T + sessionSeconds and replayUntil = expiresAt + replaySeconds, frozen at open', async () => {
    const live = await store()
    const before = nowSeconds(live)
    const body = openBody()
    const first = json(await live.open(body, ALICE))
    const after = nowSeconds(live)
    // U64 fields are decimal strings on the wire.
    const T = BigInt(first.expiresAt) - BigInt(SESSION_SECONDS)
    expect(T >= BigInt(before) && T <= BigInt(after)).toBe(true)
    expect(BigInt(first.replayUntil)).toBe(BigInt(first.expiresAt) + BigInt(REPLAY_SECONDS))
    // Reopened with other settings, the session keeps the deadlines of its open.
    await live.shut()
    const reopened = await store(live.dir, { create: false, sessionSeconds: 60, replaySeconds: 60 })
    const next = json(await reopened.read(readBody(first.session, first.cursor), ALICE))
    expect([next.expiresAt, next.replayUntil]).toEqual([first.expiresAt, first.replayUntil])
    expect(Buffer.from((await reopened.open(body, ALICE)).body).toString()).toBe(JSON.stringify(first))
    // A new open takes the new settings.
    const fresh = json(await reopened.open(openBody(), ALICE))
    expect(BigInt(fresh.replayUntil) - BigInt(fresh.expiresAt)).toBe(60n)
  })

  test('a read exactly at expiresAt is reset-required; one second before, it is served', async () => {
    const live = await store()
    const first = json(await live.open(openBody(), ALICE))
    clockAt(live, Number(first.expiresAt) - 1)
    expect((await live.read(readBody(first.session, first.cursor), ALICE)).status).toBe(200)
    clockAt(live, first.expiresAt)
    const res = await live.read(readBody(first.session, first.cursor), ALICE)
    expect(res.status).toBe(409)
    expect(json(res).error.code).toBe('reset-required')
  })

  test('a long poll whose wait reaches session expiry answers reset-required, not a batch with an expired promise', async () => {
    const live = await store()
    const first = json(await live.open(openBody(), ALICE))
    // About a second and a half before expiry, a poll that would wait 20 s.
    live.core.advanceClockMs(first.expiresAt * 1000 - 1500 - live.core.nowMs())
    const res = await live.read(readBody(first.session, first.cursor, { waitMs: 20000 }), ALICE)
    expect(res.status).toBe(409)
    expect(json(res).error.code).toBe('reset-required')
  }, 15000)
})

describe('transport', () => {
  test('the router under a base path: routes and manifest live under it, the handshake at the origin root', async () => {
    const n = await node({ basePath: '/overlay-base' })
    expect(n.base).toBe(n.origin + '/overlay-base')
    const manifest = await (await fetch(`${n.base}/overlay/v1/capabilities`)).json()
    expect(manifest.body.baseURL).toBe(n.base)
    expect((await fetch(`${n.origin}/overlay/v1/capabilities`)).status).toBe(404)
    await n.submit(await n.factory.createNotes(['under a base path']))
    const alice = await authClient(n) // AuthFetch handshakes at <origin>/.well-known/auth
    const end = await openCaughtUp(alice)
    const created = await n.factory.createNotes(['live under a base path'])
    await n.submit(created)
    const b = await alice.post('read', readReq(end))
    expect(summary(b.body)).toEqual([[`output ${created.txid}.0`]])
    const rootRoute = await fetch(`${n.origin}/overlay/v1/lookup/open`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
    expect(rootRoute.status).toBe(404)
  })

  test('a BRC-103 reauthentication that resends a read gets the same batch: nothing advanced', async () => {
    const reads = [] // the status of every read the node answered, refusals included
    const count = (app) => app.use((req, res, next) => {
      if (req.path.endsWith('/lookup/read')) res.on('finish', () => reads.push(res.statusCode))
      next()
    })
    // One authentication session in all: a second client's handshake drops the first's.
    const n = await node({ authSessions: { maxSessions: 1, sessionsPerIdentity: 1 }, before: count })
    const alice = await authClient(n, PrivateKey.fromRandom())
    const end = await openCaughtUp(alice)
    const created = await n.factory.createNotes(['read twice'])
    await n.submit(created)
    const once = await alice.post('read', readReq(end))
    expect(summary(once.body)).toEqual([[`output ${created.txid}.0`]])
    await (await authClient(n, PrivateKey.fromRandom())).post('open', openReq()) // alice's session is dropped
    const answered = reads.length
    // AuthFetch gets a 401, handshakes again and resends the very same read.
    const twice = await alice.post('read', readReq(end))
    expect(reads.slice(answered)).toEqual([401, 200])
    expect(twice.status).toBe(200)
    expect(twice.body.groups).toEqual(once.body.groups)
    expect(twice.body.cursor).toBe(once.body.cursor)
    // The cursor it was sent with still reads the same; the next one goes on from there.
    expect((await alice.post('read', readReq(end))).body.groups).toEqual(once.body.groups)
    expect((await alice.post('read', readReq(twice.body))).body.groups).toEqual([])
  })
})
