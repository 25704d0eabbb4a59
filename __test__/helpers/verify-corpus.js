'use strict'
// Evidence for the differential tests of the native verifier (and its bench): real @bsv/sdk
// transactions in BEEF, spending outputs of parents mined in blocks of a LocalChainTracker.
// Every case is { name, beef: Buffer, txid, limits? }: the bundle is what a provider would
// ship, the txid the one the job names. Randomness comes from a seeded generator, so a
// failing case can be rebuilt from its seed.

const crypto = require('node:crypto')
const {
  Transaction, PrivateKey, P2PKH, LockingScript, UnlockingScript, TransactionSignature, Hash, ECDSA, BigNumber
} = require('@bsv/sdk')
const { LocalChainTracker, SEQUENCE_FINAL } = require('../../demo/chain')
const native = require('../../js/common/native')

/** A small deterministic PRNG (mulberry32). */
function rng (seed) {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6D2B79F5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return {
    next,
    int: (n) => Math.floor(next() * n),
    pick: (xs) => xs[Math.floor(next() * xs.length)],
    bytes: (n) => Array.from({ length: n }, () => Math.floor(next() * 256)),
    chance: (p) => next() < p
  }
}

/** A mined parent paying each locking script (bytes) `satoshis`. */
function minedParent (tracker, lockings, satoshis = 10000) {
  const tx = new Transaction(1, [{
    sourceTXID: crypto.randomBytes(32).toString('hex'), sourceOutputIndex: 0, unlockingScript: new UnlockingScript([]), sequence: SEQUENCE_FINAL
  }], lockings.map(l => ({ lockingScript: LockingScript.fromBinary(l), satoshis })), 0)
  tx.merklePath = tracker.mint(tx.id('hex'))
  return tx
}

/**
 * A signature in checksig form by `key` for input `i` of `tx` with `scope` (any hash type,
 * with or without FORKID or the Chronicle bit), over `subscript` (bytes).
 */
function signInput (tx, i, key, scope, subscript) {
  const input = tx.inputs[i]
  const src = input.sourceTransaction
  const params = {
    sourceTXID: input.sourceTXID ?? src.id('hex'),
    sourceOutputIndex: input.sourceOutputIndex,
    sourceSatoshis: src.outputs[input.sourceOutputIndex].satoshis,
    transactionVersion: tx.version,
    otherInputs: tx.inputs.filter((_, j) => j !== i),
    outputs: tx.outputs,
    inputIndex: i,
    subscript: LockingScript.fromBinary(subscript),
    inputSequence: input.sequence,
    lockTime: tx.lockTime,
    scope
  }
  let raw
  if (TransactionSignature.usesOtdaSingleBug(params)) {
    raw = ECDSA.sign(new BigNumber([1, ...new Array(31).fill(0)]), key, true)
  } else {
    raw = key.sign(Hash.sha256(TransactionSignature.formatBytes(params)))
  }
  return new TransactionSignature(raw.r, raw.s, scope).toChecksigFormat()
}

const push = (data) => new UnlockingScript().writeBin(data).toBinary()

/** The BEEF of `tx` (its sources linked) as a Buffer, and its txid. */
function caseOf (name, tx, extra = {}) {
  return { name, beef: Buffer.from(tx.toBEEF()), txid: tx.id('hex'), ...extra }
}

/** A child spending `parent`'s outputs `indexes` with `unlockings` (bytes each). */
function child (parent, indexes, unlockings, { version = 1, outSatoshis = 1000, lockTime = 0, sequence = SEQUENCE_FINAL, outputs = 1, lock } = {}) {
  const out = Array.from({ length: outputs }, (_, k) => ({ lockingScript: LockingScript.fromBinary(lock ?? [0x51, 0x75 + (k % 2)]), satoshis: outSatoshis }))
  return new Transaction(version, indexes.map((k, j) => ({
    sourceTransaction: parent, sourceOutputIndex: k, unlockingScript: UnlockingScript.fromBinary(unlockings[j]), sequence
  })), out, lockTime)
}

const SCOPES = []
for (const base of [1, 2, 3]) {
  for (const acp of [0, 0x80]) {
    for (const fork of [0, 0x40]) {
      for (const chron of [0, 0x20]) SCOPES.push(base | acp | fork | chron)
    }
  }
}

/**
 * Conditionals with one or two OP_ELSE per OP_IF, spent by a version-2 transaction: after
 * Genesis the node refuses a second OP_ELSE (UNBALANCED_CONDITIONAL), the SDK without
 * explicit flags runs it.
 */
