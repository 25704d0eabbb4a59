'use strict'
// The native CheckpointStore through its JS wrapper, on real sled directories:
// commit, replay no-op, equivocation quarantine, stale cursor refusal, restart,
// two sources for one outpoint, and the interim digest against the spec vectors.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { CheckpointStore, digest, canonicalJson } = require('../js/client/client.js')

const GENESIS = '000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f'
const hex32 = s => crypto.createHash('sha256').update(s).digest('hex')

function scope (provider, epoch = 'e1') {
  return {
    chain: { network: 'main', genesisHash: GENESIS },
    provider, service: 'ls_notes', queryDigest: hex32('q'), rulesDigest: hex32('rules'),
    access: 'public', epoch
  }
}
const keyOf = s => ({ provider: s.provider, service: s.service, queryDigest: s.queryDigest })
const output = (id, s, index, txid = hex32('tx')) =>
  ({ id, scope: s, kind: 'output', payload: { evidence: { txid, outputIndex: index, beef: 'AQID' } } })
const withdraw = (id, s, index, txid = hex32('tx')) =>
  ({ id, scope: s, kind: 'withdraw', payload: { outpoint: { chain: s.chain, txid, outputIndex: index }, reason: 'gone' } })
const group = (id, sequence, observations) => ({ id, sequence: String(sequence), observations })
function batch (s, phase, groups, cursor, snapshotComplete, through, highWater = through, session = 'sess') {
  return Buffer.from(JSON.stringify({
    version: 1, session, scope: s, phase, groups, cursor, snapshotComplete,
    through: String(through), highWater: String(highWater), expiresAt: '4000000000', replayUntil: '4000003600',
    limits: { maxBytes: 65536, maxObservations: 64, waitMs: 0 }
  }))
}

let dir
beforeEach(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-client-')) })
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }))

// A store with the reconciler configured (evidence is journaled at receipt) and a first
// generation of `s`'s source begun.
function reconciling (s, journalId) {
  const store = CheckpointStore.open(path.join(dir, 'store'))
  store.defineContext('tip', { tipHeight: '1000000', medianTimePast: '4000000000' })
  store.configureReconciler({ journalId, nonFinal: true, initialContext: 'tip' })
  const key = keyOf(s)
  return { store, key, gen: store.beginGeneration(key, 'label') }
}

function opened (s) {
  const store = CheckpointStore.open(path.join(dir, 'store'))
  const key = keyOf(s)
  const gen = store.beginGeneration(key, 'label')
  store.commitBatch(key, gen, null, batch(s, 'snapshot', [group('snap', 10, [output('o0', s, 0)])], 'c1', true, 10))
  return { store, key, gen }
}

test('commit publishes after the snapshot and a restart keeps the checkpoint', () => {
  const s = scope('02aa')
  const { store, key, gen } = opened(s)
  expect(gen).toBe(0)
  const out = store.commitBatch(key, gen, 'c1', batch(s, 'live', [group('l12', 12, [output('o12', s, 1)])], 'c2', true, 12, 15))
  expect(out).toMatchObject({ applied: 1, accepted: 1, duplicates: 0, ignored: false })
  store.close()
  expect(() => store.members(key)).toThrow(/closed/)
  const again = CheckpointStore.open(path.join(dir, 'store'))
  expect(again.sourceForLabel('label')).toEqual(key)
  expect(again.checkpoint(key)).toMatchObject({ generation: 0, session: 'sess', cursor: 'c2', phase: 'live', through: '12', highWater: '15', snapshotComplete: true, epoch: 'e1', invalidated: null })
  const m = again.members(key)
  expect(m.map(r => [r.outpoint.outputIndex, r.present, r.sequence, r.stale])).toEqual([[0, true, '10', false], [1, true, '12', false]])
  again.close()
})

