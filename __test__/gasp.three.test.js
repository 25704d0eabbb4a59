'use strict'
// Three GASP-synchronized nodes on loopback (docs/scaling.md): A, B and C, each its own provider
// (own Engine on SQLite, own sled live store, own epoch), sharing one synthetic chain, each
// pulling from the other two. A note submitted on A reaches B's and C's live feeds once, as
// ordinary groups of each; a node that restarts with a lost live store (its data directory
// removed, its Engine kept) starts a new epoch and answers its own old cursors with
// reset-required, while the sessions of the other nodes go on unchanged from their cursors.
// Real Engines, real transactions, real Express over loopback (public mode).

const fs = require('node:fs')
const h = require('./helpers/live')
const { LocalChainTracker } = require('./helpers/engine')
const { startNode, publicClient, readReq, openAndDrain, summary } = require('./helpers/node')
const { scheduleGASPSync } = require('../js/provider/gasp')

const cleanup = require('./helpers/live').cleanupAfterEach()

function tempDir (prefix) {
  const dir = h.tempDir(prefix)
  cleanup.unshift(() => fs.rmSync(dir, { recursive: true, force: true })) // removed after the nodes close
  return dir
}

/** Starts a node that keeps its Engine folder and identity, so that it can be restarted. */
async function node (chainTracker, prior = {}) {
  const n = await startNode({
    authentication: 'none',
    chainTracker,
    gasp: true,
    engineDir: prior.engineDir || tempDir('gasp3-engine-'),
    dir: prior.dir,
    port: prior.port,
    serverKey: prior.serverKey
  })
  const handle = { node: n, engineDir: n.t.dir, port: n.srv.port }
  cleanup.push(() => n.close())
  return handle
}

async function threeNodes () {
  const chainTracker = new LocalChainTracker()
  const nodes = [await node(chainTracker), await node(chainTracker), await node(chainTracker)]
  return { chainTracker, nodes }
}

/** Each node pulls from the two others, run by hand (intervalMs 0) so the test decides when. */
function syncAll (nodes) {
  return Promise.all(nodes.map(({ node: n }) => {
    const peers = nodes.filter(o => o.node !== n).map(o => `http://127.0.0.1:${o.port}`)
    return scheduleGASPSync(n.t.engine, { peers, intervalMs: 0 }).syncNow()
  }))
}

/** An HTTP follower of one node: opened, snapshot drained. */
async function follow (n) {
  const client = await publicClient(n)
  const { batches, end } = await openAndDrain(client)
  return { client, batches, end }
}

async function next (f) {
  const r = await f.client.post('read', readReq(f.end))
  expect(r.status).toBe(200)
  f.end = r.body
  return r.body
}

test('a note submitted on A reaches the live feeds of B and C through GASP, once each, in each node\'s own epoch', async () => {
  const { nodes } = await threeNodes()
  const [a, b, c] = nodes.map(x => x.node)
  const onB = await follow(b)
  const onC = await follow(c)
  const created = await a.factory.createNotes(['from A'])
  await a.submit(created)
  await syncAll(nodes)
  for (const [f, n] of [[onB, b], [onC, c]]) {
    const got = await next(f)
    expect(got.phase).toBe('live')
    expect(summary(got)).toEqual([[`output ${created.txid}.0`]])
    expect(got.scope.provider).toBe(n.origin)
    expect(got.scope.epoch).toBe(n.live.epoch)
  }
  expect(new Set([a, b, c].map(n => n.live.epoch)).size).toBe(3)
  // Another round (B now also offers it to C and C to B) commits nothing anywhere.
  const hw = [a, b, c].map(n => n.live.highWater)
  await syncAll(nodes)
  expect([a, b, c].map(n => n.live.highWater)).toEqual(hw)
  for (const f of [onB, onC]) expect((await next(f)).groups).toEqual([])
})

test('a node restarted with a lost live store resets its own sessions only; the other nodes\' sessions resume from their cursors', async () => {
  const { chainTracker, nodes } = await threeNodes()
  const [a, b] = nodes.map(x => x.node)
  const first = await a.factory.createNotes(['one', 'two'])
  await a.submit(first)
  await syncAll(nodes)
  const followers = []
  for (const x of nodes) followers.push(await follow(x.node))
  for (const f of followers) expect(f.batches.flatMap(summary).flat()).toHaveLength(2)
  const epochs = nodes.map(x => x.node.live.epoch)

  // C stops; its live store's data directory is removed; the Engine's SQLite is kept.
  const old = nodes[2]
  const oldC = old.node
  await oldC.close()
  fs.rmSync(oldC.dir, { recursive: true, force: true })
  const restarted = await node(chainTracker, { engineDir: old.engineDir, port: old.port, serverKey: oldC.serverKey, dir: oldC.dir })
  nodes[2] = restarted
  const c = restarted.node
  expect(c.origin).toBe(oldC.origin)
  expect(c.live.epoch).not.toBe(epochs[2])

  // C's own old session: reset-required, never an empty success.
  const onNewC = await publicClient(c)
  const stale = await onNewC.post('read', readReq(followers[2].end))
  expect(stale.status).toBe(409)
  expect(stale.body.error.code).toBe('reset-required')
  // A new session on C sees the same collection, rebuilt from Engine storage.
  expect((await follow(c)).batches.flatMap(summary).flat().sort()).toEqual(followers[2].batches.flatMap(summary).flat().sort())

  // A and B: same epochs; their cursors resume, and a note submitted on the restarted C reaches
  // them as the next live group of the same sessions.
  expect([a.live.epoch, b.live.epoch]).toEqual(epochs.slice(0, 2))
  const fromC = await c.factory.createNotes(['from the restarted C'])
  await c.submit(fromC)
  await syncAll(nodes)
  for (const i of [0, 1]) {
    const got = await next(followers[i]) // the cursor stored before C's restart
    expect(got.scope.epoch).toBe(epochs[i])
    expect(summary(got)).toEqual([[`output ${fromC.txid}.0`]])
  }
})