function conditionalCases (tracker) {
  const IF = 0x63; const NOTIF = 0x64; const ELSE = 0x67; const ENDIF = 0x68; const DROP = 0x75
  const locks = {
    'IF 1 ELSE 0 ENDIF': [IF, 0x51, ELSE, 0x00, ENDIF],
    'IF 1 ELSE 0 ELSE 1 ENDIF DROP': [IF, 0x51, ELSE, 0x00, ELSE, 0x51, ENDIF, DROP],
    'NOTIF 0 ELSE 1 ELSE 0 ENDIF 1': [NOTIF, 0x00, ELSE, 0x51, ELSE, 0x00, ENDIF, 0x51],
    'IF IF 1 ELSE 0 ELSE 1 ENDIF ELSE 1 ENDIF': [IF, IF, 0x51, ELSE, 0x00, ELSE, 0x51, ENDIF, ELSE, 0x51, ENDIF]
  }
  const parent = minedParent(tracker, Object.values(locks))
  return Object.keys(locks).map((name, k) => caseOf(`conditional ${name}`, child(parent, [k], [[0x51, 0x51].slice(0, name.startsWith('IF IF') ? 2 : 1)], { version: 2 })))
}

/** P2PKH spends with every hash type (ALL/NONE/SINGLE, ANYONECANPAY, FORKID, Chronicle), both tx versions, 1-3 inputs, outputs fewer than inputs for the SINGLE quirk. */
function sighashCases (tracker, r) {
  const cases = []
  const key = PrivateKey.fromRandom()
  const lock = new P2PKH().lock(key.toAddress()).toBinary()
  for (const scope of [...SCOPES, 0x00, 0x04, 0x1f, 0x41 | 0x04]) {
    for (const version of [1, 2]) {
      const nIn = 1 + r.int(3)
      const parent = minedParent(tracker, Array.from({ length: nIn }, () => lock))
      const tx = child(parent, [...Array(nIn).keys()], Array.from({ length: nIn }, () => []), { version, outputs: r.chance(0.5) ? 1 : nIn, lockTime: r.int(2) ? 0 : 12345, sequence: r.chance(0.3) ? 7 : SEQUENCE_FINAL })
      for (let i = 0; i < nIn; i++) {
        const sig = signInput(tx, i, key, scope, lock)
        tx.inputs[i].unlockingScript = UnlockingScript.fromBinary([...push(sig), ...push(key.toPublicKey().encode(true))])
      }
      cases.push(caseOf(`sighash ${scope.toString(16)} v${version} ${nIn} inputs`, tx))
    }
  }
  return cases
}

/** Bare multisig m-of-n spends: right, reordered, missing and extra signatures, dummies. */
function multisigCases (tracker, r) {
  const cases = []
  const keys = Array.from({ length: 3 }, () => PrivateKey.fromRandom())
  for (const [m, n] of [[1, 1], [1, 2], [2, 3], [3, 3], [0, 2]]) {
    const pubs = keys.slice(0, n).map(k => k.toPublicKey().encode(r.chance(0.8)))
    const lock = [0x50 + m || 0, ...pubs.flatMap(p => push(p)), 0x50 + n, 0xae]
    if (m === 0) lock[0] = 0x00
    for (const variant of ['ok', 'reversed', 'missing', 'dummy', 'wrong key', 'verify']) {
      for (const version of [1, 2]) {
        const l = variant === 'verify' ? [...lock.slice(0, -1), 0xaf, 0x51] : lock
        const parent = minedParent(tracker, [l])
        const tx = child(parent, [0], [[]], { version })
        let signers = keys.slice(0, m)
        if (variant === 'reversed') signers = signers.reverse()
        if (variant === 'missing') signers = signers.slice(1)
        if (variant === 'wrong key') signers = [PrivateKey.fromRandom(), ...signers.slice(1)]
        const scope = r.pick([0x41, 0x43, 0xc1, 0x01])
        const sigs = signers.map(k => signInput(tx, 0, k, scope, l))
        tx.inputs[0].unlockingScript = UnlockingScript.fromBinary([variant === 'dummy' ? 0x51 : 0x00, ...sigs.flatMap(s => push(s))])
        cases.push(caseOf(`multisig ${m}-of-${n} ${variant} v${version}`, tx))
      }
    }
  }
  return cases
}

const N = new BigNumber('FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141', 16)

