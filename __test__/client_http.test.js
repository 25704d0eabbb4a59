'use strict'
// Interim HTTP plumbing tests of LiveLookupClient against a small lookup-live
// provider written here (real Express on loopback, real sled store, real child
// processes SIGKILLed at the client's crash points). The provider keeps a snapshot
// at W per session, pages it, and serves live groups after W with long polls; it is
// a stand-in for the project's server until that lands, not a mock of the client.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { spawn } = require('node:child_process')
const express = require('express')
const { createAuthMiddleware } = require('@bsv/auth-express-middleware')
const { AuthFetch, ProtoWallet, PrivateKey } = require('@bsv/sdk')
const { LiveLookupClient, CheckpointStore, digest, PROFILE } = require('../js/client/client.js')
const native = require('../js/common/native')

const GENESIS = '000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f'
const SERVICE = 'ls_notes'
const QUERY = { author: 'alice' }
const TXID = crypto.createHash('sha256').update('tx').digest('hex')
const CHAIN = { network: 'main', genesisHash: GENESIS }
const RULES_DIGEST = digest('service-rules', { id: 'urn:test:rules' })
// The scope of this file's provider sessions, but for the provider and epoch.
const CHAIN_SCOPE = { chain: CHAIN, service: SERVICE, queryDigest: digest('lookup-query', { service: SERVICE, query: QUERY }), rulesDigest: RULES_DIGEST, access: 'public', epoch: 'e1' }

// A real BRC-194 manifest of this provider, signed with its identity key.
function signedManifest (key, baseURL, issuedAt) {
  const body = native.buildManifest({
    identity: key.toPublicKey().toString(),
    baseURL,
    allowLocalHttp: true,
    chain: CHAIN,
    issuedAt,
    expiresAt: issuedAt + 86400,
    services: [{
      name: SERVICE,
      rules: { id: 'urn:test:rules', parameters: {} },
      rulesDigest: RULES_DIGEST,
      profile: { authentication: 'brc103', maxRequestBytes: 1048576, maxResponseBytes: 4194304, sessionSeconds: 3600, replaySeconds: 86400, maxObservations: 1024, maxWaitMs: 25000 }
    }]
  })
  return native.signManifest(body, key.toHex())
}

