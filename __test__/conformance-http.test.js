'use strict'
// BRC-193 §7 cases over the real transport: Express on loopback, the router's BRC-103/104
// provider, AuthFetch (or NativeAuthFetch) clients with their own identities, a real
// @bsv/overlay Engine with real signed transactions and the native sled store. The same cases
// run through the JS API in sessions.test.js; here every request and answer is an
// authenticated HTTP exchange. The §7 list, and where each case runs over BRC-103:
// - mutation before the snapshot boundary, during the last page, between registering a waiter
//   and sleeping; empty snapshots; commit-before-crash; cursor-before-commit rejection;
//   cancellation; reorganization; duplicate pages; sparse sequences; expiry; large atomic
//   groups; restart; provider reset; rule changes: this file;
// - authorization revocation during a poll: http.test.js;
// - source-specific reconciliation: client_sources.test.js (two BRC-103 nodes, one store).

const path = require('path')
const { spawn } = require('child_process')
const { PrivateKey } = require('@bsv/sdk')
const h = require('./helpers/live')
const { startNode, authClient, openReq, readReq, drain, openAndDrain, openCaughtUp, summary, expiringNotesCompanion, PROFILE } = require('./helpers/node')
const { NoteFactory } = require('./helpers/engine')
const { createNotesCompanion } = require('../demo/notes/notesCompanion')
const { NativeAuthFetch } = require('../js/auth/authfetch')
const { NativeWallet } = require('../js/auth/wallet')
const { CheckpointStore, digest } = require('../js/client/client')
const { toNativeChange } = require('../js/provider/live')
const { reservePort } = require('./helpers/proxy')

const nodes = []
afterEach(async () => {
  while (nodes.length > 0) await nodes.pop().close()
})

async function node (options) {
  const n = await startNode(options)
  nodes.push(n)
  return n
}

test('limited group: a group larger than the client limit is 413 limited without advancing, and whole with a larger limit', async () => {
  const n = await node()
  const alice = await authClient(n)
  const { end } = await openAndDrain(alice)
  const big = await n.factory.createNotes(Array.from({ length: 12 }, (_, i) => `note ${i}`))
  await n.submit(big)
  const small = await alice.post('read', readReq(end, { maxObservations: 5 }))
  expect(small.status).toBe(413)
  expect(small.body.error).toMatchObject({ code: 'limited', limit: { kind: 'group', minimumObservations: 12 } })
  expect(small.body.error).not.toHaveProperty('cursor')
  const tight = await alice.post('read', readReq(end, { maxBytes: 2048 }))
  expect(tight.status).toBe(413)
  const need = tight.body.error.limit.minimumBytes
  expect(need).toBeGreaterThan(2048)
  const ok = await alice.post('read', readReq(end, { maxBytes: need }))
  expect(ok.status).toBe(200)
  expect(ok.body.groups).toHaveLength(1)
  expect(ok.body.groups[0].observations).toHaveLength(12)
})

test('expiry: a row expiring after the snapshot reaches the live feed as an ordered withdraw', async () => {
  const companion = expiringNotesCompanion()
  const n = await node({ companion })
  const alice = await authClient(n)
  const created = await n.factory.createNotes(['late', 'early'])
  await n.submit(created)
  const { batches, end } = await openAndDrain(alice)
  expect(batches.flatMap(summary).flat()).toEqual([`output ${created.txid}.0`, `output ${created.txid}.1`])
  n.live.core.advanceClockMs(300_000)
  const b = await alice.post('read', readReq(end))
  expect(b.status).toBe(200)
  expect(summary(b.body)).toEqual([[`withdraw ${created.txid}.1 expired`, `withdraw ${created.txid}.0 expired`]])
})

test('restart: the node restarts on its store and identity, and the client resumes its cursor', async () => {
  const dir = h.tempDir('conf-restart-')
  const engineDir = h.tempDir('conf-restart-engine-')
  let n = await node({ dir, engineDir })
  const key = require('@bsv/sdk').PrivateKey.fromRandom()
  let alice = await authClient(n, key)
  await n.submit(await n.factory.createNotes(['before']))
  const { end } = await openAndDrain(alice)
  const epoch = n.live.epoch
  await nodes.pop().close()
  n = await node({ dir, engineDir, serverKey: n.serverKey, live: { create: false } })
  expect(n.live.epoch).toBe(epoch)
  const after = await new NoteFactory(n.t.chainTracker).createNotes(['after'])
  await n.submit(after)
  alice = await authClient(n, key) // a new handshake with the restarted node, same identity
  const b = await alice.post('read', readReq(end))
  expect(b.status).toBe(200)
  expect(summary(b.body)).toEqual([[`output ${after.txid}.0`]])
  expect(b.body.session).toBe(end.session)
})

