'use strict'
// js/provider/ingest.js against a REAL @bsv/overlay 0.4.6 Engine (knex + better-sqlite3) and REAL signed
// transactions with SPV proofs checked by a local chain tracker.
const { Transaction } = require('@bsv/sdk')
const { createTestEngine, NoteFactory } = require('./helpers/engine')
const { createSink } = require('./helpers/sink')
const { RecordingLookupService, normalizedCalls } = require('./helpers/recording')
const { NotesLookupService } = require('../demo/notes/NotesLookupService')
const { NotesTopicManager } = require('../demo/notes/NotesTopicManager')
const { createNotesCompanion } = require('../demo/notes/notesCompanion')
const { NOTES_TOPIC } = require('../demo/notes/notesProtocol')
const { wrapLookupService, attachEngine, backfill, whenPublished, LEGACY_CONTEXT_SCHEMA } = require('../js/provider/ingest')

const TOPICS = [NOTES_TOPIC]
const open = []
afterEach(async () => {
  while (open.length > 0) await open.pop().close()
})

/** A real Engine with the notes service wrapped as ls_notes, attached to a recording sink. */
async function setup (options = {}) {
  const sink = options.sink ?? createSink()
  const companion = options.companion ?? createNotesCompanion()
  let inner
  const t = await createTestEngine({
    storageLatencyTurns: options.storageLatencyTurns,
    managers: { [NOTES_TOPIC]: new NotesTopicManager({ retainHistory: options.retainHistory === true }) },
    lookupServices: async (knex) => {
      inner = new NotesLookupService(knex, options.innerModes)
      await inner.init()
      return { ...(options.before ?? {}), ls_notes: wrapLookupService('ls_notes', inner, companion, sink), ...(options.after ?? {}) }
    }
  })
  open.push(t)
  attachEngine(t.engine, sink)
  const factory = new NoteFactory(t.chainTracker)
  // A bracketed submit resolves before its group is committed; tests read the group after.
  const submit = async (built) => {
    const steak = await t.engine.submit({ beef: built.beef, topics: TOPICS })
    await whenPublished(t.engine)
    return steak
  }
  return { ...t, sink, inner, factory, submit, author: await factory.authorIdentityKey() }
}

function txidOfAtomic (bytes) {
  return Transaction.fromAtomicBEEF(Array.from(bytes)).id('hex')
}

async function innerRows (t) {
  const rows = await t.knex('notes').select('txid', 'outputIndex', 'text').orderBy(['txid', 'outputIndex'])
  return rows.map(r => `${r.txid}.${r.outputIndex}:${r.text}`)
}

function deferred () {
  let resolve
  const promise = new Promise(r => { resolve = r })
  return { promise, resolve }
}

