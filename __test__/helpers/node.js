'use strict'
// The one way tests start a whole overlay node on loopback: Express 5 with this package's
// router, a real @bsv/overlay Engine (knex + SQLite) with the wrapped notes LookupService
// (or, with `service`, a plain LookupService and no Engine), the native sled store; and the
// clients and request bodies that talk to it: BRC-103 (`AuthFetch` with its own identity) or
// plain `fetch` in the explicit public mode. `startNode` serves it over HTTP,
// `startEngineNode` is the same node without HTTP; auth-node-child.js and
// fixtures/http-node-child.js run `startNode` in a child process.

const express = require('express')
const { AuthFetch, PrivateKey, ProtoWallet } = require('@bsv/sdk')
const h = require('./live')
const { LiveLookup } = require('../../js')
const { startServer } = require('./net')
const { createTestEngine, NoteFactory } = require('./engine')
const { NotesLookupService } = require('../../demo/notes/NotesLookupService')
const { NotesTopicManager } = require('../../demo/notes/NotesTopicManager')
const { createNotesCompanion } = require('../../demo/notes/notesCompanion')
const { NOTES_TOPIC } = require('../../demo/notes/notesProtocol')
const wire = require('../../js/common/wire')
const { PROFILE } = require('../../js/provider/router')
const { gaspRouter } = require('../../js/provider/gasp')

/**
 * Starts a node. Options, all optional:
 * - `authentication`: 'brc103' (default) or 'none' (the explicit public mode; the provider
 *   is then the origin);
 * - `serverKey`: the provider identity (kept across restarts); `wallet` replaces the router's
 *   default native wallet made from it;
 * - `allowedOrigins`, `log`, `authSessions`: passed to the router as they are;
 * - `baseURL`: the advertised base URL (default the node's own origin), e.g. that of a proxy
 *   in front of it; in the public mode the provider is its origin;
 * - `before(app)`: mounts test routes (or middleware that edits answers) ahead of the router;
 * - `maxWaitMs` (default 20000) and `live`: options of LiveLookup.open, `live` last;
 *   `packageDefaults`: open the store with the package's own defaults (and `live`) instead of
 *   the tests' shorter session and replay windows and wait bound;
 * - `companion`: replaces the notes companion;
 * - `service`: a LookupService wrapped as ls_notes directly, with no Engine (`t` and `inner`
 *   are then null and `submit` is not available; changes go in with `live.commit`);
 * - `innerModes`: modes of the Engine's NotesLookupService; `onInner(inner)`: called with it
 *   once it is initialized, before it is wrapped;
 * - `dir`, `engineDir`: reuse the live store and the Engine's SQLite folder (a restart);
 *   `port`: listen on that port (a restart keeping the origin);
 * - `chainTracker`: shares one synthetic chain between nodes; `gasp`: mounts the GASP routes;
 * - `publicOrigin`: the origin clients reach when a reverse proxy fronts the node (its
 *   baseURL, and in public mode its provider); `direct` in the answer is the node's own.
 * - `basePath`: the path of the advertised baseURL (the router serves under it).
 * `capability` in the answer is the digest of the manifest the router serves now, read from
 * the router itself; like the first request, reading it issues the manifest if none is yet.
 */
async function startNode (options = {}) {
  const authentication = options.authentication || 'brc103'
  const serverKey = options.serverKey || PrivateKey.fromRandom()
  const app = express()
  // Needed under BRC-104 (docs/operators.md); the public mode keeps Express's default.
  if (authentication === 'brc103') app.set('etag', false)
  if (options.before) options.before(app)
  const srv = await startServer(app, options.port || 0)
  const direct = `http://127.0.0.1:${srv.port}`
  // The origin clients reach: the node's own, or a reverse proxy's in front of it.
  const origin = options.publicOrigin || direct
  const base = options.baseURL || origin + (options.basePath || '')
  const provider = authentication === 'brc103' ? serverKey.toPublicKey().toString() : new URL(base).origin
  const core = await startCore(options, options.packageDefaults
    ? { provider, ...options.live }
    : { provider, maxWaitMs: options.maxWaitMs || 20000, ...options.live })
  const { live, t } = core
  const router = live.router({
    baseURL: base,
    authentication,
    privateKey: serverKey.toHex(),
    wallet: options.wallet,
    allowLocalHttp: true,
    allowedOrigins: options.allowedOrigins,
    log: options.log,
    authSessions: options.authSessions
  })
  app.use(router)
  if (options.gasp) app.use(gaspRouter(t.engine))
  let closed = false
  return {
    ...core,
    srv, origin, direct, base, router, serverKey,
    identity: serverKey.toPublicKey().toString(),
    get capability () { return router.manifest.digest() },
    async close () {
      if (closed) return
      closed = true
      await srv.close()
      await core.close()
    }
  }
}

