'use strict'
// The demo overlay host: a real @bsv/overlay Engine (knex on SQLite) serving the notes topic and
// lookup service of demo/notes/, the lookup service wrapped for live sessions, this package's
// routes with BRC-103 authentication, an Overlay-Express-style /submit and /lookup, a development
// faucet, and the static page in demo/public/. Everything persists in one data directory.
// See docs/demo.md. Run: `node demo/server.js` (PORT, DEMO_DATA_DIR, HOST, DEMO_NODES,
// DEMO_SYNC_MS). With DEMO_NODES=2 or more, several such nodes run side by side, each its own
// provider, synchronized by GASP (docs/scaling.md).
const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')
const crypto = require('node:crypto')
const express = require('express')
const { Engine, KnexStorage } = require('@bsv/overlay')
const { PrivateKey, P2PKH } = require('@bsv/sdk')
const { LiveLookup } = require('../js')
const { gaspRouter, scheduleGASPSync } = require('../js/provider/gasp')
const { PROFILE } = require('../js/provider/router')
const { LocalChainTracker, mintFunding, trackerFile } = require('./chain')
const { openSqlite } = require('./storage')
const { NotesTopicManager } = require('./notes/NotesTopicManager')
const { NotesLookupService } = require('./notes/NotesLookupService')
const { createNotesCompanion } = require('./notes/notesCompanion')
const notes = require('./notes/notesProtocol')

const SERVICE = 'ls_notes'
// The chain this demo's data belongs to: the local chain tracker's, never a public network.
const CHAIN = {
  network: 'local-dev',
  genesisHash: crypto.createHash('sha256').update('overlay-lookup-live demo: local development chain').digest('hex')
}
const FAUCET_SATOSHIS = 10000
const MAX_SUBMIT_BYTES = 1024 * 1024
const PUBLIC_DIR = path.join(__dirname, 'public')
const DEFAULT_SYNC_MS = 3000

/**
 * The @bsv/sdk browser bundle (dist/umd/bundle.js). The package exports no subpath for it (and
 * dist/cjs carries its own package.json), so walk up from the entry point until the file exists.
 */
function sdkBundlePath () {
  let dir = path.dirname(require.resolve('@bsv/sdk'))
  for (;;) {
    const candidate = path.join(dir, 'dist', 'umd', 'bundle.js')
    if (fs.existsSync(candidate)) return candidate
    const up = path.dirname(dir)
    if (up === dir) throw new Error('cannot locate the @bsv/sdk browser bundle (dist/umd/bundle.js)')
    dir = up
  }
}

/** The server identity key: generated on first run, then read from the data directory. */
function loadIdentityKey (dataDir) {
  const file = path.join(dataDir, 'server-key.hex')
  if (fs.existsSync(file)) {
    const hex = fs.readFileSync(file, 'utf8').trim()
    if (!/^[0-9a-f]{64}$/.test(hex)) throw new Error(`${file} does not hold a 64-hex private key`)
    return hex
  }
  const hex = PrivateKey.fromRandom().toHex().padStart(64, '0')
  fs.writeFileSync(file, hex + '\n', { mode: 0o600 })
  return hex
}

/**
 * Opens the live store: created on the very first run only. An existing store is reopened as it
 * is, so cursors handed out before a restart stay valid (a lost store would start a new epoch and
 * clients would get reset-required, never a silent wipe).
 */
async function openLiveStore (dataDir, provider) {
  const dir = path.join(dataDir, 'live')
  const create = !fs.existsSync(dir)
  return LiveLookup.open({
    dataDir: dir,
    create,
    chain: CHAIN,
    provider,
    sessionSeconds: 3600,
    replaySeconds: 3600,
    maxWaitMs: 25000,
    // Each BRC-103 identity is its own access partition: the notes companion shows it the
    // public notes and the notes addressed by it or to it (docs/companions.md "Visibility").
    accessPolicy: 'urn:overlay-lookup-live:demo:notes-readers:1',
    authorize: ({ principal }) => principal ? { partition: principal } : null
  })
}

function quietLogger () {
  const noop = () => {}
  return { log: noop, info: noop, warn: noop, error: (...a) => console.error('[engine]', ...a), debug: noop, time: noop, timeEnd: noop }
}

