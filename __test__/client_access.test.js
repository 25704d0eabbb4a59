'use strict'
// An access change seen by LiveLookupClient (BRC-193 §5, §9) on real parts: the package's
// provider (a real @bsv/overlay Engine admitting signed notes, the native sled store, Express
// over loopback, BRC-103/104) with @bsv/sdk AuthFetch clients of two identities, each its own
// access partition, following into one durable CheckpointStore.
//
// The operator narrows bob's partition (`live.changePolicy`): bob's session ends with
// reset-required and his next open is served under another `scope.access`. That is the same
// source with a new generation: bob's follow reports a start-over for `access-changed`, keeps
// showing the old rows marked stale while the narrowed snapshot arrives, swaps it in when it is
// complete and retires the old generation, in that order. Alice's source in the same store
// (another query) is untouched.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { AuthFetch, PrivateKey, ProtoWallet } = require('@bsv/sdk')
const { CheckpointStore } = require('../js/client/client.js')
const { startNode, brc103LiveClient } = require('./helpers/node')
const { NoteFactory } = require('./helpers/engine')
const { createNotesCompanion } = require('../demo/notes/notesCompanion')

jest.setTimeout(60000)

const op = (m) => `${m.outpoint.txid}.${m.outpoint.outputIndex}`
const noteOp = (n) => `${n.txid}.${n.outputIndex}`
const sorted = (a) => [...a].sort()

let tmp, node
const keys = { alice: PrivateKey.fromRandom(), bob: PrivateKey.fromRandom(), carol: PrivateKey.fromRandom() }
const id = Object.fromEntries(Object.entries(keys).map(([n, k]) => [n, k.toPublicKey().toString()]))
// What each partition may read besides public notes and its own: `grants[p]` are more readers
// whose notes partition p may see (the policy the operator changes).
const grants = new Map()

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-client-access-'))
  const base = createNotesCompanion({ addressed: true })
  node = await startNode({
    companion: { ...base, visibility: ({ partition }) => ({ in: ['readers', ['*', partition, ...(grants.get(partition) || [])]] }) },
    live: {
      accessPolicy: 'urn:test:client-access',
      authorize: ({ principal }) => principal ? { partition: principal } : null
    }
  })
})

afterAll(async () => {
  await node.close()
  fs.rmSync(tmp, { recursive: true, force: true })
})

/**
 * Follows `query` as `who` into `store`, logging every state and revision event (the lists read
 * in the callback, as of its revision) in one array, in the order the follow reports them.
 */
function follow (who, store, query, log, onEvent) {
  const client = brc103LiveClient(node.origin, store, {
    authFetch: new AuthFetch(new ProtoWallet(keys[who])),
    // One row a page: the replacement snapshot takes several commits, so its progress shows.
    limits: { maxObservations: 1, waitMs: 2000 }
  })
  const handle = client.follow('ls_notes', query, {
    membership: 'claims',
    onState (e) {
      log.push({ kind: 'state', connection: e.connection, progress: e.progress, reason: e.reason, generation: e.generation, sourceKey: e.sourceKey })
      onEvent()
    },
    onRevision (e) {
      log.push({
        kind: 'revision',
        sourceKey: e.sourceKey,
        restored: e.restored,
        batch: e.batch,
        swapped: e.outcome ? e.outcome.swapped : null,
        state: e.state,
        members: e.members.map(m => ({ op: op(m), present: m.present, generation: m.generation, stale: m.stale })),
        partial: e.partialMembers.map(m => ({ op: op(m), generation: m.generation }))
      })
      onEvent()
    }
  })
  return { client, handle }
}

test("a policy change narrowing bob's partition: old rows stale, then swapped to the narrowed snapshot, then the old generation retired; alice's source untouched", async () => {
  const factory = new NoteFactory(node.t.chainTracker, { authorKey: keys.alice })
  const built = await factory.build({ notes: ['public one', 'public two', { text: 'alice to carol', to: id.carol }] })
  await node.submit(built)
  const [pub1, pub2, toCarol] = built.notes.map(noteOp)
  // Bob may read what alice writes or receives, for now.
  grants.set(id.bob, [id.alice])

  const store = CheckpointStore.open(path.join(tmp, 'client'))
  const logs = { alice: [], bob: [] }
  let waiting = []
  const check = () => { waiting = waiting.filter(w => !w.pred() || (w.resolve(), false)) }
  const until = (pred) => new Promise(resolve => { waiting.push({ pred, resolve }); check() })
  const a = follow('alice', store, { author: id.alice }, logs.alice, check)
  const b = follow('bob', store, {}, logs.bob, check)
  try {
    await policyChange(store, a, b, logs, until, [pub1, pub2, toCarol])
  } finally {
    await Promise.all([a.handle.close(), b.handle.close()])
    store.close()
  }
})