/**
 * The same node without HTTP: a live store on `dir` (a new temporary one unless given; options
 * of LiveLookup.open in `live`, over the tests' defaults unless `packageDefaults`), a real
 * Engine on `engineDir` (a new one unless given) with the notes topic manager and the wrapped
 * notes lookup service, attached; `companion`, `service`, `innerModes`, `onInner` and
 * `chainTracker` as for startNode. Resolves with `{ live, t, inner, factory, dir, submit(),
 * close() }`.
 */
async function startEngineNode (options = {}) {
  return startCore(options, options.live)
}

/** The store and (unless `options.service`) the Engine of a node; `liveOptions` open the store. */
async function startCore (options, liveOptions) {
  const dir = options.dir || h.tempDir()
  const live = options.packageDefaults
    ? await LiveLookup.open({ dataDir: dir, create: true, chain: h.CHAIN, provider: h.PROVIDER, ...liveOptions })
    : await h.openLive(dir, liveOptions)
  const companion = options.companion || createNotesCompanion()
  let t = null
  let inner = null
  if (options.service) {
    live.wrap('ls_notes', options.service, companion)
  } else {
    t = await createTestEngine({
      dir: options.engineDir,
      chainTracker: options.chainTracker,
      managers: { [NOTES_TOPIC]: new NotesTopicManager() },
      lookupServices: async (knex) => {
        inner = new NotesLookupService(knex, options.innerModes)
        await inner.init()
        if (options.onInner) options.onInner(inner)
        return { ls_notes: live.wrap('ls_notes', inner, companion) }
      }
    })
    await live.attach(t.engine)
  }
  const factory = new NoteFactory(t ? t.chainTracker : options.chainTracker)
  return {
    live, t, inner, factory, dir,
    /** Submits and resolves once the group is published (a submit resolves before that). */
    async submit (built) {
      if (!t) throw new Error('this node has no Engine (started with `service`)')
      const steak = await t.engine.submit({ beef: built.beef, topics: [NOTES_TOPIC] })
      await live.published()
      return steak
    },
    async close () {
      if (t) await t.close()
      await live.close()
    }
  }
}

/** The capability digest the node's manifest names (BRC-194 selection header). */
async function capabilityOf (node) {
  const res = await fetch(`${node.base}/overlay/v1/capabilities`)
  if (res.status !== 200) throw new Error('manifest: ' + res.status)
  return wire.digest('capabilities', (await res.json()).body)
}

/**
 * A BRC-103 client posting lookup requests with `wallet` (ProtoWallet or NativeWallet) to the
 * routes under `base` (the advertised baseURL).
 */
