'use strict'
// Spend reconciliation (BRC-192 §10) through the JS CheckpointStore on a real sled
// directory, with the corpus's real transactions, headers and Atomic BEEF: a batch
// committed from its exact bytes puts its evidence transaction into the journal in
// the same commit; the revision snapshot shows membership and currentness together;
// verification goes through the port; a reorg-style view change and a restart keep
// the same reconciled state.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { CheckpointStore } = require('../js/client/client.js')

const vectors = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'tests', 'fixtures', 'spec', 'reconciliation-vectors.json'), 'utf8'))
const GENESIS = '000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f'
const hex32 = s => crypto.createHash('sha256').update(s).digest('hex')
const tx = name => vectors.transactions[name]
const header = label => vectors.headers.find(h => h.label === label)

const scope = {
  chain: { network: 'main', genesisHash: GENESIS },
  provider: '02aa', service: 'ls_notes', queryDigest: hex32('q'), rulesDigest: hex32('rules'), access: 'public', epoch: 'e1'
}
const key = { provider: scope.provider, service: scope.service, queryDigest: scope.queryDigest }
function batch (phase, groups, cursor, through) {
  return Buffer.from(JSON.stringify({
    version: 1, session: 'sess', scope, phase, groups, cursor, snapshotComplete: true,
    through: String(through), highWater: String(through), expiresAt: '4000000000', replayUntil: '4000003600',
    limits: { maxBytes: 1 << 20, maxObservations: 64, waitMs: 0 }
  }))
}

let dir
beforeEach(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-reconcile-')) })
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }))

function setUp (store) {
  store.addHeaders(vectors.headers.map(h => Buffer.from(h.raw, 'hex')))
  for (const [id, v] of Object.entries(vectors.views)) store.defineView(id, v.tipHash)
  store.configureReconciler({ journalId: 'js-test', nonFinal: true, initialContext: 'base' })
  // P is confirmed in block "base" at height 101 (its anchor BEEF's BUMP).
  store.addAnchor(Buffer.from(tx('P').raw, 'hex'), { block: header('base').hash, height: 101 })
}

test('a committed batch feeds the journal; currentness comes from the graph, not membership', () => {
  const storePath = path.join(dir, 'store')
  let store = CheckpointStore.open(storePath)
  setUp(store)
  const gen = store.beginGeneration(key, null)
  const b = tx('B')
  // B's Atomic BEEF (from the corpus's inclusion vector) as the evidence of B:0.
  const obs = { id: 'o1', scope, kind: 'output', payload: { evidence: { txid: b.txid, outputIndex: 0, beef: vectors.inclusion.beef } } }
  store.commitBatch(key, gen, null, batch('snapshot', [{ id: 'g1', sequence: '5', observations: [obs] }], 'c1', 5))

  let snap = store.revisionSnapshot(key)
  expect(snap.members).toHaveLength(1)
  expect(snap.members[0].currentness).toBe('pending')
  expect(snap.reconciled.pending).toEqual([b.txid])
  expect(snap.reconciled.through).toBe('1')

  const jobs = store.pendingVerifications(b.txid)
  expect(jobs).toHaveLength(1)
  expect(jobs[0].variantId).toBe(crypto.createHash('sha256').update(Buffer.from(vectors.inclusion.beef, 'base64')).digest('hex'))
  // A result for another context is stale and changes nothing.
  expect(store.acceptVerifications([{ ...jobs[0], contextId: 'fork', status: 'verified', raw: Buffer.from(b.raw, 'hex'), reason: 'ok' }]).stale).toBe(1)
  expect(store.acceptVerifications([{ ...jobs[0], status: 'verified', raw: Buffer.from(b.raw, 'hex'), reason: 'ok' }]).accepted).toBe(1)

  snap = store.revisionSnapshot(key)
  expect(snap.members[0].currentness).toBe('current')
  // The revision's current/spent cover this source's members; reconciledView() is store-wide.
  expect(snap.reconciled.current).toEqual([{ txid: b.txid, outputIndex: 0 }])
  expect(snap.reconciled.spent).toEqual([])
  expect(store.reconciledView().spent).toEqual([{ outpoint: { txid: tx('P').txid, outputIndex: 0 }, by: b.txid }])
  expect(store.reconciledView().current).toContainEqual({ txid: b.txid, outputIndex: 0 })

  // A competing spend of P:0 received later loses to B (first selectable).
  store.receiveTransactions('host-b', [{ raw: Buffer.from(tx('A').raw, 'hex') }])
  const [ja] = store.pendingVerifications(tx('A').txid)
  store.acceptVerifications([{ ...ja, status: 'verified', raw: Buffer.from(tx('A').raw, 'hex'), reason: 'ok' }])
  const state = store.reconciledState({ network: 'main', genesisHash: GENESIS })
  const byTxid = Object.fromEntries(state.transactions.map(t => [t.txid, t]))
  expect(byTxid[b.txid].status).toBe('selected-final')
  expect(byTxid[tx('A').txid].status).toBe('conflicting')
  expect(byTxid[tx('A').txid].conflictsWith).toEqual([b.txid])
  expect(byTxid[b.txid].order).toMatchObject({ readyAt: '1', depth: 0, readyContextId: 'base' })
  expect(store.reconciledView().conflicting).toEqual([tx('A').txid])

  // The source withdraws B:0: membership changes, the transaction facts do not.
  store.commitBatch(key, gen, 'c1', batch('live', [{
    id: 'g2', sequence: '6', observations: [{ id: 'o2', scope, kind: 'withdraw', payload: { outpoint: { chain: scope.chain, txid: b.txid, outputIndex: 0 }, reason: 'gone' } }]
  }], 'c2', 6))
  snap = store.revisionSnapshot(key)
  expect(snap.members[0]).toMatchObject({ present: false, currentness: null })
  expect(snap.reconciled.current).toEqual([])
  expect(store.reconciledView().current).toContainEqual({ txid: b.txid, outputIndex: 0 })

  const beforeRestart = store.reconciledState({ network: 'main', genesisHash: GENESIS })
  expect(beforeRestart.transactions).toEqual(state.transactions)
  expect(beforeRestart.memberships.map(m => m.present)).toEqual([false])
  store.close()
  store = CheckpointStore.open(storePath)
  expect(store.reconciledState({ network: 'main', genesisHash: GENESIS })).toEqual(beforeRestart)
  expect(store.reconciledView().spent).toEqual([{ outpoint: { txid: tx('P').txid, outputIndex: 0 }, by: b.txid }])
  store.close()
})