function startProvider ({ pageSize = 2, wallet = null, identityKey = null, key = PrivateKey.fromRandom() } = {}) {
  const p = {
    epoch: 'epoch-1',
    seq: 0,
    rows: new Map(), // outputIndex -> present
    log: [], // {sequence, changes:[{index, present}]}
    sessions: new Map(),
    fences: new Map(), // requestId -> saved first batch
    waiters: new Set(),
    opens: 0,
    reads: [], // cursors read, in order
    inject: null, // one-shot {status, headers, body}
    headerFaults: 0,
    manifest: null,
    manifestFetches: 0,
    key
  }
  const app = express()
  const scope = epoch => ({
    chain: { network: 'main', genesisHash: GENESIS },
    provider: p.providerName ?? identityKey ?? p.origin,
    service: SERVICE,
    queryDigest: digest('lookup-query', { service: SERVICE, query: QUERY }),
    rulesDigest: p.rulesDigest ?? RULES_DIGEST,
    ...(p.chain ? { chain: p.chain } : {}),
    access: 'public',
    epoch
  })
  const obs = (id, s, index, present) => present
    ? { id, scope: s, kind: 'output', payload: { evidence: { txid: TXID, outputIndex: index, beef: 'AQID' } } }
    : { id, scope: s, kind: 'withdraw', payload: { outpoint: { chain: s.chain, txid: TXID, outputIndex: index }, reason: 'removed' } }
  const body = (sess, phase, groups, cursor, snapshotComplete, through) => JSON.stringify({
    version: 1,
    session: sess.id,
    scope: scope(sess.epoch),
    phase,
    groups,
    cursor,
    snapshotComplete,
    through: String(through),
    highWater: String(Math.max(through, p.seq)),
    expiresAt: '4000000000',
    replayUntil: '4000003600',
    limits: { maxBytes: 65536, maxObservations: 64, waitMs: 0 }
  })
  const page = (sess, offset) => {
    const s = scope(sess.epoch)
    const slice = sess.snapshot.slice(offset, offset + pageSize)
    const groups = slice.map(i => ({ id: `snap-${sess.id}-${i}`, sequence: String(sess.W), observations: [obs(`so-${sess.id}-${i}`, s, i, true)] }))
    if (p.equivocateOnce && offset > 0) {
      // Replays the first snapshot group's id with other content.
      p.equivocateOnce = false
      const i0 = sess.snapshot[0]
      groups.unshift({ id: `snap-${sess.id}-${i0}`, sequence: String(sess.W), observations: [obs(`so-${sess.id}-${i0}`, s, 99, true)] })
    }
    const done = offset + pageSize >= sess.snapshot.length
    return body(sess, 'snapshot', groups, done ? `live:${sess.W}` : `snap:${offset + pageSize}`, done, sess.W)
  }
  const live = (sess, after) => {
    const s = scope(sess.epoch)
    const groups = p.log.filter(g => g.sequence > after).map(g => ({
      id: `live-${g.sequence}`,
      sequence: String(g.sequence),
      observations: g.changes.map((c, i) => obs(`lo-${g.sequence}-${i}`, s, c.index, c.present))
    }))
    const through = Math.max(after, p.seq)
    return body(sess, 'live', groups, `live:${through}`, true, through)
  }
  const error = (res, status, code) => res.status(status).type('application/json').send(JSON.stringify({ version: 1, error: { code, message: code, retryable: false } }))

  app.use(express.json())
  // With `p.timeline` set, each lookup answer is recorded there as it is sent.
  app.use('/overlay/v1/lookup', (req, res, next) => {
    if (p.timeline) res.on('finish', () => p.timeline.push(['answer', req.path]))
    next()
  })
  if (wallet) app.use(createAuthMiddleware({ wallet, allowUnauthenticated: false }))
  app.get('/overlay/v1/capabilities', (req, res) => { p.manifestFetches++; res.json(p.manifest) })
  app.use('/overlay/v1/lookup', (req, res, next) => {
    if (req.get('x-bsv-overlay-capability') !== digest('capabilities', p.manifest.body)) {
      return error(res, 409, 'context-changed')
    }
    const ok = req.get('x-bsv-overlay-profile') === PROFILE &&
      // AuthFetch cannot carry Cache-Control in a signed request (see js/client/client.js).
      (wallet || req.get('cache-control') === 'no-store') && req.is('application/json')
    if (!ok) { p.headerFaults++; return error(res, 400, 'invalid') }
    // Selection headers are echoed (BRC-194 §1) unless a test turns that off.
    if (!p.noEcho) for (const h of ['x-bsv-overlay-profile', 'x-bsv-overlay-capability']) res.set(h, req.get(h))
    if (p.hangAll) return // never answers
    if (p.inject) {
      const { status, headers = {}, text } = p.inject
      p.inject = null
      return res.status(status).set(headers).send(text)
    }
    next()
  })
  app.post('/overlay/v1/lookup/open', (req, res) => {
    p.opens++
    if (!/^[0-9a-f]{32}$/.test(req.body.requestId)) return error(res, 400, 'invalid')
    // Identical retry of an open returns its saved first batch (BRC-193 §8).
    const saved = p.fences.get(req.body.requestId)
    if (saved) return res.type('application/json').send(saved)
    const sess = {
      id: crypto.randomBytes(8).toString('hex'),
      epoch: p.epoch,
      W: p.seq,
      snapshot: [...p.rows].filter(([, present]) => present).map(([i]) => i).sort((a, b) => a - b)
    }
    p.sessions.set(sess.id, sess)
    const first = page(sess, 0)
    p.fences.set(req.body.requestId, first)
    res.type('application/json').send(first)
  })
  app.post('/overlay/v1/lookup/read', async (req, res) => {
    const { session, cursor, limits } = req.body
    p.reads.push(cursor)
    const sess = p.sessions.get(session)
    if (!sess || sess.epoch !== p.epoch) return error(res, 409, 'reset-required')
    const [kind, n] = cursor.split(':')
    if (kind === 'snap') return res.type('application/json').send(page(sess, Number(n)))
    const after = Number(n)
    if (!p.log.some(g => g.sequence > after) && limits.waitMs > 0) {
      await new Promise(resolve => {
        const w = () => { clearTimeout(t); p.waiters.delete(w); resolve() }
        const t = setTimeout(w, limits.waitMs)
        p.waiters.add(w)
      })
      if (sess.epoch !== p.epoch) return error(res, 409, 'reset-required')
    }
    res.type('application/json').send(live(sess, after))
  })
  app.post('/overlay/v1/lookup/close', (req, res) => res.json({ version: 1, closed: true }))

  p.mutate = changes => {
    p.seq++
    for (const c of changes) p.rows.set(c.index, c.present)
    p.log.push({ sequence: p.seq, changes })
    for (const w of [...p.waiters]) w()
  }
  p.seed = indexes => { for (const i of indexes) p.rows.set(i, true) }
  // Storage loss: a new epoch; old sessions get reset-required.
  p.reset = () => { p.epoch = `epoch-${Number(p.epoch.split('-')[1]) + 1}`; p.log = []; for (const w of [...p.waiters]) w() }
  return new Promise(resolve => {
    const server = app.listen(0, '127.0.0.1', () => {
      p.origin = `http://127.0.0.1:${server.address().port}`
      p.manifest = signedManifest(p.key, p.origin, Math.floor(Date.now() / 1000) - 60)
      // Re-signing (a new issuedAt) changes the capability digest: context-changed.
      p.resign = () => { p.manifest = signedManifest(p.key, p.origin, Math.floor(Date.now() / 1000) - 30) }
      p.close = () => new Promise(r => { for (const w of [...p.waiters]) w(); server.closeAllConnections(); server.close(r) })
      resolve(p)
    })
  })
}

