'use strict'
// The client-scale catalogue (bench/sections/clientscale.js): N outputs, each a real signed
// P2PKH transaction (@bsv/sdk's P2PKH template) spending the P2PKH output of a proven parent,
// served as Atomic BEEF. The parents sit in synthetic blocks of 2^16 transactions (a stand-in
// coinbase, the parents, and filler leaves), so every Merkle path has 16 levels as in a busy
// block, whatever N: about 955 bytes of Atomic BEEF per output, and the verifier checks a real
// path. A LocalChainTracker (demo/chain) knows exactly those blocks' roots.
//
// Signing 100,000 transactions in JS takes minutes, so the built catalogue is cached under
// the bench tmp dir, keyed by N and CATALOGUE_VERSION:
//   catalogue.bin  per output: txid (32 bytes, display order), u32 LE length, Atomic BEEF
//   tracker.json   the LocalChainTracker's state (LocalChainTracker.persisted reads it)
//   meta.json      written last, so a cache without it is an interrupted build
// A rerun reuses it; the build time is reported on its own, never in a row's time.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { PrivateKey, Transaction, MerklePath, P2PKH, UnlockingScript } = require('@bsv/sdk')
const { LocalChainTracker, SEQUENCE_FINAL } = require('../../demo/chain')

// Bump when what is built changes, so an old cache is not taken for a new one.
const CATALOGUE_VERSION = 'p2pkh-v1'
const BLOCK_LEVELS = 16
const BLOCK_LEAVES = 1 << BLOCK_LEVELS
const PARENT_SATOSHIS = 1000
const OUTPUT_SATOSHIS = 900

function cacheDir (n, root = os.tmpdir()) {
  return path.join(root, `oll-bench-cache-${n}-${CATALOGUE_VERSION}`)
}

function sha256d (buf) {
  return crypto.createHash('sha256').update(crypto.createHash('sha256').update(buf).digest()).digest()
}

// Display-order hex (as txids are written) <-> internal byte order (as they are hashed).
const toInternal = hex => Buffer.from(hex, 'hex').reverse()
const toDisplay = buf => Buffer.from(buf).reverse().toString('hex')

/**
 * A full Merkle tree over `leaves` (internal byte order, a power of two of them):
 * levels[0] are the leaves, levels[BLOCK_LEVELS] the root.
 */
function merkleTree (leaves) {
  const levels = [leaves]
  for (let l = leaves; l.length > 1;) {
    const up = new Array(l.length / 2)
    for (let i = 0; i < up.length; i++) up[i] = sha256d(Buffer.concat([l[2 * i], l[2 * i + 1]]))
    levels.push(up)
    l = up
  }
  return levels
}

/** The BRC-74 path of leaf `index`: itself and its sibling at level 0, one sibling above. */
function pathOf (levels, height, index) {
  const path = [[
    { offset: index, hash: toDisplay(levels[0][index]), txid: true },
    { offset: index ^ 1, hash: toDisplay(levels[0][index ^ 1]) }
  ].sort((a, b) => a.offset - b.offset)]
  for (let h = 1; h < BLOCK_LEVELS; h++) {
    const offset = (index >> h) ^ 1
    path.push([{ offset, hash: toDisplay(levels[h][offset]) }])
  }
  return new MerklePath(height, path)
}

/** A parent paying one P2PKH output; its input is never checked (a proven transaction's is not). */
function parentTx (lock) {
  return new Transaction(1, [{
    sourceTXID: crypto.randomBytes(32).toString('hex'),
    sourceOutputIndex: 0,
    unlockingScript: new UnlockingScript([]),
    sequence: SEQUENCE_FINAL
  }], [{ lockingScript: lock, satoshis: PARENT_SATOSHIS }], 0)
}

/**
 * Mints one synthetic block holding `parents` (offset 0 is a stand-in coinbase, as in
 * LocalChainTracker.mint) and gives each parent its Merkle path.
 */
function mintBlock (tracker, parents) {
  const leaves = new Array(BLOCK_LEAVES)
  for (let i = 0; i < BLOCK_LEAVES; i++) leaves[i] = crypto.randomBytes(32)
  parents.forEach((tx, k) => { leaves[k + 1] = toInternal(tx.id('hex')) })
  const levels = merkleTree(leaves)
  tracker.height += 1
  tracker.roots.set(tracker.height, toDisplay(levels[BLOCK_LEVELS][0]))
  parents.forEach((tx, k) => { tx.merklePath = pathOf(levels, tracker.height, k + 1) })
}