test('a bounded page cache holds the same store; a bad bound is refused before anything opens', () => {
  const s = scope('02aa')
  const { store, key } = opened(s)
  store.close()
  for (const cacheBytes of [0, -1, 1.5e300, NaN]) {
    expect(() => CheckpointStore.open(path.join(dir, 'store'), { cacheBytes })).toThrow(expect.objectContaining({ code: 'invalid' }))
  }
  const small = CheckpointStore.open(path.join(dir, 'store'), { cacheBytes: 1024 * 1024 })
  expect(small.members(key).map(r => [r.outpoint.outputIndex, r.present])).toEqual([[0, true]])
  small.close()
})

test('a replayed batch is a no-op; a stale cursor with new content is a conflict', () => {
  const s = scope('02aa')
  const { store, key, gen } = opened(s)
  const live = batch(s, 'live', [group('l12', 12, [withdraw('w12', s, 0)])], 'c2', true, 12)
  store.commitBatch(key, gen, 'c1', live)
  const rev = store.revision()
  expect(store.commitBatch(key, gen, 'c1', live)).toMatchObject({ applied: 0, duplicates: 1, revision: rev })
  const other = batch(s, 'live', [group('l13', 13, [output('o13', s, 3)])], 'c3', true, 13)
  expect(() => store.commitBatch(key, gen, 'c1', other)).toThrow(expect.objectContaining({ code: 'conflict' }))
  expect(() => store.commitBatch(key, gen, 'never-committed', other)).toThrow(expect.objectContaining({ code: 'conflict' }))
  expect(store.checkpoint(key).cursor).toBe('c2')
  expect(store.members(key)[0].present).toBe(false)
  expect(store.state(key)).toMatchObject({ received: 2, accepted: 2, pendingCount: 0 })
  store.close()
})

test('commitBatchAsync commits on the pool as commitBatch does: same outcomes, same errors, durable when it resolves', async () => {
  const s = scope('02aa')
  const { store, key, gen } = opened(s)
  const many = Array.from({ length: 64 }, (_, i) => group(`l${20 + i}`, 20 + i, [output(`o${20 + i}`, s, 20 + i)]))
  const live = batch(s, 'live', many, 'c2', true, 83)
  const before = store.checkpoint(key).cursor
  const pending = store.commitBatchAsync(key, gen, 'c1', live)
  // A store call made while the commit runs sees it whole or not at all (it waits for
  // the flush, or ran first).
  expect([1, 65]).toContain(store.state(key).received)
  expect(['c1', 'c2']).toContain(store.checkpoint(key).cursor)
  expect(before).toBe('c1')
  await expect(pending).resolves.toMatchObject({ applied: 64, accepted: 64, duplicates: 0, ignored: false })
  // A replay is the same no-op; a stale cursor with new content the same conflict.
  const rev = store.revision()
  await expect(store.commitBatchAsync(key, gen, 'c1', live)).resolves.toMatchObject({ applied: 0, duplicates: 64, revision: rev })
  const other = batch(s, 'live', [group('l99', 99, [output('o99', s, 99)])], 'c3', true, 99)
  await expect(store.commitBatchAsync(key, gen, 'c1', other)).rejects.toMatchObject({ code: 'conflict' })
  await expect(store.commitBatchAsync(key, gen, 'c2', Buffer.from('{'))).rejects.toMatchObject({ code: 'invalid' })
  // Closing while a commit runs waits for it; the reopened store holds it.
  const last = store.commitBatchAsync(key, gen, 'c2', other)
  store.close()
  await expect(last).resolves.toMatchObject({ applied: 1 })
  await expect(store.commitBatchAsync(key, gen, 'c3', other)).rejects.toThrow(/closed/)
  const again = CheckpointStore.open(path.join(dir, 'store'))
  expect(again.checkpoint(key).cursor).toBe('c3')
  expect(again.state(key)).toMatchObject({ received: 66, accepted: 66 })
  again.close()
})

