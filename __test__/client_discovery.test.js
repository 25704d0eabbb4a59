'use strict'
// Hosts found the way @bsv/sdk finds them (issue #51): a local SLAP tracker (a real
// @bsv/overlay Engine host whose tokens are made with the SDK's OverlayAdminTokenTemplate)
// lists a host that speaks lookup-live-v1 (this package's router over a real Engine) and one
// that answers only BRC-24 /lookup (a plain Engine behind Overlay Express's routes);
// `follow(service, query, {resolver})` follows both into one store, the first live and the
// second by refresh, and follows the tracker's list as it changes.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { LookupResolver, HTTPSOverlayLookupFacilitator } = require('@bsv/sdk')
const { LiveLookupClient, CheckpointStore, digest, decodeBatch } = require('../js/client/client.js')
const { CHAIN } = require('./helpers/live')
const { LocalChainTracker, NoteFactory } = require('./helpers/engine')
const { startNode } = require('./helpers/node')
const { startNotesHost, startSlapTracker } = require('./helpers/brc24-host')

jest.setTimeout(60000)

const SERVICE = 'ls_notes'
const QUERY = {}
const QUERY_DIGEST = digest('lookup-query', { service: SERVICE, query: QUERY })

let tmp
const cleanup = []
beforeEach(() => { tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-discovery-')) })
afterEach(async () => {
  while (cleanup.length) await cleanup.pop()()
  fs.rmSync(tmp, { recursive: true, force: true })
})

const op = (txid, i = 0) => `${txid}.${i}`
const present = members => members.filter(m => m.present).map(m => op(m.outpoint.txid, m.outpoint.outputIndex)).sort()

/** The newest event and every state per source, and a way to wait on them. */
function watcher () {
  const w = { latest: {}, states: [] }
  let waiting = []
  const check = () => { waiting = waiting.filter(x => !(x.pred() && (x.resolve(), true))) }
  w.onRevision = (e) => {
    w.latest[e.source] = { mode: e.mode, sourceKey: e.sourceKey, members: e.members, batch: e.batch }
    check()
  }
  w.onState = (s) => { w.states.push(s); check() }
  w.until = (pred) => new Promise(resolve => { waiting.push({ pred, resolve }); check() })
  w.lists = (source, mode, want) => () => !!w.latest[source] && w.latest[source].mode === mode && present(w.latest[source].members).join() === want.join()
  return w
}

/** A live host (the package's router, public mode) and a BRC-24-only host on one chain, each with a note. */
async function network () {
  const chainTracker = new LocalChainTracker()
  const tracker = await startSlapTracker({ chainTracker })
  cleanup.push(() => tracker.close())
  const live = await startNode({ authentication: 'none', chainTracker })
  cleanup.push(() => live.close())
  const plain = await startNotesHost({ chainTracker })
  cleanup.push(() => plain.close())
  const factory = new NoteFactory(chainTracker)
  const a = await factory.createNotes(['on the live host'])
  await live.submit(a)
  const b = await factory.createNotes(['on the BRC-24 host'])
  await plain.submit(b)
  // Another service's advertisement, which discovery of ls_notes must not follow.
  const other = await startNotesHost({ chainTracker })
  cleanup.push(() => other.close())
  await tracker.advertise(other.origin, 'ls_elsewhere')
  return { chainTracker, tracker, live, plain, other, factory, a, b }
}

test("a SLAP tracker's hosts are followed together, the live one live and the BRC-24 one by refresh, as the tracker's list changes", async () => {
  const { tracker, live, plain, other, factory, a, b } = await network()
  // Each host is advertised by its own identity (the live host's signs its manifest).
  const liveAd = await tracker.advertise(live.origin, SERVICE, live.serverKey)

  const store = CheckpointStore.open(path.join(tmp, 'client'))
  cleanup.push(() => store.close())
  // No baseURL: the hosts are what the resolver finds.
  const client = new LiveLookupClient({ fetch, store, chain: CHAIN, allowInsecureHttp: true, limits: { waitMs: 1000 }, retry: { initialMs: 50, maxMs: 200 } })
  const resolver = new LookupResolver({ slapTrackers: [tracker.origin], facilitator: new HTTPSOverlayLookupFacilitator(fetch, true) })
  const w = watcher()
  const handle = client.follow(SERVICE, QUERY, {
    resolver,
    resolveIntervalMs: 200,
    finite: { refreshMs: 100 },
    membership: 'claims',
    onRevision: w.onRevision,
    onState: w.onState
  })
  cleanup.push(() => handle.close())

  await w.until(w.lists(live.origin, 'live', [op(a.txid)]))
  expect(tracker.requests).toContain('POST /lookup')

  // The tracker lists a second host: found at the next resolution, followed by refresh.
  await tracker.advertise(plain.origin, SERVICE)
  await w.until(w.lists(plain.origin, 'finite', [op(b.txid)]))
  const liveKey = w.latest[live.origin].sourceKey
  const finiteKey = w.latest[plain.origin].sourceKey
  expect(liveKey).toMatchObject({ provider: live.origin, service: SERVICE, queryDigest: QUERY_DIGEST })
  expect(store.checkpoint(liveKey).access).not.toBe('finite')
  expect(finiteKey).toEqual({ provider: plain.origin, service: SERVICE, queryDigest: QUERY_DIGEST })
  expect(store.checkpoint(finiteKey)).toMatchObject({ access: 'finite', phase: 'finite', cursor: null })
  expect(client.sourceKey(SERVICE, QUERY, live.origin)).toEqual(liveKey)
  expect(client.sourceKey(SERVICE, QUERY, plain.origin)).toEqual(finiteKey)

  // Two sources of one store: a change on the live host arrives as a live group.
  const c = await factory.createNotes(['later, live'])
  await live.submit(c)
  await w.until(w.lists(live.origin, 'live', [op(a.txid), op(c.txid)].sort()))
  expect(decodeBatch(w.latest[live.origin].batch).phase).toBe('live')
  expect(present(store.members(finiteKey))).toEqual([op(b.txid)])
  expect(store.checkpoint(liveKey)).toMatchObject({ phase: 'live', cursor: expect.any(String) })
  expect(store.checkpoint(finiteKey)).toMatchObject({ phase: 'finite', cursor: null })

  // The tracker stops listing the live host: it is no longer followed; the other continues.
  await tracker.t.engine.lookupServices.ls_slap.outputEvicted(liveAd, 0)
  await w.until(() => w.states.some(s => s.source === live.origin && s.connection === 'closed'))
  expect(w.states.find(s => s.source === live.origin && s.connection === 'closed')).toMatchObject({ reason: 'not-advertised', mode: 'live' })
  const d = await factory.createNotes(['later, by refresh'])
  await plain.submit(d)
  await w.until(w.lists(plain.origin, 'finite', [op(b.txid), op(d.txid)].sort()))

  await handle.close()
  const result = await handle.done
  expect(result.sources).toEqual(expect.arrayContaining([
    { source: live.origin, sourceKey: liveKey, error: null },
    { source: plain.origin, sourceKey: finiteKey, error: null }
  ]))
  expect(result.sources).toHaveLength(2)
  // The host advertised for another service was never asked anything; the BRC-24 host only
  // for its manifest and its answers.
  expect(other.requests).toEqual([])
  expect([...new Set(plain.requests)].sort()).toEqual(['GET /overlay/v1/capabilities', 'POST /lookup'])
})

test('a list of SLAP trackers is a resolver too; without `finite` a host that speaks only BRC-24 is reported failed with the reason, and the live one is followed', async () => {
  const { tracker, live, plain, a } = await network()
  await tracker.advertise(live.origin, SERVICE, live.serverKey)
  await tracker.advertise(plain.origin, SERVICE)
  const store = CheckpointStore.open(path.join(tmp, 'client'))
  cleanup.push(() => store.close())
  const client = new LiveLookupClient({ fetch, store, chain: CHAIN, allowInsecureHttp: true, limits: { waitMs: 1000 } })
  const w = watcher()
  const handle = client.follow(SERVICE, QUERY, { resolver: [tracker.origin], membership: 'claims', onRevision: w.onRevision, onState: w.onState })
  cleanup.push(() => handle.close())
  await w.until(() => w.lists(live.origin, 'live', [op(a.txid)])() && w.states.some(s => s.source === plain.origin && s.connection === 'failed'))
  const failed = w.states.find(s => s.source === plain.origin && s.connection === 'failed')
  expect(failed.error).toMatchObject({ code: 'unsupported' })
  expect(failed.error.message).toMatch(/cannot be followed live: no manifest.*`finite`/)
  await handle.close()
  const result = await handle.done
  expect(result.sources.find(s => s.source === plain.origin)).toMatchObject({ sourceKey: null, error: { code: 'unsupported' } })
  expect(result.sources.find(s => s.source === live.origin)).toMatchObject({ error: null })
  // Nothing of the BRC-24 host was committed.
  expect(store.state({ provider: plain.origin, service: SERVICE, queryDigest: QUERY_DIGEST }).currentGeneration).toBeNull()
  expect(plain.requests).toEqual(['GET /overlay/v1/capabilities'])
})

test('a host whose manifest is signed by an identity that did not advertise it is not followed', async () => {
  const { tracker, live } = await network()
  // Someone else advertises the live host's domain under their own identity.
  await tracker.advertise(live.origin, SERVICE)
  const store = CheckpointStore.open(path.join(tmp, 'client'))
  cleanup.push(() => store.close())
  const client = new LiveLookupClient({ fetch, store, chain: CHAIN, allowInsecureHttp: true })
  const w = watcher()
  const handle = client.follow(SERVICE, QUERY, { resolver: [tracker.origin], finite: { refreshMs: 100 }, membership: 'claims', onRevision: w.onRevision, onState: w.onState })
  cleanup.push(() => handle.close())
  await w.until(() => w.states.some(s => s.source === live.origin && s.connection === 'failed'))
  const failed = w.states.find(s => s.source === live.origin && s.connection === 'failed')
  expect(failed.error).toMatchObject({ code: 'invalid' })
  expect(failed.error.message).toMatch(/not an identity that advertised/)
  await handle.close()
  // Neither live nor by refresh: nothing of it was committed.
  expect(store.revision()).toBe(0)
  expect(w.latest[live.origin]).toBeUndefined()
})

