'use strict'
// Chain events on real parts (issue 9; BRC-193 §3, §7; BRC-192 §2, §3): a real @bsv/overlay
// Engine on SQLite, real signed transactions with merkle paths from the local chain tracker,
// the wrapped notes service and the native sled store. Proof updates reach live sessions as new
// output observations; reorganizations as assessment-invalidated groups or reset-required.

const crypto = require('node:crypto')
const { Transaction, Beef, MerklePath, Utils } = require('@bsv/sdk')
const h = require('./helpers/live')
const { createTestEngine, NoteFactory } = require('./helpers/engine')
const { NotesLookupService } = require('../demo/notes/NotesLookupService')
const { NotesTopicManager } = require('../demo/notes/NotesTopicManager')
const { createNotesCompanion } = require('../demo/notes/notesCompanion')
const { NOTES_TOPIC } = require('../demo/notes/notesProtocol')

const { ALICE, readBody, openBody, json } = h
const cleanup = require('./helpers/live').cleanupAfterEach()

/** The notes companion, except that notes whose text starts with 'off-list' are not members. */
function companionWithOffList () {
  const c = createNotesCompanion()
  return {
    ...c,
    index (output) {
      const r = c.index(output)
      return r !== null && r.context.text.startsWith('off-list') ? null : r
    }
  }
}

async function setup (options = {}) {
  const dir = h.tempDir()
  const logged = []
  const live = await h.openLive(dir, { log: (e) => logged.push(e), ...options.live })
  cleanup.push(() => live.close())
  const t = await createTestEngine({
    managers: { [NOTES_TOPIC]: new NotesTopicManager({ retainHistory: !!options.retainHistory }) },
    lookupServices: async (knex) => {
      const inner = new NotesLookupService(knex)
      await inner.init()
      const services = { ls_notes: live.wrap('ls_notes', inner, companionWithOffList()) }
      if (options.secondService) services.ls_b = live.wrap('ls_b', h.plainService(), onlyTextsStartingWithB())
      return services
    }
  })
  cleanup.push(() => t.close())
  if (options.engineReorg) t.engine.handleReorg = options.engineReorg(t)
  await live.attach(t.engine)
  const factory = new NoteFactory(t.chainTracker)
  const submit = async (built) => {
    const steak = await t.engine.submit({ beef: built.beef, topics: [NOTES_TOPIC] })
    await live.published() // the submit resolves before its group is published
    return steak
  }
  return { live, t, factory, submit, logged, dir }
}

/** A second collection over the same topic: only notes whose text starts with 'B'. */
function onlyTextsStartingWithB () {
  const c = createNotesCompanion()
  return {
    ...c,
    rules: { id: 'urn:test:b-notes', parameters: {} },
    index (output) {
      const r = c.index(output)
      return r !== null && r.context.text.startsWith('B') ? r : null
    }
  }
}

async function openSession (live, service = 'ls_notes') {
  const res = await live.open(openBody({ service, query: {} }), ALICE)
  expect(res.status).toBe(200)
  const batches = await h.drainSnapshot(live, json(res))
  return batches[batches.length - 1]
}

async function read (live, batch, waitMs = 5000) {
  return live.read(readBody(batch.session, batch.cursor, { waitMs }), ALICE)
}

async function next (live, batch, waitMs = 5000) {
  const res = await read(live, batch, waitMs)
  expect(res.status).toBe(200)
  return json(res)
}

/** Snapshot members of a fresh session, as 'txid.index'. */
async function members (live) {
  const res = await live.open(openBody({ query: {} }), ALICE)
  const batches = await h.drainSnapshot(live, json(res))
  return batches.flatMap(b => b.groups.flatMap(g => g.observations))
    .map(o => `${o.payload.evidence.txid}.${o.payload.evidence.outputIndex}`).sort()
}

function kinds (batch) {
  return batch.groups.map(g => g.observations.map(o => {
    if (o.kind === 'output') return `output ${o.payload.evidence.txid}.${o.payload.evidence.outputIndex}`
    if (o.kind === 'assessment-invalidated') return `invalidated ${o.payload.contextId}`
    if (o.kind === 'spend') return `spend ${o.payload.previous.txid}.${o.payload.previous.outputIndex}`
    return `withdraw ${o.payload.outpoint.txid}.${o.payload.outpoint.outputIndex} ${o.payload.reason}`
  }))
}