test('equivocation is quarantined, invalidates the source, and survives a restart', () => {
  const s = scope('02aa')
  const { store, key, gen } = opened(s)
  const forged = batch(s, 'snapshot', [group('snap', 10, [output('o0', s, 7)])], 'c1', true, 10)
  expect(() => store.commitBatch(key, gen, null, forged)).toThrow(expect.objectContaining({ code: 'equivocation' }))
  store.close()
  const again = CheckpointStore.open(path.join(dir, 'store'))
  expect(again.state(key)).toMatchObject({ invalidated: 'equivocation', quarantined: 1, stale: true })
  expect(again.members(key).map(m => m.outpoint.outputIndex)).toEqual([0])
  const next = batch(s, 'live', [], 'c2', true, 11)
  expect(() => again.commitBatch(key, gen, 'c1', next)).toThrow(expect.objectContaining({ code: 'reset-required' }))
  expect(again.beginGeneration(key)).toBe(1)
  again.close()
})

test('checks run before commit: boundary, sequences, size, scope', () => {
  const s = scope('02aa')
  const { store, key, gen } = opened(s)
  const cases = [
    [batch(s, 'snapshot', [], 'c2', true, 10), 'invalid'], // snapshot after completion
    [batch(s, 'live', [group('x', 10, [output('x', s, 4)])], 'c2', true, 12), 'invalid'], // not above through
    [batch(s, 'live', [group('x', 13, [output('x', s, 4)])], 'c2', true, 12), 'invalid'], // above through
    [batch(s, 'live', [], 'c2', true, 9), 'invalid'], // through decreased
    [batch(s, 'live', [], 'c2', true, 12, 11), 'invalid'], // through > highWater
    [batch(scope('02aa', 'e2'), 'live', [], 'c2', true, 12), 'invalid'], // scope changed
    [batch(s, 'live', [], 'c2', true, 12, 12, 'other-session'), 'invalid'],
    [Buffer.from('<html>oops</html>'), 'invalid']
  ]
  for (const [body, code] of cases) {
    expect(() => store.commitBatch(key, gen, 'c1', body)).toThrow(expect.objectContaining({ code }))
  }
  const ok = batch(s, 'live', [group('x', 11, [output('x', s, 4)])], 'c2', true, 12)
  expect(() => store.commitBatch(key, gen, 'c1', ok, { maxBytes: ok.length - 1 })).toThrow(expect.objectContaining({ code: 'limited' }))
  expect(() => store.commitBatch(key, gen, 'c1', ok, { maxObservations: 0 })).toThrow(expect.objectContaining({ code: 'limited' }))
  expect(store.checkpoint(key).cursor).toBe('c1')
  expect(store.commitBatch(key, gen, 'c1', ok, { maxBytes: ok.length })).toMatchObject({ applied: 1 })
  expect(() => store.beginGeneration({ ...key, queryDigest: 'nope' })).toThrow(expect.objectContaining({ code: 'invalid' }))
  store.close()
})

test('two providers keep separate receipts and memberships for the same outpoint', () => {
  const store = CheckpointStore.open(path.join(dir, 'store'))
  const a = scope('02aa'); const b = scope('02bb')
  const ka = keyOf(a); const kb = keyOf(b)
  const ga = store.beginGeneration(ka); const gb = store.beginGeneration(kb)
  store.commitBatch(ka, ga, null, batch(a, 'snapshot', [group('snap', 5, [output('o', a, 0)])], 'c1', true, 5))
  store.commitBatch(kb, gb, null, batch(b, 'snapshot', [group('snap', 9, [output('o', b, 0)])], 'c1', true, 9))
  store.commitBatch(ka, ga, 'c1', batch(a, 'live', [group('l6', 6, [withdraw('w', a, 0)])], 'c2', true, 6))
  const ma = store.members(ka); const mb = store.members(kb)
  expect(ma[0].outpoint).toEqual(mb[0].outpoint)
  expect([ma[0].present, ma[0].sequence, mb[0].present, mb[0].sequence]).toEqual([false, '6', true, '9'])
  expect([store.state(ka).received, store.state(kb).received]).toEqual([2, 1])
  store.close()
})