// Storage that answers within the same event-loop turn (better-sqlite3) and storage that takes a
// few turns per call, as over a network: grouping must not depend on either.
describe.each([0, 3])('with storage latency of %i turns', (latency) => {
  test('one submit of a multi-output transaction commits one group admitting its notes', async () => {
    const t = await setup({ storageLatencyTurns: latency })
    const created = await t.factory.build({ notes: ['first note', 'second'], plainOutputs: 1 })
    const steak = await t.submit(created)
    expect(steak[NOTES_TOPIC].outputsToAdmit).toEqual([0, 1])

    expect(t.sink.groups).toHaveLength(1)
    const group = t.sink.groups[0]
    expect(group.map(c => [c.op, c.txid, c.outputIndex])).toEqual([
      ['admit', created.txid, 0], ['admit', created.txid, 1]
    ])
    for (const change of group) {
      const note = created.notes[change.outputIndex]
      expect(change).toMatchObject({ service: 'ls_notes', topic: NOTES_TOPIC, satoshis: 1000, expiresAt: null })
      expect(change.lockingScript).toBe(created.tx.outputs[change.outputIndex].lockingScript.toHex())
      expect(Buffer.isBuffer(change.beef)).toBe(true)
      expect(txidOfAtomic(change.beef)).toBe(created.txid)
      expect(change.attributes).toEqual({ author: t.author, length: note.text.length })
      expect(change.context.schema).toBe(LEGACY_CONTEXT_SCHEMA)
      expect(JSON.parse(change.context.bytes.toString('utf8'))).toEqual({ text: note.text })
    }
    // The inner service indexed them as it would unwrapped, and its lookup passes through.
    expect(await innerRows(t)).toEqual([`${created.txid}.0:first note`, `${created.txid}.1:second`])
    const answer = await t.engine.lookup({ service: 'ls_notes', query: { author: t.author } })
    expect(answer.outputs).toHaveLength(2)
  })

  test('spending a member and creating its replacement commits one group: remove with spend evidence, then admit', async () => {
    const t = await setup({ storageLatencyTurns: latency })
    const created = await t.factory.createNotes(['draft'])
    await t.submit(created)
    const replaced = await t.factory.replaceNote(created.notes[0], 'final')
    await t.submit(replaced)

    expect(t.sink.groups).toHaveLength(2)
    const [remove, admit, ...rest] = t.sink.groups[1]
    expect(rest).toEqual([])
    // The Engine reported both the spend and the non-retention; the group keeps the spend.
    expect(remove).toMatchObject({ op: 'remove', service: 'ls_notes', txid: created.txid, outputIndex: 0, reason: 'spent' })
    expect(remove.spend.spendingTxid).toBe(replaced.txid)
    expect(txidOfAtomic(remove.spend.beef)).toBe(replaced.txid)
    expect(admit).toMatchObject({ op: 'admit', txid: replaced.txid, outputIndex: 0 })
    expect(JSON.parse(admit.context.bytes)).toEqual({ text: 'final' })
    expect(await innerRows(t)).toEqual([`${replaced.txid}.0:final`])
  })

  test('spending without replacement commits one group with only the removal', async () => {
    const t = await setup({ storageLatencyTurns: latency })
    const created = await t.factory.createNotes(['a', 'b'])
    await t.submit(created)
    const spent = await t.factory.spendNotes([created.notes[1]])
    await t.submit(spent)

    expect(t.sink.groups).toHaveLength(2)
    expect(t.sink.groups[1].map(c => [c.op, c.txid, c.outputIndex, c.reason, c.spend && c.spend.spendingTxid]))
      .toEqual([['remove', created.txid, 1, 'spent', spent.txid]])
    expect(await innerRows(t)).toEqual([`${created.txid}.0:a`])
  })

  test('an eviction by the host commits its own group and reaches the inner service', async () => {
    const t = await setup({ storageLatencyTurns: latency })
    const created = await t.factory.createNotes(['to evict', 'to keep'])
    await t.submit(created)
    await t.engine.lookupServices.ls_notes.outputEvicted(created.txid, 0)

    expect(t.sink.groups).toHaveLength(2)
    expect(t.sink.groups[1]).toEqual([
      { op: 'remove', service: 'ls_notes', txid: created.txid, outputIndex: 0, reason: 'evicted', spend: null }
    ])
    expect(await innerRows(t)).toEqual([`${created.txid}.1:to keep`])
  })

  test('concurrent submits commit separate groups, each holding only its own changes', async () => {
    const t = await setup({ storageLatencyTurns: latency })
    const seed = await t.factory.createNotes(['s0', 's1', 's2'])
    await t.submit(seed)
    const built = [
      await t.factory.replaceNote(seed.notes[0], 's0 v2'),
      await t.factory.spendNotes([seed.notes[1]]),
      await t.factory.createNotes(['n1', 'n2']),
      await t.factory.replaceNote(seed.notes[2], 's2 v2', { fundingAt: 1 }),
      await t.factory.createNotes(['n3'])
    ]
    await Promise.all(built.map(b => t.submit(b)))

    const groups = t.sink.groups.slice(1)
    expect(groups).toHaveLength(built.length)
    const causeOf = (c) => c.op === 'admit' ? c.txid : c.spend.spendingTxid
    for (const group of groups) {
      expect(new Set(group.map(causeOf)).size).toBe(1)
    }
    const byCause = new Map(groups.map(g => [causeOf(g[0]), g.map(c => `${c.op}:${c.txid}.${c.outputIndex}`)]))
    expect(byCause.get(built[0].txid)).toEqual([`remove:${seed.txid}.0`, `admit:${built[0].txid}.0`])
    expect(byCause.get(built[1].txid)).toEqual([`remove:${seed.txid}.1`])
    expect(byCause.get(built[2].txid)).toEqual([`admit:${built[2].txid}.0`, `admit:${built[2].txid}.1`])
    expect(byCause.get(built[3].txid)).toEqual([`remove:${seed.txid}.2`, `admit:${built[3].txid}.0`])
    expect(byCause.get(built[4].txid)).toEqual([`admit:${built[4].txid}.0`])
  })

  test('a spend reported through the un-awaited outputSpent joins its group even when the inner service is slow', async () => {
    const inner = new RecordingLookupService('locking-script', 'txid')
    const record = inner.outputSpent.bind(inner)
    inner.outputSpent = async (payload) => {
      for (let i = 0; i < 10; i++) await new Promise(resolve => setImmediate(resolve))
      return record(payload)
    }
    const sink = createSink()
    const t = await setup({ storageLatencyTurns: latency, sink, after: { ls_slow: wrapLookupService('ls_slow', inner, createNotesCompanion(), sink) } })
    const created = await t.factory.createNotes(['slow'])
    await t.submit(created)
    const replaced = await t.factory.replaceNote(created.notes[0], 'slow 2')
    await t.submit(replaced)

    expect(sink.groups).toHaveLength(2)
    expect(sink.groups[1].map(c => `${c.service}:${c.op}:${c.txid}.${c.outputIndex}`)).toEqual([
      `ls_notes:remove:${created.txid}.0`, `ls_slow:remove:${created.txid}.0`,
      `ls_notes:admit:${replaced.txid}.0`, `ls_slow:admit:${replaced.txid}.0`
    ])
    expect(inner.calls.filter(([hook]) => hook === 'outputSpent').map(([, p]) => p.spendingTxid)).toEqual([replaced.txid])
  })
})