/** The Engine: notes topic manager, the wrapped notes lookup service, no broadcaster, no sync. */
async function openEngine (dataDir, live, chainTracker) {
  const knex = await openSqlite(dataDir)
  const inner = new NotesLookupService(knex)
  await inner.init()
  const managers = { [notes.NOTES_TOPIC]: new NotesTopicManager() }
  const lookupServices = { [SERVICE]: live.wrap(SERVICE, inner, createNotesCompanion({ addressed: true })) }
  // Constructor order of @bsv/overlay 0.4.6 (see DESIGN.md): managers, lookupServices, storage,
  // chainTracker, hostingURL, shipTrackers, slapTrackers, broadcaster, advertiser, syncConfiguration,
  // logTime, logPrefix, throwOnBroadcastFailure, overlayBroadcastFacilitator, logger.
  const engine = new Engine(managers, lookupServices, new KnexStorage(knex), chainTracker,
    undefined, undefined, undefined, undefined, undefined, { [notes.NOTES_TOPIC]: false },
    false, '[demo] ', false, undefined, quietLogger())
  await live.attach(engine)
  return { engine, knex }
}

function badRequest (res, message) {
  res.status(400).json({ status: 'error', message })
}

/** Parses Overlay Express's `x-topics` header: a JSON array of topic names. */
function parseTopics (header) {
  let topics
  try {
    topics = JSON.parse(header)
  } catch (_) {
    return null
  }
  if (!Array.isArray(topics) || topics.length === 0 || topics.length > 16) return null
  return topics.every(t => typeof t === 'string' && t.length > 0 && t.length <= 100) ? topics : null
}

/** Routes of the demo itself, mounted after the live router (they use body parsers). */
function demoRoutes ({ engine, chainTracker, manifest, identity, peers }) {
  const r = express.Router()
  const peerOrigins = new Set(peers.map(p => new URL(p).origin))

  // What the page needs to build notes and to check its own capability digest computation.
  // A page served by a peer node reads it too (to follow this node as a second source).
  r.get('/demo/info', (req, res) => {
    res.setHeader('Cache-Control', 'no-store')
    const origin = req.get('origin')
    if (origin && peerOrigins.has(origin)) {
      res.setHeader('Access-Control-Allow-Origin', origin)
      res.setHeader('Vary', 'Origin')
    }
    res.json({
      identity,
      peers,
      service: SERVICE,
      topic: notes.NOTES_TOPIC,
      marker: notes.NOTES_MARKER,
      protocolID: notes.NOTES_PROTOCOL,
      keyID: notes.NOTES_KEY_ID,
      maxTextBytes: notes.NOTE_TEXT_MAX,
      profile: PROFILE,
      capabilityDigest: manifest.digest(),
      chain: { ...CHAIN, tracker: 'local (development only: synthetic blocks minted by this host)', height: chainTracker.height }
    })
  })

  // Development faucet: a funding transaction paying `address`, proven in a synthetic block that
  // only this host's local chain tracker knows. Nothing here touches a real chain.
  r.post('/demo/fund', express.json({ limit: '4kb' }), (req, res) => {
    const address = req.body && req.body.address
    if (typeof address !== 'string' || address.length > 64) return badRequest(res, 'body must be {"address": "<P2PKH address>"}')
    try {
      new P2PKH().lock(address)
    } catch (_) {
      return badRequest(res, 'not a P2PKH address')
    }
    const funding = mintFunding(chainTracker, address, FAUCET_SATOSHIS)
    res.json({ txid: funding.tx.id('hex'), outputIndex: funding.outputIndex, satoshis: funding.satoshis, beef: Buffer.from(funding.tx.toBEEF()).toString('hex') })
  })

  // Overlay Express's submit: binary BEEF body, topics in `x-topics`.
  r.post('/submit', express.raw({ type: () => true, limit: MAX_SUBMIT_BYTES }), async (req, res) => {
    const topics = parseTopics(req.headers['x-topics'])
    if (!topics) return badRequest(res, 'x-topics must be a JSON array of topic names')
    if (!Buffer.isBuffer(req.body) || req.body.length === 0) return badRequest(res, 'the body must be a BEEF (application/octet-stream)')
    try {
      const steak = await engine.submit({ beef: [...req.body], topics })
      res.json(steak)
    } catch (e) {
      badRequest(res, 'submit failed: ' + String(e && e.message))
    }
  })

  // Overlay Express's lookup (BRC-24, one-shot): used by `demo:publish --withdraw`.
  r.post('/lookup', express.json({ limit: '64kb' }), async (req, res) => {
    const { service, query } = req.body || {}
    if (typeof service !== 'string') return badRequest(res, 'body must be {service, query}')
    try {
      const answer = await engine.lookup({ service, query: query ?? {} })
      res.json(answer)
    } catch (e) {
      badRequest(res, 'lookup failed: ' + String(e && e.message))
    }
  })

  const bundle = sdkBundlePath()
  r.get('/vendor/bsv.js', (req, res) => { res.sendFile(bundle) })
  r.use(express.static(PUBLIC_DIR, { etag: false, maxAge: 0 }))
  return r
}

