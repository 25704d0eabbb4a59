'use strict'
// Failover across nodes (BRC-193 §9, docs/scaling.md): a client follows one query on two real
// nodes (Express, BRC-103 with AuthFetch, real @bsv/overlay Engines, one shared local chain)
// into one store. Node A goes away: A's membership stays as it was (the source is
// `retrying`) while B's keeps changing. A comes back on the same address, store and identity:
// the client resumes A's session from its stored cursor (no new open, same generation) and
// every change arrives exactly once.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { PrivateKey } = require('@bsv/sdk')
const { CheckpointStore } = require('../js/client/client.js')
const { startNode, brc103LiveClient } = require('./helpers/node')
const { LocalChainTracker, NoteFactory } = require('./helpers/engine')

jest.setTimeout(60000)

let tmp
beforeEach(() => { tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-failover-')) })
afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }))

const listed = (store, key) => store.members(key).filter(m => m.present).map(m => m.outpoint.txid).sort()

test('a node going away leaves its membership stale while the other continues; back, it resumes from its cursor', async () => {
  const chainTracker = new LocalChainTracker()
  const aOptions = { chainTracker, dir: path.join(tmp, 'a-live'), engineDir: fs.mkdtempSync(path.join(tmp, 'a-engine-')), serverKey: PrivateKey.fromRandom() }
  let a = await startNode(aOptions)
  const b = await startNode({ chainTracker })
  const nodes = [a, b]
  const store = CheckpointStore.open(path.join(tmp, 'client'))
  try {
    const first = await a.factory.createNotes(['on A'])
    await a.submit(first)
    const second = await b.factory.createNotes(['on B'])
    await b.submit(second)

    const client = brc103LiveClient(a.origin, store)
    const keys = {}
    const states = []
    let waiter = null
    const until = (what, pred) => new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('timed out waiting until ' + what)), 30000)
      waiter = () => { if (pred()) { clearTimeout(timer); waiter = null; resolve() } }
      waiter()
    })
    const handle = client.follow('ls_notes', {}, {
      membership: 'claims',
      sources: [a.origin, b.origin],
      onRevision (e) {
        keys[e.source] = e.sourceKey
        if (waiter) waiter()
      },
      onState (s) { states.push({ source: s.source, connection: s.connection, at: Date.now() }); if (waiter) waiter() }
    })
    const aKey = () => keys[a.origin]
    const bKey = () => keys[b.origin]
    await until('both sources list their note', () => aKey() && bKey() &&
      listed(store, aKey()).includes(first.txid) && listed(store, bKey()).includes(second.txid))
    const aBefore = store.checkpoint(aKey())
    const aMembers = store.members(aKey())

    // A goes away: its connections drop and its server stops.
    const downAt = Date.now()
    await a.close()
    await until('A is retrying', () => states.some(s => s.source === a.origin && s.connection === 'retrying' && s.at >= downAt))
    // B carries on while A is down; A's rows stay exactly as they were.
    const third = await b.factory.createNotes(['on B while A is down'])
    await b.submit(third)
    await until('B lists the new note', () => listed(store, bKey()).includes(third.txid))
    expect(store.members(aKey())).toEqual(aMembers)
    expect(states.filter(s => s.source === b.origin && s.connection === 'retrying')).toEqual([])

    // A comes back on the same port, store, Engine and identity.
    a = await startNode({ ...aOptions, port: new URL(a.origin).port | 0, live: { create: false } })
    nodes[0] = a
    const upAt = Date.now()
    const fourth = await new NoteFactory(chainTracker).createNotes(['on A after its restart'])
    await a.submit(fourth)
    await until('A lists the note made after its restart', () => listed(store, aKey()).includes(fourth.txid))
    const resumedMs = Date.now() - upAt
    const aAfter = store.checkpoint(aKey())
    // Resumed, not reopened: the same session and generation, no reset.
    expect(aAfter.session).toBe(aBefore.session)
    expect(aAfter.generation).toBe(aBefore.generation)
    expect(states.some(s => s.source === a.origin && s.connection === 'connected' && s.at >= upAt)).toBe(true)
    // Nothing lost, nothing twice: each source lists exactly its notes, each group received once.
    expect(listed(store, aKey())).toEqual([first.txid, fourth.txid].sort())
    expect(listed(store, bKey())).toEqual([second.txid, third.txid].sort())
    const aRows = store.members(aKey()).filter(m => m.present)
    expect(new Set(aRows.map(m => m.observationId)).size).toBe(aRows.length)

    await handle.close()
    const result = await handle.done
    expect(result.sources.every(s => s.error === null)).toBe(true)
    // For the record (not asserted: the machine is shared): how long A took to come back live.
    console.log(`failover: A live again ${resumedMs} ms after its restart`)
  } finally {
    store.close()
    for (const n of nodes) await n.close()
  }
})
