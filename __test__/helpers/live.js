'use strict'
// Shared helpers for tests that drive LiveLookup through its JS API with real
// sled stores in temporary directories.

const fs = require('fs')
const os = require('os')
const path = require('path')
const crypto = require('crypto')
const { LiveLookup } = require('../../js')

const CHAIN = { network: 'test', genesisHash: '00'.repeat(32) }
const PROVIDER = '02' + '11'.repeat(32)

function tempDir (prefix = 'live-') {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix))
}

async function openLive (dataDir, extra = {}) {
  return LiveLookup.open({
    dataDir,
    create: true,
    chain: CHAIN,
    provider: PROVIDER,
    sessionSeconds: 600,
    replaySeconds: 600,
    ...extra
  })
}

/** A plain LookupService, as an operator already runs one. */
function plainService () {
  const seen = []
  return {
    seen,
    admissionMode: 'locking-script',
    spendNotificationMode: 'none',
    async outputAdmittedByTopic (p) { seen.push(['admit', p]) },
    async outputSpent (p) { seen.push(['spent', p]) },
    async outputNoLongerRetainedInHistory (txid, outputIndex, topic) { seen.push(['gone', txid, outputIndex, topic]) },
    async outputEvicted (txid, outputIndex) { seen.push(['evicted', txid, outputIndex]) },
    async lookup () { return [] },
    async getDocumentation () { return 'notes' },
    async getMetaData () { return { name: 'notes', shortDescription: 'notes' } }
  }
}

/** A companion indexing every output by an `author` attribute. */
function notesCompanion (rulesVersion = 1) {
  return {
    rules: { id: 'urn:test:notes-rules:' + rulesVersion, parameters: {} },
    index (output) { return { attributes: { author: 'alice' } } },
    select (query) {
      if (query && query.bad) throw new Error('bad query')
      if (query && query.author) return { where: { eq: ['author', query.author] }, order: 'admission' }
      return { where: { all: true }, order: 'admission' }
    }
  }
}

function txid (n) {
  return crypto.createHash('sha256').update('tx' + n).digest('hex')
}

function admit (n, extra = {}) {
  return {
    op: 'admit',
    service: 'ls_notes',
    txid: txid(n),
    outputIndex: 0,
    topic: 'tm_notes',
    satoshis: 1,
    lockingScript: '51',
    beef: Buffer.from('beef-' + n),
    attributes: { author: 'alice' },
    context: null,
    expiresAt: null,
    ...extra
  }
}

function remove (n, reason = 'evicted', extra = {}) {
  return { op: 'remove', service: 'ls_notes', txid: txid(n), outputIndex: 0, reason, spend: null, ...extra }
}

function requestId () {
  return crypto.randomBytes(16).toString('hex')
}

function openBody (over = {}) {
  return Buffer.from(JSON.stringify({
    version: 1,
    requestId: over.requestId || requestId(),
    service: 'ls_notes',
    query: {},
    limits: { maxBytes: 65536, maxObservations: 100, waitMs: 0 },
    ...over
  }))
}

function readBody (session, cursor, limits = {}) {
  return Buffer.from(JSON.stringify({
    version: 1,
    session,
    cursor,
    limits: { maxBytes: 65536, maxObservations: 100, waitMs: 0, ...limits }
  }))
}

function json (res) {
  return JSON.parse(Buffer.from(res.body).toString('utf8'))
}

const ALICE = { principal: '02' + 'aa'.repeat(32), authenticated: true }
const BOB = { principal: '03' + 'bb'.repeat(32), authenticated: true }

/** Reads until the snapshot is complete; returns all batches. */
async function drainSnapshot (live, first, caller = ALICE, limits = {}) {
  const batches = [first]
  let b = first
  while (!b.snapshotComplete) {
    const res = await live.read(readBody(b.session, b.cursor, limits), caller)
    if (res.status !== 200) throw new Error('read failed: ' + res.status + ' ' + Buffer.from(res.body))
    b = json(res)
    batches.push(b)
  }
  return batches
}

/**
 * A list a test pushes its teardown functions on; after each test they run, newest first
 * (so a server closes before the store it serves).
 */
function cleanupAfterEach () {
  const cleanup = []
  afterEach(async () => {
    while (cleanup.length > 0) await cleanup.pop()()
  })
  return cleanup
}

module.exports = {
  CHAIN, PROVIDER, ALICE, BOB, cleanupAfterEach,
  tempDir, openLive, plainService, notesCompanion, txid, admit, remove,
  requestId, openBody, readBody, json, drainSnapshot
}