/** Builds the catalogue into `dir` (which must not exist yet holding a finished one). */
async function build (n, dir, log = () => {}) {
  const t0 = performance.now()
  const key = PrivateKey.fromRandom()
  // The template derives the public key for every signature (a second scalar multiplication,
  // half the build time); it is the same key each time.
  const publicKey = key.toPublicKey()
  key.toPublicKey = () => publicKey
  const lock = new P2PKH().lock(key.toAddress())
  const to = new P2PKH().lock(PrivateKey.fromRandom().toAddress())
  const tracker = new LocalChainTracker()
  fs.mkdirSync(dir, { recursive: true })
  const fd = fs.openSync(path.join(dir, 'catalogue.bin'), 'w')
  let beefBytes = 0
  let minBeef = Infinity
  let maxBeef = 0
  try {
    const perBlock = BLOCK_LEAVES - 1
    for (let start = 0; start < n; start += perBlock) {
      const parents = []
      for (let i = start; i < Math.min(n, start + perBlock); i++) parents.push(parentTx(lock))
      mintBlock(tracker, parents)
      for (const parent of parents) {
        const tx = new Transaction(1, [{ sourceTransaction: parent, sourceOutputIndex: 0, unlockingScriptTemplate: new P2PKH().unlock(key), sequence: SEQUENCE_FINAL }],
          [{ lockingScript: to, satoshis: OUTPUT_SATOSHIS }], 0)
        await tx.sign()
        const beef = Buffer.from(tx.toAtomicBEEF())
        const head = Buffer.alloc(36)
        Buffer.from(tx.id('hex'), 'hex').copy(head, 0)
        head.writeUInt32LE(beef.length, 32)
        fs.writeSync(fd, head)
        fs.writeSync(fd, beef)
        beefBytes += beef.length
        minBeef = Math.min(minBeef, beef.length)
        maxBeef = Math.max(maxBeef, beef.length)
        const done = start + parents.indexOf(parent) + 1
        if (done % 10000 === 0) log(`catalogue: ${done} of ${n} transactions signed`)
      }
    }
  } finally {
    fs.closeSync(fd)
  }
  tracker.file = path.join(dir, 'tracker.json')
  tracker.save()
  const meta = {
    version: CATALOGUE_VERSION,
    outputs: n,
    blockLevels: BLOCK_LEVELS,
    lockingScript: to.toHex(),
    satoshis: OUTPUT_SATOSHIS,
    beefBytes: { mean: beefBytes / n, min: minBeef, max: maxBeef },
    buildSeconds: (performance.now() - t0) / 1000,
    builtAt: new Date().toISOString()
  }
  fs.writeFileSync(path.join(dir, 'meta.json'), JSON.stringify(meta, null, 2) + '\n')
  return meta
}

function readMeta (dir) {
  try {
    return JSON.parse(fs.readFileSync(path.join(dir, 'meta.json'), 'utf8'))
  } catch (e) {
    if (e.code === 'ENOENT') return null
    throw e
  }
}

/**
 * The catalogue of `n` outputs, built unless cached: {dir, meta, cached}. The build goes to a
 * directory of its own and is renamed into place, so an interrupted build or a concurrent
 * one never leaves a half-built cache where a later run would take it.
 */
async function ensure (n, { root = os.tmpdir(), log } = {}) {
  const dir = cacheDir(n, root)
  const meta = readMeta(dir)
  if (meta && meta.outputs === n && meta.version === CATALOGUE_VERSION) return { dir, meta, cached: true }
  const building = fs.mkdtempSync(dir + '.building-')
  try {
    const built = await build(n, building, log)
    // Another run may have finished the same catalogue meanwhile: then its copy is used.
    if (!readMeta(dir)) {
      fs.rmSync(dir, { recursive: true, force: true }) // an interrupted build's leftovers
      fs.renameSync(building, dir)
    }
    return { dir, meta: built, cached: false }
  } finally {
    fs.rmSync(building, { recursive: true, force: true })
  }
}

/** The cached transactions as serveNotes takes them: [{txid, beef}]. */
function readTransactions (dir) {
  const buf = fs.readFileSync(path.join(dir, 'catalogue.bin'))
  const out = []
  for (let at = 0; at < buf.length;) {
    const txid = buf.toString('hex', at, at + 32)
    const len = buf.readUInt32LE(at + 32)
    out.push({ txid, beef: buf.subarray(at + 36, at + 36 + len) })
    at += 36 + len
  }
  return out
}

/** A LocalChainTracker that knows the catalogue's blocks (read from the cache). */
function trackerOf (dir) {
  const tracker = LocalChainTracker.persisted(path.join(dir, 'tracker.json'))
  tracker.file = null // read only: nothing mints into the cache
  return tracker
}

module.exports = { CATALOGUE_VERSION, cacheDir, ensure, readTransactions, trackerOf }