function evidenceTx (observation) {
  const e = observation.payload.evidence
  return Transaction.fromBEEF(Utils.toArray(e.beef, 'base64'), e.txid)
}

function bumpHeights (observation) {
  return Beef.fromBinary(Utils.toArray(observation.payload.evidence.beef, 'base64')).bumps.map(b => b.blockHeight)
}

/** Mints a block for `txid` and hands the proof to the Engine, as an ARC callback would. */
async function prove (t, txid) {
  const proof = t.chainTracker.mint(txid)
  await t.engine.handleNewMerkleProof(txid, proof, proof.blockHeight)
  return proof.blockHeight
}

describe('merkle proof updates', () => {
  test('a proof for a member commits one group with a new output carrying the proven evidence; the earlier group replays unchanged', async () => {
    const { live, t, factory, submit } = await setup()
    const start = await openSession(live)
    const created = await factory.createNotes(['first', 'second'])
    await submit(created)
    const admitted = await next(live, start)
    expect(kinds(admitted)).toEqual([[`output ${created.txid}.0`, `output ${created.txid}.1`]])
    expect(evidenceTx(admitted.groups[0].observations[0]).merklePath).toBeUndefined()

    const height = await prove(t, created.txid)
    const proven = await next(live, admitted)
    expect(kinds(proven)).toEqual([[`output ${created.txid}.0`, `output ${created.txid}.1`]])
    for (const o of proven.groups[0].observations) {
      const tx = evidenceTx(o)
      expect(tx.merklePath.blockHeight).toBe(height)
      expect(await tx.verify(t.chainTracker)).toBe(true)
    }
    // A new evidence variant is a new observation: new ids, same context.
    expect(proven.groups[0].observations.map(o => o.payload.context)).toEqual(admitted.groups[0].observations.map(o => o.payload.context))
    const oldIds = admitted.groups[0].observations.map(o => o.id)
    expect(proven.groups[0].observations.map(o => o.id).some(id => oldIds.includes(id))).toBe(false)
    expect(proven.groups[0].sequence).not.toBe(admitted.groups[0].sequence)

    // Replaying from the first cursor: the admission group is byte-for-byte what it was.
    const replay = await next(live, start, 0)
    expect(JSON.stringify(replay.groups[0])).toBe(JSON.stringify(admitted.groups[0]))
    expect(JSON.stringify(replay.groups[1])).toBe(JSON.stringify(proven.groups[0]))
  })

  test('a proof for an ancestor refreshes the descendant member; spent outputs are not brought back', async () => {
    // The Engine finds descendants through the consumedBy links of retained spent outputs.
    const { live, t, factory, submit } = await setup({ retainHistory: true })
    const created = await factory.createNotes(['keep', 'replace me'])
    await submit(created)
    const replaced = await factory.replaceNote(created.notes[1], 'replacement')
    await submit(replaced)
    const start = await openSession(live)
    const hw = live.highWater

    const height = await prove(t, created.txid)
    const b = await next(live, start)
    expect(b.groups).toHaveLength(1)
    expect(Number(b.groups[0].sequence)).toBe(Number(hw) + 1)
    // Members: created.0 (the proven tx itself) and replaced.0 (its descendant). The spent
    // created.1 is not a member and gets nothing.
    expect(kinds(b)).toEqual([[`output ${created.txid}.0`, `output ${replaced.txid}.0`].sort()])
    const child = b.groups[0].observations.find(o => o.payload.evidence.txid === replaced.txid)
    const childTx = evidenceTx(child)
    expect(childTx.merklePath).toBeUndefined()
    const parent = childTx.inputs.find(i => i.sourceTransaction && i.sourceTransaction.id('hex') === created.txid)
    expect(parent.sourceTransaction.merklePath.blockHeight).toBe(height)
    expect(await childTx.verify(t.chainTracker)).toBe(true)
    expect(await members(live)).toEqual([`${created.txid}.0`, `${replaced.txid}.0`].sort())
  })

  test('without retained history the Engine cannot reach descendants: only what it rewrote is refreshed', async () => {
    const { live, t, factory, submit } = await setup()
    const created = await factory.createNotes(['keep', 'replace me'])
    await submit(created)
    const replaced = await factory.replaceNote(created.notes[1], 'replacement')
    await submit(replaced)
    const start = await openSession(live)
    await prove(t, created.txid)
    const b = await next(live, start)
    expect(kinds(b)).toEqual([[`output ${created.txid}.0`]])
    // The feed matches Engine storage: the descendant's stored BEEF still lacks the proof.
    const [stored] = await t.engine.storage.findOutputsForTransaction(replaced.txid, true)
    const tx = Transaction.fromBEEF(Array.from(stored.beef), replaced.txid)
    const parent = tx.inputs.find(i => i.sourceTransaction && i.sourceTransaction.id('hex') === created.txid)
    expect(parent.sourceTransaction.merklePath).toBeUndefined()
  })

  test('a proof for a transaction without members commits nothing; an unknown txid commits nothing and rejects', async () => {
    const { live, t, factory, submit } = await setup()
    const offList = await factory.createNotes(['off-list note'])
    await submit(offList)
    const hw = live.highWater
    await prove(t, offList.txid)
    expect(live.highWater).toBe(hw)
    const unknown = crypto.randomBytes(32).toString('hex')
    await expect(t.engine.handleNewMerkleProof(unknown, t.chainTracker.mint(unknown), 1)).rejects.toThrow()
    expect(live.highWater).toBe(hw)
  })
})