test('rule change: a changed rules digest ends old sessions with reset-required, and a pinned digest refuses to open', async () => {
  const n = await node()
  const alice = await authClient(n)
  const { first, end } = await openAndDrain(alice)
  const rulesDigest = first.scope.rulesDigest
  n.live.wrap('ls_notes', n.t.engine.lookupServices.ls_notes, { ...createNotesCompanion(), rules: { id: 'urn:test:notes-rules:2', parameters: {} } })
  const old = await alice.post('read', readReq(end))
  expect(old.status).toBe(409)
  expect(old.body.error.code).toBe('reset-required')
  // The manifest names the rules, so the client's selection header is stale now.
  const stale = await alice.post('open', openReq())
  expect(stale.status).toBe(409)
  expect(stale.body.error.code).toBe('context-changed')
  const renewed = await authClient(n) // fetched the new manifest
  const pinned = await renewed.post('open', { ...openReq(), requiredRulesDigest: rulesDigest })
  expect(pinned.status).toBe(409)
  expect(pinned.body.error.code).toBe('conflict')
  const fresh = await renewed.post('open', openReq())
  expect(fresh.status).toBe(200)
  expect(fresh.body.scope.rulesDigest).not.toBe(rulesDigest)
})

test('changed companion code under the same rules: a new digest and epoch at restart, rows indexed by the new code; parameters.version keeps both', async () => {
  const dir = h.tempDir('conf-code-')
  const engineDir = h.tempDir('conf-code-engine-')
  const key = require('@bsv/sdk').PrivateKey.fromRandom()
  const base = createNotesCompanion()
  const shouting = { ...base, index (output) { const r = base.index(output); return r && { ...r, context: { text: r.context.text.toUpperCase() } } } }
  const texts = (batches) => batches.flatMap(b => b.groups.flatMap(g => g.observations))
    .map(o => JSON.parse(Buffer.from(o.payload.context.bytes, 'base64').toString('utf8')).text)
  const restart = async (companion) => {
    if (nodes.length > 0) await nodes.pop().close()
    const n = await node({ dir, engineDir, serverKey: key, companion, live: { create: true } })
    return { n, alice: await authClient(n, key) }
  }

  let { n, alice } = await restart(base)
  await n.submit(await n.factory.createNotes(['hello']))
  const before = await openAndDrain(alice)
  expect(texts(before.batches)).toEqual(['hello'])
  const epoch = n.live.epoch;

  // The same rules object, other code: the digest and the epoch change, the rows are re-indexed.
  ({ n, alice } = await restart(shouting))
  expect(n.live.epoch).not.toBe(epoch)
  const old = await alice.post('read', readReq(before.end))
  expect(old.status).toBe(409)
  expect(old.body.error.code).toBe('reset-required')
  const after = await openAndDrain(alice)
  expect(after.first.scope.rulesDigest).not.toBe(before.first.scope.rulesDigest)
  expect(texts(after.batches)).toEqual(['HELLO']);

  // With parameters.version the operator names the code: a rewrite that keeps the version
  // keeps the digest, the epoch and the sessions.
  const versioned = (companion) => ({ ...companion, rules: { ...companion.rules, parameters: { version: '2' } } });
  ({ n, alice } = await restart(versioned(shouting)))
  const pinned = await openAndDrain(alice)
  const epoch2 = n.live.epoch
  const rewritten = { ...shouting, index (output) { const r = base.index(output); return r === null ? null : { ...r, context: { text: String(r.context.text).toUpperCase() } } } };
  ({ n, alice } = await restart(versioned(rewritten)))
  expect(n.live.epoch).toBe(epoch2)
  const resumed = await alice.post('read', readReq(pinned.end))
  expect(resumed.status).toBe(200)
  expect(resumed.body.scope.rulesDigest).toBe(pinned.first.scope.rulesDigest)
})