test('pending verification blocks later membership but not receipt', () => {
  const s = scope('02aa')
  const { store, key, gen } = opened(s)
  store.commitBatch(key, gen, 'c1', batch(s, 'live', [group('l11', 11, [withdraw('w', s, 0)])], 'c2', true, 11), { membership: 'manual' })
  store.commitBatch(key, gen, 'c2', batch(s, 'live', [group('l12', 12, [output('p', s, 0)])], 'c3', true, 12))
  expect(store.state(key)).toMatchObject({ pendingCount: 2, pendingGroups: [{ groupId: 'l11', sequence: '11', generation: 0 }, { groupId: 'l12', sequence: '12', generation: 0 }] })
  expect(store.members(key)[0]).toMatchObject({ present: true, sequence: '10' })
  expect(store.markVerified(key, gen, 'l11')).toMatchObject({ accepted: 2 })
  expect(store.members(key)[0]).toMatchObject({ present: true, sequence: '12', observationId: 'p' })
  store.close()
})

test('interim digest matches the spec vectors', () => {
  const v = JSON.parse(fs.readFileSync(path.join(__dirname, '../tests/fixtures/spec/digest-vectors.json'), 'utf8'))
  expect(canonicalJson(v.body)).toBe(v.canonical)
  expect(v.vectors.length).toBeGreaterThan(0)
  for (const vec of v.vectors) expect(digest(vec.domain, v.body)).toBe(vec.sha256)
})

test('a pending open request id survives a restart and is consumed by the open commit', () => {
  const s = scope('02aa')
  let store = CheckpointStore.open(path.join(dir, 'store'))
  expect(store.pendingOpen('lbl')).toBeNull()
  store.setPendingOpen('lbl', 'a'.repeat(32))
  store.close()
  store = CheckpointStore.open(path.join(dir, 'store'))
  expect(store.pendingOpen('lbl')).toBe('a'.repeat(32))
  const key = keyOf(s)
  const gen = store.beginGeneration(key, 'lbl')
  // A failed commit keeps it (the open can be retried with the same id)...
  expect(() => store.commitBatch(key, gen, null, Buffer.from('{}'), { openLabel: 'lbl' })).toThrow(expect.objectContaining({ code: 'invalid' }))
  expect(store.pendingOpen('lbl')).toBe('a'.repeat(32))
  // ...a committed open response removes it in the same write.
  store.commitBatch(key, gen, null, batch(s, 'snapshot', [], 'c1', true, 3), { openLabel: 'lbl' })
  expect(store.pendingOpen('lbl')).toBeNull()
  store.close()
})

test('an unknown option key is refused with invalid naming it, and nothing is committed', async () => {
  const { LiveLookupClient } = require('../js/client/client.js')
  expect(() => CheckpointStore.open(path.join(dir, 'other'), { cacheByte: 1 << 20 })).toThrow(expect.objectContaining({ code: 'invalid', option: 'cacheByte', message: expect.stringMatching(/`cacheByte`/) }))
  const s = scope('02aa')
  const { store, key, gen } = opened(s)
  const next = batch(s, 'live', [group('l11', 11, [output('o11', s, 1)])], 'c2', true, 11)
  // The option's former name: it must not quietly mean the default rule.
  expect(() => store.commitBatch(key, gen, 'c1', next, { verified: false })).toThrow(expect.objectContaining({ code: 'invalid', option: 'verified' }))
  await expect(store.commitBatchAsync(key, gen, 'c1', next, { verified: false })).rejects.toMatchObject({ code: 'invalid', option: 'verified' })
  expect(store.checkpoint(key).cursor).toBe('c1')
  expect(store.state(key).received).toBe(1)
  expect(store.commitBatch(key, gen, 'c1', next, { membership: 'manual' })).toMatchObject({ applied: 1, accepted: 0 })

  const base = { baseURL: 'https://overlay.example', chain: { network: 'main', genesisHash: GENESIS }, fetch, store }
  const refused = (options, option) => expect(() => new LiveLookupClient(options)).toThrow(expect.objectContaining({ code: 'invalid', option }))
  refused({ ...base, chaintracker: {} }, 'chaintracker')
  refused({ ...base, limits: { waitMS: 1000 } }, 'waitMS')
  refused({ ...base, retry: { initialMS: 1 } }, 'initialMS')
  refused({ ...base, verification: { concurency: 2 } }, 'concurency')
  const client = new LiveLookupClient(base)
  const revision = store.revision()
  await expect(client.follow('ls_notes', {}, { membership: 'claims', readahead: true })).rejects.toMatchObject({ code: 'invalid', option: 'readahead' })
  await expect(client.follow('ls_notes', {}, { membership: 'claims', source: ['https://b.example'] })).rejects.toMatchObject({ code: 'invalid', option: 'source' })
  expect(store.revision()).toBe(revision)
  store.close()
})