function listen (app, port, host) {
  return new Promise((resolve, reject) => {
    const server = app ? http.createServer(app) : http.createServer()
    server.listen(port, host)
    server.once('listening', () => resolve(server))
    server.once('error', reject)
  })
}

/**
 * Starts the demo host. `peers` (base URLs of other demo nodes) turns on GASP: the node serves
 * the GASP routes, pulls from every peer every `syncMs`, lets pages served by its peers call it
 * (CORS for their origins) and tells its own page about them (`/demo/info`). `chainTracker`
 * shares one synthetic chain between nodes; `server` is an http.Server already listening (so
 * that nodes can learn each other's URL before any of them starts).
 * @param {{port?: number, dataDir?: string, host?: string, log?: (entry: object) => void,
 *   peers?: string[], syncMs?: number, chainTracker?: LocalChainTracker, server?: import('node:http').Server}} [options]
 * @returns {Promise<{url: string, port: number, dataDir: string, identity: string, createdStore: boolean,
 *   live: LiveLookup, engine: Engine, peers: string[], sync: object|null, close: () => Promise<void>}>}
 */
async function startDemo (options = {}) {
  const dataDir = path.resolve(options.dataDir || 'demo-data')
  const host = options.host || '127.0.0.1'
  const peers = options.peers || []
  fs.mkdirSync(dataDir, { recursive: true })
  const privateKey = loadIdentityKey(dataDir)
  const identity = PrivateKey.fromHex(privateKey).toPublicKey().toString()
  const chainTracker = options.chainTracker || LocalChainTracker.persisted(trackerFile(dataDir))
  const createdStore = !fs.existsSync(path.join(dataDir, 'live'))
  const live = await openLiveStore(dataDir, identity)
  let knex = null
  let server = null
  let sync = null
  try {
    const opened = await openEngine(dataDir, live, chainTracker)
    knex = opened.knex
    const app = express()
    app.set('etag', false)
    app.disable('x-powered-by')
    // Listen first: the advertised base URL needs the actual port (port 0 in tests).
    if (options.server) {
      server = options.server
      server.on('request', app)
    } else {
      server = await listen(app, options.port ?? 8080, host)
    }
    const port = server.address().port
    const url = `http://${host}:${port}`
    // The live router comes first: it reads raw bodies itself and must see them unparsed.
    const router = live.router({
      baseURL: url,
      authentication: 'brc103',
      privateKey,
      allowLocalHttp: true,
      allowedOrigins: peers.map(p => new URL(p).origin),
      log: options.log
    })
    app.use(router)
    if (peers.length > 0) {
      app.use(gaspRouter(opened.engine))
      sync = scheduleGASPSync(opened.engine, { peers, intervalMs: options.syncMs ?? DEFAULT_SYNC_MS, log: options.log })
    }
    app.use(demoRoutes({ engine: opened.engine, chainTracker, manifest: router.manifest, identity, peers }))
    let closed = false
    return {
      url,
      port,
      dataDir,
      identity,
      createdStore,
      live,
      engine: opened.engine,
      peers,
      sync,
      async close () {
        if (closed) return
        closed = true
        if (sync) await sync.stop()
        server.closeAllConnections()
        await new Promise(resolve => server.close(resolve))
        await live.close()
        await knex.destroy()
      }
    }
  } catch (e) {
    if (sync) await sync.stop()
    if (server) { server.closeAllConnections(); server.close() }
    await live.close()
    if (knex) await knex.destroy()
    throw e
  }
}

const NODE_NAMES = 'abcdefghij'

