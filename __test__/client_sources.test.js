'use strict'
// One query followed on two providers into one store (BRC-193 §9, BRC-192 §10): two real
// nodes (Express, BRC-103 with AuthFetch, real @bsv/overlay Engines on SQLite sharing one
// local chain tracker), `follow(..., { sources: [A, B] })`. Node B learns a spend that A
// has not processed: the output shows spent although A still lists it, A's reset and
// lagging snapshot cannot make it current again, A's reset leaves B untouched, and when A
// goes away its membership is left stale while B continues.
//
// No BEEF verifier is part of this branch: the test answers the store's verification
// port itself, with results it computes with @bsv/sdk (`Transaction.verify` against the
// shared chain tracker, merkle paths and scripts) for the transactions the jobs name.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { CheckpointStore } = require('../js/client/client.js')
const { startNode, brc103LiveClient } = require('./helpers/node')
const { LocalChainTracker } = require('./helpers/engine')

jest.setTimeout(20000)

let tmp
beforeEach(() => { tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-sources-')) })
afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }))

const op = (txid, i = 0) => `${txid}.${i}`
const listed = e => e.members.filter(m => m.present).map(m => op(m.outpoint.txid, m.outpoint.outputIndex)).sort()
const shown = e => Object.fromEntries(e.members.filter(m => m.present).map(m => [op(m.outpoint.txid, m.outpoint.outputIndex), m.currentness]))

test('two providers: a spend seen on one settles the output for both; resets and outages stay per source', async () => {
  const chainTracker = new LocalChainTracker()
  const a = await startNode({ chainTracker })
  const b = await startNode({ chainTracker })
  const nodes = [a, b]
  try {
    const note = await a.factory.createNotes(['shared'])
    await a.submit(note)
    await b.submit(note)
    const spend = await a.factory.spendNotes(note.notes)

    // The application's verifier: SDK verification of the transactions it knows.
    const known = new Map([[note.txid, note.tx], [spend.txid, spend.tx]])
    const anchored = new Set()
    const store = CheckpointStore.open(path.join(tmp, 'client'))
    store.defineContext('now', { tipHeight: '1000000', medianTimePast: '4000000000' })
    store.configureReconciler({ journalId: 'two-providers', nonFinal: false, initialContext: 'now' })
    let verifying = Promise.resolve()
    const verify = () => {
      verifying = verifying.then(async () => {
        const results = []
        for (const job of store.pendingVerifications()) {
          const tx = known.get(job.txid)
          if (!tx) { results.push({ ...job, status: 'unresolved', reason: 'unknown transaction' }); continue }
          const ok = await tx.verify(chainTracker)
          for (const input of tx.inputs) {
            const src = input.sourceTransaction
            if (src && src.merklePath && !anchored.has(src.id('hex'))) {
              anchored.add(src.id('hex'))
              store.addAnchor(Buffer.from(src.toBinary()))
            }
          }
          results.push(ok
            ? { ...job, status: 'verified', raw: Buffer.from(tx.toBinary()), reason: 'sdk verify' }
            : { ...job, status: 'invalid', reason: 'sdk verify failed' })
        }
        if (results.length) store.acceptVerifications(results)
      })
      return verifying
    }

    const client = brc103LiveClient(a.origin, store)
    const latest = {}
    const keys = {}
    const states = []
    let waiter = null
    const until = (pred) => new Promise(resolve => {
      waiter = () => { if (pred()) { waiter = null; resolve() } }
      waiter()
    })
    const handle = client.follow('ls_notes', {}, {
      membership: 'claims',
      sources: [a.origin, b.origin],
      async onRevision (e) {
        await verify()
        keys[e.source] = e.sourceKey
        // The event's membership is of its commit; re-read after verification settled.
        latest[e.source] = { ...e, ...store.revisionSnapshot(e.sourceKey) }
        if (waiter) waiter()
      },
      onState (s) { states.push({ source: s.source, connection: s.connection }); if (waiter) waiter() }
    })
    const view = url => latest[url] ? shown(latest[url]) : {}

    await until(() => view(a.origin)[op(note.txid)] === 'current' && view(b.origin)[op(note.txid)] === 'current')

    // B learns the spend; A has not processed it.
    await b.submit(spend)
    await until(() => !listed(latest[b.origin]).includes(op(note.txid)) && view(a.origin)[op(note.txid)] === 'spent')
    expect(listed(latest[a.origin])).toEqual([op(note.txid)]) // A still lists it...
    expect(store.reconciledView().spent).toContainEqual({ outpoint: { txid: note.txid, outputIndex: 0 }, by: spend.txid }) // ...spent for all

    // A resets while still lagging: its new snapshot lists the output again, and it stays spent.
    const bGeneration = store.checkpoint(keys[b.origin]).generation
    const bMembers = store.members(keys[b.origin])
    await a.live.resetEpoch()
    await until(() => store.checkpoint(keys[a.origin]).generation === 1 && latest[a.origin].state.currentGeneration === 1)
    expect(listed(latest[a.origin])).toEqual([op(note.txid)])
    expect(view(a.origin)[op(note.txid)]).toBe('spent')
    // A's reset did not touch B: same generation, same rows, not stale.
    expect(store.checkpoint(keys[b.origin]).generation).toBe(bGeneration)
    expect(store.members(keys[b.origin])).toEqual(bMembers)
    expect(store.state(keys[b.origin]).stale).toBe(false)

    // A catches up.
    await a.submit(spend)
    await until(() => !listed(latest[a.origin]).includes(op(note.txid)))

    // A goes away: its source is retrying (its rows stay, shown stale by the app); B continues.
    const kept = store.members(keys[a.origin])
    await a.close()
    await until(() => states.some(s => s.source === a.origin && s.connection === 'retrying'))
    const later = await b.factory.createNotes(['later'])
    known.set(later.txid, later.tx)
    await b.submit(later)
    await until(() => view(b.origin)[op(later.txid)] === 'current')
    expect(store.members(keys[a.origin])).toEqual(kept)
    expect(states.filter(s => s.source === b.origin && s.connection === 'retrying')).toEqual([])

    await handle.close()
    const result = await handle.done
    expect(result.sources.map(s => s.source)).toEqual([a.origin, b.origin])
    expect(result.sources.every(s => s.error === null)).toBe(true)
    // Each source has its own checkpoint and generation.
    expect(store.checkpoint(keys[a.origin]).generation).toBe(1)
    expect(store.checkpoint(keys[b.origin]).generation).toBe(0)
    store.close()
  } finally {
    for (const n of nodes) await n.close()
  }
})