function lookupClient (base, capability, wallet) {
  const af = new AuthFetch(wallet)
  return {
    af,
    async post (op, body, headers = {}) {
      const res = await af.fetch(`${base}/overlay/v1/lookup/${op}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-bsv-overlay-capability': capability, 'x-bsv-overlay-profile': PROFILE, ...headers },
        body: JSON.stringify(body)
      })
      return { status: res.status, headers: res.headers, body: await res.json() }
    }
  }
}

/**
 * A BRC-103 client of the identity `key` (a fresh one unless given), naming `capability`
 * or else the one the node's manifest names now.
 */
async function authClient (node, key = PrivateKey.fromRandom(), capability) {
  const client = lookupClient(node.base, capability || await capabilityOf(node), new ProtoWallet(key))
  return { identity: key.toPublicKey().toString(), ...client }
}

/**
 * A client of the explicit public mode, over plain fetch, naming `capability` or else the
 * one the node's manifest names now. `post` sends a string body as it is; `init.headers`
 * are added to the lookup headers, the rest of `init` goes to fetch.
 */
async function publicClient (node, capability) {
  capability = capability || await capabilityOf(node)
  return {
    async post (op, body, init = {}) {
      const res = await fetch(`${node.base}/overlay/v1/lookup/${op}`, {
        method: 'POST',
        body: typeof body === 'string' ? body : JSON.stringify(body),
        ...init,
        headers: { 'content-type': 'application/json', 'cache-control': 'no-store', 'x-bsv-overlay-capability': capability, 'x-bsv-overlay-profile': PROFILE, ...init.headers }
      })
      const raw = await res.text()
      return { status: res.status, headers: res.headers, body: raw ? JSON.parse(raw) : null, raw }
    }
  }
}

const LIMITS = { maxBytes: 65536, maxObservations: 100, waitMs: 0 }

/** An open request for ls_notes; `limits` override the defaults one by one. */
function openReq (query = {}, limits = {}) {
  return { version: 1, requestId: h.requestId(), service: 'ls_notes', query, limits: { ...LIMITS, ...limits } }
}

/** A read request continuing `batch`; `limits` override the defaults one by one. */
function readReq (batch, limits = {}) {
  return { version: 1, session: batch.session, cursor: batch.cursor, limits: { ...LIMITS, ...limits } }
}

/** Reads until the snapshot is complete; returns every batch, the first included. */
async function drain (client, first, limits = {}) {
  const batches = [first]
  let b = first
  while (!b.snapshotComplete) {
    const r = await client.post('read', readReq(b, limits))
    if (r.status !== 200) throw new Error(`read failed: ${r.status} ${JSON.stringify(r.body)}`)
    b = r.body
    batches.push(b)
  }
  return batches
}

/** Opens a session and drains its snapshot: the first batch, every batch, and the last. */
async function openAndDrain (client, query = {}, limits = {}) {
  const r = await client.post('open', openReq(query, limits))
  if (r.status !== 200) throw new Error(`open failed: ${r.status} ${JSON.stringify(r.body)}`)
  const batches = await drain(client, r.body, limits)
  return { first: r.body, batches, end: batches[batches.length - 1] }
}

/** Opens a session and reads until the snapshot is complete; returns the last batch. */
async function openCaughtUp (client, query = {}, limits = {}) {
  return (await openAndDrain(client, query, limits)).end
}

/**
 * The notes companion with an expiry on every note: a note whose text is 'late' expires
 * 200 s from now, any other 100 s from now (tests move the provider's clock past both).
 */
function expiringNotesCompanion () {
  const base = createNotesCompanion()
  const now = Math.floor(Date.now() / 1000)
  return {
    ...base,
    index (output) {
      const r = base.index(output)
      if (r === null) return null
      const text = JSON.parse(JSON.stringify(r.context)).text
      return { ...r, expiresAt: now + (text === 'late' ? 200 : 100) }
    }
  }
}

/** `kind outpoint[ reason]` per observation, per group. */
function summary (batch) {
  return batch.groups.map(g => g.observations.map(o => {
    if (o.kind === 'output') return `output ${o.payload.evidence.txid}.${o.payload.evidence.outputIndex}`
    if (o.kind === 'spend') return `spend ${o.payload.previous.txid}.${o.payload.previous.outputIndex}`
    if (o.kind === 'withdraw') return `withdraw ${o.payload.outpoint.txid}.${o.payload.outpoint.outputIndex} ${o.payload.reason}`
    return o.kind
  }))
}

/**
 * A LiveLookupClient of its own fresh BRC-103 identity on `origin` (loopback HTTP allowed),
 * committing to `store`, with short long polls and quick retries so failover shows in seconds.
 * `options` override any of these.
 */
function brc103LiveClient (origin, store, options = {}) {
  const { LiveLookupClient } = require('../../js/client/client.js')
  return new LiveLookupClient({
    baseURL: origin,
    chain: h.CHAIN,
    allowInsecureHttp: true,
    authFetch: new AuthFetch(new ProtoWallet(PrivateKey.fromRandom())),
    store,
    limits: { waitMs: 1000 },
    retry: { initialMs: 50, maxMs: 200 },
    ...options
  })
}

/**
 * Follows `service` (default ls_notes) with `query` (default {}) until `done(snapshot)` holds,
 * where snapshot is the store's revisionSnapshot (with its sourceKey) taken after the client's
 * verifier, if any, went idle; resolves with that snapshot. Other options go to `follow`.
 */
async function followClientUntil (client, done, { service = 'ls_notes', query = {}, ...opts } = {}) {
  const ac = new AbortController()
  let last = null
  await client.follow(service, query, {
    ...opts,
    signal: ac.signal,
    async onRevision (e) {
      if (client.verifier) await client.verifier.idle()
      last = { ...client.store.revisionSnapshot(e.sourceKey), sourceKey: e.sourceKey }
      if (done(last)) ac.abort()
    }
  })
  return last
}

module.exports = {
  brc103LiveClient,
  followClientUntil,
  startNode,
  startEngineNode,
  capabilityOf,
  lookupClient,
  authClient,
  publicClient,
  openReq,
  readReq,
  drain,
  openAndDrain,
  openCaughtUp,
  summary,
  expiringNotesCompanion,
  NOTES_TOPIC,
  PROFILE
}