/** Signature and key encodings: high S (refused in v1, accepted in v2), padded DER, undefined hash types, uncompressed, hybrid and off-curve keys, empty signatures. */
function encodingCases (tracker) {
  const cases = []
  const key = PrivateKey.fromRandom()
  const compressed = key.toPublicKey().encode(true)
  const uncompressed = key.toPublicKey().encode(false)
  const hybrid = [uncompressed[64] % 2 ? 0x07 : 0x06, ...uncompressed.slice(1)]
  const offCurve = [0x02, ...new Array(31).fill(0), 5]
  const p2pkh = pk => [0x76, 0xa9, ...push(Hash.hash160(pk)), 0x88, 0xac]
  const variants = {
    'low S': (sig) => sig,
    'high S': (sig) => { const t = TransactionSignature.fromChecksigFormat(sig); return new TransactionSignature(t.r, N.sub(t.s), t.scope).toChecksigFormat() },
    'padded r': (sig) => { const t = TransactionSignature.fromChecksigFormat(sig); const r = [0, ...t.r.toArray('be')]; const s2 = t.s.toArray('be'); const der = [0x02, r.length, ...r, 0x02, s2.length, ...s2]; return [0x30, der.length, ...der, t.scope] },
    'hash type 0': (sig) => [...sig.slice(0, -1), 0x00],
    'hash type 0x84': (sig) => [...sig.slice(0, -1), 0x84],
    empty: () => []
  }
  for (const version of [1, 2]) {
    for (const [kname, pk] of Object.entries({ compressed, uncompressed, hybrid, 'off curve': offCurve })) {
      for (const [vname, edit] of Object.entries(variants)) {
        const lock = p2pkh(pk)
        const parent = minedParent(tracker, [lock])
        const tx = child(parent, [0], [[]], { version })
        const sig = edit(signInput(tx, 0, key, 0x41, lock))
        tx.inputs[0].unlockingScript = UnlockingScript.fromBinary([...push(sig), ...push(pk)])
        cases.push(caseOf(`encoding ${kname} key, ${vname} signature, v${version}`, tx))
      }
    }
  }
  return cases
}

