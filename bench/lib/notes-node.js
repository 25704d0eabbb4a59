'use strict'
// A public-mode node for the client benches (verify.js, receipt.js): Express on loopback with
// this package's router and one wrapped notes service, loaded with `txs` ({txid, beef}) in
// commits of 1,000 rows.
const path = require('node:path')
const express = require('express')
const crypto = require('node:crypto')
const { PrivateKey, Transaction, LockingScript, UnlockingScript, P2PKH } = require('@bsv/sdk')
const { SEQUENCE_FINAL } = require('../../demo/chain')
const { LiveLookup, createRouter } = require('../../js')
const { CHAIN, plainService, notesCompanion, admit } = require('../../__test__/helpers/live')

async function serveNotes (dir, txs) {
  let routerRef
  const app = express()
  app.use((req, res, next) => routerRef(req, res, next))
  const server = await new Promise(resolve => { const s = app.listen(0, '127.0.0.1', () => resolve(s)) })
  const origin = `http://127.0.0.1:${server.address().port}`
  const live = await LiveLookup.open({ dataDir: path.join(dir, 'server'), create: true, chain: CHAIN, provider: origin })
  live.wrap('ls_notes', plainService(), notesCompanion())
  routerRef = createRouter(live, { authentication: 'none', baseURL: origin, allowLocalHttp: true, privateKey: PrivateKey.fromRandom().toHex() })
  for (let i = 0; i < txs.length; i += 1000) {
    await live.commit(txs.slice(i, i + 1000).map((t, k) => admit(i + k, { txid: t.txid, beef: Buffer.from(t.beef) })))
  }
  async function close () {
    server.closeAllConnections()
    await new Promise(resolve => server.close(resolve))
    await live.close()
  }
  return { origin, live, close }
}

/**
 * `n` one-input transactions, each spending the OP_TRUE output of its own funding
 * transaction that `tracker` mints a Merkle path for (no signing: a 1,000,000-output
 * catalogue builds in under two minutes); `{txid, beef}` as serveNotes takes them.
 */
function opTrueSpends (tracker, n) {
  const to = new P2PKH().lock(PrivateKey.fromRandom().toAddress())
  const out = []
  for (let i = 0; i < n; i++) {
    const funding = new Transaction(1, [{ sourceTXID: crypto.randomBytes(32).toString('hex'), sourceOutputIndex: 0, unlockingScript: new UnlockingScript([]), sequence: SEQUENCE_FINAL }],
      [{ lockingScript: LockingScript.fromHex('51'), satoshis: 1000 }], 0)
    funding.merklePath = tracker.mint(funding.id('hex'))
    const tx = new Transaction(1, [{ sourceTransaction: funding, sourceOutputIndex: 0, unlockingScript: UnlockingScript.fromHex(''), sequence: SEQUENCE_FINAL }],
      [{ lockingScript: to, satoshis: 900 }], 0)
    out.push({ txid: tx.id('hex'), beef: Buffer.from(tx.toBEEF()) })
  }
  return out
}

module.exports = { serveNotes, opTrueSpends }