let dir, provider
beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-http-'))
  provider = await startProvider()
})
afterEach(async () => {
  await provider.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

// A client wallet that records any attempt to fund a payment.
function clientWallet () {
  const w = new ProtoWallet(PrivateKey.fromRandom())
  w.createActionCalls = 0
  w.createAction = async () => { w.createActionCalls++; throw new Error('this test wallet never pays') }
  return w
}

const present = members => members.filter(m => m.present).map(m => m.outpoint.outputIndex).sort((a, b) => a - b)

// Follows until `until(event)` returns true; `step(event)` may mutate the provider.
async function followUntil (store, until, { step, waitMs = 5000, limits, readAhead, states } = {}) {
  const ac = new AbortController()
  const events = []
  const client = new LiveLookupClient({ baseURL: provider.origin + '/', fetch, store, chain: CHAIN, allowInsecureHttp: true, limits: { waitMs, ...limits } })
  await client.follow(SERVICE, QUERY, {
    membership: 'claims',
    readAhead,
    onState: states ? s => { states.push(s) } : undefined,
    signal: ac.signal,
    onRevision (e) {
      // The lists as of each revision, kept for assertions after the follow (an event's
      // unread lists throw once the store has moved on).
      events.push({ ...e, members: e.members, partialMembers: e.partialMembers, reconciled: e.reconciled })
      if (step) step(e, events)
      if (until(e)) ac.abort()
    }
  })
  return events
}

test('drains a paged snapshot, then follows live enter/leave/re-enter with long polls', async () => {
  provider.seed([0, 1, 2, 3, 4])
  const store = CheckpointStore.open(path.join(dir, 'store'))
  let phase = 0
  const events = await followUntil(store, e => phase === 3 && present(e.members).includes(1), {
    step (e) {
      const live = e.state.currentGeneration === 0 && e.members.length === 5
      if (phase === 0 && live) { phase = 1; setImmediate(() => provider.mutate([{ index: 1, present: false }, { index: 7, present: true }])) }
      if (phase === 1 && e.members.some(m => m.outpoint.outputIndex === 7)) {
        phase = 3
        // The provider re-signs its manifest: the next request gets context-changed.
        provider.resign()
        setImmediate(() => provider.mutate([{ index: 1, present: true }]))
      }
    }
  })
  expect(provider.headerFaults).toBe(0)
  expect(provider.opens).toBe(1)
  expect(provider.manifestFetches).toBe(2) // at start, and after context-changed
  const members = store.members(events[0].sourceKey)
  expect(present(members)).toEqual([0, 1, 2, 3, 4, 7])
  expect(members.find(m => m.outpoint.outputIndex === 1)).toMatchObject({ sequence: '2', observationId: 'lo-2-0', phase: 'live', stale: false })
  // 5 snapshot groups + 2 live groups, each received once.
  expect(store.state(events[0].sourceKey)).toMatchObject({ received: 7, accepted: 7, pendingCount: 0, currentGeneration: 0 })
  // Snapshot pages were read in order, each once.
  expect(provider.reads.slice(0, 2)).toEqual(['snap:2', 'snap:4'])
  // Before the snapshot completed nothing was published.
  expect(events[0].members).toEqual([])
  expect(events[0].partialMembers.length).toBe(2)
  store.close()
})

// Holds each commit of a snapshot page that is not the last until the provider has seen a
// read of the cursor it carries (or `holdMs` pass): a read seen meanwhile was sent before its
// cursor's commit returned. Records, for every read the provider receives, whether its cursor
// was committed (the open's first cursor, or a page whose commitBatchAsync had resolved).
function watchCommits (store, holdMs) {
  const committed = new Set()
  const seen = [] // [cursor, committed when the provider received the read]
  const commit = store.commitBatchAsync.bind(store)
  store.commitBatchAsync = async (key, gen, cursor, bytes, options) => {
    const outcome = await commit(key, gen, cursor, bytes, options)
    const b = JSON.parse(bytes.toString('utf8'))
    if (cursor !== null && b.phase === 'snapshot' && !b.snapshotComplete) {
      const until = Date.now() + holdMs
      while (!provider.reads.includes(b.cursor) && Date.now() < until) await new Promise(resolve => setTimeout(resolve, 5))
    }
    committed.add(b.cursor)
    return outcome
  }
  const push = provider.reads.push.bind(provider.reads)
  provider.reads.push = cursor => { seen.push([cursor, committed.has(cursor)]); return push(cursor) }
  return seen
}

test('by default no read carries a cursor whose commit has not returned (BRC-193 §4)', async () => {
  provider.seed([0, 1, 2, 3, 4, 5, 6])
  const store = CheckpointStore.open(path.join(dir, 'store'))
  const seen = watchCommits(store, 300)
  const events = await followUntil(store, e => e.state.currentGeneration === 0, { waitMs: 0 })
  expect(events.map(e => e.outcome.applied)).toEqual([2, 2, 2, 1])
  expect(seen.slice(0, 3)).toEqual([['snap:2', true], ['snap:4', true], ['snap:6', true]])
  expect(present(store.members(events[0].sourceKey))).toEqual([0, 1, 2, 3, 4, 5, 6])
  store.close()
})

test('with readAhead the next snapshot page is read while the previous one commits, and each page is read once', async () => {
  provider.seed([0, 1, 2, 3, 4, 5, 6])
  const store = CheckpointStore.open(path.join(dir, 'store'))
  // Commits are held until the provider has seen the next page's read (or 5 s pass): the
  // follow loop itself reads only after a commit returned, so such a read is the read ahead.
  const seen = watchCommits(store, 5000)
  const events = await followUntil(store, e => e.state.currentGeneration === 0, { waitMs: 0, readAhead: true })
  expect(events.map(e => e.outcome.applied)).toEqual([2, 2, 2, 1])
  // The open's page commits first; each read page but the last had its successor read ahead.
  expect(seen.slice(0, 3)).toEqual([['snap:2', true], ['snap:4', false], ['snap:6', false]])
  expect(provider.reads.slice(0, 3)).toEqual(['snap:2', 'snap:4', 'snap:6'])
  expect(present(store.members(events[0].sourceKey))).toEqual([0, 1, 2, 3, 4, 5, 6])
  expect(store.state(events[0].sourceKey)).toMatchObject({ received: 7, accepted: 7, pendingCount: 0 })
  store.close()
})

test('a revision event reads its lists only when asked, as of its own revision', async () => {
  provider.seed([0, 1, 2, 3, 4])
  const store = CheckpointStore.open(path.join(dir, 'store'))
  const reads = []
  const snapshot = store.revisionSnapshot.bind(store)
  store.revisionSnapshot = (...args) => { reads.push(args[1]); return snapshot(...args) }
  const ac = new AbortController()
  const kept = []
  const client = new LiveLookupClient({ baseURL: provider.origin, fetch, store, chain: CHAIN, allowInsecureHttp: true, limits: { waitMs: 0 } })
  await client.follow(SERVICE, QUERY, {
    membership: 'claims',
    signal: ac.signal,
    onRevision (e) {
      kept.push(e)
      if (e.state.currentGeneration === 0) ac.abort()
    }
  })
  // Three commits (pages of two), not one list read among them.
  expect(kept.map(e => e.outcome.applied)).toEqual([2, 2, 1])
  expect(reads).toEqual([])
  // The last event is still the store's revision: its lists are that commit's.
  const last = kept[kept.length - 1]
  expect(last.revision).toBe(store.revision())
  expect(present(last.members)).toEqual([0, 1, 2, 3, 4])
  expect(last.partialMembers).toEqual([])
  expect(reads).toEqual([last.revision])
  // An earlier one is past: reading it now would mix revisions, so it says so.
  expect(() => kept[0].members).toThrow(expect.objectContaining({ code: 'conflict' }))
  store.close()
})

test('resumes from the stored cursor after a restart and recovers a change missed offline', async () => {
  provider.seed([0, 1])
  let store = CheckpointStore.open(path.join(dir, 'store'))
  await followUntil(store, e => e.members.length === 2)
  store.close()
  provider.mutate([{ index: 0, present: false }])
  const readsBefore = provider.reads.length
  store = CheckpointStore.open(path.join(dir, 'store'))
  const events = await followUntil(store, e => present(e.members).join() === '1')
  expect(provider.opens).toBe(1)
  expect(provider.reads[readsBefore]).toBe('live:0')
  expect(store.state(events[0].sourceKey)).toMatchObject({ received: 3, accepted: 3 })
  store.close()
})

test('an epoch reset starts a new generation; the old one stays visible and stale until the swap', async () => {
  provider.seed([0, 1, 2])
  const store = CheckpointStore.open(path.join(dir, 'store'))
  let resetDone = false
  const seen = []
  const states = []
  const events = await followUntil(store, e => e.state.currentGeneration === 1, {
    states,
    step (e) {
      seen.push({ current: e.state.currentGeneration, pending: e.state.pendingGeneration, stale: e.state.stale, gens: e.members.map(m => `${m.generation}:${m.outpoint.outputIndex}:${m.stale}`), swapped: e.outcome.swapped })
      if (!resetDone && e.members.length === 3) {
        resetDone = true
        setImmediate(() => { provider.rows.set(0, false); provider.rows.set(5, true); provider.reset() })
      }
    }
  })
  const key = events[0].sourceKey
  const during = seen.find(s => s.pending === 1)
  expect(during).toMatchObject({ current: 0, stale: true })
  expect(during.gens).toEqual(['0:0:true', '0:1:true', '0:2:true'])
  const swap = seen.find(s => s.swapped && s.current === 1)
  expect(swap.gens).toEqual(['1:1:false', '1:2:false', '1:5:false'])
  expect(store.members(key).map(m => m.outpoint.outputIndex)).toEqual([1, 2, 5])
  expect(store.checkpoint(key)).toMatchObject({ generation: 1, epoch: 'epoch-2' })
  expect(provider.opens).toBe(2)
  // The states say what happened: opened, snapshot complete, started over (and why), complete again.
  expect(states.filter(s => s.progress).map(s => [s.connection, s.progress, s.generation, s.reason])).toEqual([
    ['connected', 'opened', 0, undefined],
    ['connected', 'snapshot-complete', 0, undefined],
    ['connected', 'started-over', 1, 'reset-required'],
    ['connected', 'snapshot-complete', 1, undefined]
  ])
  store.close()
})

test('without a chainTracker, follow names its membership rule or refuses to start, before any request', async () => {
  provider.seed([0])
  const store = CheckpointStore.open(path.join(dir, 'store'))
  const client = new LiveLookupClient({ baseURL: provider.origin, fetch, store, chain: CHAIN, allowInsecureHttp: true })
  const states = []
  const refused = client.follow(SERVICE, QUERY, { onState (s) { states.push(s) } })
  await expect(refused).rejects.toMatchObject({ code: 'invalid', message: expect.stringMatching(/`membership`/) })
  await expect(client.follow(SERVICE, QUERY, { sources: [provider.origin] })).rejects.toMatchObject({ code: 'invalid', message: expect.stringMatching(/`membership`/) })
  await expect(client.follow(SERVICE, QUERY, { membership: 'verified-ish' })).rejects.toMatchObject({ code: 'invalid', message: expect.stringMatching(/membership/) })
  expect(states).toEqual([])
  expect([provider.manifestFetches, provider.opens, store.revision()]).toEqual([0, 0, 0])
  // Named explicitly, `manual` follows: received, nothing accepted until markVerified.
  const ac = new AbortController()
  let last
  await client.follow(SERVICE, QUERY, { membership: 'manual', signal: ac.signal, onRevision (e) { last = e; ac.abort() } })
  expect(last.state).toMatchObject({ received: 1, accepted: 0, pendingCount: 1 })
  store.close()
})

test('402 pays nothing and commits nothing; unknown errors and bad bodies are never empty success', async () => {
  const store = CheckpointStore.open(path.join(dir, 'store'))
  const client = new LiveLookupClient({ baseURL: provider.origin, fetch, store, chain: CHAIN, allowInsecureHttp: true })
  const follow = () => client.follow(SERVICE, QUERY, { membership: 'claims' })
  provider.inject = { status: 402, headers: { 'x-bsv-payment-version': '1.0', 'x-bsv-payment-satoshis-required': '100' }, text: '' }
  await expect(follow()).rejects.toMatchObject({ code: 'unsupported', status: 402 })
  // A 5xx without the protocol's error body is a transport failure: retried, shown as a state.
  provider.inject = { status: 500, headers: { 'content-type': 'text/html' }, text: '<h1>boom</h1>' }
  const states = []
  const h = client.follow(SERVICE, QUERY, { membership: 'claims', onState (s) { states.push(s); if (s.connection === 'retrying') h.close() } })
  await h.done
  expect(states[0]).toMatchObject({ connection: 'retrying', attempt: 1, error: { code: 'unavailable', status: 500, transport: true } })
  expect(states[0].nextRetryAt).toEqual(expect.any(Number))
  provider.inject = { status: 200, headers: { 'content-type': 'text/plain' }, text: '{}' }
  await expect(follow()).rejects.toMatchObject({ code: 'invalid' })
  provider.inject = { status: 200, headers: { 'content-type': 'application/json' }, text: '{"version":1}' }
  await expect(follow()).rejects.toMatchObject({ code: 'invalid' })
  provider.inject = { status: 503, headers: { 'content-type': 'application/json' }, text: '{"version":1,"error":{"code":"limited","message":"too big","retryable":false}}' }
  await expect(follow()).rejects.toMatchObject({ code: 'limited', status: 503 })
  expect(provider.opens).toBe(0)
  // A provider that never answers: a clean retryable error at the request deadline.
  provider.hangAll = true
  const impatient = new LiveLookupClient({ baseURL: provider.origin, fetch, store, chain: CHAIN, allowInsecureHttp: true, requestTimeoutMs: 200 })
  const waits = []
  const hi = impatient.follow(SERVICE, QUERY, { membership: 'claims', onState (s) { waits.push(s); if (s.connection === 'retrying') hi.close() } })
  await hi.done
  expect(waits[0]).toMatchObject({ connection: 'retrying', error: { code: 'unavailable', retryable: true } })
  provider.hangAll = false
  provider.seed([0, 1, 2, 3])
  // A body over the requested byte limit is refused on its actual length.
  const tight = new LiveLookupClient({ baseURL: provider.origin, fetch, store, chain: CHAIN, allowInsecureHttp: true, limits: { maxBytes: 600 } })
  await expect(tight.follow(SERVICE, QUERY, { membership: 'claims' })).rejects.toMatchObject({ code: 'limited' })
  expect(store.revision()).toBe(0)
  store.close()
})

// --- crash points in a child process ----------------------------------------

const CHILD = `
const { LiveLookupClient, CheckpointStore } = require(${JSON.stringify(path.join(__dirname, '../js/client/client.js'))})
const store = CheckpointStore.open(process.env.STORE)
const ac = new AbortController()
const client = new LiveLookupClient({ baseURL: process.env.BASE, fetch, store, chain: ${JSON.stringify(CHAIN)}, allowInsecureHttp: true, limits: { waitMs: 5000 } })
client.follow(${JSON.stringify(SERVICE)}, ${JSON.stringify(QUERY)}, {
  membership: 'claims',
  signal: ac.signal,
  onRevision ({ members, state }) {
    const n = members.filter(m => m.present).length
    if (n === Number(process.env.WANT) && state.pendingCount === 0) ac.abort()
  }
}).then(() => { store.close(); process.exit(0) }, e => { console.error(e); process.exit(3) })
`

function runChild (env) {
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, ['-e', CHILD], {
      env: { ...process.env, STORE: path.join(dir, 'store'), BASE: provider.origin, ...env },
      stdio: ['ignore', 'ignore', 'pipe']
    })
    let err = ''
    c.stderr.on('data', d => { err += d })
    c.on('error', reject)
    c.on('exit', (code, signal) => resolve({ code, signal, err }))
  })
}