test('the client-only entry point exports the BRC-103 transport and wallet the docs use with it', () => {
  const client = require('../js/client/client.js')
  const root = require('../js/index.js')
  expect(client.NativeAuthFetch).toBe(root.NativeAuthFetch)
  expect(client.NativeWallet).toBe(root.NativeWallet)
  const wallet = client.NativeWallet.fromPrivateKey('11'.repeat(32))
  const authFetch = new client.NativeAuthFetch(wallet)
  expect(typeof authFetch.fetch).toBe('function')
  authFetch.close()
})

test.each(['manual', 'claims', 'verified'])('an invalid member quarantines its whole group and invalidates the source under %s (BRC-192 §8)', async (rule) => {
  const { LocalChainTracker, NoteFactory } = require('./helpers/engine')
  // A real one-output transaction: its group lists output 0 (valid) and output 999 (none).
  const note = await new NoteFactory(new LocalChainTracker()).createNotes(['one output'])
  const beef = Buffer.from(note.beef).toString('base64')
  const s = scope('02aa')
  const { store, key, gen } = reconciling(s, 'quarantine')
  const out = (id, index) => ({ id, scope: s, kind: 'output', payload: { evidence: { txid: note.txid, outputIndex: index, beef } } })
  store.commitBatch(key, gen, null, batch(s, 'snapshot', [group('g', 10, [out('valid', 0), out('bad', 999)])], 'c1', true, 10), { membership: rule })
  expect(store.state(key)).toMatchObject({ quarantined: 1, pendingCount: 0, invalidated: expect.stringMatching(/^invalid-evidence: .*output 999 does not exist/) })
  // markVerified cannot publish any of it: not the nonexistent output, not its valid sibling.
  if (rule === 'manual') expect(store.markVerified(key, gen, 'g')).toMatchObject({ accepted: 0 })
  expect(store.members(key)).toEqual([])
  expect(store.partialMembers(key)).toEqual([])
  // The generation receives nothing more: a new one must follow.
  expect(() => store.commitBatch(key, gen, 'c1', batch(s, 'live', [], 'c2', true, 11), { membership: rule })).toThrow(expect.objectContaining({ code: 'reset-required' }))
  store.close()
})

test('spaceUsage counts the keys each commit writes, per key space', () => {
  const s = scope('02aa')
  const { store, key, gen } = opened(s)
  const before = store.spaceUsage()
  // The open's snapshot: one group of one observation.
  expect(before.M).toMatchObject({ keys: 1 })
  expect(before.R).toMatchObject({ keys: 1 })
  store.commitBatch(key, gen, 'c1', batch(s, 'live', [group('l12', 12, [output('o12', s, 1), output('o13', s, 2), withdraw('w0', s, 0)])], 'c2', true, 12, 15))
  const after = store.spaceUsage()
  // One member row per outpoint the group names (row 0 is rewritten absent, not added)
  // with its index key, one group record, and one identity for the group and one per
  // observation.
  expect(after.M.keys - before.M.keys).toBe(2)
  expect(after.K.keys - before.K.keys).toBe(2)
  expect(after.R.keys - before.R.keys).toBe(1)
  expect(after.J.keys - before.J.keys).toBe(4)
  for (const v of Object.values(after)) expect(v.bytes).toBeGreaterThan(0)
  store.close()
  expect(() => store.spaceUsage()).toThrow(/closed/)
})