test('inner services get every hook in their own mode, as the Engine gives them unwrapped', async () => {
  const modes = [['locking-script', 'txid'], ['whole-tx', 'whole-tx'], ['locking-script', 'script'], ['whole-tx', 'none']]
  const direct = modes.map(([a, s]) => new RecordingLookupService(a, s))
  const inner = modes.map(([a, s]) => new RecordingLookupService(a, s))
  const sink = createSink()
  const services = {}
  modes.forEach((_, i) => {
    services[`ls_direct_${i}`] = direct[i]
    services[`ls_wrapped_${i}`] = wrapLookupService(`ls_wrapped_${i}`, inner[i], createNotesCompanion(), sink)
  })
  const t = await setup({ after: services, sink })
  // Spent notes sit at input 1 (funding at input 0): in 'script' mode the Engine drops input-0 spends.
  const created = await t.factory.build({ notes: ['x', 'y', 'z'], plainOutputs: 1 })
  await t.submit(created)
  await t.submit(await t.factory.replaceNote(created.notes[0], 'x2', { fundingAt: 0 }))
  await t.submit(await t.factory.spendNotes([created.notes[1]], { fundingAt: 0 }))
  await t.submit(await t.factory.build({ spend: [created.notes[2]], notes: ['z2', 'z3'], fundingAt: 0 }))

  for (let i = 0; i < modes.length; i++) {
    expect(inner[i].calls.length).toBeGreaterThan(0)
    expect(normalizedCalls(inner[i].calls)).toEqual(normalizedCalls(direct[i].calls))
  }
  // Same classes as the Engine's own (its nested @bsv/sdk 1.x), not merely equal bytes.
  const firstAdmit = (svc) => svc.calls.find(([hook]) => hook === 'outputAdmittedByTopic')[1]
  expect(firstAdmit(inner[0]).lockingScript.constructor).toBe(firstAdmit(direct[0]).lockingScript.constructor)
  const firstSpend = (svc) => svc.calls.find(([hook]) => hook === 'outputSpent')[1]
  expect(firstSpend(inner[2]).unlockingScript.constructor).toBe(firstSpend(direct[2]).unlockingScript.constructor)
  // Every wrapped service staged into the same submit groups: 4 submits, 4 groups.
  expect(sink.groups).toHaveLength(4)
  expect(new Set(sink.groups[0].map(c => c.service))).toEqual(new Set(['ls_notes', ...modes.map((_, i) => `ls_wrapped_${i}`)]))
})

