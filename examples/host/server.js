'use strict'
// A complete overlay host with live lookup, as an operator copies it: Express, an @bsv/overlay
// Engine on SQLite, Overlay-Express-style `POST /submit` and `POST /lookup`, the lookup-live
// routes (public mode or BRC-103), `GET /health` and `GET /metrics`, and a development faucet
// for the local chain tracker. Run it from the project that installed overlay-lookup-live:
//
//   PORT=8080 DATA_DIR=./host-data AUTH=none node node_modules/overlay-lookup-live/examples/host/server.js
//
// PORT (default 8080; 0 picks a free port), HOST (default 127.0.0.1), DATA_DIR (default
// ./host-data: Engine database, live store, identity key, chain tracker) and AUTH (none: public
// mode; brc103: BRC-103 callers only). It prints `listening on <url>` once it serves.
//
// The chain tracker is LOCAL (development only): `POST /dev/fund` mints a proven funding
// transaction in a synthetic block only this host knows. A production host passes a real
// ChainTracker (for example @bsv/sdk's WhatsOnChain tracker) and drops the faucet.
const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const express = require('express')
const { Engine, KnexStorage } = require('@bsv/overlay')
const { PrivateKey, P2PKH } = require('@bsv/sdk')
const { LiveLookup, openSqlite, LocalChainTracker, mintFunding } = require('overlay-lookup-live')
const { TOPIC, SERVICE, MessagesTopicManager, MessagesLookupService, messagesCompanion } = require('./messages')

/** The local development chain (never a public network's). */
const CHAIN = {
  network: 'local-dev',
  genesisHash: crypto.createHash('sha256').update('overlay-lookup-live example: local development chain').digest('hex')
}

/** The provider identity key: made on the first run, then read from the data directory. */
function identityKey (dataDir) {
  const file = path.join(dataDir, 'server-key.hex')
  if (fs.existsSync(file)) return PrivateKey.fromHex(fs.readFileSync(file, 'utf8').trim())
  const key = PrivateKey.fromRandom()
  fs.writeFileSync(file, key.toHex().padStart(64, '0') + '\n', { mode: 0o600 })
  return key
}

/** Parses the `x-topics` header of /submit: a JSON array of topic names. */
function topicsOf (header) {
  try {
    const topics = JSON.parse(header)
    if (Array.isArray(topics) && topics.length > 0 && topics.every(t => typeof t === 'string')) return topics
  } catch (_) {}
  return null
}

/** Routes of the host itself: mounted after the live router (they parse bodies). */
function hostRoutes (engine, chainTracker) {
  const r = express.Router()
  // Overlay Express's submit: a BEEF body, the topics in `x-topics`; answers the STEAK.
  r.post('/submit', express.raw({ type: () => true, limit: '1mb' }), async (req, res) => {
    const topics = topicsOf(req.headers['x-topics'])
    if (!topics) return res.status(400).json({ status: 'error', message: 'x-topics must be a JSON array of topic names' })
    try {
      res.json(await engine.submit({ beef: [...req.body], topics }))
    } catch (e) {
      res.status(400).json({ status: 'error', message: String(e && e.message) })
    }
  })
  // BRC-24 lookup, one-shot: {service, query}.
  r.post('/lookup', express.json({ limit: '64kb' }), async (req, res) => {
    const { service, query } = req.body || {}
    try {
      res.json(await engine.lookup({ service, query: query ?? {} }))
    } catch (e) {
      res.status(400).json({ status: 'error', message: String(e && e.message) })
    }
  })
  // Development faucet of the local chain tracker: {address} -> a proven P2PKH funding output.
  r.post('/dev/fund', express.json({ limit: '4kb' }), (req, res) => {
    const address = req.body && req.body.address
    try {
      new P2PKH().lock(address)
    } catch (_) {
      return res.status(400).json({ status: 'error', message: 'body must be {"address": "<P2PKH address>"}' })
    }
    const f = mintFunding(chainTracker, address, 10000)
    res.json({ txid: f.tx.id('hex'), outputIndex: f.outputIndex, satoshis: f.satoshis, beef: Buffer.from(f.tx.toBEEF()).toString('hex'), topic: TOPIC })
  })
  return r
}

async function startHost ({ port = 8080, host = '127.0.0.1', dataDir = './host-data', auth = 'none', log = (entry) => console.log(JSON.stringify(entry)) } = {}) {
  if (auth !== 'none' && auth !== 'brc103') throw new TypeError('AUTH must be none or brc103')
  dataDir = path.resolve(dataDir)
  fs.mkdirSync(dataDir, { recursive: true })
  const key = identityKey(dataDir)
  const chainTracker = LocalChainTracker.persisted(path.join(dataDir, 'chain-roots.json'))

  // Listen first: the advertised base URL needs the actual port. /health says 503 until ready.
  const app = express()
  app.disable('x-powered-by')
  let ready = false
  app.get('/health', (req, res, next) => ready ? next() : res.status(503).json({ status: 'starting', services: [] }))
  const server = await new Promise((resolve, reject) => {
    const s = app.listen(port, host, () => resolve(s))
    s.once('error', reject)
  })
  const baseURL = `http://${host}:${server.address().port}`

  // The live store: provider is the identity key with BRC-103, the exact origin in public mode.
  const liveDir = path.join(dataDir, 'live')
  const live = await LiveLookup.open({
    dataDir: liveDir,
    create: !fs.existsSync(liveDir),
    chain: CHAIN,
    provider: auth === 'brc103' ? key.toPublicKey().toString() : new URL(baseURL).origin,
    log
  })
  const knex = await openSqlite(dataDir) // @bsv/overlay's migrations, fixed for SQLite
  const inner = new MessagesLookupService(knex)
  await inner.init()
  // Constructor of @bsv/overlay 0.4.6: managers, lookupServices, storage, chainTracker, hostingURL,
  // then optional SHIP/SLAP trackers, broadcaster, advertiser, syncConfiguration (no GASP here).
  const engine = new Engine(
    { [TOPIC]: new MessagesTopicManager() },
    { [SERVICE]: live.wrap(SERVICE, inner, messagesCompanion) },
    new KnexStorage(knex), chainTracker, baseURL,
    undefined, undefined, undefined, undefined, { [TOPIC]: false })
  await live.attach(engine)

  // The live routes first (they read raw bodies), with health and metrics; then the host's own.
  app.use(live.router({
    baseURL,
    authentication: auth,
    privateKey: key,
    allowLocalHttp: true, // plain http on loopback for development; use https in production
    health: '/health',
    metrics: '/metrics'
  }))
  app.use(hostRoutes(engine, chainTracker))
  ready = true

  let closed = false
  return {
    url: baseURL,
    identity: key.toPublicKey().toString(),
    live,
    engine,
    async close () {
      if (closed) return
      closed = true
      server.closeAllConnections()
      await new Promise(resolve => server.close(resolve))
      await live.close()
      await knex.destroy()
    }
  }
}

async function main () {
  const port = process.env.PORT === undefined ? 8080 : Number(process.env.PORT)
  const h = await startHost({ port, host: process.env.HOST, dataDir: process.env.DATA_DIR, auth: process.env.AUTH || 'none' })
  console.log(`listening on ${h.url}`)
  const stop = () => { h.close().then(() => process.exit(0), (e) => { console.error(e); process.exit(1) }) }
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
}

if (require.main === module) main().catch((e) => { console.error(e && e.stack ? e.stack : e); process.exit(1) })

module.exports = { startHost, CHAIN }
