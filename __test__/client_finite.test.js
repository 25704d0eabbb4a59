'use strict'
// Following hosts that answer only BRC-24 `/lookup` (issue #51): a plain @bsv/overlay Engine
// (knex + SQLite, real notes transactions) behind Overlay Express's routes, no lookup-live
// routes and no manifest, followed by finite refresh into the real durable store; a SIGKILL
// in the middle of a refresh (a child process); a host that gains the live routes on restart;
// a host whose manifest offers the profile but whose open answers 422.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const express = require('express')
const { Transaction, UnlockingScript } = require('@bsv/sdk')
const { LiveLookupClient, CheckpointStore, digest, decodeBatch } = require('../js/client/client.js')
const { CHAIN } = require('./helpers/live')
const { LocalChainTracker, NoteFactory } = require('./helpers/engine')
const { startNode } = require('./helpers/node')
const { startNotesHost } = require('./helpers/brc24-host')

jest.setTimeout(60000)

const SERVICE = 'ls_notes'
const QUERY = {}
const QUERY_DIGEST = digest('lookup-query', { service: SERVICE, query: QUERY })

let tmp
const cleanup = []
beforeEach(() => { tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-finite-')) })
afterEach(async () => {
  while (cleanup.length) await cleanup.pop()()
  fs.rmSync(tmp, { recursive: true, force: true })
})

const op = (txid, i = 0) => `${txid}.${i}`
const present = members => members.filter(m => m.present).map(m => op(m.outpoint.txid, m.outpoint.outputIndex)).sort()
// A finite source is keyed like a public live one; its generations' scopes say access 'finite'.
const finiteKey = origin => ({ provider: origin, service: SERVICE, queryDigest: QUERY_DIGEST })

/** Collects what a follow reports (each event's lists read in its synchronous part) and waits on it. */
function watcher () {
  const w = { events: [], states: [] }
  let waiting = []
  const check = () => { waiting = waiting.filter(x => !(x.pred() && (x.resolve(), true))) }
  w.onRevision = (e) => {
    w.events.push({ mode: e.mode, restored: e.restored, sourceKey: e.sourceKey, members: e.members, partial: e.partialMembers, state: e.state, batch: e.batch, outcome: e.outcome })
    check()
  }
  w.onState = (s) => { w.states.push(s); check() }
  w.until = (pred) => new Promise(resolve => { waiting.push({ pred, resolve }); check() })
  w.last = () => w.events[w.events.length - 1]
  return w
}

test('a BRC-24-only Engine host is refused without `finite`, and followed by refresh with it: each answer is one local generation, published whole once verified; a spend and an eviction leave in one revision', async () => {
  const chainTracker = new LocalChainTracker()
  const host = await startNotesHost({ chainTracker })
  cleanup.push(() => host.close())
  const factory = new NoteFactory(chainTracker)
  const [a, b, c] = [await factory.createNotes(['a']), await factory.createNotes(['b']), await factory.createNotes(['c'])]
  for (const n of [a, b, c]) await host.submit(n)

  const store = CheckpointStore.open(path.join(tmp, 'client'))
  cleanup.push(() => store.close())
  store.defineContext('tip', { tipHeight: String(chainTracker.height + 100), medianTimePast: '4000000000' })
  store.configureReconciler({ journalId: 'finite', nonFinal: true, initialContext: 'tip' })
  const client = new LiveLookupClient({ baseURL: host.origin, fetch, store, chain: CHAIN, allowInsecureHttp: true, chainTracker, retry: { initialMs: 50, maxMs: 200 } })

  // Without `finite`: refused with an error that says why and what to do; nothing committed.
  const revision = store.revision()
  const refusal = await client.follow(SERVICE, QUERY, {}).then(() => null, e => e)
  expect(refusal).toMatchObject({ name: 'LiveLookupError', status: 404 })
  expect(refusal.message).toMatch(/does not serve .*lookup-live-v1.* for ls_notes.*`finite`/)
  expect(store.revision()).toBe(revision)
  expect(client.sourceKey(SERVICE, QUERY)).toBeNull()

  const w = watcher()
  const handle = client.follow(SERVICE, QUERY, { finite: { refreshMs: 100 }, onRevision: w.onRevision, onState: w.onState })
  cleanup.push(() => handle.close())
  const first = [op(a.txid), op(b.txid), op(c.txid)].sort()
  const published = (want) => () => {
    const e = w.last()
    return !!e && present(e.members).join() === want.join() && e.members.filter(m => m.present).every(m => m.currentness === 'current')
  }
  await w.until(published(first))
  const key = finiteKey(host.origin)
  let e = w.last()
  // The state says finite: no session, no cursor, no replay promised.
  expect(e.mode).toBe('finite')
  expect(e.sourceKey).toEqual(key)
  expect(client.sourceKey(SERVICE, QUERY)).toEqual(key)
  expect(e.members.every(m => m.phase === 'finite' && m.sequence === '0' && !m.stale)).toBe(true)
  expect(store.checkpoint(key)).toMatchObject({ session: null, cursor: null, phase: 'finite', snapshotComplete: true, through: '0', expiresAt: '0', replayUntil: '0' })
  // The whole answer is one snapshot group of the generation (BRC-192 §9).
  const batch = decodeBatch(e.batch)
  expect(batch).toMatchObject({ phase: 'snapshot', snapshotComplete: true, through: '0' })
  expect(batch.groups).toHaveLength(1)
  expect(batch.groups[0].observations.map(o => op(o.txid, o.outputIndex)).sort()).toEqual(first)
  const refreshed = w.states.filter(s => s.progress === 'refreshed')
  expect(refreshed.length).toBeGreaterThanOrEqual(1)
  expect(refreshed[0]).toMatchObject({ source: host.origin, connection: 'connected', mode: 'finite', outputs: 3, skipped: 0, sourceKey: key })
  expect(w.states.some(s => s.progress === 'resumed' || s.progress === 'opened')).toBe(false)

  // While the host is quiet its answer is the same: refreshed, not committed again (no new
  // generation, nothing added to the journal).
  const unchangedAfter = (n) => w.states.slice(n).filter(s => s.progress === 'refreshed' && s.unchanged === true).length
  let mark = w.states.length
  await w.until(() => unchangedAfter(mark) >= 1)
  const quiet = store.state(key)
  const revisionQuiet = store.revision()
  mark = w.states.length
  await w.until(() => unchangedAfter(mark) >= 2)
  expect(store.state(key)).toMatchObject({ currentGeneration: quiet.currentGeneration, pendingGeneration: null })
  expect(store.revision()).toBe(revisionQuiet)

  // Between two answers, a spends into its replacement a2 and the host evicts b.
  await host.pause()
  const a2 = await factory.replaceNote(a.notes[0], 'a2')
  await host.submit(a2)
  await host.inner.outputEvicted(b.txid, 0)
  host.resume()
  const second = [op(a2.txid), op(c.txid)].sort()
  await w.until(published(second))
  e = w.last()
  expect(e.state.currentGeneration).toBeGreaterThan(0)
  // Each published membership is one whole answer: never a mix of the two.
  for (const ev of w.events) {
    const listed = present(ev.members).join()
    if (listed !== '') expect([first.join(), second.join()]).toContain(listed)
  }
  // The replacement's evidence shows a spent; b's absence is not a spend.
  const view = store.reconciledView()
  expect(view.spent).toContainEqual({ outpoint: { txid: a.txid, outputIndex: 0 }, by: a2.txid })
  expect(view.spent.some(s => s.outpoint.txid === b.txid)).toBe(false)
  expect(view.current).toContainEqual({ txid: b.txid, outputIndex: 0 })
  expect(store.reconciledState(CHAIN).memberships.filter(m => m.scope.access === 'finite').every(m => m.phase === 'finite')).toBe(true)

  await handle.close()
  await client.verifier.idle()
  expect(w.states[w.states.length - 1]).toMatchObject({ connection: 'closed', mode: 'finite' })
  // Nothing but the manifest probe and BRC-24 lookups reached the host: no local session
  // or cursor was ever sent anywhere.
  expect([...new Set(host.requests)].sort()).toEqual(['GET /overlay/v1/capabilities', 'POST /lookup'])
})

test('evidence of a finite answer is verified as for a live source: a forged output quarantines the whole answer, and an honest one publishes again', async () => {
  const chainTracker = new LocalChainTracker()
  const host = await startNotesHost({ chainTracker })
  cleanup.push(() => host.close())
  const factory = new NoteFactory(chainTracker)
  const a = await factory.createNotes(['a'])
  await host.submit(a)
  const store = CheckpointStore.open(path.join(tmp, 'client'))
  cleanup.push(() => store.close())
  store.defineContext('tip', { tipHeight: String(chainTracker.height + 100), medianTimePast: '4000000000' })
  store.configureReconciler({ journalId: 'finite-forged', nonFinal: true, initialContext: 'tip' })
  const client = new LiveLookupClient({ baseURL: host.origin, fetch, store, chain: CHAIN, allowInsecureHttp: true, chainTracker, retry: { initialMs: 50, maxMs: 200 } })
  const w = watcher()
  const handle = client.follow(SERVICE, QUERY, { finite: { refreshMs: 100 }, onRevision: w.onRevision, onState: w.onState })
  cleanup.push(() => handle.close())
  const published = (want) => () => {
    const e = w.last()
    return !!e && !e.state.invalidated && present(e.members).join() === want.join() && e.members.filter(m => m.present).every(m => m.currentness === 'current')
  }
  await w.until(published([op(a.txid)]))

  // The host starts serving b with one signature byte flipped (its own txid, a failing script).
  const b = await factory.createNotes(['b'])
  const tx = Transaction.fromBEEF(b.beef)
  const sig = tx.inputs[0].unlockingScript.toBinary()
  sig[10] ^= 0x01
  tx.inputs[0].unlockingScript = UnlockingScript.fromBinary(sig)
  const bad = new Transaction(tx.version, tx.inputs, tx.outputs, tx.lockTime)
  const badTxid = bad.id('hex')
  await host.pause()
  host.editAnswers((answer) => ({
    ...answer,
    outputs: answer.outputs.map(o => Transaction.fromBEEF(o.beef).id('hex') === b.txid ? { ...o, beef: bad.toBEEF() } : o)
  }))
  await host.submit(b)
  host.resume()
  await w.until(() => /invalid-evidence/.test(w.last().state.invalidated || ''))
  const e = w.last()
  // Nothing of that answer is listed, not even its honest output (BRC-192 §9).
  expect(present(e.members)).toEqual([])
  expect(store.verdicts(badTxid).map(v => v.verdict && v.verdict.status)).toContain('invalid')
  expect(store.reconciledView().current).toContainEqual({ txid: a.txid, outputIndex: 0 })
  // The same forged answer again is not committed again.
  const rev = store.revision()
  const mark = w.states.length
  await w.until(() => w.states.slice(mark).filter(s => s.unchanged).length >= 2)
  expect(store.revision()).toBe(rev)

  host.editAnswers(null)
  await w.until(published([op(a.txid), op(b.txid)].sort()))
  await handle.close()
})

test('an answer over finite.maxOutputs ends the follow with `limited` and commits nothing', async () => {
  const chainTracker = new LocalChainTracker()
  const host = await startNotesHost({ chainTracker })
  cleanup.push(() => host.close())
  const factory = new NoteFactory(chainTracker)
  await host.submit(await factory.createNotes(['a', 'b']))
  const store = CheckpointStore.open(path.join(tmp, 'client'))
  cleanup.push(() => store.close())
  const client = new LiveLookupClient({ baseURL: host.origin, fetch, store, chain: CHAIN, allowInsecureHttp: true })
  const error = await client.follow(SERVICE, QUERY, { membership: 'claims', finite: { refreshMs: 100, maxOutputs: 1 } }).then(() => null, e => e)
  expect(error).toMatchObject({ code: 'limited' })
  expect(error.message).toMatch(/2 outputs, over finite.maxOutputs 1/)
  expect(store.revision()).toBe(0)
})

// --- a SIGKILL in the middle of a refresh -------------------------------------------------

const CHILD = `
const { LiveLookupClient, CheckpointStore } = require(${JSON.stringify(path.join(__dirname, '../js/client/client.js'))})
const store = CheckpointStore.open(process.env.STORE)
const ac = new AbortController()
const client = new LiveLookupClient({ baseURL: process.env.BASE, fetch, store, chain: ${JSON.stringify(CHAIN)}, allowInsecureHttp: true })
client.follow(${JSON.stringify(SERVICE)}, ${JSON.stringify(QUERY)}, {
  membership: 'claims',
  finite: { refreshMs: 50 },
  signal: ac.signal,
  onRevision (e) {
    if (!e.restored && e.members.filter(m => m.present).length === Number(process.env.WANT)) ac.abort()
  }
}).then(() => { store.close(); process.exit(0) }, e => { console.error(e); process.exit(3) })
`

function runChild (env) {
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, ['-e', CHILD], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] })
    let err = ''
    c.stderr.on('data', d => { err += d })
    c.on('error', reject)
    c.on('exit', (code, signal) => resolve({ code, signal, err }))
  })
}

