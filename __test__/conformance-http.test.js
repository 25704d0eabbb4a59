'use strict'
// BRC-193 §7 cases over the real transport: Express on loopback, the BRC-103/104 middleware,
// AuthFetch clients with their own identities, a real @bsv/overlay Engine with real signed
// transactions and the native sled store. The same cases run through the JS API in
// sessions.test.js; here every request and answer is an authenticated HTTP exchange.

const h = require('./helpers/live')
const { startNode, authClient, openReq, readReq, drain, openAndDrain, summary, expiringNotesCompanion } = require('./helpers/node')
const { NoteFactory } = require('./helpers/engine')
const { createNotesCompanion } = require('../demo/notes/notesCompanion')

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