test('a spend at input 0 reaches a script-mode inner service with inputIndex 0 (the Engine itself drops it)', async () => {
  const direct = new RecordingLookupService('locking-script', 'script')
  const inner = new RecordingLookupService('locking-script', 'script')
  const sink = createSink()
  const t = await setup({
    after: { ls_direct: direct, ls_wrapped: wrapLookupService('ls_wrapped', inner, createNotesCompanion(), sink) },
    sink
  })
  const created = await t.factory.createNotes(['n'])
  await t.submit(created)
  const spent = await t.factory.spendNotes([created.notes[0]], { fundingAt: -1 }) // the note is input 0
  await t.submit(spent)

  const spends = inner.calls.filter(([hook]) => hook === 'outputSpent').map(([, p]) => p)
  expect(spends).toHaveLength(1)
  expect(spends[0]).toMatchObject({ mode: 'script', spendingTxid: spent.txid, inputIndex: 0, txid: created.txid, outputIndex: 0, sequenceNumber: 0xffffffff })
  expect(spends[0].unlockingScript.toHex()).toBe(spent.tx.inputs[0].unlockingScript.toHex())
  expect(direct.calls.filter(([hook]) => hook === 'outputSpent')).toHaveLength(0)
  expect(t.logger.entries.some(e => String(e.args[1]).includes('Could not find input index'))).toBe(true)
})

test('non-retention reported after submit returns (un-awaited deleteUTXODeep recursion) lands in the same group', async () => {
  // With history retained, A -> B keeps A as B's history; spending B without replacement makes
  // the Engine delete B (awaited) and then A through a recursion it does not await.
  const slowForeign = new RecordingLookupService('locking-script', 'none')
  const original = slowForeign.outputNoLongerRetainedInHistory.bind(slowForeign)
  slowForeign.outputNoLongerRetainedInHistory = async (...args) => {
    for (let i = 0; i < 5; i++) await new Promise(resolve => setImmediate(resolve))
    return original(...args)
  }
  const t = await setup({ retainHistory: true, before: { ls_slow: slowForeign }, storageLatencyTurns: 3 })
  const a = await t.factory.createNotes(['v1'])
  await t.submit(a)
  const b = await t.factory.replaceNote(a.notes[0], 'v2')
  await t.submit(b)
  const end = await t.factory.spendNotes([b.notes[0]])
  await t.submit(end)

  expect(t.sink.groups).toHaveLength(3)
  expect(t.sink.groups[2].map(c => [c.op, c.txid, c.reason])).toEqual(
    [['remove', a.txid, 'not-retained'], ['remove', b.txid, 'spent']].sort((x, y) => x[1] < y[1] ? -1 : 1))
  expect(slowForeign.calls.filter(([hook]) => hook === 'outputNoLongerRetainedInHistory').map(([, p]) => p.txid).sort())
    .toEqual([a.txid, b.txid].sort())
})

test('a companion failure rejects the submit, commits nothing, and the inner service never sees the output', async () => {
  const notes = createNotesCompanion()
  const companion = {
    index (output) {
      if (JSON.parse(JSON.stringify(notes.index(output))).context.text === 'poison') throw new Error('companion refused')
      return notes.index(output)
    }
  }
  const t = await setup({ companion })
  const good = await t.factory.createNotes(['fine'])
  await t.submit(good)
  const bad = await t.factory.createNotes(['ok', 'poison'])
  await expect(t.submit(bad)).rejects.toThrow('companion refused')
  expect(t.sink.groups).toHaveLength(1)
  expect((await innerRows(t)).some(r => r.endsWith(':poison'))).toBe(false)
})