test('acceptVerificationsAsync accepts on the pool as acceptVerifications does: same outcomes, same state, same errors, held with the commits, awaited by close', async () => {
  // The same receipts in two stores; one accepts synchronously, the other on the pool.
  const stores = ['sync', 'pool'].map(name => {
    const s = CheckpointStore.open(path.join(dir, name))
    setUp(s)
    s.receiveTransactions('host', [{ raw: Buffer.from(tx('B').raw, 'hex'), evidence: Buffer.from(vectors.inclusion.beef, 'base64') }])
    s.receiveTransactions('host-b', [{ raw: Buffer.from(tx('A').raw, 'hex') }])
    return s
  })
  const [sync, pool] = stores
  const results = s => s.pendingVerifications().map(j => ({ ...j, status: 'verified', raw: Buffer.from(j.txid === tx('A').txid ? tx('A').raw : tx('B').raw, 'hex'), reason: 'ok' }))
  expect(results(pool)).toHaveLength(2)
  const stale = s => [{ ...s.pendingVerifications()[0], contextId: 'fork', status: 'verified', raw: Buffer.from(tx('B').raw, 'hex'), reason: 'ok' }]
  expect(await pool.acceptVerificationsAsync(stale(pool))).toEqual(sync.acceptVerifications(stale(sync)))

  // Bad input is refused before anything is queued, with the same code.
  const rev = pool.revision()
  await expect(pool.acceptVerificationsAsync([{ ...results(pool)[0], status: 'fine' }])).rejects.toMatchObject({ code: 'invalid' })
  expect(() => sync.acceptVerifications([{ ...results(sync)[0], status: 'fine' }])).toThrow(expect.objectContaining({ code: 'invalid' }))
  expect(pool.revision()).toBe(rev)

  // While commits are held the accept does not apply; whenIdle waits for it.
  pool._holdCommits()
  const pending = pool.acceptVerificationsAsync(results(pool))
  let settled = false
  const idle = pool.whenIdle().then(() => { settled = true })
  await new Promise(resolve => setTimeout(resolve, 50))
  expect(settled).toBe(false)
  expect(pool.revision()).toBe(rev)
  pool._releaseCommits()
  const outcome = await pending
  await idle
  expect(outcome).toEqual(sync.acceptVerifications(results(sync)))
  expect(outcome.accepted).toBeGreaterThan(0)
  expect(pool.revision()).toBe(rev + 1)
  const chain = { network: 'main', genesisHash: GENESIS }
  expect(pool.reconciledState(chain)).toEqual(sync.reconciledState(chain))

  // Closing while an accept runs waits for it: the reopened store holds its result.
  pool.receiveTransactions('host-e', [{ raw: Buffer.from(tx('E').raw, 'hex') }])
  const last = pool.acceptVerificationsAsync(pool.pendingVerifications().map(j => ({ ...j, status: 'invalid', reason: 'a script fails' })))
  pool.close()
  await expect(last).resolves.toMatchObject({ revision: rev + 3 })
  await expect(pool.acceptVerificationsAsync([])).rejects.toThrow(/closed/)
  const again = CheckpointStore.open(path.join(dir, 'pool'))
  expect(again.verdicts(tx('E').txid).map(v => v.verdict.status)).toEqual(['invalid'])
  again.close()
  sync.close()
})

