'use strict'
// An authenticated overlay node on real parts for the BRC-103 tests and their
// child processes: a real @bsv/overlay Engine (SQLite) with the notes service
// wrapped by the live layer, the native sled store, and the live router on
// Express over loopback. `wallet` replaces the router's default (the native
// wallet from privateKey); `before(app)` mounts test routes ahead of it.
const express = require('express')
const { AuthFetch, PrivateKey } = require('@bsv/sdk')
const h = require('./live')
const { startServer } = require('./net')
const { createTestEngine, NoteFactory } = require('./engine')
const { NotesLookupService } = require('../../demo/notes/NotesLookupService')
const { NotesTopicManager } = require('../../demo/notes/NotesTopicManager')
const { createNotesCompanion } = require('../../demo/notes/notesCompanion')
const { NOTES_TOPIC } = require('../../demo/notes/notesProtocol')
const wire = require('../../js/wire')
const { PROFILE } = require('../../js/router')

async function startAuthNode ({ wallet, allowedOrigins = [], before, serverKey = PrivateKey.fromRandom(), log, authSessions } = {}) {
  const app = express()
  app.set('etag', false)
  if (before) before(app)
  const srv = await startServer(app)
  const origin = `http://127.0.0.1:${srv.port}`
  const live = await h.openLive(h.tempDir(), { provider: serverKey.toPublicKey().toString(), maxWaitMs: 25000 })
  const t = await createTestEngine({
    managers: { [NOTES_TOPIC]: new NotesTopicManager() },
    lookupServices: async (knex) => {
      const inner = new NotesLookupService(knex)
      await inner.init()
      return { ls_notes: live.wrap('ls_notes', inner, createNotesCompanion()) }
    }
  })
  await live.attach(t.engine)
  const router = live.router({
    baseURL: origin,
    authentication: 'brc103',
    privateKey: serverKey.toHex(),
    wallet,
    allowLocalHttp: true,
    allowedOrigins,
    log,
    authSessions
  })
  app.use(router)
  const capability = wire.digest('capabilities', JSON.parse(router.manifest.bytes()).body)
  const factory = new NoteFactory(t.chainTracker)
  return {
    live, t, srv, origin, router, capability, factory,
    identity: serverKey.toPublicKey().toString(),
    submit: (built) => t.engine.submit({ beef: built.beef, topics: [NOTES_TOPIC] }),
    async close () { await srv.close(); await t.close(); await live.close() }
  }
}

/** A BRC-103 client posting lookup requests with `wallet` (ProtoWallet or NativeWallet). */
function lookupClient (origin, capability, wallet) {
  const af = new AuthFetch(wallet)
  return {
    af,
    async post (op, body, headers = {}) {
      const res = await af.fetch(`${origin}/overlay/v1/lookup/${op}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-bsv-overlay-capability': capability, 'x-bsv-overlay-profile': PROFILE, ...headers },
        body: JSON.stringify(body)
      })
      return { status: res.status, headers: res.headers, body: await res.json() }
    }
  }
}

function openReq (waitMs = 0) {
  return { version: 1, requestId: h.requestId(), service: 'ls_notes', query: {}, limits: { maxBytes: 65536, maxObservations: 100, waitMs } }
}

function readReq (batch, waitMs = 0) {
  return { version: 1, session: batch.session, cursor: batch.cursor, limits: { maxBytes: 65536, maxObservations: 100, waitMs } }
}

/** Opens a session and reads until the snapshot is complete; returns the last batch. */
async function openCaughtUp (client) {
  let b = (await client.post('open', openReq())).body
  while (!b.snapshotComplete) b = (await client.post('read', readReq(b))).body
  return b
}

module.exports = { startAuthNode, lookupClient, openReq, readReq, openCaughtUp, PROFILE }