const keyFor = () => ({
  provider: provider.origin,
  service: SERVICE,
  queryDigest: digest('lookup-query', { service: SERVICE, query: QUERY })
})

test.each([
  ['after-receive', ['snap:2', 'snap:2', 'snap:4', 'live:0']],
  // No read ahead (the default): the third page is read once, after the restart.
  ['after-commit', ['snap:2', 'snap:4', 'live:0']]
])('SIGKILL %s the second batch: nothing lost, nothing applied twice', async (point, readOrder) => {
  provider.seed([0, 1, 2, 3, 4])
  const crashed = await runChild({ OLL_CLIENT_CRASH: point, OLL_CLIENT_CRASH_AT: '2', WANT: '5' })
  expect(crashed.signal).toBe('SIGKILL')
  let store = CheckpointStore.open(path.join(dir, 'store'))
  const cp = store.checkpoint(keyFor())
  // after-receive: only the open batch is committed; after-commit: the second too.
  expect(cp.cursor).toBe(point === 'after-receive' ? 'snap:2' : 'snap:4')
  store.close()
  // A change while the client is down arrives live after the restart.
  provider.mutate([{ index: 9, present: true }])
  const done = await runChild({ WANT: '6' })
  expect(done).toMatchObject({ code: 0, signal: null })
  expect(provider.opens).toBe(1)
  expect(provider.reads.slice(0, readOrder.length)).toEqual(readOrder)
  store = CheckpointStore.open(path.join(dir, 'store'))
  const key = keyFor()
  expect(present(store.members(key))).toEqual([0, 1, 2, 3, 4, 9])
  // 5 snapshot groups + 1 live group, each exactly once.
  expect(store.state(key)).toMatchObject({ received: 6, accepted: 6, pendingCount: 0, currentGeneration: 0 })
  store.close()
})

