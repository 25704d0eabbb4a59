'use strict'
// The hooks' Atomic BEEF reader (the native beefSubject, src/bitcoin/beef.rs, the reader the client
// uses too) against @bsv/sdk's Transaction.fromAtomicBEEF on REAL signed transactions from
// NoteFactory, in the bundle forms the Engine (sdk 1.x, BEEF V1) and the sdk 2.x (BEEF V2) write;
// and on truncated and corrupted input, which must get an Error.
const path = require('node:path')
const { Transaction, Beef } = require('@bsv/sdk')
const { NoteFactory, LocalChainTracker } = require('./helpers/engine')
const { beefSubject: subjectOfAtomicBeef } = require('../js/common/native')

// The @bsv/sdk the Engine uses (0.4.6 nests 1.x): its toAtomicBEEF is what whole-tx hooks receive.
const hostSdk = require(require.resolve('@bsv/sdk', { paths: [path.dirname(require.resolve('@bsv/overlay'))] }))

function sdkView (atomic) {
  const t = Transaction.fromAtomicBEEF(Array.from(atomic))
  return {
    txid: t.id('hex'),
    inputs: t.inputs.map(i => [i.sourceTXID ?? i.sourceTransaction.id('hex'), i.sourceOutputIndex, i.unlockingScript.toHex(), i.sequence]),
    outputs: t.outputs.map(o => [o.satoshis, o.lockingScript.toHex()])
  }
}

function ourView (atomic) {
  const s = subjectOfAtomicBeef(Buffer.from(atomic))
  return {
    txid: s.txid,
    inputs: s.inputs.map(i => [i.sourceTXID, i.sourceOutputIndex, i.unlockingScript.toString('hex'), i.sequence]),
    outputs: s.outputs.map(o => [o.satoshis, o.lockingScript.toString('hex')])
  }
}

/** Real transactions: new notes, a replacement (unproven parent in the ancestry), a two-note spend. */
async function samples () {
  const f = new NoteFactory(new LocalChainTracker())
  const a = await f.createNotes(['first', 'second'])
  const b = await f.replaceNote(a.notes[0], 'third')
  const c = await f.spendNotes([a.notes[1], b.notes[0]], { fundingAt: 2 })
  const d = await f.build({ notes: ['x'.repeat(300)], plainOutputs: 3 })
  const out = []
  for (const built of [a, b, c, d]) {
    // Engine form: sdk 1.x parses the submitted BEEF and writes BEEF V1 inside the atomic prefix.
    out.push({ name: `engine ${built.txid.slice(0, 8)}`, atomic: Buffer.from(hostSdk.Transaction.fromBEEF(built.beef).toAtomicBEEF()) })
    // sdk 2.x form: BEEF V2.
    const beef = new Beef()
    beef.mergeTransaction(built.tx)
    out.push({ name: `v2 ${built.txid.slice(0, 8)}`, atomic: Buffer.from(beef.toBinaryAtomic(built.txid)) })
  }
  return out
}

let cases
beforeAll(async () => { cases = await samples() })

test('the Engine writes BEEF V1 and the sdk 2.x BEEF V2: both forms are covered', () => {
  const versions = new Set(cases.map(c => c.atomic.subarray(36, 40).toString('hex')))
  expect(versions).toEqual(new Set(['0100beef', '0200beef']))
})

test('reads the same subject transaction as Transaction.fromAtomicBEEF', () => {
  for (const { name, atomic } of cases) {
    expect({ name, ...ourView(atomic) }).toEqual({ name, ...sdkView(atomic) })
  }
})

test('every truncation is an Error', () => {
  for (const { atomic } of cases) {
    for (let len = 0; len < atomic.length; len++) {
      expect(() => subjectOfAtomicBeef(atomic.subarray(0, len))).toThrow(/truncated|prefix|BEEF/)
    }
  }
})

test('a corrupted byte is an Error unless it lies outside the subject (then the answer is unchanged)', () => {
  let accepted = 0
  let rejected = 0
  for (const { atomic } of cases) {
    const expected = ourView(atomic)
    for (let pos = 0; pos < atomic.length; pos++) {
      for (const flip of [0x01, 0x80, 0xff]) {
        const bad = Buffer.from(atomic)
        bad[pos] ^= flip
        let got
        try {
          got = ourView(bad)
        } catch (e) {
          // Native errors come from Node's realm, not Jest's: check the shape, not the class.
          expect(e).toMatchObject({ code: 'invalid', message: expect.any(String) })
          rejected++
          continue
        }
        // The subject is identified by hashing its bytes, so whatever is accepted is the original.
        expect(got).toEqual(expected)
        accepted++
      }
    }
  }
  expect(rejected).toBeGreaterThan(0)
  expect(accepted).toBeGreaterThan(0) // corruptions of ancestors' scripts or of BUMP hashes
})

test('bad framing gets a clean Error, huge counts are refused without allocating', () => {
  const { atomic } = cases[0]
  expect(() => subjectOfAtomicBeef(Array.from(atomic))).toThrow(/Buffer/)
  expect(() => subjectOfAtomicBeef(Buffer.alloc(0))).toThrow(/truncated/)
  const noPrefix = Buffer.from(atomic.subarray(36))
  expect(() => subjectOfAtomicBeef(noPrefix)).toThrow(/prefix/)
  const wrongVersion = Buffer.from(atomic)
  wrongVersion[36] = 0x03
  expect(() => subjectOfAtomicBeef(wrongVersion)).toThrow(/V1 or V2/)
  // The BUMP count replaced by a 64-bit varint of 2^53 - 1.
  const huge = Buffer.concat([atomic.subarray(0, 40), Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0x00]), atomic.subarray(41)])
  expect(() => subjectOfAtomicBeef(huge)).toThrow(/truncated/)
  const beyond = Buffer.concat([atomic.subarray(0, 40), Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]), atomic.subarray(41)])
  expect(() => subjectOfAtomicBeef(beyond)).toThrow(/truncated/)
  // Another transaction's txid as the subject.
  const otherSubject = Buffer.from(atomic)
  otherSubject[4] ^= 1
  expect(() => subjectOfAtomicBeef(otherSubject)).toThrow(/does not hold its subject/)
  // Errors carry the BRC-192 code.
  expect(() => subjectOfAtomicBeef(otherSubject)).toThrow(expect.objectContaining({ code: 'invalid' }))
})
