'use strict'
// Reads the subject transaction of an Atomic BEEF (BRC-95 around BEEF V1, BRC-62, or V2, BRC-96)
// without building @bsv/sdk objects: the lookup-service hooks need only the subject's txid, its
// outputs and its inputs. Ancestors and BUMPs are walked over, never decoded into objects;
// checking proofs and scripts is the Engine's job (it has verified the transaction before it
// calls a hook). Accepts what Transaction.fromAtomicBEEF accepts (the subject is found by its
// txid among the bundle's transactions; bytes after the bundle are ignored, as the SDK does),
// and rejects malformed or truncated input with an Error, never reading past the end.
const { createHash } = require('node:crypto')

const ATOMIC_PREFIX = 0x01010101
const BEEF_V1 = 0xefbe0001
const BEEF_V2 = 0xefbe0002
const TXID_ONLY = 2
const RAWTX_AND_BUMP_INDEX = 1

class Reader {
  constructor (bytes) {
    this.b = bytes
    this.pos = 0
  }

  need (n) {
    if (n > this.b.length - this.pos) throw new Error('Atomic BEEF is truncated')
  }

  u8 () {
    this.need(1)
    return this.b[this.pos++]
  }

  u32 () {
    this.need(4)
    const v = this.b.readUInt32LE(this.pos)
    this.pos += 4
    return v
  }

  /** A Bitcoin varint as a Number; lengths and counts beyond 2^53 cannot fit in any input. */
  varint () {
    const first = this.u8()
    if (first < 0xfd) return first
    if (first === 0xfd) {
      this.need(2)
      const v = this.b.readUInt16LE(this.pos)
      this.pos += 2
      return v
    }
    if (first === 0xfe) return this.u32()
    this.need(8)
    const v = this.b.readBigUInt64LE(this.pos)
    this.pos += 8
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error('Atomic BEEF has an impossible length')
    return Number(v)
  }

  skip (n) {
    this.need(n)
    this.pos += n
  }

  /** Number of items that follow, each at least `minBytes` long (bounds allocation and loops). */
  count (minBytes) {
    const n = this.varint()
    if (n * minBytes > this.b.length - this.pos) throw new Error('Atomic BEEF is truncated')
    return n
  }
}

function txidOf (raw) {
  const once = createHash('sha256').update(raw).digest()
  return createHash('sha256').update(once).digest().reverse().toString('hex')
}

/** Walks over one raw transaction; returns [start, end) of its bytes. */
function skipTx (r) {
  const start = r.pos
  r.skip(4)
  for (let n = r.count(41); n > 0; n--) {
    r.skip(36)
    r.skip(r.varint())
    r.skip(4)
  }
  for (let n = r.count(9); n > 0; n--) {
    r.skip(8)
    r.skip(r.varint())
  }
  r.skip(4)
  return [start, r.pos]
}

/** Walks over one BUMP (BRC-74). */
function skipBump (r) {
  r.varint() // block height
  const treeHeight = r.u8()
  for (let level = 0; level < treeHeight; level++) {
    for (let n = r.count(2); n > 0; n--) {
      r.varint() // offset
      const flags = r.u8()
      if ((flags & 1) === 0) r.skip(32) // flag 1: duplicate of its sibling, no hash
    }
  }
}

/** The fields of a raw transaction the hooks use (script bytes are views into `raw`). */
function readTx (raw) {
  const r = new Reader(raw)
  r.skip(4)
  const inputs = []
  for (let n = r.count(41); n > 0; n--) {
    const sourceTXID = Buffer.from(raw.subarray(r.pos, r.pos + 32)).reverse().toString('hex')
    r.skip(32)
    const sourceOutputIndex = r.u32()
    const len = r.varint()
    r.need(len)
    const unlockingScript = raw.subarray(r.pos, r.pos + len)
    r.skip(len)
    inputs.push({ sourceTXID, sourceOutputIndex, unlockingScript, sequence: r.u32() })
  }
  const outputs = []
  for (let n = r.count(9); n > 0; n--) {
    r.need(8)
    const sats = raw.readBigUInt64LE(r.pos)
    r.skip(8)
    const len = r.varint()
    r.need(len)
    const lockingScript = raw.subarray(r.pos, r.pos + len)
    r.skip(len)
    outputs.push({ satoshis: Number(sats), lockingScript })
  }
  return { inputs, outputs }
}

/**
 * The subject transaction of an Atomic BEEF.
 * @param {Buffer} atomic
 * @returns {{txid: string, inputs: Array<{sourceTXID: string, sourceOutputIndex: number, unlockingScript: Buffer, sequence: number}>, outputs: Array<{satoshis: number, lockingScript: Buffer}>}}
 */
function subjectOfAtomicBeef (atomic) {
  if (!Buffer.isBuffer(atomic)) throw new TypeError('Atomic BEEF must be a Buffer')
  const r = new Reader(atomic)
  if (r.u32() !== ATOMIC_PREFIX) throw new Error('not an Atomic BEEF (BRC-95): missing its prefix')
  r.need(32)
  const subject = Buffer.from(atomic.subarray(4, 36)).reverse().toString('hex')
  r.skip(32)
  const version = r.u32()
  if (version !== BEEF_V1 && version !== BEEF_V2) throw new Error('Atomic BEEF does not hold a BEEF V1 or V2 bundle')
  for (let n = r.count(3); n > 0; n--) skipBump(r)
  const txs = []
  for (let n = r.count(1); n > 0; n--) {
    if (version === BEEF_V2) {
      const format = r.u8()
      if (format === TXID_ONLY) {
        r.skip(32)
        continue
      }
      if (format === RAWTX_AND_BUMP_INDEX) r.varint()
      else if (format !== 0) throw new Error(`Atomic BEEF has an unknown transaction format ${format}`)
      txs.push(skipTx(r))
    } else {
      txs.push(skipTx(r))
      if (r.u8() !== 0) r.varint() // bump index
    }
  }
  // The subject is normally last; look there first.
  for (let i = txs.length - 1; i >= 0; i--) {
    const raw = atomic.subarray(txs[i][0], txs[i][1])
    if (txidOf(raw) === subject) return { txid: subject, ...readTx(raw) }
  }
  throw new Error(`Atomic BEEF does not contain its subject transaction ${subject}`)
}

module.exports = { subjectOfAtomicBeef }