test('over BRC-103/104 with AuthFetch: follows, checks the provider identity, and never funds a 402', async () => {
  await provider.close()
  const serverKey = PrivateKey.fromRandom()
  const serverWallet = new ProtoWallet(serverKey)
  const { publicKey } = await serverWallet.getPublicKey({ identityKey: true })
  provider = await startProvider({ wallet: serverWallet, identityKey: publicKey, key: serverKey })
  // Four pages of two: two of them are read ahead, so AuthFetch carries two requests at once.
  provider.seed([0, 1, 2, 3, 4, 5, 6])
  const wallet = clientWallet()
  const authFetch = new AuthFetch(wallet)
  const store = CheckpointStore.open(path.join(dir, 'store'))
  const ac = new AbortController()
  const client = new LiveLookupClient({ baseURL: provider.origin, authFetch, store, chain: CHAIN, allowInsecureHttp: true, limits: { waitMs: 0 } })
  let last
  await client.follow(SERVICE, QUERY, {
    membership: 'claims',
    readAhead: true,
    signal: ac.signal,
    onRevision (e) { last = e; if (e.members.length === 7) ac.abort() }
  })
  expect(last.sourceKey.provider).toBe(publicKey)
  expect(present(last.members)).toEqual([0, 1, 2, 3, 4, 5, 6])
  expect(provider.reads.slice(0, 3)).toEqual(['snap:2', 'snap:4', 'snap:6'])
  expect(provider.headerFaults).toBe(0)

  // A 402 carrying payment terms: AuthFetch would pay it; this client must not.
  provider.inject = {
    status: 402,
    headers: { 'x-bsv-payment-version': '1.0', 'x-bsv-payment-satoshis-required': '1000', 'x-bsv-payment-derivation-prefix': 'abc' },
    text: 'payment required'
  }
  await expect(client.follow(SERVICE, QUERY, { membership: 'claims' })).rejects.toMatchObject({ code: 'unsupported', status: 402 })
  expect(wallet.createActionCalls).toBe(0)

  // A scope naming some other provider is refused before anything is committed.
  const rev = store.revision()
  provider.providerName = '02' + 'ab'.repeat(32)
  const other = new LiveLookupClient({ baseURL: provider.origin, authFetch, store, chain: CHAIN, allowInsecureHttp: true })
  await expect(other.follow(SERVICE, { author: 'bob' }, { membership: 'claims' })).rejects.toMatchObject({ code: 'invalid' })
  expect(store.revision()).toBe(rev)
  store.close()
})