test('a source key is {provider, service, queryDigest}: one naming an access is refused, whatever the call', () => {
  const s = scope('02aa')
  const { store, key, gen } = opened(s)
  const withAccess = { ...key, access: s.access }
  const calls = [
    () => store.checkpoint(withAccess),
    () => store.members(withAccess),
    () => store.state(withAccess),
    () => store.beginGeneration(withAccess),
    () => store.commitBatch(withAccess, gen, 'c1', batch(s, 'live', [], 'c2', true, 11))
  ]
  for (const call of calls) expect(call).toThrow(expect.objectContaining({ code: 'invalid', message: expect.stringMatching(/access belongs to a generation/) }))
  expect(store.checkpoint(key)).toMatchObject({ generation: gen, cursor: 'c1', access: 'public' })
  store.close()
})

test.each(['manual', 'claims', 'verified'])('a group verification judges invalid later quarantines and invalidates the source under %s (BRC-192 §8)', async (rule) => {
  const { LocalChainTracker, NoteFactory } = require('./helpers/engine')
  // Evidence that passes every receipt check; the verifier's verdict comes later.
  const note = await new NoteFactory(new LocalChainTracker()).createNotes(['judged later'])
  const beef = Buffer.from(note.beef).toString('base64')
  const s = scope('02aa')
  const { store, key, gen } = reconciling(s, 'later')
  const out = { id: 'o', scope: s, kind: 'output', payload: { evidence: { txid: note.txid, outputIndex: 0, beef } } }
  store.commitBatch(key, gen, null, batch(s, 'snapshot', [group('g', 10, [out])], 'c1', true, 10), { membership: rule })
  expect(store.state(key)).toMatchObject({ quarantined: 0, invalidated: null })
  // Under claims the group is listed at receipt; under the others it waits.
  expect(store.members(key).length).toBe(rule === 'claims' ? 1 : 0)
  const jobs = store.pendingVerifications(note.txid)
  expect(jobs.length).toBe(1)
  store.acceptVerifications(jobs.map(j => ({ txid: j.txid, variantId: j.variantId, contextId: j.contextId, status: 'invalid', reason: 'a script fails' })))
  expect(store.state(key)).toMatchObject({ quarantined: 1, invalidated: expect.stringMatching(/^invalid-evidence: /) })
  if (rule === 'manual') expect(store.markVerified(key, gen, 'g')).toMatchObject({ accepted: 0 })
  expect(store.members(key).length).toBe(rule === 'claims' ? 1 : 0)
  // The generation receives nothing more: a new one must follow.
  expect(() => store.commitBatch(key, gen, 'c1', batch(s, 'live', [], 'c2', true, 11), { membership: rule })).toThrow(expect.objectContaining({ code: 'reset-required' }))
  store.close()
})

test('renew is checked before anything starts: an object with afterGroups or afterMs, positive integers', async () => {
  const store = CheckpointStore.open(path.join(dir, 'store'))
  const { LiveLookupClient } = require('../js/client/client.js')
  const client = new LiveLookupClient({ baseURL: 'https://overlay.example', chain: { network: 'main', genesisHash: GENESIS }, fetch, store })
  const refused = (renew, option) => expect(client.follow('ls_notes', {}, { membership: 'claims', renew })).rejects.toMatchObject({ code: 'invalid', option })
  await refused(5, 'renew')
  await refused({}, 'renew')
  await refused({ afterGroups: 0 }, 'afterGroups')
  await refused({ afterMs: 1.5 }, 'afterMs')
  await refused({ afterGroup: 10 }, 'afterGroup')
  expect(store.revision()).toBe(0)
  store.close()
})
