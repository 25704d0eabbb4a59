'use strict'
// Evidence verification in the client (issue 23 item 1): the project's server (LiveLookup
// behind createRouter on real Express over loopback, public mode) serves outputs with real
// @bsv/sdk BEEF (NoteFactory transactions, funded by P2PKH outputs proven in blocks of a
// LocalChainTracker); the client follows with a chainTracker and the verifier answers the
// store's verification port. Forged bundles are real BEEF with one thing edited.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { Transaction, UnlockingScript } = require('@bsv/sdk')
const { LiveLookupClient, CheckpointStore } = require('../js/client/client.js')
const { EvidenceVerifier } = require('../js/index.js')
const { CHAIN, plainService, notesCompanion, admit } = require('./helpers/live')
const { LocalChainTracker, NoteFactory } = require('./helpers/engine')
const { startNode, followClientUntil } = require('./helpers/node')

let dir, node, live, origin, tracker, factory, engine
beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-verify-'))
  node = await startNode({ authentication: 'none', packageDefaults: true, dir: path.join(dir, 'server'), service: plainService(), companion: notesCompanion() })
  ;({ live, origin } = node)
  tracker = new LocalChainTracker()
  factory = new NoteFactory(tracker)
})
afterEach(async () => {
  await node.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

function openStore (name = 'client') {
  const store = CheckpointStore.open(path.join(dir, name))
  store.defineContext('tip', { tipHeight: String(tracker.height + 100), medianTimePast: '4000000000' })
  store.configureReconciler({ journalId: 'verify-test', nonFinal: true, initialContext: 'tip' })
  return store
}

// Follows alice's notes until `done(snapshot)` holds after the verifier went idle (helpers/node.js).
const followUntil = (client, done, opts) => followClientUntil(client, done, { query: { author: 'alice' }, ...opts })

// txid -> currentness of output 0 (other outputs are keyed `txid:index`).
const currentnessOf = snap => Object.fromEntries(snap.members.map(m => [m.outpoint.outputIndex === 0 ? m.outpoint.txid : `${m.outpoint.txid}:${m.outpoint.outputIndex}`, m.currentness]))
const verdictOf = (store, txid) => store.verdicts(txid).map(v => v.verdict)

// A real note transaction re-serialized after `edit(tx)`; its (possibly new) txid.
function forged (note, edit) {
  const tx = Transaction.fromBEEF(note.beef)
  edit(tx)
  // A fresh Transaction: the parsed one caches its serialization and id.
  const copy = new Transaction(tx.version, tx.inputs, tx.outputs, tx.lockTime)
  return { txid: copy.id('hex'), beef: copy.toBEEF() }
}

// Every test runs with both verification engines: the native one (the default) and
// @bsv/sdk's Transaction.verify ('sdk'); the verdicts must be the same.
describe.each(['native', 'sdk'])('verification engine %s', (name) => {
  beforeAll(() => { engine = name })

  test('honest evidence becomes current; forged evidence is quarantined with its reason', async () => {
    const honest = await factory.createNotes(['honest'])
    // The funding ancestor's proof claims another block height: its root is not that block's.
    const badRoot = forged(await factory.createNotes(['bad root']), tx => { tx.inputs[0].sourceTransaction.merklePath.blockHeight += 1 })
    // One signature byte flipped: the bytes (and so the txid) are the forger's, the script fails.
    const badSig = forged(await factory.createNotes(['bad sig']), tx => {
      const bytes = tx.inputs[0].unlockingScript.toBinary()
      bytes[10] ^= 0x01
      tx.inputs[0].unlockingScript = UnlockingScript.fromBinary(bytes)
    })
    // Claims the honest-looking txid of one transaction, ships another transaction's bytes.
    const other = await factory.createNotes(['other'])
    const claimed = (await factory.createNotes(['claimed'])).txid
    await live.commit([
      admit(0, { txid: honest.txid, beef: Buffer.from(honest.beef) }),
      admit(1, { txid: badRoot.txid, beef: Buffer.from(badRoot.beef) }),
      admit(2, { txid: badSig.txid, beef: Buffer.from(badSig.beef) }),
      admit(3, { txid: claimed, beef: Buffer.from(other.beef) }),
      // A real transaction, but an output it does not have.
      admit(4, { txid: honest.txid, outputIndex: 7, beef: Buffer.from(honest.beef) })
    ])
    const store = openStore()
    // Pages of two jobs: a run walks its backlog page by page (three jobs here).
    const client = new LiveLookupClient({ baseURL: origin, chain: CHAIN, allowInsecureHttp: true, fetch, store, limits: { waitMs: 0 }, chainTracker: tracker, verification: { engine, concurrency: 3, page: 2 } })
    // `claims`: the forged groups are listed (as the source's claims) and never current.
    const snap = await followUntil(client, s => s.members.length === 3 && s.reconciled.pending.length === 0, { membership: 'claims' })
    const c = currentnessOf(snap)
    expect(c[honest.txid]).toBe('current')
    for (const t of [badRoot.txid, badSig.txid]) expect(c[t]).not.toBe('current')
    // Claims whose own bytes refute them (a bundle without the claimed transaction, an output
    // the transaction does not have) are refused at receipt: never members, never current.
    expect(Object.keys(c).sort()).toEqual([honest.txid, badRoot.txid, badSig.txid].sort())
    expect(snap.reconciled.current).toEqual([{ txid: honest.txid, outputIndex: 0 }])

    // The honest bundle verified; offered as evidence of output 7 it was refused, with the reason.
    expect(verdictOf(store, honest.txid)).toEqual([
      expect.objectContaining({ status: 'verified' }),
      expect.objectContaining({ status: 'invalid', reason: expect.stringMatching(/has 1 outputs: output 7 does not exist/) })
    ])
    expect(verdictOf(store, badRoot.txid)).toEqual([expect.objectContaining({ status: 'invalid', reason: expect.stringMatching(/merkle path/i) })])
    expect(verdictOf(store, badSig.txid)).toEqual([expect.objectContaining({ status: 'invalid', reason: expect.stringMatching(/script/) })])
    // A bundle without the claimed transaction journals no fact and no job, but its refusal is recorded.
    expect(store.verdicts(claimed)).toEqual([{ variantId: expect.any(String), atReceipt: true, verdict: expect.objectContaining({ status: 'invalid', reason: expect.stringMatching(/does not hold transaction/) }) }])
    expect(store.pendingVerifications(claimed)).toEqual([])
    const state = store.reconciledState(CHAIN)
    const status = Object.fromEntries(state.transactions.map(t => [t.txid, t.status]))
    expect(status[badRoot.txid]).toBe('invalid')
    expect(status[badSig.txid]).toBe('invalid')
    expect(client.verifier.stats).toMatchObject({ verified: 1, invalid: 2 })
    store.close()
  })

  test('a bound exceeded gives limited, never invalid', async () => {
    const note = await factory.createNotes(['big'])
    await live.commit([admit(0, { txid: note.txid, beef: Buffer.from(note.beef) })])
    const store = openStore()
    const client = new LiveLookupClient({ baseURL: origin, chain: CHAIN, allowInsecureHttp: true, fetch, store, limits: { waitMs: 0 }, chainTracker: tracker, verification: { engine, maxBytes: 64 } })
    const snap = await followUntil(client, s => s.members.length === 1 && s.reconciled.pending.length === 0, { membership: 'claims' })
    expect(currentnessOf(snap)[note.txid]).not.toBe('current')
    expect(verdictOf(store, note.txid)).toEqual([expect.objectContaining({ status: 'limited', reason: expect.stringMatching(/over 64/) })])
    const t = store.reconciledState(CHAIN).transactions.find(x => x.txid === note.txid)
    expect(t.status).toBe('limited')
    store.close()

    // The other bounds, on the same real bundle, straight through the verifier.
    const s2 = openStore('direct')
    s2.receiveTransactions('direct', [{ raw: Buffer.from(note.tx.toBinary()), evidence: Buffer.from(note.beef) }])
    const [job] = s2.pendingVerifications()
    const { checkEvidence } = require('../js/client/verifier')
    const ev = s2.verificationEvidence(job.txid, job.variantId)
    expect(ev).toEqual(Buffer.from(note.beef))
    const base = { engine, maxBytes: 1 << 20, maxTransactions: 10, maxDepth: 10, maxScriptBytes: 1 << 20 }
    expect((await checkEvidence(job, ev, tracker, { ...base, maxTransactions: 1 })).status).toBe('limited')
    expect((await checkEvidence(job, ev, tracker, { ...base, maxDepth: 0 })).status).toBe('limited')
    expect((await checkEvidence(job, ev, tracker, { ...base, maxScriptBytes: 10 })).status).toBe('limited')
    // The interpreter's own memory bound (a 72-byte signature push does not fit in 16).
    const mem = await checkEvidence(job, ev, tracker, { ...base, memoryLimit: 16 })
    expect(mem).toMatchObject({ status: 'limited', reason: expect.stringMatching(/^script work: /) })
    expect(mem.reason.length).toBeLessThanOrEqual(512)
    expect((await checkEvidence(job, ev, tracker, base)).status).toBe('verified')
    s2.close()
  })

  test('without a chainTracker nothing verifies; a restart with one resumes the pending jobs', async () => {
    const note = await factory.createNotes(['later'])
    await live.commit([admit(0, { txid: note.txid, beef: Buffer.from(note.beef) })])
    let store = openStore()
    const plain = new LiveLookupClient({ baseURL: origin, chain: CHAIN, allowInsecureHttp: true, fetch, store, limits: { waitMs: 0 } })
    expect(plain.verifier).toBeNull()
    let snap = await followUntil(plain, s => s.members.length === 1, { membership: 'claims' })
    // Complete evidence not checked yet: 'pending' ("checking..."), never 'unknown'.
    expect(currentnessOf(snap)[note.txid]).toBe('pending')
    expect(store.pendingVerifications()).toHaveLength(1)
    // Pages: the one job, then nothing after it; a page of one transaction is not offered.
    const [job] = store.pendingVerifications(null, { limit: 1 })
    expect(job).toEqual(store.pendingVerifications()[0])
    expect(store.pendingVerifications(null, { after: job, limit: 5 })).toEqual([])
    expect(() => store.pendingVerifications(null, { limit: 0 })).toThrow(expect.objectContaining({ code: 'invalid' }))
    expect(() => store.pendingVerifications(note.txid, { limit: 1 })).toThrow(expect.objectContaining({ code: 'invalid' }))
    expect(() => store.pendingVerifications(null, { after: { ...job, firstRaw: { position: 'x', index: 0 } } })).toThrow(expect.objectContaining({ code: 'invalid' }))
    // A tracker that cannot answer leaves the job pending (unresolved is not recorded).
    const down = { isValidRootForHeight: async () => { throw new Error('offline') }, currentHeight: async () => tracker.height }
    const v = new EvidenceVerifier({ store, chainTracker: down, engine })
    await v.run()
    expect(v.stats.unresolved).toBe(1)
    await v.run() // a tracker failure is tried again on the next run
    expect(v.stats.unresolved).toBe(2)
    expect(store.pendingVerifications()).toHaveLength(1)
    // During the outage the output shows 'pending', as complete unverified evidence does.
    expect(store.revisionSnapshot(snap.sourceKey).members[0].currentness).toBe('pending')
    store.close()

    store = openStore()
    const client = new LiveLookupClient({ baseURL: origin, chain: CHAIN, allowInsecureHttp: true, fetch, store, limits: { waitMs: 0 }, chainTracker: tracker, verification: { engine } })
    snap = await followUntil(client, s => s.reconciled.pending.length === 0)
    expect(currentnessOf(snap)[note.txid]).toBe('current')
    expect(store.pendingVerifications()).toEqual([])
    expect(client.verifier.stats.verified).toBe(1)
    store.close()
  })

  test('with a chainTracker, membership defaults to verified: an unchecked group is received, not a member', async () => {
    const note = await factory.createNotes(['unchecked'])
    await live.commit([admit(0, { txid: note.txid, beef: Buffer.from(note.beef) })])
    // A tracker that cannot answer: the job stays pending (unresolved is not recorded).
    const down = { isValidRootForHeight: async () => { throw new Error('offline') }, currentHeight: async () => tracker.height }
    let store = openStore()
    const waiting = new LiveLookupClient({ baseURL: origin, chain: CHAIN, allowInsecureHttp: true, fetch, store, limits: { waitMs: 0 }, chainTracker: down, verification: { engine } })
    let snap = await followUntil(waiting, s => s.state.received === 1)
    expect(waiting.verifier.stats.unresolved).toBeGreaterThan(0)
    expect(snap.members).toEqual([])
    expect(snap.state).toMatchObject({ received: 1, accepted: 0, pendingCount: 1, currentGeneration: null })
    store.close()

    // Once the evidence verifies, the group is accepted and published.
    store = openStore()
    const client = new LiveLookupClient({ baseURL: origin, chain: CHAIN, allowInsecureHttp: true, fetch, store, limits: { waitMs: 0 }, chainTracker: tracker, verification: { engine } })
    snap = await followUntil(client, s => s.members.length === 1 && s.reconciled.pending.length === 0)
    expect(snap.state).toMatchObject({ received: 1, accepted: 1, pendingCount: 0, currentGeneration: 0 })
    expect(currentnessOf(snap)[note.txid]).toBe('current')
    store.close()
  })

  // The whole path on real parts: notes submitted to a real @bsv/overlay Engine reach the
  // client as output and spend observations; the spender's unconfirmed ancestry (a PushDrop
  // note) is script-checked by the verifier before the graph marks the note spent.
  test('through a real Engine: a verified replacement makes the new note current and the old one spent', async () => {
    // This test's node has the Engine (on the test's chain) in place of the plain service.
    await node.close()
    node = await startNode({ authentication: 'none', packageDefaults: true, dir: path.join(dir, 'server-engine'), chainTracker: tracker })
    ;({ live, origin } = node)
    // node.submit resolves once the group is published (the Engine's submit resolves before).
    const submit = built => node.submit(built)
    const first = await factory.createNotes(['v1'])
    await submit(first)
    const second = await factory.replaceNote(first.notes[0], 'v2')
    await submit(second)

    const store = openStore()
    const client = new LiveLookupClient({ baseURL: origin, chain: CHAIN, allowInsecureHttp: true, fetch, store, limits: { waitMs: 0 }, chainTracker: tracker, verification: { engine } })
    const ac = new AbortController()
    let snap
    await client.follow('ls_notes', {}, {
      signal: ac.signal,
      async onRevision (e) {
        await client.verifier.idle()
        snap = store.revisionSnapshot(e.sourceKey)
        if (snap.reconciled.current.some(o => o.txid === second.txid) && snap.reconciled.pending.length === 0) ac.abort()
      }
    })
    expect(snap.reconciled.current).toEqual([{ txid: second.txid, outputIndex: 0 }])
    expect(store.reconciledView().spent).toContainEqual({ outpoint: { txid: first.txid, outputIndex: 0 }, by: second.txid })
    expect(verdictOf(store, second.txid).every(v => v.status === 'verified')).toBe(true)
    store.close()
  })
})
