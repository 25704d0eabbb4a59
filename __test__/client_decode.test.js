'use strict'
// The decoders of what a follow delivers (js/client/decode.js), on real payloads: a real node
// (helpers/node.js: LiveLookup behind the router on Express over loopback, a real @bsv/overlay
// Engine with the notes companion) publishes a note and its replacement; the client follows
// into a real sled store and decodes each committed batch and the members' contexts.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { Transaction } = require('@bsv/sdk')
const { LiveLookupClient, CheckpointStore, decodeBatch, decodeContext, decodeObservation, LEGACY_CONTEXT_SCHEMA } = require('../js/client/client.js')
const { CHAIN } = require('./helpers/live')
const { LocalChainTracker, NoteFactory } = require('./helpers/engine')
const { startNode } = require('./helpers/node')

let dir, node
beforeEach(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-decode-')) })
afterEach(async () => {
  if (node) await node.close()
  node = null
  fs.rmSync(dir, { recursive: true, force: true })
})

const txidOf = beef => Transaction.fromBEEF([...beef]).id('hex')

test('output, spend and withdraw payloads and member contexts decode to their documented shapes', async () => {
  const tracker = new LocalChainTracker()
  node = await startNode({ authentication: 'none', packageDefaults: true, dir: path.join(dir, 'server'), chainTracker: tracker })
  const factory = new NoteFactory(tracker)
  const first = await factory.createNotes(['v1'])
  await node.submit(first)

  const store = CheckpointStore.open(path.join(dir, 'client'))
  const client = new LiveLookupClient({ baseURL: node.origin, chain: CHAIN, allowInsecureHttp: true, fetch, store, limits: { waitMs: 1000 } })
  const ac = new AbortController()
  const observations = []
  let key = null
  let second = null
  let replacing = null
  await client.follow('ls_notes', {}, {
    membership: 'claims',
    signal: ac.signal,
    onRevision (e) {
      key = e.sourceKey
      for (const g of decodeBatch(e.batch).groups) observations.push(...g.observations)
      const listed = e.members.filter(m => m.present).map(m => m.outpoint.txid)
      // Once the first note is listed live, it is replaced: a spend and a new output follow.
      if (!replacing && listed.includes(first.txid)) {
        replacing = factory.replaceNote(first.notes[0], 'v2').then(async built => { second = built; await node.submit(built) })
      }
      if (second && listed.length === 1 && listed[0] === second.txid && observations.some(o => o.kind === 'spend')) ac.abort()
    }
  })
  await replacing

  const outputs = observations.filter(o => o.kind === 'output')
  expect(outputs.map(o => o.txid)).toEqual(expect.arrayContaining([second.txid]))
  for (const o of outputs) {
    expect(o).toEqual({ id: expect.any(String), kind: 'output', txid: o.txid, outputIndex: 0, beef: expect.any(Buffer), context: { schema: LEGACY_CONTEXT_SCHEMA, bytes: expect.any(Buffer), json: { text: o.txid === second.txid ? 'v2' : 'v1' } } })
    // The evidence bytes are the BEEF of the transaction they name.
    expect(txidOf(o.beef)).toBe(o.txid)
  }
  const spend = observations.find(o => o.kind === 'spend')
  expect(spend).toEqual({ id: expect.any(String), kind: 'spend', previous: { chain: CHAIN, txid: first.txid, outputIndex: 0 }, spendingTxid: second.txid, beef: expect.any(Buffer) })
  expect(txidOf(spend.beef)).toBe(second.txid)
  const withdrawals = observations.filter(o => o.kind === 'withdraw')
  expect(withdrawals.length).toBeGreaterThan(0)
  for (const w of withdrawals) {
    expect(w).toEqual({ id: expect.any(String), kind: 'withdraw', outpoint: { chain: CHAIN, txid: first.txid, outputIndex: 0 }, reason: expect.any(String) })
  }

  // A member's context, as the store keeps it, decodes to the same value.
  const [member] = store.members(key).filter(m => m.present)
  expect(member.context).toEqual({ schema: LEGACY_CONTEXT_SCHEMA, bytes: expect.any(String) })
  const decoded = decodeContext(member.context)
  expect(decoded.json).toEqual({ text: 'v2' })
  expect(decoded.bytes.toString('utf8')).toBe('{"text":"v2"}')
  store.close()
})

test('decoders refuse what is not canonical, and keep other schemas as bytes', () => {
  expect(decodeContext(null)).toBeNull()
  expect(decodeContext({ schema: 'urn:app:ctx', bytes: 'AQID' })).toEqual({ schema: 'urn:app:ctx', bytes: Buffer.from([1, 2, 3]) })
  expect(() => decodeContext({ schema: 'urn:app:ctx', bytes: 'AQI' })).toThrow(expect.objectContaining({ code: 'invalid' }))
  expect(() => decodeContext({ schema: LEGACY_CONTEXT_SCHEMA, bytes: Buffer.from('{nope').toString('base64') })).toThrow(expect.objectContaining({ code: 'invalid' }))
  expect(() => decodeObservation({ id: 'x', kind: 'proposal', payload: {} })).toThrow(expect.objectContaining({ code: 'invalid' }))
  expect(() => decodeBatch(Buffer.from('not json'))).toThrow(expect.objectContaining({ code: 'invalid' }))
})
