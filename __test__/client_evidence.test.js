'use strict'
// What an application shows (`reconciledView`, member currentness) for the evidence real
// providers serve, end to end: a real @bsv/overlay Engine behind this package's router on
// loopback, real signed transactions (NoteFactory, funded by outputs proven in blocks of a
// LocalChainTracker), the client's durable store, and the real verifier (or the verification
// port answered with the verifier's own results, in an order the test chooses).

const fs = require('node:fs')
const path = require('node:path')
const { Beef, Transaction } = require('@bsv/sdk')
const { LiveLookupClient, CheckpointStore } = require('../js/client/client.js')
const { checkEvidence, VERIFIER_DEFAULTS } = require('../js/client/verifier')
const { CHAIN, tempDir, admit } = require('./helpers/live')
const { LocalChainTracker } = require('./helpers/engine')
const { startNode, NOTES_TOPIC, followClientUntil } = require('./helpers/node')

let dir, tracker, nodes, engine
beforeEach(() => {
  dir = tempDir('oll-evidence-')
  tracker = new LocalChainTracker()
  nodes = []
})
afterEach(async () => {
  for (const n of nodes) await n.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

async function node () {
  const n = await startNode({ authentication: 'none', chainTracker: tracker })
  nodes.push(n)
  return n
}

function openStore (name = 'client') {
  const store = CheckpointStore.open(path.join(dir, name))
  store.defineContext('tip', { tipHeight: String(tracker.height + 1000), medianTimePast: '4000000000' })
  store.configureReconciler({ journalId: 'evidence-test', nonFinal: false, initialContext: 'tip' })
  return store
}

function clientOf (n, store, extra = {}) {
  const verification = { engine, ...extra.verification }
  return new LiveLookupClient({ baseURL: n.origin, chain: CHAIN, allowInsecureHttp: true, fetch, store, limits: { waitMs: 0 }, ...extra, verification })
}

// Follows until `done(snapshot)` holds (helpers/node.js), polling every 20 ms. Membership is
// `claims` unless a test names another rule: these tests watch currentness, which comes from
// the reconciled graph whatever the membership rule.
const followUntil = (client, done, opts = {}) => followClientUntil(client, done, { pollIntervalMs: 20, membership: 'claims', ...opts })

const op = (txid, outputIndex = 0) => ({ txid, outputIndex })
const currentness = (store, key) => Object.fromEntries(store.revisionSnapshot(key).members.filter(m => m.present).map(m => [`${m.outpoint.txid}.${m.outpoint.outputIndex}`, m.currentness]))
// The store-wide view, narrowed to the outputs of these transactions (it also lists the
// proven funding transactions' outputs, which the bundles carry as confirmed parents).
function viewOf (store, txids) {
  const v = store.reconciledView()
  return { current: v.current.filter(o => txids.includes(o.txid)), spent: v.spent.filter(s => txids.includes(s.outpoint.txid)) }
}
const statusOf = (store, txid) => store.reconciledState(CHAIN).transactions.find(t => t.txid === txid)?.status

/** The verifier's own results for these jobs (real checks against the tracker). */
async function resultsFor (store, jobs) {
  const out = []
  for (const job of jobs) {
    const r = await checkEvidence(job, store.verificationEvidence(job.txid, job.variantId), tracker, { ...VERIFIER_DEFAULTS, engine })
    out.push({ txid: job.txid, variantId: job.variantId, contextId: job.contextId, status: r.status, raw: r.raw, reason: r.reason })
  }
  return out
}

// Every test runs with both verification engines: the native one (the default) and
// @bsv/sdk's Transaction.verify ('sdk'); the verdicts must be the same.
describe.each(['native', 'sdk'])('verification engine %s', (name) => {
  beforeAll(() => { engine = name })

  test('a mined subject becomes current, and a verified spend of it makes it spent', async () => {
    const n = await node()
    // Mined before it reached the Engine: the provider serves it with its own BUMP.
    const mined = await n.factory.createNotes(['mined'])
    mined.tx.merklePath = tracker.mint(mined.txid)
    await n.submit({ beef: mined.tx.toBEEF() })
    const store = openStore()
    const client = clientOf(n, store, { chainTracker: tracker })
    let snap = await followUntil(client, s => s.reconciled?.current.length === 1)
    expect(snap.reconciled.current).toEqual([op(mined.txid)])
    expect(statusOf(store, mined.txid)).toBe('included')
    expect(currentness(store, snap.sourceKey)).toEqual({ [`${mined.txid}.0`]: 'current' })

    // Its replacement spends it; the spender's bundle carries the mined parent proven.
    const next = await n.factory.replaceNote(mined.notes[0], 'next')
    await n.submit(next)
    snap = await followUntil(client, s => s.reconciled?.current.some(o => o.txid === next.txid) && s.reconciled.pending.length === 0)
    expect(snap.reconciled.current).toEqual([op(next.txid)])
    expect(viewOf(store, [mined.txid, next.txid])).toEqual({ current: [op(next.txid)], spent: [{ outpoint: op(mined.txid), by: next.txid }] })
    expect(statusOf(store, next.txid)).toBe('selected-final')
    store.close()
  })

  test('a proof update for a received output makes it current (the common case once a block is found)', async () => {
    const n = await node()
    const note = await n.factory.createNotes(['later mined'])
    await n.submit(note)
    const store = openStore()
    const client = clientOf(n, store, { chainTracker: tracker })
    await followUntil(client, s => s.reconciled?.current.length === 1)
    // The block is found: the Engine learns the proof and the provider refreshes the output.
    const proof = tracker.mint(note.txid)
    await n.t.engine.handleNewMerkleProof(note.txid, proof, proof.blockHeight)
    await followUntil(client, () => statusOf(store, note.txid) === 'included')
    expect(store.reconciledView().current).toContainEqual(op(note.txid))
    expect(store.verdicts(note.txid).map(v => v.verdict.status)).toEqual(['verified', 'verified'])
    store.close()
  })

  test('complete evidence being checked shows pending, also while the chain tracker is down', async () => {
    const n = await node()
    const note = await n.factory.createNotes(['checking'])
    await n.submit(note)
    let down = true
    const flaky = {
      isValidRootForHeight: async (root, height) => { if (down) throw new Error('tracker offline'); return tracker.isValidRootForHeight(root, height) },
      currentHeight: async () => tracker.currentHeight()
    }
    const store = openStore()
    const client = clientOf(n, store, { chainTracker: flaky })
    let snap = await followUntil(client, s => s.members.length === 1)
    await client.verifier.idle()
    expect(client.verifier.stats.unresolved).toBeGreaterThan(0)
    // Not 'unknown' (which is what forged evidence shows): the application can say "checking...".
    expect(currentness(store, snap.sourceKey)).toEqual({ [`${note.txid}.0`]: 'pending' })
    expect(store.reconciledView().pending).toContain(note.txid)
    down = false
    snap = await followUntil(client, s => s.reconciled.current.length === 1)
    expect(currentness(store, snap.sourceKey)).toEqual({ [`${note.txid}.0`]: 'current' })
    store.close()
  })

  test('reversed worker completion and a restart give the same published choice between two spends', async () => {
    const a = await node()
    const b = await node()
    const base = await a.factory.createNotes(['contested'])
    await a.submit(base)
    await b.submit(base)
    // Two conflicting spends of the same note, one per provider.
    const s1 = await a.factory.replaceNote(base.notes[0], 'first')
    const s2 = await a.factory.replaceNote(base.notes[0], 'second')
    await a.submit(s1)
    await b.submit(s2)

    // The store receives S1 (from A) before S2 (from B); no verifier runs: the test is the worker.
    async function receiveBoth (name) {
      const store = openStore(name)
      await followUntil(clientOf(a, store), s => s.members.some(m => m.outpoint.txid === s1.txid))
      await followUntil(clientOf(b, store), s => s.members.some(m => m.outpoint.txid === s2.txid))
      return store
    }
    const forward = await receiveBoth('forward')
    const reversed = await receiveBoth('reversed')
    const jobs = reversed.pendingVerifications()
    const isS1 = j => j.txid === s1.txid
    expect(jobs.some(isS1)).toBe(true)

    // Reversed: everything but S1's own job finishes first. S2 must not be published: the
    // earlier complete candidate S1 holds the component (BRC-192 §10.2 barrier).
    reversed.acceptVerifications(await resultsFor(reversed, jobs.filter(j => !isS1(j))))
    expect(statusOf(reversed, s2.txid)).not.toBe('selected-final')
    expect(viewOf(reversed, [base.txid]).spent).toEqual([])
    expect(reversed.reconciledView().pending).toEqual(expect.arrayContaining([s1.txid, s2.txid]))
    reversed.acceptVerifications(await resultsFor(reversed, jobs.filter(isS1)))
    forward.acceptVerifications(await resultsFor(forward, forward.pendingVerifications()))

    const choice = store => ({ s1: statusOf(store, s1.txid), s2: statusOf(store, s2.txid), ...viewOf(store, [base.txid, s1.txid, s2.txid]) })
    const expected = { s1: 'selected-final', s2: 'conflicting', spent: [{ outpoint: op(base.txid), by: s1.txid }], current: [op(s1.txid)] }
    expect(choice(forward)).toEqual(expected)
    expect(choice(reversed)).toEqual(expected)
    reversed.close()
    const reopened = CheckpointStore.open(path.join(dir, 'reversed'))
    expect(choice(reopened)).toEqual(expected)
    reopened.close()
    forward.close()
  })

  test('a group publishes whole: with one of its two candidates verified nothing of it shows', async () => {
    const n = await node()
    const first = await n.factory.createNotes(['v1'])
    await n.submit(first)
    const second = await n.factory.replaceNote(first.notes[0], 'v2')
    await n.submit(second)
    const store = openStore()
    const snap = await followUntil(clientOf(n, store), s => s.members.some(m => m.outpoint.txid === second.txid))
    // The replacement group's bundle holds the replacement and its unproven parent: two
    // candidates (the parent also has the variant its own admission group brought).
    const jobs = store.pendingVerifications()
    const group2 = jobs.filter(j => store.verificationEvidence(j.txid, j.variantId).equals(store.verificationEvidence(second.txid, jobs.find(x => x.txid === second.txid).variantId)))
    expect(group2.map(j => j.txid).sort()).toEqual([first.txid, second.txid].sort())
    const parentInGroup2 = group2.find(j => j.txid === first.txid)
    const rest = jobs.filter(j => j !== parentInGroup2)
    store.acceptVerifications(await resultsFor(store, rest))
    // The old output is not shown spent, the new one not current: the group is still pending.
    const watched = [first.txid, second.txid]
    expect(viewOf(store, watched)).toEqual({ current: [], spent: [] })
    expect(currentness(store, snap.sourceKey)[`${second.txid}.0`]).toBe('pending')
    const before = store.revision()
    store.acceptVerifications(await resultsFor(store, [parentInGroup2]))
    // Both effects in the one commit that accepted the last candidate.
    expect(store.revision()).toBe(before + 1)
    expect(viewOf(store, watched)).toEqual({ current: [op(second.txid)], spent: [{ outpoint: op(first.txid), by: second.txid }] })
    store.close()
  })

  test('a proof for a block the tracker learns a moment later ends verified, never invalid', async () => {
    const n = await node()
    const mined = await n.factory.createNotes(['fresh block'])
    mined.tx.merklePath = tracker.mint(mined.txid)
    await n.submit({ beef: mined.tx.toBEEF() })
    // The client's tracker is one block behind the one the Engine used.
    let lag = 1
    const behind = {
      isValidRootForHeight: async (root, height) => height <= tracker.height - lag && tracker.isValidRootForHeight(root, height),
      currentHeight: async () => tracker.height - lag
    }
    const store = openStore()
    const client = clientOf(n, store, { chainTracker: behind, verification: { heightPollMs: 20 } })
    const snap = await followUntil(client, s => s.members.length === 1)
    await client.verifier.idle()
    expect(client.verifier.stats.deferred).toBeGreaterThan(0)
    expect(client.verifier.stats.invalid).toBe(0)
    expect(store.verdicts(mined.txid).map(v => v.verdict)).toEqual([null])
    expect(currentness(store, snap.sourceKey)).toEqual({ [`${mined.txid}.0`]: 'pending' })
    // The tracker catches up; the waiting job is tried again without any new receipt.
    lag = 0
    for (let i = 0; i < 500 && store.reconciledView().current.length === 0; i++) await new Promise(resolve => setTimeout(resolve, 20))
    expect(store.reconciledView().current).toEqual([op(mined.txid)])
    expect(store.verdicts(mined.txid).map(v => v.verdict.status)).toEqual(['verified'])
    client.verifier.close()
    store.close()
  })

  test('BEEF V2 and Atomic BEEF V2 (as @bsv/sdk and BRC-100 wallets write them) verify; junk and txid-only ancestry do not', async () => {
    const n = await node()
    const v2 = await n.factory.createNotes(['v2'])
    const atomic = await n.factory.createNotes(['atomic v2'])
    const partial = await n.factory.createNotes(['txid-only funding'])
    const junk = await n.factory.createNotes(['junk'])
    const beefOf = built => { const b = new Beef(); b.mergeTransaction(built.tx); return b }
    const partialBeef = beefOf(partial)
    partialBeef.makeTxidOnly(partial.tx.inputs[0].sourceTransaction.id('hex'))
    const bytes = {
      [v2.txid]: Buffer.from(beefOf(v2).toBinary()),
      [atomic.txid]: Buffer.from(beefOf(atomic).toBinaryAtomic(atomic.txid)),
      [partial.txid]: Buffer.from(partialBeef.toBinary()),
      [junk.txid]: Buffer.from('not a bundle at all')
    }
    expect(bytes[v2.txid].subarray(0, 4).toString('hex')).toBe('0200beef')
    expect(bytes[atomic.txid].subarray(36, 40).toString('hex')).toBe('0200beef')
    // Another provider serving the bundles it was given.
    await n.live.commit(Object.entries(bytes).map(([txid, beef], i) => admit(i, { txid, beef, topic: NOTES_TOPIC })))
    const store = openStore()
    const client = clientOf(n, store, { chainTracker: tracker })
    const snap = await followUntil(client, s => s.members.length >= 3 && s.reconciled.pending.length === 0)
    expect(store.reconciledView().current.sort((x, y) => x.txid.localeCompare(y.txid))).toEqual([op(v2.txid), op(atomic.txid)].sort((x, y) => x.txid.localeCompare(y.txid)))
    const c = currentness(store, snap.sourceKey)
    // The funding parent known by txid only is an unresolved dependency: unknown, not pending.
    expect(c[`${partial.txid}.0`]).toBe('unknown')
    expect(statusOf(store, partial.txid)).toBe('unresolved')
    // Junk is refused at receipt with its reason: no member, no job.
    expect(c[`${junk.txid}.0`]).toBeUndefined()
    expect(store.verdicts(junk.txid)).toEqual([expect.objectContaining({ atReceipt: true, verdict: expect.objectContaining({ status: 'invalid', reason: expect.stringMatching(/not a valid BEEF/) }) })])
    store.close()
  })

  test('a limited verdict is verified again when the application raises the bound', async () => {
    const n = await node()
    const note = await n.factory.createNotes(['large'])
    await n.submit(note)
    const store = openStore()
    const tight = clientOf(n, store, { chainTracker: tracker, verification: { maxBytes: 64 } })
    await followUntil(tight, s => s.members.length === 1 && s.reconciled.pending.length === 0)
    expect(store.verdicts(note.txid).map(v => v.verdict.status)).toEqual(['limited'])
    expect(statusOf(store, note.txid)).toBe('limited')
    const roomy = clientOf(n, store, { chainTracker: tracker, verification: { maxBytes: 1 << 20 } })
    await followUntil(roomy, s => s.reconciled.current.length === 1)
    expect(store.verdicts(note.txid).map(v => v.verdict.status)).toEqual(['verified'])
    store.close()
  })

  test("membership 'verified': a group waiting for verification holds later membership; 'claims' is what the source lists", async () => {
    const n = await node()
    const first = await n.factory.createNotes(['a'])
    await n.submit(first)
    const second = await n.factory.createNotes(['b'])
    await n.submit(second)
    const claims = openStore('claims')
    let snap = await followUntil(clientOf(n, claims), s => s.members.length === 2)
    // Claims: both listed at once, neither current (nothing is verified).
    expect(Object.values(currentness(claims, snap.sourceKey))).toEqual(['pending', 'pending'])
    claims.close()

    const gated = openStore('gated')
    snap = await followUntil(clientOf(n, gated), s => s.state.received >= 2, { membership: 'verified' })
    expect(gated.members(snap.sourceKey).filter(m => m.present)).toEqual([])
    // Only the second group's evidence verifies: the first still holds it back.
    const jobs = gated.pendingVerifications()
    gated.acceptVerifications(await resultsFor(gated, jobs.filter(j => j.txid === second.txid)))
    expect(gated.members(snap.sourceKey).filter(m => m.present)).toEqual([])
    gated.acceptVerifications(await resultsFor(gated, jobs.filter(j => j.txid !== second.txid)))
    expect(gated.members(snap.sourceKey).filter(m => m.present).map(m => m.outpoint.txid).sort()).toEqual([first.txid, second.txid].sort())
    gated.close()
  })
})
