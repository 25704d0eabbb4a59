'use strict'
// GASP between overlay nodes, for an Express + Engine host (docs/scaling.md). Each node is its
// own provider with its own store and epoch; nodes exchange *transactions* with GASP, the
// overlay network's synchronization protocol, as Overlay Express does. What a node learns
// from a peer goes through its Engine.submit, so its live feed carries it as an ordinary
// group. BRC-193 §6: GASP stays available and never carries a cursor, a session or a private
// response. These routes answer from Engine storage only; nothing here reads the live store.

const express = require('express')
const { Transaction } = require('@bsv/sdk')
const { whenPublished } = require('./ingest')

const MAX_BODY = '64kb'
const MAX_TOPIC_BYTES = 256
const HEX64 = /^[0-9a-f]{64}$/

function badRequest (res, message) {
  res.status(400).json({ status: 'error', code: 'ERR_BAD_REQUEST', description: message })
}

/** The topics the Engine manages (GASP syncs one topic at a time). */
function managedTopics (engine) {
  return Object.keys(engine.managers || {})
}

function isIndex (v) {
  return Number.isSafeInteger(v) && v >= 0 && v <= 0xffffffff
}

/**
 * One transaction of an output's history as a GASP node: taken from the BEEF the Engine
 * stored for the graph's root output, where every unproven ancestor is. @bsv/overlay 0.4.6's
 * own provideForeignGASPNode walks every input of the root and fails ('Incomplete SPV data')
 * as soon as one branch reaches a proven ancestor before the transaction asked for, so a
 * transaction with two inputs (a note spent together with a funding input) could never be
 * synced (docs/engine-notes.md). It is still asked for what the root's BEEF does not hold.
 */
async function gaspNode (engine, graphID, txid, outputIndex) {
  const [rootTxid, rootIndex] = graphID.split('.')
  const root = await engine.storage.findOutput(rootTxid, Number(rootIndex), undefined, undefined, true)
  if (root && root.beef) {
    let tx = null
    try {
      tx = Transaction.fromBEEF(Array.from(root.beef), txid)
    } catch (_) {
      tx = null // not in this BEEF: an older part of the history
    }
    if (tx !== null) {
      const node = { graphID, rawTx: tx.toHex(), outputIndex }
      if (tx.merklePath) node.proof = tx.merklePath.toHex()
      return node
    }
  }
  return engine.provideForeignGASPNode(graphID, txid, outputIndex)
}

/**
 * An Express router with the two routes a GASP peer calls (the paths Overlay Express serves):
 * `POST /requestSyncResponse` (header `X-BSV-Topic`, body `{version, since, limit?}`): the
 * UTXOs of that topic admitted since a score; `POST /requestForeignGASPNode` (body
 * `{graphID, txid, outputIndex}`): one transaction of an output's history. Unauthenticated,
 * like Overlay Express: what they serve is public transaction data the Engine would send to
 * any peer. Only managed topics are answered; bodies are bounded.
 * @param {object} engine an @bsv/overlay Engine
 * @param {{ topics?: string[], log?: (entry: object) => void }} [options]
 */