test('provider reset: old cursors get reset-required and a new snapshot holds the whole collection', async () => {
  const n = await node()
  const alice = await authClient(n)
  const created = await n.factory.createNotes(['a', 'b', 'c'])
  await n.submit(created)
  const { end } = await openAndDrain(alice)
  await n.live.resetEpoch()
  const old = await alice.post('read', readReq(end))
  expect(old.status).toBe(409)
  expect(old.body.error.code).toBe('reset-required')
  const { batches, end: last } = await openAndDrain(alice)
  expect(batches.flatMap(summary).flat().sort()).toEqual([0, 1, 2].map(i => `output ${created.txid}.${i}`))
  expect(last.scope.epoch).not.toBe(end.scope.epoch)
})

test('duplicate pages: repeating a read or an open returns the same page, and a later commit does not change it', async () => {
  const n = await node()
  const alice = await authClient(n)
  await n.submit(await n.factory.createNotes(['1', '2', '3', '4', '5']))
  const req = openReq({}, { maxObservations: 2 })
  const opened = await alice.post('open', req)
  expect(opened.status).toBe(200)
  expect(opened.body.snapshotComplete).toBe(false)
  const page = await alice.post('read', readReq(opened.body, { maxObservations: 2 }))
  await n.submit(await n.factory.createNotes(['after the pages']))
  const again = await alice.post('read', readReq(opened.body, { maxObservations: 2 }))
  // highWater is what the provider knows when it answers; the page itself is replay-stable.
  const { highWater: h1, ...stable } = page.body
  const { highWater: h2, ...stableAgain } = again.body
  expect(stableAgain).toEqual(stable)
  expect(BigInt(h2)).toBe(BigInt(h1) + 1n)
  const reopened = await alice.post('open', req)
  expect(reopened.body).toEqual(opened.body)
  // Observation identities deduplicate a replay: the snapshot holds each output once.
  const all = await drain(alice, opened.body, { maxObservations: 2 })
  const ids = all.flatMap(b => b.groups.flatMap(g => g.observations.map(o => o.id)))
  expect(new Set(ids).size).toBe(ids.length)
  expect(ids.length).toBe(5)
})

test('sparse sequences: groups irrelevant to the query advance through without being delivered', async () => {
  const n = await node()
  const alice = await authClient(n)
  const other = new NoteFactory(n.t.chainTracker)
  const author = await n.factory.authorIdentityKey()
  const { end } = await openAndDrain(alice, { author })
  for (let i = 0; i < 3; i++) await n.submit(await other.createNotes([`someone else ${i}`]))
  const quiet = await alice.post('read', readReq(end))
  expect(quiet.status).toBe(200)
  expect(quiet.body.groups).toEqual([])
  expect(BigInt(quiet.body.through)).toBe(BigInt(end.through) + 3n)
  expect(BigInt(quiet.body.through) <= BigInt(quiet.body.highWater)).toBe(true)
  const mine = await n.factory.createNotes(['mine'])
  await n.submit(mine)
  const b = await alice.post('read', readReq(quiet.body))
  expect(summary(b.body)).toEqual([[`output ${mine.txid}.0`]])
  expect(BigInt(b.body.groups[0].sequence)).toBe(BigInt(end.through) + 4n)
  expect(BigInt(b.body.groups[0].sequence) > BigInt(quiet.body.through)).toBe(true)
})

test('mutations before the snapshot boundary, during the last page and between registering a waiter and sleeping are not lost', async () => {
  const n = await node()
  const alice = await authClient(n)
  await n.submit(await n.factory.createNotes(['1', '2', '3', '4']))
  const first = await alice.post('open', openReq({}, { maxObservations: 2 }))
  expect(first.body.snapshotComplete).toBe(false)
  const before = await n.factory.createNotes(['before the boundary'])
  await n.submit(before)
  const second = await alice.post('read', readReq(first.body, { maxObservations: 2 }))
  const during = await n.factory.createNotes(['during the last page'])
  await n.submit(during)
  const batches = [first.body, ...await drain(alice, second.body, { maxObservations: 2 })]
  expect(batches.flatMap(summary).flat()).toHaveLength(4) // the snapshot holds what was there at W
  const end = batches[batches.length - 1]
  const next = await alice.post('read', readReq(end))
  expect(summary(next.body)).toEqual([[`output ${before.txid}.0`], [`output ${during.txid}.0`]])
  // A commit injected right after the poll registered its waiter, before it sleeps, wakes it.
  n.live.core.injectAfterWaiterRegistered([toNativeChange(h.admit(8))])
  const woken = await alice.post('read', readReq(next.body, { waitMs: 20000 }))
  expect(woken.body.groups.map(g => g.observations[0].payload.evidence.txid)).toEqual([h.txid(8)])
}, 15000) // a lost wakeup would wait 20 s