/** Bundle shapes and ancestry: V2 and Atomic, unconfirmed chains, txid-only parents, bad and future proofs, coinbase depth, amounts over several inputs. */
async function bundleCases (tracker) {
  const { Beef, MerklePath } = require('@bsv/sdk')
  const cases = []
  const key = PrivateKey.fromRandom()
  const lock = new P2PKH().lock(key.toAddress())
  const spend = async (sources, { version = 1, satoshis } = {}) => {
    const tx = new Transaction(version, sources.map(([t, i]) => ({ sourceTransaction: t, sourceOutputIndex: i, unlockingScriptTemplate: new P2PKH().unlock(key), sequence: SEQUENCE_FINAL })),
      [{ lockingScript: lock, satoshis: satoshis ?? sources.reduce((a, [t, i]) => a + t.outputs[i].satoshis, 0) - 100 }], 0)
    await tx.sign()
    return tx
  }
  const mined = (satoshis = 50000) => minedParent(tracker, [lock.toBinary(), lock.toBinary()], satoshis)
  // An unconfirmed chain of three signed spends above a mined parent, in V1, V2 and Atomic form.
  let t = await spend([[mined(), 0]])
  t = await spend([[t, 0]], { version: 2 })
  t = await spend([[t, 0]])
  cases.push(caseOf('chain of 3, V1', t))
  const v2 = new Beef(); v2.mergeTransaction(t)
  cases.push({ name: 'chain of 3, V2', beef: Buffer.from(v2.toBinary()), txid: t.id('hex') })
  cases.push({ name: 'chain of 3, Atomic', beef: Buffer.from(t.toAtomicBEEF()), txid: t.id('hex') })
  // A job naming an ancestor of the bundle's subject: found inside it.
  cases.push({ name: 'ancestor inside the bundle', beef: Buffer.from(t.toBEEF()), txid: t.inputs[0].sourceTransaction.id('hex') })
  // The same parent known only by txid: the chain cannot be checked.
  const p = mined()
  const c = await spend([[p, 0], [p, 1]])
  const only = new Beef(); only.mergeTransaction(c); only.makeTxidOnly(p.id('hex'))
  cases.push({ name: 'txid-only parent', beef: Buffer.from(only.toBinary()), txid: c.id('hex') })
  cases.push(caseOf('two inputs of one parent', c))
  // Two parents, outputs one satoshi above the inputs.
  const q = mined(1000); const r2 = mined(2000)
  cases.push(caseOf('two parents, outputs over inputs', await spend([[q, 0], [r2, 1]], { satoshis: 3001 })))
  cases.push(caseOf('two parents, outputs equal to inputs', await spend([[q, 1], [r2, 0]], { satoshis: 3000 })))
  // A proof claiming the wrong height, and a proof for a block above the tracker's.
  const bad = mined()
  const badTx = await spend([[bad, 0]])
  bad.merklePath = new MerklePath(bad.merklePath.blockHeight + 1, bad.merklePath.path)
  cases.push(caseOf('parent proof at the wrong height', badTx))
  const ahead = minedParent(tracker, [lock.toBinary()])
  ahead.merklePath = new MerklePath(tracker.height + 50, ahead.merklePath.path)
  cases.push(caseOf('proof above the tracker', await spend([[ahead, 0]])))
  // A mined subject at offset 0 (a coinbase): judged against the tracker's height.
  const cb = new Transaction(1, [{ sourceTXID: '00'.repeat(32), sourceOutputIndex: 0xffffffff, unlockingScript: UnlockingScript.fromBinary([0x51]), sequence: SEQUENCE_FINAL }], [{ lockingScript: lock, satoshis: 5000 }], 0)
  const other = crypto.randomBytes(32).toString('hex')
  const height = tracker.height - 150
  cb.merklePath = new MerklePath(height, [[{ offset: 0, hash: cb.id('hex'), txid: true }, { offset: 1, hash: other }]])
  tracker.roots.set(height, cb.merklePath.computeRoot(cb.id('hex')))
  cases.push(caseOf('coinbase 150 blocks deep', cb))
  // Spent by an unmined transaction: the node requires the coinbase to be 100 blocks below the
  // spending block (the next one at the earliest).
  cases.push(caseOf('coinbase 150 blocks deep, spent', await spend([[cb, 0]])))
  const young = new Transaction(1, [{ sourceTXID: '00'.repeat(32), sourceOutputIndex: 0xffffffff, unlockingScript: UnlockingScript.fromBinary([0x52]), sequence: SEQUENCE_FINAL }], [{ lockingScript: lock, satoshis: 5000 }], 0)
  const youngHeight = tracker.height - 50
  young.merklePath = new MerklePath(youngHeight, [[{ offset: 0, hash: young.id('hex'), txid: true }, { offset: 1, hash: crypto.randomBytes(32).toString('hex') }]])
  tracker.roots.set(youngHeight, young.merklePath.computeRoot(young.id('hex')))
  cases.push(caseOf('coinbase 50 blocks deep, spent', await spend([[young, 0]])))
  return cases
}

/** OP_CODESEPARATOR before a signature check: the digest covers the script after the last one executed. */
function codeseparatorCases (tracker, r) {
  const cases = []
  const key = PrivateKey.fromRandom()
  const pk = key.toPublicKey().encode(true)
  const h160 = Hash.hash160(pk)
  const locks = [
    { lock: [...push(pk), 0xab, 0xac], code: [0xac], withKey: false },
    { lock: [0xab, 0x76, 0xa9, ...push(h160), 0x88, 0xab, 0xac], code: [0xac], withKey: true },
    { lock: [0x51, 0x63, 0xab, 0x68, ...push(pk), 0xac], code: [0x68, ...push(pk), 0xac], withKey: false },
    { lock: [0x00, 0x63, 0xab, 0x68, ...push(pk), 0xac], code: [0x00, 0x63, 0xab, 0x68, ...push(pk), 0xac], withKey: false }
  ]
  for (const { lock, code, withKey } of locks) {
    for (const scope of [0x41, 0x01, 0xc3, 0x61, 0x02]) {
      for (const right of [true, false]) {
        const version = scope & 0x20 ? 2 : 1 + r.int(2)
        const parent = minedParent(tracker, [lock])
        const tx = child(parent, [0], [[]], { version })
        const sig = signInput(tx, 0, key, scope, right ? code : lock)
        tx.inputs[0].unlockingScript = UnlockingScript.fromBinary([...push(sig), ...(withKey ? push(pk) : [])])
        cases.push(caseOf(`codeseparator ${Buffer.from(lock.slice(0, 3)).toString('hex')} scope ${scope.toString(16)} ${right ? 'right' : 'whole script'} v${version}`, tx))
      }
    }
  }
  // A signature check inside the unlocking script (v2 only: v1 wants push-only): its script code
  // is the unlocking script after the signature's push is removed.
  for (const scope of [0x41, 0x01, 0x61]) {
    for (const version of [1, 2]) {
      const parent = minedParent(tracker, [[0x69, 0x51]])
      const tx = child(parent, [0], [[]], { version })
      const code = [...push(pk), 0xac]
      const sig = signInput(tx, 0, key, scope, code)
      tx.inputs[0].unlockingScript = UnlockingScript.fromBinary([...push(sig), ...code])
      cases.push(caseOf(`checksig in the unlocking script, scope ${scope.toString(16)} v${version}`, tx))
    }
  }
  return cases
}

