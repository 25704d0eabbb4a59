'use strict'
// The demo host without a browser: what it keeps across restarts (identity, live store and epoch,
// the local chain tracker's roots), its Overlay-Express-style /submit and /lookup, the faucet's
// input checks, and the CLI publisher's functions. Real Engine, real sled store, real loopback.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const bsv = require('@bsv/sdk')
const { startDemo } = require('../demo/server')
const { publishNote, withdrawNote } = require('../demo/publish')
const createNotesTx = require('../demo/public/notes-tx')
const { LocalChainTracker, mintFunding } = require('../demo/chain')

async function json (res) {
  return { status: res.status, body: await res.json() }
}

async function getInfo (url) {
  return (await json(await fetch(`${url}/demo/info`))).body
}

function submit (url, beef, topics = '["tm_notes"]') {
  const headers = { 'content-type': 'application/octet-stream' }
  if (topics !== null) headers['x-topics'] = topics
  return fetch(`${url}/submit`, { method: 'POST', headers, body: Buffer.from(beef) }).then(json)
}

async function lookupAll (url) {
  const r = await json(await fetch(`${url}/lookup`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ service: 'ls_notes', query: {} })
  }))
  expect(r.status).toBe(200)
  return r.body.outputs.map(o => bsv.Transaction.fromBEEF(o.beef).id('hex') + '.' + o.outputIndex)
}

describe('demo host', () => {
  let dataDir, demo
  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'demo-server-'))
    demo = await startDemo({ port: 0, dataDir })
  })
  afterAll(async () => {
    if (demo) await demo.close()
    fs.rmSync(dataDir, { recursive: true, force: true })
  })

  test('first start creates the store and an identity; /demo/info agrees with the signed manifest', async () => {
    expect(demo.createdStore).toBe(true)
    const info = await getInfo(demo.url)
    const signed = await (await fetch(`${demo.url}/overlay/v1/capabilities`)).json()
    expect(info.identity).toBe(demo.identity)
    expect(signed.body.identity).toBe(demo.identity)
    expect(info.capabilityDigest).toBe(require('../js').digest('capabilities', signed.body))
    expect(info.chain.tracker).toMatch(/^local/)
  })

  test('publish and withdraw through /submit; /lookup follows', async () => {
    const key = bsv.PrivateKey.fromRandom()
    const published = await publishNote(demo.url, key, 'a demo note')
    expect(published.steak.tm_notes.outputsToAdmit).toEqual([0])
    expect(await lookupAll(demo.url)).toContain(`${published.txid}.0`)
    const withdrawn = await withdrawNote(demo.url, key, `${published.txid}.0`)
    expect(withdrawn.steak.tm_notes.coinsRemoved).toEqual([0])
    expect(await lookupAll(demo.url)).not.toContain(`${published.txid}.0`)
    await expect(withdrawNote(demo.url, key, `${published.txid}.0`)).rejects.toThrow(/no live note/)
  })

  test('an addressed note stays out of the unauthenticated /lookup list; its author still finds and withdraws it by outpoint', async () => {
    const key = bsv.PrivateKey.fromRandom()
    const to = bsv.PrivateKey.fromRandom().toPublicKey().toString()
    const published = await publishNote(demo.url, key, 'for one reader', { to })
    expect(published.steak.tm_notes.outputsToAdmit).toEqual([0])
    expect(await lookupAll(demo.url)).not.toContain(`${published.txid}.0`)
    const withdrawn = await withdrawNote(demo.url, key, `${published.txid}.0`)
    expect(withdrawn.steak.tm_notes.coinsRemoved).toEqual([0])
  })

  test('a note can be withdrawn only by its author', async () => {
    const author = bsv.PrivateKey.fromRandom()
    const other = bsv.PrivateKey.fromRandom()
    const published = await publishNote(demo.url, author, 'not yours')
    await expect(withdrawNote(demo.url, other, `${published.txid}.0`)).rejects.toThrow(/submit failed/)
    expect(await lookupAll(demo.url)).toContain(`${published.txid}.0`)
  })

  test('/submit and /demo/fund refuse bad input with a 400 and a message', async () => {
    const cases = [
      await submit(demo.url, [1, 2, 3], null),
      await submit(demo.url, [1, 2, 3], 'tm_notes'),
      await submit(demo.url, [1, 2, 3], '[]'),
      await submit(demo.url, [1, 2, 3], '[1]'),
      await submit(demo.url, [], '["tm_notes"]'),
      await submit(demo.url, [1, 2, 3], '["tm_notes"]'),
      await json(await fetch(`${demo.url}/demo/fund`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })),
      await json(await fetch(`${demo.url}/demo/fund`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"address":"nope"}' })),
      await json(await fetch(`${demo.url}/lookup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }))
    ]
    for (const r of cases) {
      expect(r.status).toBe(400)
      expect(r.body.status).toBe('error')
      expect(typeof r.body.message).toBe('string')
    }
  })

  test('a restart keeps the identity, the live store and epoch, and the chain tracker roots', async () => {
    const key = bsv.PrivateKey.fromRandom()
    const info = await getInfo(demo.url)
    // Funding minted before the restart, spent after it: the persisted roots must still verify it.
    const funding = (await json(await fetch(`${demo.url}/demo/fund`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ address: key.toAddress() })
    }))).body
    const epoch = demo.live.epoch
    const highWater = demo.live.highWater
    const port = demo.port
    await demo.close()
    demo = await startDemo({ port, dataDir })
    expect(demo.createdStore).toBe(false)
    expect(demo.identity).toBe(info.identity)
    expect(demo.live.epoch).toBe(epoch)
    expect(demo.live.highWater).toBe(highWater)
    const built = await createNotesTx(bsv, info).buildPublish(key, funding, 'minted before the restart')
    const r = await submit(demo.url, built.beef)
    expect(r.status).toBe(200)
    expect(r.body.tm_notes.outputsToAdmit).toEqual([0])
  })
})

describe('LocalChainTracker persistence', () => {
  test('roots survive a reload from the file; an unknown root does not verify', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'demo-chain-'))
    try {
      const file = path.join(dir, 'roots.json')
      const first = LocalChainTracker.persisted(file)
      const funding = mintFunding(first, bsv.PrivateKey.fromRandom().toAddress())
      const again = LocalChainTracker.persisted(file)
      expect(await again.currentHeight()).toBe(await first.currentHeight())
      expect(await funding.tx.merklePath.verify(funding.tx.id('hex'), again)).toBe(true)
      const fresh = new LocalChainTracker()
      expect(await funding.tx.merklePath.verify(funding.tx.id('hex'), fresh)).toBe(false)
      fs.writeFileSync(file, '{"height":"x"}')
      expect(() => LocalChainTracker.persisted(file)).toThrow(/malformed/)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
