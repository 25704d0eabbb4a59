'use strict'
// A development-only chain view (exported from the package root; the demo and the shipped example
// host use it): a host that runs with no outside network, so nothing can prove a
// transaction against the real chain. Instead this tracker mints synthetic blocks for funding
// transactions it creates itself and accepts exactly those merkle roots. BEEFs stay SPV-valid
// (real merkle paths, real scripts, real signatures); only the chain they point to is local.
const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const { MerklePath, Transaction, P2PKH, UnlockingScript } = require('@bsv/sdk')

const SEQUENCE_FINAL = 0xffffffff
const START_HEIGHT = 800000

/**
 * A ChainTracker that knows only the blocks it minted: each synthetic block has two leaves, a
 * random stand-in coinbase at offset 0 and the funding transaction at offset 1 (MerklePath.verify
 * treats offset 0 as a coinbase, which fails once the tip is 100 blocks above it).
 *
 * With `file`, the known roots are persisted (JSON, rewritten atomically after every mint, before
 * the path is handed out), so BEEFs minted before a restart still verify after it.
 */
class LocalChainTracker {
  /** @param {number} [startHeight] @param {{file?: string}} [options] */
  constructor (startHeight = START_HEIGHT, options = {}) {
    this.roots = new Map()
    this.height = startHeight
    this.file = options.file || null
    if (this.file && fs.existsSync(this.file)) this.load()
  }

  /** Opens (or starts) a tracker persisted in `file`. */
  static persisted (file) {
    return new LocalChainTracker(START_HEIGHT, { file })
  }

  load () {
    const saved = JSON.parse(fs.readFileSync(this.file, 'utf8'))
    if (!Number.isSafeInteger(saved.height) || typeof saved.roots !== 'object' || saved.roots === null) {
      throw new Error(`chain tracker file ${this.file} is malformed`)
    }
    this.height = saved.height
    for (const [h, root] of Object.entries(saved.roots)) this.roots.set(Number(h), root)
  }

  save () {
    const tmp = this.file + '.tmp'
    const data = JSON.stringify({ height: this.height, roots: Object.fromEntries(this.roots) })
    fs.writeFileSync(tmp, data)
    fs.renameSync(tmp, this.file) // atomic replace: a crash leaves the old or the new file, never half
  }

  /** Mints a block holding txid at offset 1 and returns its MerklePath. */
  mint (txid) {
    this.height += 1
    const coinbase = crypto.randomBytes(32).toString('hex')
    const merklePath = new MerklePath(this.height, [[
      { offset: 0, hash: coinbase },
      { offset: 1, hash: txid, txid: true }
    ]])
    this.roots.set(this.height, merklePath.computeRoot(txid))
    if (this.file) this.save()
    return merklePath
  }

  async isValidRootForHeight (root, height) {
    return this.roots.get(height) === root
  }

  async currentHeight () {
    return this.height
  }
}

/**
 * A proven funding transaction (in a freshly minted synthetic block) paying one P2PKH output to
 * `address`. Its single input spends a random, nonexistent outpoint: it is never checked, since a
 * proven transaction's inputs are not validated by SPV.
 */
function mintFunding (chainTracker, address, satoshis = 100000) {
  const tx = new Transaction(1, [{
    sourceTXID: crypto.randomBytes(32).toString('hex'),
    sourceOutputIndex: 0,
    unlockingScript: new UnlockingScript([]),
    sequence: SEQUENCE_FINAL
  }], [{ lockingScript: new P2PKH().lock(address), satoshis }], 0)
  tx.merklePath = chainTracker.mint(tx.id('hex'))
  return { tx, outputIndex: 0, satoshis }
}

/** Path of the tracker file inside a demo data directory. */
function trackerFile (dataDir) {
  return path.join(dataDir, 'chain-roots.json')
}

module.exports = { LocalChainTracker, mintFunding, trackerFile, SEQUENCE_FINAL }