function gaspRouter (engine, options = {}) {
  if (engine === null || typeof engine !== 'object' || typeof engine.provideForeignSyncResponse !== 'function' ||
      typeof engine.provideForeignGASPNode !== 'function') {
    throw new TypeError('gaspRouter needs an @bsv/overlay Engine')
  }
  const topics = new Set(options.topics || managedTopics(engine))
  const log = typeof options.log === 'function' ? options.log : () => {}
  const router = express.Router()
  const json = express.json({ limit: MAX_BODY })

  router.post('/requestSyncResponse', json, async (req, res) => {
    const topic = req.get('x-bsv-topic')
    if (typeof topic !== 'string' || Buffer.byteLength(topic) > MAX_TOPIC_BYTES || !topics.has(topic)) {
      return badRequest(res, 'X-BSV-Topic must name a topic this node synchronizes')
    }
    const body = req.body
    if (body === null || typeof body !== 'object' || !Number.isFinite(body.since) ||
        (body.limit !== undefined && !(Number.isSafeInteger(body.limit) && body.limit > 0))) {
      return badRequest(res, 'body must be a GASP initial request { version, since, limit? }')
    }
    try {
      res.status(200).json(await engine.provideForeignSyncResponse(body, topic))
    } catch (e) {
      log({ op: 'gasp', route: 'requestSyncResponse', topic, error: String(e && e.message) })
      res.status(500).json({ status: 'error', code: 'ERR_GASP', description: 'the sync response could not be built' })
    }
  })

  router.post('/requestForeignGASPNode', json, async (req, res) => {
    const { graphID, txid, outputIndex } = req.body || {}
    const parts = typeof graphID === 'string' ? graphID.split('.') : []
    if (parts.length !== 2 || !HEX64.test(parts[0]) || !isIndex(Number(parts[1])) || String(Number(parts[1])) !== parts[1] ||
        typeof txid !== 'string' || !HEX64.test(txid) || !isIndex(outputIndex)) {
      return badRequest(res, 'body must be { graphID: "<txid>.<index>", txid, outputIndex }')
    }
    try {
      res.status(200).json(await gaspNode(engine, graphID, txid, outputIndex))
    } catch (e) {
      // The Engine throws when it holds no such output: the peer learns only that.
      res.status(404).json({ status: 'error', code: 'ERR_NOT_FOUND', description: 'no such output in this node\'s history' })
    }
  })
  return router
}

/**
 * Runs `engine.startGASPSync()` every `intervalMs` against `peers` (base URLs of other nodes
 * serving gaspRouter), for every topic in `topics` (default: all the Engine manages). Runs
 * never overlap; the timer does not keep Node alive; failures are logged and the next run
 * tries again. `syncNow()` runs one sync at once (or joins the running one) and resolves once
 * the groups of what it submitted are published; `stop()` ends the schedule and waits for a
 * running sync.
 * @param {object} engine an @bsv/overlay Engine
 * @param {{ peers: string[], intervalMs?: number, topics?: string[], log?: (entry: object) => void }} options
 */
function scheduleGASPSync (engine, options) {
  if (engine === null || typeof engine !== 'object' || typeof engine.startGASPSync !== 'function') {
    throw new TypeError('scheduleGASPSync needs an @bsv/overlay Engine')
  }
  const { peers, intervalMs = 30_000 } = options || {}
  if (!Array.isArray(peers) || peers.some(p => typeof p !== 'string' || !/^https?:\/\/[^/]+/.test(p))) {
    throw new TypeError('scheduleGASPSync needs peers: base URLs of other nodes')
  }
  if (!(Number.isSafeInteger(intervalMs) && intervalMs >= 0)) throw new TypeError('intervalMs must be a non-negative integer')
  const topics = options.topics || managedTopics(engine)
  const log = typeof options.log === 'function' ? options.log : () => {}
  // startGASPSync reads the Engine's sync configuration: each topic syncs with these peers.
  const list = peers.map(p => p.replace(/\/+$/, ''))
  engine.syncConfiguration = { ...(engine.syncConfiguration || {}) }
  for (const topic of topics) engine.syncConfiguration[topic] = list

  let running = null
  let timer = null
  const syncNow = () => {
    if (running) return running
    const started = Date.now()
    // A run ends once what it learned is in the live feed: a live-attached Engine's submits
    // resolve before their groups are published.
    running = engine.startGASPSync()
      .then(() => whenPublished(engine))
      .then(() => log({ op: 'gasp-sync', peers: list.length, ms: Date.now() - started }))
      .catch((e) => log({ op: 'gasp-sync', error: String(e && e.message) }))
      .finally(() => { running = null })
    return running
  }
  if (intervalMs > 0) {
    timer = setInterval(syncNow, intervalMs)
    timer.unref()
  }
  return {
    syncNow,
    async stop () {
      if (timer) clearInterval(timer)
      timer = null
      if (running) await running
    }
  }
}

module.exports = { gaspRouter, scheduleGASPSync }