test('empty snapshot: an empty collection still gives a completed snapshot batch, then live', async () => {
  const n = await node()
  const alice = await authClient(n)
  const first = await alice.post('open', openReq())
  expect(first.status).toBe(200)
  expect(first.body).toMatchObject({ phase: 'snapshot', snapshotComplete: true, groups: [] })
  const created = await n.factory.createNotes(['first ever'])
  await n.submit(created)
  const next = await alice.post('read', readReq(first.body))
  expect(next.body.phase).toBe('live')
  expect(summary(next.body)).toEqual([[`output ${created.txid}.0`]])
})

test('commit before crash: a node SIGKILLed right after acknowledging a submit serves it, once, when restarted', async () => {
  const dir = h.tempDir('conf-crash-')
  const engineDir = h.tempDir('conf-crash-engine-')
  const key = PrivateKey.fromRandom()
  const port = await reservePort()
  const child = spawn(process.execPath, [path.join(__dirname, 'fixtures', 'http-node-child.js'), dir, engineDir, key.toHex(), String(port)], { stdio: ['pipe', 'pipe', 'inherit'] })
  const lines = []
  let waiting = null
  child.stdout.on('data', (d) => {
    for (const l of String(d).split('\n').filter(Boolean)) lines.push(JSON.parse(l))
    if (waiting) waiting()
  })
  const line = async (k) => {
    while (!lines.some(l => l[k] !== undefined)) await new Promise(resolve => { waiting = resolve })
    return lines.find(l => l[k] !== undefined)[k]
  }
  const exited = new Promise(resolve => child.once('exit', (code, signal) => resolve(signal)))
  const origin = await line('ready')
  const alice = await authClient({ base: origin }, PrivateKey.fromRandom())
  const end = await openCaughtUp(alice)
  child.stdin.write('acknowledged, then killed\n')
  const acked = await line('acked')
  child.kill('SIGKILL')
  expect(await exited).toBe('SIGKILL')
  const n = await node({ dir, engineDir, serverKey: key, port, live: { create: false } })
  // The same AuthFetch: its session died with the process, so it handshakes again by itself.
  const b = await alice.post('read', readReq(end))
  expect(b.status).toBe(200)
  expect(summary(b.body)).toEqual([[`output ${acked}.0`]])
  expect((await alice.post('read', readReq(b.body))).body.groups).toEqual([])
  expect(n.origin).toBe(origin)
})

test('cancellation: a BRC-103 client that goes away during a poll releases it and consumes nothing', async () => {
  const n = await node()
  const alice = await authClient(n)
  const end = await openCaughtUp(alice)
  const native = new NativeAuthFetch(NativeWallet.fromPrivateKey(PrivateKey.fromRandom().toHex()))
  const post = (body, signal) => native.fetch(`${n.base}/overlay/v1/lookup/read`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-bsv-overlay-capability': n.capability, 'x-bsv-overlay-profile': PROFILE },
    body: JSON.stringify(body),
    signal
  })
  // Its own session, so the poll is this client's.
  const mine = await (async () => {
    const res = await native.fetch(`${n.base}/overlay/v1/lookup/open`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-bsv-overlay-capability': n.capability, 'x-bsv-overlay-profile': PROFILE },
      body: JSON.stringify(openReq())
    })
    return res.json()
  })()
  const ac = new AbortController()
  const poll = post(readReq(mine, { waitMs: 20000 }), ac.signal).catch(e => e)
  for (let i = 0; i < 500 && n.live.stats().waiters === 0; i++) await new Promise(resolve => setTimeout(resolve, 20))
  expect(n.live.stats().waiters).toBe(1)
  ac.abort()
  expect((await poll).name).toBe('AbortError')
  for (let i = 0; i < 500 && n.live.stats().waiters > 0; i++) await new Promise(resolve => setTimeout(resolve, 20))
  expect(n.live.stats().waiters).toBe(0)
  const created = await n.factory.createNotes(['after the cancel'])
  await n.submit(created)
  expect(summary(await (await post(readReq(mine))).json())).toEqual([[`output ${created.txid}.0`]])
  expect(summary((await alice.post('read', readReq(end))).body)).toEqual([[`output ${created.txid}.0`]])
})