test('bad input to the reconciler is an error with a code, and writes nothing', () => {
  const store = CheckpointStore.open(path.join(dir, 'store'))
  expect(() => store.receiveTransactions('h', [{ raw: Buffer.from('00', 'hex') }])).toThrow(expect.objectContaining({ code: 'invalid' }))
  setUp(store)
  const before = store.revision()
  expect(() => store.receiveTransactions('h', [{ raw: Buffer.from(tx('A').raw.slice(0, 40), 'hex') }])).toThrow(expect.objectContaining({ code: 'invalid' }))
  expect(() => store.setContext('nowhere')).toThrow(expect.objectContaining({ code: 'invalid' }))
  expect(() => store.defineView('x', 'zz')).toThrow(expect.objectContaining({ code: 'invalid' }))
  expect(store.revision()).toBe(before)
  expect(store.reconciledView().through).toBe('0')
  store.close()
})

// End to end: the project's server (LiveLookup behind createRouter on real Express,
// public mode) serves B and then A, each with its real BEEF, as outputs; the client
// follows with a reconciler-configured store. Each revision carries membership and
// the reconciled state of the same commit; verification goes through the port.
describe('LiveLookupClient revisions carry the reconciled state', () => {
  const { LiveLookupClient } = require('../js/client/client.js')
  const { CHAIN, plainService, notesCompanion, admit } = require('./helpers/live')
  const { startNode } = require('./helpers/node')

  let node, live, origin
  beforeEach(async () => {
    node = await startNode({ authentication: 'none', packageDefaults: true, dir: path.join(dir, 'server'), service: plainService(), companion: notesCompanion() })
    ;({ live, origin } = node)
  })
  afterEach(async () => {
    await node.close()
  })

  // An Atomic BEEF of one unmined transaction (BRC-95 around BEEF V1).
  const atomic = name => Buffer.concat([
    Buffer.from('01010101', 'hex'), Buffer.from(tx(name).txid, 'hex').reverse(),
    Buffer.from('0100beef0001', 'hex'), Buffer.from(tx(name).raw, 'hex'), Buffer.from([0])
  ])

  test('pending, then current and conflicting after verification', async () => {
    await live.commit([admit(0, { txid: tx('B').txid, beef: Buffer.from(vectors.inclusion.beef, 'base64') })])
    const store = CheckpointStore.open(path.join(dir, 'client'))
    setUp(store)
    const client = new LiveLookupClient({ baseURL: origin, fetch, store, chain: CHAIN, allowInsecureHttp: true, limits: { waitMs: 2000 } })
    const ac = new AbortController()
    const events = []
    let sentA = false
    await client.follow('ls_notes', { author: 'alice' }, {
      membership: 'claims',
      signal: ac.signal,
      async onRevision (e) {
        events.push(e)
        const byTxid = Object.fromEntries(e.members.map(m => [m.outpoint.txid, m.currentness]))
        if (byTxid[tx('B').txid] === 'pending' && !sentA) {
          sentA = true
          // The verifier answers B's job; then the provider admits A (spends P:0 too).
          const results = store.pendingVerifications(tx('B').txid).map(j => ({ ...j, status: 'verified', raw: Buffer.from(tx('B').raw, 'hex'), reason: 'ok' }))
          store.acceptVerifications(results)
          await live.commit([admit(1, { txid: tx('A').txid, beef: atomic('A') })])
        }
        if (byTxid[tx('A').txid] === 'pending') {
          // Evidence for A is unverified: its component (with B) waits, B shown stale.
          expect(e.reconciled.stale).toEqual([{ txid: tx('B').txid, status: 'selected-final' }])
          expect(byTxid[tx('B').txid]).toBe('stale')
          const results = store.pendingVerifications(tx('A').txid).map(j => ({ ...j, status: 'verified', raw: Buffer.from(tx('A').raw, 'hex'), reason: 'ok' }))
          store.acceptVerifications(results)
          ac.abort()
        }
      }
    })
    expect(sentA).toBe(true)
    const key = events[0].sourceKey
    const snap = store.revisionSnapshot(key)
    const byTxid = Object.fromEntries(snap.members.map(m => [m.outpoint.txid, m.currentness]))
    expect(byTxid).toEqual({ [tx('B').txid]: 'current', [tx('A').txid]: 'conflicting' })
    expect(snap.reconciled).toMatchObject({ pending: [], stale: [], conflicting: [tx('A').txid], current: [{ txid: tx('B').txid, outputIndex: 0 }] })
    expect(store.reconciledView().spent).toEqual([{ outpoint: { txid: tx('P').txid, outputIndex: 0 }, by: tx('B').txid }])
    store.close()
  })
})
