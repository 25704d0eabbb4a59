'use strict'
// `DEMO_NODES=2` without a browser: two demo nodes in one process (demo/server.js startCluster),
// each its own provider (identity, Engine, live store, epoch, data directory), one synthetic
// chain, each pulling from the other by GASP. A note published on A reaches a BRC-103 client
// that follows only B, as a live group of B's session. Real Engines, real sled, real loopback.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { AuthFetch, PrivateKey, ProtoWallet } = require('@bsv/sdk')
const { startCluster } = require('../demo/server')
const { publishNote } = require('../demo/publish')

const SYNC_MS = 200

/** A BRC-103 follower of one demo node, the way the page calls it. */
async function follower (url) {
  const info = await (await fetch(`${url}/demo/info`)).json()
  const af = new AuthFetch(new ProtoWallet(PrivateKey.fromRandom()))
  const post = async (op, body) => {
    const res = await af.fetch(`${url}/overlay/v1/lookup/${op}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-bsv-overlay-capability': info.capabilityDigest, 'x-bsv-overlay-profile': info.profile },
      body: JSON.stringify(body)
    })
    return { status: res.status, body: await res.json() }
  }
  return { info, post }
}

const limits = (waitMs = 0) => ({ maxBytes: 262144, maxObservations: 64, waitMs })
const outpoints = (batch) => batch.groups.flatMap(g => g.observations.filter(o => o.kind === 'output').map(o => `${o.payload.evidence.txid}.${o.payload.evidence.outputIndex}`))

describe('demo with two nodes', () => {
  let dataDir, cluster
  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'demo-cluster-'))
    cluster = await startCluster({ nodes: 2, port: 0, dataDir, syncMs: SYNC_MS })
  })
  afterAll(async () => {
    if (cluster) await cluster.close()
    fs.rmSync(dataDir, { recursive: true, force: true })
  })

  test('each node is its own provider in its own data directory; each names the other as its peer', async () => {
    const [a, b] = cluster.nodes
    expect(a.dataDir).toBe(path.join(dataDir, 'node-a'))
    expect(b.dataDir).toBe(path.join(dataDir, 'node-b'))
    expect(a.identity).not.toBe(b.identity)
    expect(a.live.epoch).not.toBe(b.live.epoch)
    const infoA = await (await fetch(`${a.url}/demo/info`)).json()
    expect(infoA.peers).toEqual([b.url])
    // A page served by A may call B: CORS for A's origin on B's info, manifest and lookup routes.
    const cors = await fetch(`${b.url}/demo/info`, { headers: { origin: a.url } })
    expect(cors.headers.get('access-control-allow-origin')).toBe(a.url)
    const manifest = await fetch(`${b.url}/overlay/v1/capabilities`, { headers: { origin: a.url } })
    expect(manifest.headers.get('access-control-allow-origin')).toBe(a.url)
    const stranger = await fetch(`${b.url}/demo/info`, { headers: { origin: 'http://127.0.0.1:1' } })
    expect(stranger.headers.get('access-control-allow-origin')).toBeNull()
  })

  test('a note published on A reaches a follower of B only, as a live group of B, once B has synced', async () => {
    const [a, b] = cluster.nodes
    const onB = await follower(b.url)
    const open = await onB.post('open', { version: 1, requestId: 'ab'.repeat(16), service: onB.info.service, query: {}, limits: limits() })
    expect(open.status).toBe(200)
    let batch = open.body
    while (!batch.snapshotComplete) batch = (await onB.post('read', { version: 1, session: batch.session, cursor: batch.cursor, limits: limits() })).body
    const published = await publishNote(a.url, PrivateKey.fromRandom(), 'published on A')
    expect(published.steak.tm_notes.outputsToAdmit).toEqual([0])
    // B's scheduled sync brings it; the waiting long poll is answered with B's live group.
    let got = { groups: [] }
    for (let i = 0; i < 20 && got.groups.length === 0; i++) {
      const r = await onB.post('read', { version: 1, session: batch.session, cursor: batch.cursor, limits: limits(5000) })
      expect(r.status).toBe(200)
      got = r.body
      batch = got
    }
    expect(got.phase).toBe('live')
    expect(outpoints(got)).toEqual([`${published.txid}.0`])
    expect(got.scope.provider).toBe(b.identity)
    expect(got.scope.epoch).toBe(b.live.epoch)
    // Both nodes accepted the block A's faucet minted: one chain, kept beside the nodes.
    expect(fs.existsSync(path.join(dataDir, 'chain-roots.json'))).toBe(true)
  })
})