// Opcodes the random programs draw from (every byte value appears in the whole-set draw).
const OPS = [
  0x00, 0x4f, 0x50, 0x51, 0x52, 0x53, 0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a,
  0x6b, 0x6c, 0x6d, 0x6e, 0x6f, 0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x7b,
  0x7c, 0x7d, 0x7e, 0x7f, 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x8b, 0x8c,
  0x8d, 0x8e, 0x8f, 0x90, 0x91, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0x9b, 0x9c, 0x9d,
  0x9e, 0x9f, 0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae,
  0xaf, 0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba
]

function randomPush (r) {
  const k = r.int(10)
  if (k < 3) return [0x51 + r.int(16)]
  if (k < 4) return [r.pick([0x00, 0x4f])]
  if (k < 6) {
    // A small script number, sometimes not minimal.
    const n = r.int(1 << 16) - (1 << 15)
    let b = Array.from(new BigNumber(n).toScriptNum())
    if (r.chance(0.15)) b = [...b, r.pick([0x00, 0x80])]
    return b.length ? push(b) : [0x00]
  }
  if (k < 7) return [0x4c, 1, r.int(256)] // a non-minimal push
  return push(r.bytes(r.int(r.chance(0.1) ? 80 : 9)))
}

/** A random program: pushes and opcodes over the whole set (weighted toward ones that run). */
function randomScript (r, len, pushOnly) {
  const out = []
  for (let i = 0; i < len; i++) {
    if (pushOnly || r.chance(0.45)) out.push(...randomPush(r))
    else if (r.chance(0.04)) out.push(r.int(256))
    else out.push(r.pick(OPS))
  }
  return out
}

/** Random locking and unlocking scripts; each child is v1 (strict) or v2 (relaxed). */
function randomScriptCases (tracker, r, count) {
  const cases = []
  const perParent = 25
  for (let start = 0; start < count; start += perParent) {
    const n = Math.min(perParent, count - start)
    const lockings = Array.from({ length: n }, () => {
      const s = randomScript(r, 1 + r.int(12), false)
      return r.chance(0.3) ? [...s, 0x51] : s
    })
    const parent = minedParent(tracker, lockings)
    for (let k = 0; k < n; k++) {
      const version = r.chance(0.5) ? 1 : 2
      const unlocking = randomScript(r, r.int(6), version === 1 ? r.chance(0.9) : r.chance(0.3))
      const tx = child(parent, [k], [unlocking], { version, outSatoshis: r.chance(0.05) ? 20000 : 1000 })
      cases.push(caseOf(`random ${start + k}`, tx))
    }
  }
  return cases
}

/** Malformed scripts: truncated pushes, junk bytes, unbalanced conditionals. */
function malformedCases (tracker, r, count) {
  const lockings = []
  const unlockings = []
  for (let i = 0; i < count; i++) {
    const kind = i % 5
    if (kind === 0) lockings.push([0x51, r.pick([0x4c, 0x4d, 0x4e, 0x05, 0x4b]), ...r.bytes(r.int(3))])
    else if (kind === 1) lockings.push(r.bytes(1 + r.int(20)))
    else if (kind === 2) lockings.push([0x51, 0x63, 0x51, ...(r.chance(0.5) ? [0x67] : []), ...(r.chance(0.5) ? [0x68] : [])])
    else if (kind === 3) lockings.push([0x68, 0x6a, 0x51, 0x63])
    else lockings.push([0x51, 0x63, 0x6a, 0x68, 0x51])
    unlockings.push(r.chance(0.5) ? [0x51] : r.bytes(r.int(4)))
  }
  const parent = minedParent(tracker, lockings)
  return lockings.map((_, k) => caseOf(`malformed ${k}`, child(parent, [k], [unlockings[k]], { version: r.chance(0.5) ? 1 : 2 })))
}