test.each([
  ['after-receive', 'the answer was read and its generation begun, nothing of it committed'],
  ['after-commit', 'the answer was committed, no event delivered yet']
])('SIGKILL %s in a refresh (%s): the store holds one whole answer, never part of one', async (point) => {
  const chainTracker = new LocalChainTracker()
  const host = await startNotesHost({ chainTracker })
  cleanup.push(() => host.close())
  const factory = new NoteFactory(chainTracker)
  const a = await factory.createNotes(['a'])
  const b = await factory.createNotes(['b'])
  for (const n of [a, b]) await host.submit(n)
  const env = { STORE: path.join(tmp, 'store'), BASE: host.origin }
  const key = finiteKey(host.origin)

  expect(await runChild({ ...env, WANT: '2' })).toMatchObject({ code: 0, signal: null })
  const before = [op(a.txid), op(b.txid)].sort()
  // The host changes: a is spent into a2, d is new.
  const a2 = await factory.replaceNote(a.notes[0], 'a2')
  const d = await factory.createNotes(['d'])
  await host.submit(a2)
  await host.submit(d)
  const after = [op(a2.txid), op(b.txid), op(d.txid)].sort()

  const crashed = await runChild({ ...env, WANT: '3', OLL_CLIENT_CRASH: point, OLL_CLIENT_CRASH_AT: '1' })
  expect(crashed.signal).toBe('SIGKILL')
  let store = CheckpointStore.open(env.STORE)
  const st = store.state(key)
  if (point === 'after-receive') {
    // The previous answer, whole and still published (stale while its replacement was
    // begun); the begun generation holds nothing.
    expect(present(store.members(key))).toEqual(before)
    expect(st).toMatchObject({ currentGeneration: 0, pendingGeneration: 1, stale: true })
    expect(store.partialMembers(key)).toEqual([])
  } else {
    expect(present(store.members(key))).toEqual(after)
    expect(st).toMatchObject({ currentGeneration: 1, pendingGeneration: null, stale: false })
  }
  store.close()

  // Restarted: the next refresh replaces whatever the kill left, as a new generation.
  expect(await runChild({ ...env, WANT: '3' })).toMatchObject({ code: 0, signal: null })
  store = CheckpointStore.open(env.STORE)
  expect(present(store.members(key))).toEqual(after)
  expect(store.state(key)).toMatchObject({ currentGeneration: 2, pendingGeneration: null, stale: false, pendingCount: 0 })
  expect(store.checkpoint(key)).toMatchObject({ generation: 2, cursor: null, phase: 'finite' })
  store.close()
})