const CLIENT_CHILD = `
const { LiveLookupClient, CheckpointStore } = require(${JSON.stringify(path.join(__dirname, '../js/client/client.js'))})
const { NativeAuthFetch } = require(${JSON.stringify(path.join(__dirname, '../js/auth/authfetch.js'))})
const { NativeWallet } = require(${JSON.stringify(path.join(__dirname, '../js/auth/wallet.js'))})
const store = CheckpointStore.open(process.env.STORE)
const ac = new AbortController()
const authFetch = new NativeAuthFetch(NativeWallet.fromPrivateKey(process.env.KEY))
const client = new LiveLookupClient({ baseURL: process.env.BASE, authFetch, store, chain: ${JSON.stringify(h.CHAIN)}, allowInsecureHttp: true, limits: { maxObservations: 2, waitMs: 5000 } })
client.follow('ls_notes', {}, {
  membership: 'claims',
  signal: ac.signal,
  onRevision ({ members, state }) {
    if (members.filter(m => m.present).length === Number(process.env.WANT) && state.pendingCount === 0) ac.abort()
  }
}).then(() => { store.close(); process.exit(0) }, e => { console.error(e); process.exit(3) })
`

test('cursor before commit: a BRC-103 client killed after receiving a batch, before committing it, reads it again; nothing lost or applied twice', async () => {
  const n = await node()
  const storeDir = path.join(h.tempDir('conf-client-'), 'client')
  const key = PrivateKey.fromRandom().toHex()
  await n.submit(await n.factory.createNotes(['1', '2', '3', '4', '5']))
  const runClient = (env) => new Promise((resolve, reject) => {
    const c = spawn(process.execPath, ['-e', CLIENT_CHILD], { env: { ...process.env, STORE: storeDir, BASE: n.base, KEY: key, ...env }, stdio: ['ignore', 'ignore', 'pipe'] })
    let err = ''
    c.stderr.on('data', d => { err += d })
    c.on('error', reject)
    c.on('exit', (code, signal) => resolve({ code, signal, err }))
  })
  const crashed = await runClient({ OLL_CLIENT_CRASH: 'after-receive', OLL_CLIENT_CRASH_AT: '2', WANT: '5' })
  expect(crashed.signal).toBe('SIGKILL')
  const k = { provider: n.identity, service: 'ls_notes', queryDigest: digest('lookup-query', { service: 'ls_notes', query: {} }) }
  let store = CheckpointStore.open(storeDir)
  expect(store.state(k).received).toBe(2) // the second batch was received, never committed
  store.close()
  await n.submit(await n.factory.createNotes(['6'])) // while the client is down
  expect(await runClient({ WANT: '6' })).toMatchObject({ code: 0, signal: null })
  store = CheckpointStore.open(storeDir)
  expect(store.members(k).filter(m => m.present)).toHaveLength(6)
  expect(store.state(k)).toMatchObject({ received: 6, accepted: 6, pendingCount: 0 })
  store.close()
})

test('reorganization: members citing an orphaned block reach a BRC-103 client as one assessment-invalidated group', async () => {
  const n = await node()
  const alice = await authClient(n)
  const created = await n.factory.createNotes(['mined, then orphaned'])
  await n.submit(created)
  const proof = n.t.chainTracker.mint(created.txid)
  await n.t.engine.handleNewMerkleProof(created.txid, proof, proof.blockHeight)
  const end = await openCaughtUp(alice)
  const r = await n.live.handleReorg({ orphanedBlockHashes: ['ab'.repeat(32)], rebuildFromHeight: proof.blockHeight, newTipHeight: proof.blockHeight + 1 })
  expect(r).toMatchObject({ action: 'invalidated', affected: 1 })
  const b = await alice.post('read', readReq(end))
  expect(b.status).toBe(200)
  expect(b.body.groups).toHaveLength(1)
  expect(b.body.groups[0].observations.map(o => [o.kind, o.payload.contextId])).toEqual([['assessment-invalidated', 'chain-view/0']])
  // Nothing was withdrawn: a new snapshot still holds the note.
  expect((await openAndDrain(alice)).batches.flatMap(summary).flat()).toEqual([`output ${created.txid}.0`])
})