test('outputs the companion leaves out produce no group', async () => {
  const t = await setup({ companion: { index: () => null } })
  await t.submit(await t.factory.createNotes(['ignored']))
  expect(t.sink.groups).toHaveLength(0)
  expect(await innerRows(t)).toHaveLength(1)
})

test('a spend submitted while the admitting submit is still in flight commits after it', async () => {
  const notes = createNotesCompanion()
  const gate = deferred()
  const reached = deferred()
  const companion = {
    async index (output) {
      if (JSON.parse(JSON.stringify(notes.index(output))).context.text === 'gated') {
        reached.resolve()
        await gate.promise
      }
      return notes.index(output)
    }
  }
  const t = await setup({ companion })
  const created = await t.factory.createNotes(['gated'])
  const first = t.submit(created)
  await reached.promise // the output is in Engine storage; its admission is not committed yet
  const spend = await t.factory.spendNotes([created.notes[0]])
  const second = t.submit(spend)
  const secondDone = second.then(() => 'spend committed')
  // Let the spending submit run to its commit point, then open the gate.
  for (let i = 0; i < 50; i++) await new Promise(resolve => setImmediate(resolve))
  gate.resolve()
  await Promise.all([first, secondDone])

  expect(t.sink.groups.map(g => g.map(c => `${c.op}:${c.txid}.${c.outputIndex}`))).toEqual([
    [`admit:${created.txid}.0`],
    [`remove:${created.txid}.0`]
  ])
})

test('backfill commits the outputs already in Engine storage as one starting-state group', async () => {
  // First an Engine with the plain service only: outputs admitted before live was installed.
  const t = await createTestEngine({
    lookupServices: async (knex) => {
      const inner = new NotesLookupService(knex)
      await inner.init()
      return { ls_notes: inner }
    }
  })
  open.push(t)
  const factory = new NoteFactory(t.chainTracker)
  const first = await factory.createNotes(['old 1', 'old 2'])
  await t.engine.submit({ beef: first.beef, topics: TOPICS })
  const second = await factory.replaceNote(first.notes[0], 'old 1 v2')
  await t.engine.submit({ beef: second.beef, topics: TOPICS })

  const sink = createSink()
  const companion = createNotesCompanion()
  t.engine.lookupServices.ls_notes = wrapLookupService('ls_notes', t.engine.lookupServices.ls_notes, companion, sink)
  attachEngine(t.engine, sink)
  const result = await backfill(t.engine, 'ls_notes', TOPICS, companion, sink)

  expect(result).toEqual({ examined: 2, admitted: 2 })
  expect(sink.groups).toHaveLength(1)
  expect(sink.groups[0].map(c => `${c.op}:${c.txid}.${c.outputIndex}`)).toEqual([
    `admit:${first.txid}.1`, `admit:${second.txid}.0`
  ])
  for (const change of sink.groups[0]) {
    expect(txidOfAtomic(change.beef)).toBe(change.txid)
    expect(change.context.schema).toBe(LEGACY_CONTEXT_SCHEMA)
  }
  // Live ingest continues after the backfill.
  const third = await factory.spendNotes([second.notes[0]])
  await t.engine.submit({ beef: third.beef, topics: TOPICS })
  await whenPublished(t.engine)
  expect(sink.groups).toHaveLength(2)
  expect(sink.groups[1].map(c => `${c.op}:${c.txid}.${c.outputIndex}:${c.reason}`)).toEqual([`remove:${second.txid}.0:spent`])
})