test('plain fetch: the scope must name the exact origin', async () => {
  provider.providerName = 'https://elsewhere.example'
  const store = CheckpointStore.open(path.join(dir, 'store'))
  const client = new LiveLookupClient({ baseURL: provider.origin, fetch, store, chain: CHAIN, allowInsecureHttp: true })
  await expect(client.follow(SERVICE, QUERY, { membership: 'claims' })).rejects.toMatchObject({ code: 'invalid' })
  expect(store.revision()).toBe(0)
  // The refused open is not retried with the same request id (it would return the
  // same saved batch): the next attempt is a new open.
  await expect(client.follow(SERVICE, QUERY, { membership: 'claims' })).rejects.toMatchObject({ code: 'invalid' })
  expect(provider.fences.size).toBe(2)
  store.close()
})

test('an equivocating provider is quarantined and the source recovers in a new generation', async () => {
  provider.seed([0, 1, 2, 3])
  provider.equivocateOnce = true
  const store = CheckpointStore.open(path.join(dir, 'store'))
  const events = await followUntil(store, e => e.state.currentGeneration !== null && e.members.length === 4)
  const key = events[0].sourceKey
  expect(provider.opens).toBe(2)
  expect(store.state(key)).toMatchObject({ currentGeneration: 1, quarantined: 1, invalidated: null, stale: false })
  expect(present(store.members(key))).toEqual([0, 1, 2, 3])
  store.close()
})