test('a proof whose root the chain tracker does not know refreshes nothing and is logged', async () => {
  const { live, t, factory, submit, logged } = await setup()
  const created = await factory.createNotes(['note'])
  await submit(created)
  const hw = live.highWater
  const bogus = new MerklePath(t.chainTracker.height + 50, [[
    { offset: 0, hash: crypto.randomBytes(32).toString('hex') },
    { offset: 1, hash: created.txid, txid: true }
  ]])
  await t.engine.handleNewMerkleProof(created.txid, bogus, bogus.blockHeight)
  expect(live.highWater).toBe(hw)
  expect(logged.some(e => e.op === 'merkle-proof' && e.action === 'not-refreshed' && e.txid === created.txid)).toBe(true)
})

describe('reorganizations', () => {
  /** Three notes: P proven low, Q proven high, U unproven (its funding parent is proven). */
  async function threeNotes (ctx) {
    const { factory, submit, t } = ctx
    const p = await factory.createNotes(['P'])
    await submit(p)
    const q = await factory.createNotes(['Q'])
    await submit(q)
    const u = await factory.createNotes(['U'])
    await submit(u)
    const hp = await prove(t, p.txid)
    const hq = await prove(t, q.txid)
    return { p, q, u, hp, hq }
  }

  test('members citing an orphaned height get one assessment-invalidated group; nothing is withdrawn or spent', async () => {
    const ctx = await setup()
    const { live } = ctx
    const { p, q, u, hq } = await threeNotes(ctx)
    expect(live.chainView).toEqual({ id: 'chain-view/0', since: '0', tipHeight: null })
    const start = await openSession(live)
    const before = await members(live)

    // Engine 0.4.6 has no reorg handling: nothing can be reassessed, only invalidated.
    const r = await live.handleReorg({ orphanedBlockHashes: ['ab'.repeat(32)], rebuildFromHeight: hq, newTipHeight: hq + 1 })
    expect(r).toMatchObject({ action: 'invalidated', affected: 1, refreshed: 0 })
    const b = await next(live, start)
    expect(kinds(b)).toEqual([['invalidated chain-view/0']])
    const obs = b.groups[0].observations[0]
    expect(obs.payload.reason).toContain(`rebuildFromHeight=${hq}`)
    expect(b.groups[0].sequence).toBe(r.sequence)
    expect(live.chainView).toEqual({ id: `chain-view/${r.sequence}`, since: r.sequence, tipHeight: hq + 1 })
    expect(live.stats().chainView.id).toBe(`chain-view/${r.sequence}`)
    expect(await members(live)).toEqual(before)
    expect(before).toEqual([`${p.txid}.0`, `${q.txid}.0`, `${u.txid}.0`].sort())

    // A reorganization below every proof but P's still names the view that just ended.
    const r2 = await live.handleReorg({ rebuildFromHeight: 0 })
    expect(r2).toMatchObject({ action: 'invalidated', affected: 3 })
    const b2 = await next(live, b)
    expect(kinds(b2)).toEqual([[`invalidated chain-view/${r.sequence}`]])
  })

  test('a reorganization above every proof commits nothing', async () => {
    const ctx = await setup()
    const { live } = ctx
    const { hq } = await threeNotes(ctx)
    const hw = live.highWater
    const r = await live.handleReorg({ orphanedBlockHashes: [], rebuildFromHeight: hq + 1, newTipHeight: hq + 1 })
    expect(r).toEqual({ action: 'none', affected: 0, refreshed: 0, sequence: null })
    expect(live.highWater).toBe(hw)
    expect(live.chainView.id).toBe('chain-view/0')
  })

  test("an Engine with handleReorg is bracketed: invalidation first, then the reassessed outputs of affected members only", async () => {
    // Stands in for a newer host Engine whose handleReorg re-proves transactions of the new
    // chain: here Q is mined again in a new block and its stored BEEF is rewritten.
    let reproved = null
    const engineReorg = (t) => async function handleReorg (event) {
      const txid = reproved.txid
      const [stored] = await t.engine.storage.findOutputsForTransaction(txid, true)
      const tx = Transaction.fromBEEF(Array.from(stored.beef), txid)
      tx.merklePath = t.chainTracker.mint(txid)
      reproved.height = tx.merklePath.blockHeight
      await t.engine.storage.updateTransactionBEEF(txid, tx.toBEEF())
    }
    const ctx = await setup({ engineReorg })
    const { live, t } = ctx
    const { p, q, hq } = await threeNotes(ctx)
    reproved = { txid: q.txid }
    const start = await openSession(live)
    await t.engine.handleReorg({ orphanedBlockHashes: ['cd'.repeat(32)], rebuildFromHeight: hq, newTipHeight: hq + 2 })
    const b = await next(live, start)
    expect(kinds(b)).toEqual([['invalidated chain-view/0', `output ${q.txid}.0`]])
    const out = b.groups[0].observations[1]
    expect(bumpHeights(out)).toContain(reproved.height)
    expect(bumpHeights(out)).not.toContain(hq)
    expect(await evidenceTx(out).verify(t.chainTracker)).toBe(true)
    expect(b.groups[0].observations.some(o => o.payload.evidence && o.payload.evidence.txid === p.txid)).toBe(false)
    expect(live.chainView.id).toBe(`chain-view/${b.groups[0].sequence}`)
  })

  test('a reassessment group larger than the provider limits starts a new epoch re-seeded from the Engine instead', async () => {
    // The Engine re-proves the three notes of one transaction: one invalidation and three new
    // outputs are four observations, and this provider serves at most three per batch.
    let reproved = null
    const engineReorg = (t) => async function handleReorg (event) {
      const [stored] = await t.engine.storage.findOutputsForTransaction(reproved, true)
      const tx = Transaction.fromBEEF(Array.from(stored.beef), reproved)
      tx.merklePath = t.chainTracker.mint(reproved)
      await t.engine.storage.updateTransactionBEEF(reproved, tx.toBEEF())
    }
    const ctx = await setup({ engineReorg, live: { maxObservations: 3 } })
    const { live, t, factory, submit, logged } = ctx
    const created = await factory.createNotes(['a', 'b', 'c'])
    await submit(created)
    const height = await prove(t, created.txid)
    reproved = created.txid
    const start = await openSession(live)
    const epoch = live.epoch
    const r = await t.engine.handleReorg({ orphanedBlockHashes: ['ef'.repeat(32)], rebuildFromHeight: height, newTipHeight: height + 1 })
    expect(r.action).toBe('reset')
    expect(r.reason).toContain('cannot fit')
    expect(logged).toContainEqual(expect.objectContaining({ op: 'chain-reorg', action: 'reset-epoch', reason: r.reason }))
    expect(live.epoch).not.toBe(epoch)
    const res = await read(live, start, 0)
    expect(json(res).error.code).toBe('reset-required')
    // The new epoch holds the Engine's collection, with the Engine's new evidence.
    const fresh = await live.open(openBody({ query: {} }), ALICE)
    const snapshot = (await h.drainSnapshot(live, json(fresh))).flatMap(b => b.groups.flatMap(g => g.observations))
    expect(snapshot.map(o => `${o.payload.evidence.txid}.${o.payload.evidence.outputIndex}`).sort())
      .toEqual([0, 1, 2].map(i => `${created.txid}.${i}`))
    for (const o of snapshot) expect(bumpHeights(o)).not.toContain(height)
  })

  test('unreadable stored evidence: a new epoch, reset-required for old cursors, the collection backfilled again', async () => {
    const ctx = await setup()
    const { live, logged } = ctx
    const { p, q, u } = await threeNotes(ctx)
    // A member whose stored evidence cannot be parsed: the store cannot tell whether it cites
    // an orphaned block.
    const garbage = crypto.randomBytes(32).toString('hex')
    await live.commit([{
      op: 'admit', service: 'ls_notes', txid: garbage, outputIndex: 0, topic: NOTES_TOPIC,
      beef: Buffer.from('not a beef'), attributes: { author: 'x', length: 1 }, context: null, expiresAt: null
    }])
    const start = await openSession(live)
    const epoch = live.epoch

    const r = await live.handleReorg({ orphanedBlockHashes: [], rebuildFromHeight: 1 })
    expect(r.action).toBe('reset')
    expect(r.reason).toContain(garbage)
    // The restated collection is the new epoch's first group, written with the reset itself.
    expect(r.sequence).toBe('1')
    expect(live.highWater).toBe('1')
    expect(logged.some(e => e.op === 'chain-reorg' && e.action === 'reset-epoch' && e.reason.includes(garbage))).toBe(true)
    expect(live.epoch).not.toBe(epoch)
    const res = await read(live, start, 0)
    expect(res.status).not.toBe(200)
    expect(JSON.stringify(json(res))).toContain('reset-required')
    // The new epoch holds the Engine's collection again, without the unreadable row.
    expect(await members(live)).toEqual([`${p.txid}.0`, `${q.txid}.0`, `${u.txid}.0`].sort())
    expect(live.chainView.id).toBe('chain-view/0')
  })

  test('every wrapped service learns of the view change from the same group; unaffected services get only the invalidation', async () => {
    const ctx = await setup({ secondService: true })
    const { live, factory, submit, t } = ctx
    const a = await factory.createNotes(['A note'])
    await submit(a)
    const b = await factory.createNotes(['B note'])
    await submit(b)
    const ha = await prove(t, a.txid)
    const startA = await openSession(live, 'ls_notes')
    const startB = await openSession(live, 'ls_b')
    // Only the A note is proven at >= ha; it is a member of ls_notes but not of ls_b.
    const r = await live.handleReorg({ rebuildFromHeight: ha })
    expect(r).toMatchObject({ action: 'invalidated', affected: 1 })
    const gotA = await next(live, startA)
    const gotB = await next(live, startB)
    expect(kinds(gotA)).toEqual([['invalidated chain-view/0']])
    expect(kinds(gotB)).toEqual([['invalidated chain-view/0']])
    expect(gotA.groups[0].sequence).toBe(r.sequence)
    expect(gotB.groups[0].sequence).toBe(r.sequence)
  })

  test('concurrent reorganizations are handled one after the other, each naming the view the previous began', async () => {
    const ctx = await setup()
    const { live } = ctx
    await threeNotes(ctx)
    const start = await openSession(live)
    const [r1, r2] = await Promise.all([live.handleReorg({ rebuildFromHeight: 0 }), live.handleReorg({ rebuildFromHeight: 0 })])
    expect(Number(r2.sequence)).toBe(Number(r1.sequence) + 1)
    const b = await next(live, start)
    expect(kinds(b)).toEqual([['invalidated chain-view/0'], [`invalidated chain-view/${r1.sequence}`]])
    expect(live.chainView.id).toBe(`chain-view/${r2.sequence}`)
  })

  test('the chain view survives a restart', async () => {
    const ctx = await setup()
    const { live, dir } = ctx
    const { hq } = await threeNotes(ctx)
    const r = await live.handleReorg({ rebuildFromHeight: hq, newTipHeight: hq + 3 })
    const view = live.chainView
    expect(view).toEqual({ id: `chain-view/${r.sequence}`, since: r.sequence, tipHeight: hq + 3 })
    await live.close()
    const again = await h.openLive(dir)
    cleanup.push(() => again.close())
    expect(again.chainView).toEqual(view)
    await again.resetEpoch({ changes: [] })
    expect(again.chainView).toEqual({ id: 'chain-view/0', since: '0', tipHeight: null })
  })

  test('malformed reorganization events are rejected before anything happens', async () => {
    const { live } = await setup()
    const hw = live.highWater
    await expect(live.handleReorg({ rebuildFromHeight: -1 })).rejects.toThrow(TypeError)
    await expect(live.handleReorg({ rebuildFromHeight: 1.5 })).rejects.toThrow(TypeError)
    await expect(live.handleReorg({ rebuildFromHeight: 1, orphanedBlockHashes: ['xyz'] })).rejects.toThrow(TypeError)
    await expect(live.handleReorg(null)).rejects.toThrow(TypeError)
    expect(live.highWater).toBe(hw)
  })
})
