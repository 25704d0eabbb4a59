'use strict'
// Scale-out by GASP (docs/scaling.md): two real nodes on loopback, each with its own Engine,
// live store, identity and epoch, sharing one synthetic chain. What node B learns from node
// A through GASP goes through B's Engine.submit and so reaches B's live feed as ordinary
// groups; nothing of either node's live sessions ever travels through GASP (BRC-193 §6).

const h = require('./helpers/live')
const { startProxy } = require('./helpers/net')
const { LocalChainTracker, NoteFactory } = require('./helpers/engine')
const { startNode, summary } = require('./helpers/node')
const { scheduleGASPSync, gaspRouter } = require('../js/provider/gasp')

const { ALICE, openBody, readBody, json } = h
const cleanup = require('./helpers/live').cleanupAfterEach()

async function twoNodes () {
  const chainTracker = new LocalChainTracker()
  const a = await startNode({ authentication: 'none', chainTracker, gasp: true })
  cleanup.push(() => a.close())
  const b = await startNode({ authentication: 'none', chainTracker, gasp: true })
  cleanup.push(() => b.close())
  return { a, b }
}

/** Opens a session on `live` and reads its snapshot to the end. */
async function follow (live) {
  const first = json(await live.open(openBody({ query: {} }), ALICE))
  const batches = await h.drainSnapshot(live, first)
  return { first, batches, end: batches[batches.length - 1] }
}

async function next (live, batch) {
  const res = await live.read(readBody(batch.session, batch.cursor), ALICE)
  expect(res.status).toBe(200)
  return json(res)
}

test('a note published on node A reaches the live feed of node B once B has synced, as a live group of B', async () => {
  const { a, b } = await twoNodes()
  const onB = await follow(b.live)
  expect(onB.batches.flatMap(summary)).toEqual([])
  const created = await a.factory.createNotes(['from A'])
  await a.submit(created)
  const quiet = await next(b.live, onB.end)
  expect(quiet.groups).toEqual([]) // B does not know it before it syncs
  const sync = scheduleGASPSync(b.t.engine, { peers: [a.origin], intervalMs: 0 })
  await sync.syncNow()
  const got = await next(b.live, onB.end)
  expect(summary(got)).toEqual([[`output ${created.txid}.0`]])
  expect(got.scope.provider).toBe(b.origin)
  expect(got.scope.epoch).toBe(b.live.epoch)
  expect(got.scope.epoch).not.toBe(a.live.epoch)
  // A second sync learns nothing new and commits nothing.
  const hw = b.live.highWater
  await sync.syncNow()
  expect(b.live.highWater).toBe(hw)
})

test('a mined replacement on A reaches B as one group: the old note withdrawn and spent, the new one admitted', async () => {
  const { a, b } = await twoNodes()
  const created = await a.factory.createNotes(['v1'])
  await a.submit(created)
  const sync = scheduleGASPSync(b.t.engine, { peers: [a.origin], intervalMs: 0 })
  await sync.syncNow()
  const onB = await follow(b.live)
  expect(onB.batches.flatMap(summary).flat()).toEqual([`output ${created.txid}.0`])
  const replaced = await a.factory.replaceNote(created.notes[0], 'v2')
  await a.submit(replaced)
  // GASP of @bsv/overlay 0.4.6 does not carry an unconfirmed transaction whose unconfirmed
  // parent the peer already holds (docs/scaling.md): B learns the replacement once it is mined.
  await sync.syncNow()
  expect((await next(b.live, onB.end)).groups).toEqual([])
  const proof = a.t.chainTracker.mint(replaced.txid)
  await a.t.engine.handleNewMerkleProof(replaced.txid, proof, proof.blockHeight)
  await sync.syncNow()
  const got = await next(b.live, onB.end)
  expect(summary(got)).toEqual([[`withdraw ${created.txid}.0 spent`, `spend ${created.txid}.0`, `output ${replaced.txid}.0`]])
})