test('two providers for one query: separate sources, receipts and memberships for the same outpoint', async () => {
  const second = await startProvider()
  try {
    provider.seed([0, 1])
    second.seed([1, 2])
    const store = CheckpointStore.open(path.join(dir, 'store'))
    const a = await followUntil(store, e => e.members.length === 2)
    const ac = new AbortController()
    let b
    await new LiveLookupClient({ baseURL: second.origin, fetch, store, chain: CHAIN, allowInsecureHttp: true, limits: { waitMs: 5000 } }).follow(SERVICE, QUERY, {
      membership: 'claims',
      signal: ac.signal,
      onRevision (e) { b = e; if (e.members.length === 2) ac.abort() }
    })
    const ka = a[0].sourceKey; const kb = b.sourceKey
    expect(ka.provider).not.toBe(kb.provider)
    expect(present(store.members(ka))).toEqual([0, 1])
    expect(present(store.members(kb))).toEqual([1, 2])
    // The first provider withdraws output 1; the second still reports it.
    provider.mutate([{ index: 1, present: false }])
    await followUntil(store, e => !present(e.members).includes(1))
    expect(present(store.members(ka))).toEqual([0])
    expect(present(store.members(kb))).toEqual([1, 2])
    expect([store.state(ka).received, store.state(kb).received]).toEqual([3, 2])
    store.close()
  } finally {
    await second.close()
  }
})

test('a SIGKILLed follower restarted against a quiet provider shows its stored membership before any answer, then resumes', async () => {
  provider.seed([0, 1, 2])
  // Killed right after the commit that completed the snapshot (the second batch).
  const crashed = await runChild({ OLL_CLIENT_CRASH: 'after-commit', OLL_CLIENT_CRASH_AT: '2', WANT: '3' })
  expect(crashed.signal).toBe('SIGKILL')
  const store = CheckpointStore.open(path.join(dir, 'store'))
  const client = new LiveLookupClient({ baseURL: provider.origin, fetch, store, chain: CHAIN, allowInsecureHttp: true, limits: { waitMs: 200 } })
  // The documented way to find the source a follow committed under.
  expect(client.sourceKey(SERVICE, QUERY)).toEqual(keyFor())
  expect(client.sourceKey(SERVICE, { author: 'bob' })).toBeNull()
  provider.timeline = []
  const ac = new AbortController()
  await client.follow(SERVICE, QUERY, {
    membership: 'claims',
    signal: ac.signal,
    onRevision (e) {
      provider.timeline.push(['revision', e.restored, present(e.members)])
      if (!e.restored) ac.abort()
    },
    onState (s) { provider.timeline.push(['state', s.connection, s.progress, s.cursor]) }
  })
  const t = provider.timeline
  // First the stored membership, before the provider answered anything.
  expect(t[0]).toEqual(['revision', true, [0, 1, 2]])
  const firstAnswer = t.findIndex(x => x[0] === 'answer')
  expect(firstAnswer).toBeGreaterThan(0)
  // Then, once the quiet long poll returned: connected, resumed from the stored cursor.
  expect(t.slice(firstAnswer + 1).filter(x => x[0] !== 'answer')).toEqual([
    ['state', 'connected', 'resumed', 'live:0'],
    ['revision', false, [0, 1, 2]],
    ['state', 'closed', undefined, undefined]
  ])
  expect(provider.opens).toBe(1)
  store.close()
})