// The test above, once both follows run; it closes them whatever happens here.
async function policyChange (store, a, b, logs, until, [pub1, pub2, toCarol]) {
  const snapshotComplete = (e) => e.kind === 'state' && e.progress === 'snapshot-complete'
  await until(() => logs.alice.some(snapshotComplete) && logs.bob.some(snapshotComplete))

  const bobKey = b.client.sourceKey('ls_notes', {})
  const aliceKey = a.client.sourceKey('ls_notes', { author: id.alice })
  expect(Object.keys(bobKey).sort()).toEqual(['provider', 'queryDigest', 'service'])
  expect(bobKey.provider).toBe(node.identity)
  const before = store.checkpoint(bobKey)
  expect(before).toMatchObject({ generation: 0, access: node.live.accessOf(id.bob) })
  const wide = sorted(store.members(bobKey).filter(m => m.present).map(op))
  expect(wide).toEqual(sorted([pub1, pub2, toCarol]))
  const aliceMembers = store.members(aliceKey)
  expect(sorted(aliceMembers.filter(m => m.present).map(op))).toEqual(sorted([pub1, pub2, toCarol]))
  const aliceState = store.state(aliceKey)
  const aliceAt = logs.alice.length
  const bobAt = logs.bob.length
  // The last batch bob committed under the old access, to try again once it is retired.
  const oldBatch = logs.bob.filter(e => e.kind === 'revision' && e.batch).pop().batch

  // The operator narrows bob's partition: his sessions end with reset-required.
  grants.delete(id.bob)
  expect(await node.live.changePolicy({ partitions: [id.bob] })).toBeGreaterThanOrEqual(1)
  // Bob's follow starts over and completes the snapshot it started over with.
  const startOver = (e) => e.kind === 'state' && e.progress === 'started-over'
  await until(() => {
    const since = logs.bob.slice(bobAt)
    const i = since.findIndex(startOver)
    return i >= 0 && since.slice(i).some(snapshotComplete)
  })
  // Alice's long poll goes on across bob's reset: wait for her next revision after it.
  const aliceSeen = logs.alice.length
  await until(() => logs.alice.length > aliceSeen && logs.alice.slice(aliceSeen).some(e => e.kind === 'revision'))
  await Promise.all([a.handle.close(), b.handle.close()])

  // Bob's follow, from the policy change on.
  const after = logs.bob.slice(bobAt)
  const startedOver = after.findIndex(startOver)
  expect(after[startedOver]).toMatchObject({ connection: 'connected', reason: 'access-changed', generation: 1 })
  // (A poll answered just before the change may still commit, under the old access.)
  for (const e of after.slice(0, startedOver).filter(e => e.kind === 'revision')) {
    expect(e.members.every(m => m.generation === 0 && !m.stale)).toBe(true)
  }
  const revisions = after.slice(startedOver).filter(e => e.kind === 'revision')
  const swap = revisions.findIndex(e => e.swapped)
  expect(swap).toBeGreaterThan(0)
  // Until the swap: the old generation's rows, all listed and stale, and the replacement
  // growing as partial rows of generation 1.
  const replacing = revisions.slice(0, swap)
  for (const e of replacing) {
    expect(e.sourceKey).toEqual(bobKey)
    expect(e.state).toMatchObject({ currentGeneration: 0, pendingGeneration: 1, stale: true })
    expect(sorted(e.members.map(m => m.op))).toEqual(wide)
    expect(e.members.every(m => m.present && m.stale && m.generation === 0)).toBe(true)
    expect(e.partial.every(m => m.generation === 1 && [pub1, pub2].includes(m.op))).toBe(true)
  }
  expect(replacing[0].partial.length).toBe(1)
  // The swap: the narrowed snapshot in one commit, the row bob may no longer read gone.
  const swapped = revisions[swap]
  expect(swapped.state).toMatchObject({ currentGeneration: 1, pendingGeneration: null, stale: false })
  expect(sorted(swapped.members.map(m => m.op))).toEqual(sorted([pub1, pub2]))
  expect(swapped.members.every(m => m.present && !m.stale && m.generation === 1)).toBe(true)
  expect(swapped.partial).toEqual([])
  expect(after.findIndex(e => e.kind === 'state' && e.progress === 'snapshot-complete')).toBeGreaterThan(after.indexOf(swapped))
  // And retired: nothing of the old generation is listed any more, and its late work is a no-op.
  for (const e of revisions.slice(swap)) expect(e.members.every(m => m.generation === 1)).toBe(true)
  expect(store.commitBatch(bobKey, 0, before.cursor, oldBatch)).toMatchObject({ ignored: true })
  expect(store.checkpoint(bobKey)).toMatchObject({ generation: 1, access: node.live.accessOf(id.bob) })
  expect(store.checkpoint(bobKey).access).not.toBe(before.access)
  // One source throughout: the key the follow reports never changed.
  expect(logs.bob.filter(e => e.sourceKey).every(e => JSON.stringify(e.sourceKey) === JSON.stringify(bobKey))).toBe(true)
  expect(b.client.sourceKey('ls_notes', {})).toEqual(bobKey)

  // Alice's source: her follow never started over, each of her revisions since shows the same
  // membership, and the store holds it as before.
  const aliceAfter = logs.alice.slice(aliceAt)
  expect(aliceAfter.filter(e => e.kind === 'state' && e.progress)).toEqual([])
  const aliceRevisions = aliceAfter.filter(e => e.kind === 'revision')
  expect(aliceRevisions.length).toBeGreaterThan(0)
  for (const e of aliceRevisions) {
    expect(e.swapped).toBe(false)
    expect(e.state).toMatchObject({ currentGeneration: 0, pendingGeneration: null, stale: false })
    expect(e.members).toEqual(aliceMembers.map(m => ({ op: op(m), present: m.present, generation: m.generation, stale: m.stale })))
  }
  expect(store.members(aliceKey)).toEqual(aliceMembers)
  expect(store.state(aliceKey)).toMatchObject({ currentGeneration: 0, pendingGeneration: null, received: aliceState.received, accepted: aliceState.accepted })
}