/**
 * Starts `nodes` demo nodes on ports port, port+1, ... (port 0: free ports), each its own
 * provider (identity, Engine, live store, epoch) in `<dataDir>/node-a`, `node-b`, ..., all on
 * one synthetic chain (`<dataDir>/chain-roots.json`), each pulling from all the others by GASP.
 * @param {{nodes: number, port?: number, dataDir?: string, host?: string, syncMs?: number,
 *   log?: (entry: object) => void}} options
 * @returns {Promise<{nodes: object[], close: () => Promise<void>}>}
 */
async function startCluster (options) {
  const count = options.nodes
  if (!Number.isSafeInteger(count) || count < 2 || count > NODE_NAMES.length) throw new RangeError(`nodes must be 2..${NODE_NAMES.length}`)
  const dataDir = path.resolve(options.dataDir || 'demo-data')
  const host = options.host || '127.0.0.1'
  const port = options.port ?? 8080
  fs.mkdirSync(dataDir, { recursive: true })
  const chainTracker = LocalChainTracker.persisted(trackerFile(dataDir))
  const servers = []
  const nodes = []
  const close = async () => {
    // Stop every schedule first: a node still syncing would otherwise call a peer already closed.
    for (const n of nodes) if (n.sync) await n.sync.stop()
    for (const n of nodes.splice(0)) await n.close()
    for (const s of servers.splice(0)) if (s.listening) { s.closeAllConnections(); await new Promise(resolve => s.close(resolve)) }
  }
  try {
    // Every node listens before any starts: each needs the others' URLs.
    for (let i = 0; i < count; i++) servers.push(await listen(null, port === 0 ? 0 : port + i, host))
    const urls = servers.map(s => `http://${host}:${s.address().port}`)
    for (let i = 0; i < count; i++) {
      nodes.push(await startDemo({
        dataDir: path.join(dataDir, 'node-' + NODE_NAMES[i]),
        host,
        server: servers[i],
        peers: urls.filter((_, j) => j !== i),
        syncMs: options.syncMs,
        chainTracker,
        log: options.log
      }))
    }
  } catch (e) {
    await close()
    throw e
  }
  return { nodes, close }
}

function envInt (name, dflt, min, max) {
  if (process.env[name] === undefined || process.env[name] === '') return dflt
  const v = Number(process.env[name])
  if (!Number.isInteger(v) || v < min || v > max) throw new Error(`${name} must be an integer in ${min}..${max}`)
  return v
}

/**
 * @bsv/overlay 0.4.6 builds its GASP instances with logging on at INFO (console.info, four lines
 * per peer per sync): keep the terminal readable by dropping those lines. Errors still show.
 */
function quietGASPInfo () {
  const info = console.info
  console.info = (...args) => {
    if (typeof args[0] === 'string' && args[0].startsWith('[GASP Sync of ') && args[1] === '[INFO]') return
    info(...args)
  }
}

async function main () {
  const port = envInt('PORT', 8080, 0, 65535)
  const count = envInt('DEMO_NODES', 1, 1, NODE_NAMES.length)
  const dataDir = process.env.DEMO_DATA_DIR || 'demo-data'
  const syncMs = envInt('DEMO_SYNC_MS', DEFAULT_SYNC_MS, 1, 3600000)
  let nodes, close
  if (!process.env.DEMO_GASP_LOG) quietGASPInfo()
  if (count === 1) {
    const demo = await startDemo({ port, dataDir, host: process.env.HOST })
    nodes = [demo]
    close = () => demo.close()
  } else {
    ({ nodes, close } = await startCluster({ nodes: count, port, dataDir, host: process.env.HOST, syncMs }))
  }
  for (const demo of nodes) {
    console.log(`overlay-lookup-live demo: ${demo.url}/` + (demo.peers.length ? `  (every node as a source: ${demo.url}/?sources=all)` : ''))
    console.log(`  data directory: ${demo.dataDir} (live store ${demo.createdStore ? 'created' : 'reopened'})`)
    console.log(`  provider identity: ${demo.identity}`)
    if (demo.peers.length) console.log(`  GASP: pulls from ${demo.peers.join(', ')} every ${syncMs} ms`)
  }
  console.log('  chain tracker: LOCAL (development only; no outside network is used)')
  const stop = () => { close().then(() => process.exit(0), () => process.exit(1)) }
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
}

if (require.main === module) {
  main().catch((e) => { console.error(e && e.stack ? e.stack : e); process.exit(1) })
}

module.exports = { startDemo, startCluster, quietGASPInfo, CHAIN, SERVICE }