test('an unconfirmed two-input transaction on A is served to B with its proven parents (the node comes from the stored BEEF)', async () => {
  const { a, b } = await twoNodes()
  const created = await a.factory.createNotes(['v1'])
  await a.submit(created)
  const proof = a.t.chainTracker.mint(created.txid)
  await a.t.engine.handleNewMerkleProof(created.txid, proof, proof.blockHeight)
  // Inputs: a fresh funding output, then the mined note. Unconfirmed itself.
  const replaced = await a.factory.replaceNote(created.notes[0], 'v2')
  await a.submit(replaced)
  const onB = await follow(b.live)
  await scheduleGASPSync(b.t.engine, { peers: [a.origin], intervalMs: 0 }).syncNow()
  const got = await next(b.live, onB.end)
  // B never held v1: it learns the current note only, through its own Engine.submit.
  expect(summary(got).flat()).toContain(`output ${replaced.txid}.0`)
  const listed = (await b.t.engine.lookup({ service: 'ls_notes', query: {} })).outputs
  expect(listed).toHaveLength(1)
})

test('no cursor, session id or live response travels through GASP', async () => {
  const { a, b } = await twoNodes()
  await a.submit(await a.factory.createNotes(['one', 'two']))
  await b.submit(await new NoteFactory(b.t.chainTracker).createNotes(['three']))
  // Live sessions on both nodes, with live cursors past a commit.
  const secrets = []
  for (const n of [a, b]) {
    const f = await follow(n.live)
    for (const batch of f.batches) secrets.push(batch.session, batch.cursor)
  }
  // B syncs from A and A from B, every byte through a recording proxy.
  const toA = await startProxy(a.srv.port)
  cleanup.push(() => toA.close())
  const toB = await startProxy(b.srv.port)
  cleanup.push(() => toB.close())
  await scheduleGASPSync(b.t.engine, { peers: [`http://127.0.0.1:${toA.port}`], intervalMs: 0 }).syncNow()
  await scheduleGASPSync(a.t.engine, { peers: [`http://127.0.0.1:${toB.port}`], intervalMs: 0 }).syncNow()
  const traffic = [...toA.seen.requests, ...toA.seen.responses, ...toB.seen.requests, ...toB.seen.responses].join('\n')
  expect(traffic).toMatch(/requestSyncResponse/)
  expect(traffic).toMatch(/requestForeignGASPNode/)
  for (const s of secrets) expect(traffic.includes(s)).toBe(false)
  expect(traffic).not.toMatch(/"cursor"|"session"|overlay\/v1\/lookup/)
  // Both now hold all three notes, each in its own epoch.
  for (const n of [a, b]) expect((await follow(n.live)).batches.flatMap(summary).flat()).toHaveLength(3)
})

test('a scheduled sync brings A\'s new note to a long poll waiting on B, with no call by the host', async () => {
  const { a, b } = await twoNodes()
  const onB = await follow(b.live)
  const sync = scheduleGASPSync(b.t.engine, { peers: [a.origin], intervalMs: 200 })
  cleanup.push(() => sync.stop())
  const created = await a.factory.createNotes(['scheduled'])
  await a.submit(created)
  let got = { groups: [] }
  for (let i = 0; i < 10 && got.groups.length === 0; i++) {
    const res = await b.live.read(readBody(onB.end.session, onB.end.cursor, { waitMs: 5000 }), ALICE)
    got = json(res)
  }
  expect(summary(got)).toEqual([[`output ${created.txid}.0`]])
})

test('the GASP routes refuse malformed requests and unmanaged topics with a bounded 400', async () => {
  const { a } = await twoNodes()
  const post = (path, body, headers = {}) => fetch(`${a.origin}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })
  const unmanaged = await post('/requestSyncResponse', { version: 1, since: 0 }, { 'x-bsv-topic': 'tm_other' })
  expect(unmanaged.status).toBe(400)
  const noSince = await post('/requestSyncResponse', { version: 1 }, { 'x-bsv-topic': 'tm_notes' })
  expect(noSince.status).toBe(400)
  const badNode = await post('/requestForeignGASPNode', { graphID: 'x.1', txid: 'y', outputIndex: -1 })
  expect(badNode.status).toBe(400)
  const unknown = await post('/requestForeignGASPNode', { graphID: 'ab'.repeat(32) + '.0', txid: 'ab'.repeat(32), outputIndex: 0 })
  expect(unknown.status).toBe(404)
  const big = await fetch(`${a.origin}/requestSyncResponse`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-bsv-topic': 'tm_notes' }, body: JSON.stringify({ version: 1, since: 0, pad: 'x'.repeat(100_000) }) })
  expect(big.status).toBe(413)
  expect(() => gaspRouter({})).toThrow(TypeError)
  expect(() => scheduleGASPSync(a.t.engine, { peers: ['not a url'] })).toThrow(TypeError)
})