test('a typed context and an expiry from the companion pass through; a duplicate submit commits nothing', async () => {
  const companion = {
    index: (output) => ({
      attributes: { topic: output.topic },
      context: { schema: 'urn:example:note-context:1', bytes: new Uint8Array([1, 2, 3]) },
      expiresAt: 1900000000
    })
  }
  const t = await setup({ companion })
  const created = await t.factory.createNotes(['typed'])
  await t.submit(created)
  await t.submit(created) // already applied for this topic: the Engine calls no hook
  expect(t.sink.groups).toHaveLength(1)
  expect(t.sink.groups[0][0]).toMatchObject({ attributes: { topic: NOTES_TOPIC }, expiresAt: 1900000000 })
  expect(t.sink.groups[0][0].context).toEqual({ schema: 'urn:example:note-context:1', bytes: Buffer.from([1, 2, 3]) })
})

test('an invalid companion result fails the admission like a throwing companion', async () => {
  const t = await setup({ companion: { index: () => ({ attributes: { a: 1 }, expiresAt: 1.5 }) } })
  await expect(t.submit(await t.factory.createNotes(['bad expiry']))).rejects.toThrow('expiresAt')
  expect(t.sink.groups).toHaveLength(0)
})

test('after a companion failure, a retry of the same transaction commits the whole transaction as one group', async () => {
  const notes = createNotesCompanion()
  let refuse = true
  const companion = {
    index (output) {
      if (refuse && JSON.parse(JSON.stringify(notes.index(output))).context.text === 'replacement') throw new Error('companion unavailable')
      return notes.index(output)
    }
  }
  const t = await setup({ companion })
  const created = await t.factory.createNotes(['original'])
  await t.submit(created)
  const replaced = await t.factory.replaceNote(created.notes[0], 'replacement')
  await expect(t.submit(replaced)).rejects.toThrow('companion unavailable')
  expect(t.sink.groups).toHaveLength(1)
  // The Engine already spent and deleted the original: a retry alone would not report it again.
  expect(await t.storage.findOutput(created.txid, 0, NOTES_TOPIC)).toBeNull()

  refuse = false
  await t.submit(replaced)
  expect(t.sink.groups).toHaveLength(2)
  expect(t.sink.groups[1].map(c => `${c.op}:${c.txid}.${c.outputIndex}:${c.reason ?? ''}:${c.spend ? c.spend.spendingTxid : ''}`)).toEqual([
    `remove:${created.txid}.0:spent:${replaced.txid}`,
    `admit:${replaced.txid}.0::`
  ])
})

test('with companion.topics, activity in other topics stages nothing; without it, spends there are no-op removals', async () => {
  const OTHER = 'tm_other'
  const withTopics = createSink()
  const withoutTopics = createSink()
  const t = await createTestEngine({
    managers: { [NOTES_TOPIC]: new NotesTopicManager(), [OTHER]: new NotesTopicManager() },
    lookupServices: async (knex) => {
      const a = new NotesLookupService(knex, { table: 'notes_a' })
      const b = new NotesLookupService(knex, { table: 'notes_b' })
      await a.init()
      await b.init()
      const { topics, ...unscoped } = createNotesCompanion()
      return {
        ls_a: wrapLookupService('ls_a', a, createNotesCompanion(), withTopics),
        ls_b: wrapLookupService('ls_b', b, unscoped, withoutTopics)
      }
    }
  })
  open.push(t)
  attachEngine(t.engine)
  const factory = new NoteFactory(t.chainTracker)
  const created = await factory.createNotes(['elsewhere'])
  await t.engine.submit({ beef: created.beef, topics: [OTHER] })
  const spent = await factory.spendNotes([created.notes[0]])
  await t.engine.submit({ beef: spent.beef, topics: [OTHER] })
  await whenPublished(t.engine)

  expect(withTopics.groups).toHaveLength(0)
  // The notes companion indexes only tm_notes outputs, but a spend in tm_other still reaches it.
  expect(withoutTopics.groups.map(g => g.map(c => `${c.op}:${c.txid}.${c.outputIndex}`))).toEqual([[`remove:${created.txid}.0`]])
})