/** A valid 1-input P2PKH spend of a mined parent, and its key. */
async function p2pkhSpend (tracker, { version = 1 } = {}) {
  const key = PrivateKey.fromRandom()
  const parent = minedParent(tracker, [new P2PKH().lock(key.toAddress()).toBinary()], 100000)
  const tx = new Transaction(version, [{ sourceTransaction: parent, sourceOutputIndex: 0, unlockingScriptTemplate: new P2PKH().unlock(key), sequence: SEQUENCE_FINAL }],
    [{ lockingScript: new P2PKH().lock(key.toAddress()), satoshis: 90000 }], 0)
  await tx.sign()
  return tx
}

/**
 * Every single-byte corruption of a valid spend (each byte of the child transaction XORed
 * with `mask`). The job names the txid of the corrupted bytes. `consistent` tells whether
 * the bounded native reader accepts the bundle and the SDK reads the transaction back as itself
 * (its reader does not detect truncation).
 */
function corruptionCases (tx, masks) {
  const beef = Buffer.from(tx.toBEEF())
  const raw = Buffer.from(tx.toBinary())
  const at = beef.lastIndexOf(raw)
  const cases = []
  for (const mask of masks) {
    for (let i = 0; i < raw.length; i++) {
      const b = Buffer.from(beef)
      b[at + i] ^= mask
      const craw = b.subarray(at, at + raw.length)
      const txid = Buffer.from(Hash.hash256(Array.from(craw))).reverse().toString('hex')
      // A count or length made huge sends the SDK's reader (which does not see the end of its
      // input) through billions of reads: only bundles the bounded native reader accepts are
      // given to it.
      let consistent = !/not a BEEF/.test(native.verifyBeef(b, txid).reason)
      if (consistent) {
        try { consistent = Buffer.from(Transaction.fromBinary(Array.from(craw)).toBinary()).equals(craw) } catch { consistent = false }
      }
      cases.push({ name: `corrupt byte ${i} ^ ${mask}`, beef: b, txid, consistent })
    }
  }
  return cases
}

/** Spends at the edges of each bound: memory, script bytes, depth, transactions. */
async function boundCases (tracker) {
  const cases = []
  // Memory: a 100-byte push duplicated (200 bytes on the stack at most) and dropped.
  const parent = minedParent(tracker, [[0x76, 0x87]])
  const tx = child(parent, [0], [push(new Array(100).fill(7))])
  for (const m of [99, 100, 101, 199, 200, 201]) cases.push(caseOf(`memory ${m}`, tx, { limits: { memoryLimit: m } }))
  // Script bytes: unlocking (102: PUSHDATA1, length, 100 bytes) + locking (2).
  for (const s of [103, 104, 105]) cases.push(caseOf(`script bytes ${s}`, tx, { limits: { maxScriptBytes: s } }))
  // Depth and transactions: a chain of 3 unconfirmed spends above a mined parent.
  let prev = minedParent(tracker, [[0x51]])
  for (let d = 0; d < 3; d++) prev = child(prev, [0], [[]], { outSatoshis: 9000 - d, lock: [0x51] })
  for (const d of [2, 3, 4]) cases.push(caseOf(`depth ${d}`, prev, { limits: { maxDepth: d } }))
  for (const t of [3, 4, 5]) cases.push(caseOf(`transactions ${t}`, prev, { limits: { maxTransactions: t } }))
  // Amounts at the edge: outputs equal to the input, one satoshi over.
  const p2 = minedParent(tracker, [[0x51]], 5000)
  cases.push(caseOf('amount equal', child(p2, [0], [[]], { outSatoshis: 5000 })))
  cases.push(caseOf('amount over', child(p2, [0], [[]], { outSatoshis: 5001 })))
  // Numbers: big arithmetic and shifts near the memory bound.
  const p3 = minedParent(tracker, [[0x51, 0x60, 0xb6, 0x82, 0x75, 0x51], [0x51, 0x01, 0x40, 0xb6, 0x01, 0x40, 0xb7, 0x51, 0x87]])
  cases.push(caseOf('lshiftnum', child(p3, [0], [[]], { version: 2 })))
  cases.push(caseOf('lshiftnum memory', child(p3, [0], [[]], { version: 2 }), { limits: { memoryLimit: 2 } }))
  cases.push(caseOf('shift round trip', child(p3, [1], [[]], { version: 2 })))
  return cases
}

module.exports = {
  conditionalCases,
  LocalChainTracker, rng, minedParent, child, signInput, caseOf, p2pkhSpend, sighashCases, multisigCases, codeseparatorCases, encodingCases, bundleCases,
  randomScriptCases, malformedCases, corruptionCases, boundCases, SCOPES
}