// --- a host that gains the live routes ----------------------------------------------------

test('a host that gains the live routes on restart is followed live from its next generation', async () => {
  const chainTracker = new LocalChainTracker()
  const engineDir = fs.mkdtempSync(path.join(tmp, 'engine-'))
  let host = await startNotesHost({ chainTracker, engineDir })
  const factory = new NoteFactory(chainTracker)
  const a = await factory.createNotes(['a'])
  const b = await factory.createNotes(['b'])
  for (const n of [a, b]) await host.submit(n)
  const store = CheckpointStore.open(path.join(tmp, 'client'))
  cleanup.push(() => store.close())
  const client = new LiveLookupClient({ baseURL: host.origin, fetch, store, chain: CHAIN, allowInsecureHttp: true, limits: { waitMs: 1000 }, retry: { initialMs: 50, maxMs: 200 } })
  const w = watcher()
  const handle = client.follow(SERVICE, QUERY, { membership: 'claims', finite: { refreshMs: 100 }, onRevision: w.onRevision, onState: w.onState })
  cleanup.push(() => handle.close())
  const two = [op(a.txid), op(b.txid)].sort()
  await w.until(() => w.last() && w.last().mode === 'finite' && present(w.last().members).join() === two.join())
  const fkey = finiteKey(host.origin)

  // The same Engine storage, now wrapped and served with the lookup-live routes.
  const { port } = host
  await host.close()
  const node = await startNode({ authentication: 'none', chainTracker, engineDir, port })
  cleanup.push(() => node.close())
  expect(node.origin).toBe(`http://127.0.0.1:${port}`)
  await w.until(() => w.last() && w.last().mode === 'live' && present(w.last().members).join() === two.join())
  const liveKey = w.last().sourceKey
  // The same source (a public host keeps its key in both modes); its next generation is live.
  expect(liveKey).toEqual(fkey)
  expect(store.checkpoint(liveKey).access).not.toBe('finite')
  expect(w.states).toContainEqual(expect.objectContaining({ connection: 'connected', mode: 'live', progress: 'opened', sourceKey: liveKey }))
  // A new note arrives as a live group, not at a refresh.
  const c = await factory.createNotes(['c'])
  await node.submit(c)
  const three = [...two, op(c.txid)].sort()
  await w.until(() => present(w.last().members).join() === three.join())
  const e = w.last()
  expect(e.mode).toBe('live')
  expect(decodeBatch(e.batch).phase).toBe('live')
  expect(store.checkpoint(liveKey)).toMatchObject({ phase: 'live', snapshotComplete: true, cursor: expect.any(String), session: expect.any(String) })
  expect(client.sourceKey(SERVICE, QUERY)).toEqual(liveKey)
  // The live snapshot replaced the refreshed generation: no row says finite any more, and
  // no 'access-changed' was reported for leaving a refresh (it negotiated no access).
  expect(store.state(liveKey)).toMatchObject({ stale: false, pendingGeneration: null })
  expect(store.members(liveKey).every(m => !m.stale && m.phase !== 'finite')).toBe(true)
  expect(w.states.some(s => s.reason === 'access-changed')).toBe(false)
  await handle.close()
})

