'use strict'
// A whole overlay node on loopback for HTTP tests: Express 5 with this package's router,
// a real @bsv/overlay Engine (knex + SQLite) with the wrapped notes LookupService, the
// native sled store, and clients: BRC-103 (`AuthFetch` with its own identity) or plain
// `fetch` in the explicit public mode.

const express = require('express')
const { AuthFetch, PrivateKey, ProtoWallet } = require('@bsv/sdk')
const h = require('./live')
const { startServer } = require('./net')
const { createTestEngine, NoteFactory } = require('./engine')
const { NotesLookupService } = require('../../demo/notes/NotesLookupService')
const { NotesTopicManager } = require('../../demo/notes/NotesTopicManager')
const { createNotesCompanion } = require('../../demo/notes/notesCompanion')
const { NOTES_TOPIC } = require('../../demo/notes/notesProtocol')
const wire = require('../../js/wire')
const { PROFILE } = require('../../js/router')
const { gaspRouter } = require('../../js/gasp')

/**
 * Starts a node. `options.live` goes to LiveLookup.open, `options.companion` replaces the
 * notes companion, `options.dir` and `options.engineDir` reuse the live store and the Engine's
 * SQLite folder (a restart), `options.serverKey` keeps the identity across restarts,
 * `options.chainTracker` shares one synthetic chain between nodes, `options.gasp` mounts the
 * GASP routes, `options.port` listens on that port (a restart keeping the origin).
 */
async function startNode (options = {}) {
  const authentication = options.authentication || 'brc103'
  const serverKey = options.serverKey || PrivateKey.fromRandom()
  const app = express()
  if (authentication === 'brc103') app.set('etag', false) // docs/operators.md
  const srv = await startServer(app, options.port || 0)
  const origin = `http://127.0.0.1:${srv.port}`
  const dir = options.dir || h.tempDir()
  const live = await h.openLive(dir, {
    provider: authentication === 'brc103' ? serverKey.toPublicKey().toString() : origin,
    maxWaitMs: 20000,
    ...options.live
  })
  const companion = options.companion || createNotesCompanion()
  const t = await createTestEngine({
    dir: options.engineDir,
    chainTracker: options.chainTracker,
    managers: { [NOTES_TOPIC]: new NotesTopicManager() },
    lookupServices: async (knex) => {
      const inner = new NotesLookupService(knex)
      await inner.init()
      return { ls_notes: live.wrap('ls_notes', inner, companion) }
    }
  })
  await live.attach(t.engine)
  app.use(live.router({
    baseURL: origin,
    authentication,
    privateKey: serverKey.toHex(),
    allowLocalHttp: true
  }))
  if (options.gasp) app.use(gaspRouter(t.engine))
  const factory = new NoteFactory(t.chainTracker)
  let closed = false
  return {
    live, t, srv, origin, factory, dir, serverKey,
    identity: serverKey.toPublicKey().toString(),
    submit: (built) => t.engine.submit({ beef: built.beef, topics: [NOTES_TOPIC] }),
    async close () {
      if (closed) return
      closed = true
      await srv.close()
      await t.close()
      await live.close()
    }
  }
}

/** The capability digest the node's manifest names (BRC-194 selection header). */
async function capabilityOf (node) {
  const res = await fetch(`${node.origin}/overlay/v1/capabilities`)
  if (res.status !== 200) throw new Error('manifest: ' + res.status)
  return wire.digest('capabilities', (await res.json()).body)
}

/** A BRC-103 client of its own identity, over a real AuthFetch. */
async function authClient (node, key = PrivateKey.fromRandom()) {
  const capability = await capabilityOf(node)
  const af = new AuthFetch(new ProtoWallet(key))
  return {
    identity: key.toPublicKey().toString(),
    af,
    async post (op, body) {
      const res = await af.fetch(`${node.origin}/overlay/v1/lookup/${op}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-bsv-overlay-capability': capability, 'x-bsv-overlay-profile': PROFILE },
        body: JSON.stringify(body)
      })
      return { status: res.status, headers: res.headers, body: await res.json() }
    }
  }
}

/** A client of the explicit public mode, over plain fetch. */
async function publicClient (node) {
  const capability = await capabilityOf(node)
  return {
    async post (op, body, init = {}) {
      const res = await fetch(`${node.origin}/overlay/v1/lookup/${op}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'cache-control': 'no-store', 'x-bsv-overlay-capability': capability, 'x-bsv-overlay-profile': PROFILE },
        body: JSON.stringify(body),
        ...init
      })
      const text = await res.text()
      return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : null }
    }
  }
}

function openReq (query = {}, limits = {}) {
  return { version: 1, requestId: h.requestId(), service: 'ls_notes', query, limits: { maxBytes: 65536, maxObservations: 100, waitMs: 0, ...limits } }
}

function readReq (batch, limits = {}) {
  return { version: 1, session: batch.session, cursor: batch.cursor, limits: { maxBytes: 65536, maxObservations: 100, waitMs: 0, ...limits } }
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

module.exports = { startNode, capabilityOf, authClient, publicClient, openReq, readReq, drain, summary, expiringNotesCompanion, NOTES_TOPIC }