test("an event's lists stay readable for its whole synchronous callback while another source's commit is on the pool", async () => {
  provider.seed([0, 1, 2, 3, 4])
  const store = CheckpointStore.open(path.join(dir, 'store'))
  // Another source of the same store (another provider's follow, say), committing on the pool.
  const otherScope = { ...CHAIN_SCOPE, provider: 'https://other.example' }
  const other = { provider: otherScope.provider, service: SERVICE, queryDigest: otherScope.queryDigest }
  const otherGeneration = store.beginGeneration(other, 'other')
  const otherBatch = Buffer.from(JSON.stringify({
    version: 1, session: 'other', scope: otherScope, phase: 'snapshot', groups: [], cursor: 'c1', snapshotComplete: true,
    through: '0', highWater: '0', expiresAt: '4000000000', replayUntil: '4000003600', limits: { maxBytes: 65536, maxObservations: 64, waitMs: 0 }
  }))
  const client = new LiveLookupClient({ baseURL: provider.origin, fetch, store, chain: CHAIN, allowInsecureHttp: true, limits: { waitMs: 0 } })
  const ac = new AbortController()
  let otherCommit = null
  let seen = null
  await client.follow(SERVICE, QUERY, {
    membership: 'claims',
    signal: ac.signal,
    onRevision (e) {
      if (e.state.currentGeneration !== 0 || otherCommit) return
      // The other source's commit starts on the pool while this callback works synchronously
      // (an application rendering, say) until that commit has landed or a while has passed.
      otherCommit = store.commitBatchAsync(other, otherGeneration, null, otherBatch)
      const until = Date.now() + 500
      while (store.revision() === e.revision && Date.now() < until) {}
      seen = { revision: store.revision(), members: present(e.members), reconciled: e.reconciled }
      ac.abort()
    }
  })
  // The event's lists were its own revision's, and the other commit landed after the callback.
  expect(seen).toEqual({ revision: expect.any(Number), members: [0, 1, 2, 3, 4], reconciled: null })
  await expect(otherCommit).resolves.toMatchObject({ ignored: false })
  expect(store.revision()).toBeGreaterThan(seen.revision)
  expect(store.checkpoint(other)).toMatchObject({ cursor: 'c1', snapshotComplete: true })
  store.close()
})

test('a provider that keeps serving an invalid member is opened again with backoff, each generation invalidated', async () => {
  // This provider's evidence ('AQID') is not a BEEF: with a reconciler every group is refused
  // at receipt, so every generation is invalidated by its first batch (BRC-192 §8).
  provider.seed([0])
  const store = CheckpointStore.open(path.join(dir, 'store'))
  store.defineContext('tip', { tipHeight: '1000', medianTimePast: '4000000000' })
  store.configureReconciler({ journalId: 'storm', nonFinal: true, initialContext: 'tip' })
  const client = new LiveLookupClient({ baseURL: provider.origin, fetch, store, chain: CHAIN, allowInsecureHttp: true, limits: { waitMs: 0 }, retry: { initialMs: 10, maxMs: 20 } })
  const states = []
  let opensAtBackoff = null
  const h = client.follow(SERVICE, QUERY, {
    membership: 'claims',
    onState (s) {
      states.push(s)
      if (s.connection === 'reset-required') { opensAtBackoff = provider.opens; h.close() }
    }
  })
  await h.done
  // The first invalidated generation is replaced at once; the second waits before the next open.
  expect(opensAtBackoff).toBe(2)
  expect(states.filter(s => s.progress).map(s => [s.progress, s.reason && s.reason.split(':')[0]])).toEqual([
    ['opened', undefined], ['snapshot-complete', undefined], ['started-over', 'invalid-evidence'], ['snapshot-complete', undefined]
  ])
  expect(states.find(s => s.connection === 'reset-required')).toMatchObject({ attempt: 1, nextRetryAt: expect.any(Number), error: { code: 'reset-required', message: expect.stringMatching(/invalid-evidence/) } })
  const key = client.sourceKey(SERVICE, QUERY)
  expect(store.state(key)).toMatchObject({ quarantined: 2, invalidated: expect.stringMatching(/^invalid-evidence/) })
  store.close()
})

test('SIGKILL after receiving the open response: the retry reuses the request id, one session', async () => {
  provider.seed([0, 1, 2])
  const crashed = await runChild({ OLL_CLIENT_CRASH: 'after-receive', OLL_CLIENT_CRASH_AT: '1', WANT: '3' })
  expect(crashed.signal).toBe('SIGKILL')
  const done = await runChild({ WANT: '3' })
  expect(done).toMatchObject({ code: 0, signal: null })
  expect(provider.opens).toBe(2)
  expect(provider.sessions.size).toBe(1)
  expect(provider.fences.size).toBe(1)
  const store = CheckpointStore.open(path.join(dir, 'store'))
  const key = keyFor()
  expect(present(store.members(key))).toEqual([0, 1, 2])
  expect(store.state(key)).toMatchObject({ received: 3, accepted: 3, currentGeneration: 1 })
  store.close()
})