test('a manifest that offers the profile but an open that answers 422: followed by refresh, and not opened again for the same manifest', async () => {
  let node = null
  let opens = 0
  node = await startNode({
    authentication: 'none',
    before (app) {
      app.post('/overlay/v1/lookup/open', (req, res) => {
        opens++
        res.status(422).json({ version: 1, error: { code: 'unsupported', message: 'not served live here', retryable: false } })
      })
      app.post('/lookup', express.json(), async (req, res) => res.json(await node.t.engine.lookup(req.body)))
    }
  })
  cleanup.push(() => node.close())
  const a = await node.factory.createNotes(['a'])
  await node.submit(a)
  const store = CheckpointStore.open(path.join(tmp, 'client'))
  cleanup.push(() => store.close())
  const client = new LiveLookupClient({ baseURL: node.origin, fetch, store, chain: CHAIN, allowInsecureHttp: true, retry: { initialMs: 50, maxMs: 200 } })

  // Without `finite` the open's 422 ends the follow, saying what would follow it.
  const refusal = await client.follow(SERVICE, QUERY, { membership: 'claims' }).then(() => null, e => e)
  expect(refusal).toMatchObject({ code: 'unsupported', status: 422 })
  expect(refusal.message).toMatch(/`finite`/)
  expect(opens).toBe(1)

  const w = watcher()
  const handle = client.follow(SERVICE, QUERY, { membership: 'claims', finite: { refreshMs: 50 }, onRevision: w.onRevision, onState: w.onState })
  await w.until(() => w.states.filter(s => s.progress === 'refreshed').length >= 3)
  await handle.close()
  expect(opens).toBe(2)
  expect(present(w.last().members)).toEqual([op(a.txid)])
  expect(w.last()).toMatchObject({ mode: 'finite', sourceKey: finiteKey(node.origin) })
})

test('finite options are closed and checked before anything starts', async () => {
  const store = CheckpointStore.open(path.join(tmp, 'client'))
  cleanup.push(() => store.close())
  const client = new LiveLookupClient({ baseURL: 'https://overlay.example', fetch: () => { throw new Error('no request expected') }, store, chain: CHAIN })
  const refused = (opts) => client.follow(SERVICE, QUERY, { membership: 'claims', ...opts }).then(() => null, e => e)
  expect(await refused({ finite: { refreshMs: 100, interval: 5 } })).toMatchObject({ code: 'invalid', option: 'interval' })
  expect(await refused({ finite: {} })).toMatchObject({ code: 'invalid', option: 'refreshMs' })
  expect(await refused({ finite: { refreshMs: 100, maxOutputs: 1025 } })).toMatchObject({ code: 'invalid', option: 'maxOutputs' })
  expect(await refused({ finite: { refreshMs: 100 }, requiredRulesDigest: '00'.repeat(32) })).toMatchObject({ code: 'invalid', option: 'requiredRulesDigest' })
  expect(await refused({ resolveIntervalMs: 1000 })).toMatchObject({ code: 'invalid', option: 'resolveIntervalMs' })
  expect(store.revision()).toBe(0)
})
