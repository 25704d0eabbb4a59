'use strict'
// Access-controlled catalogues over BRC-103 (BRC-193 §1, §5, §8) on real parts: Express over
// loopback, the package's BRC-104 provider with @bsv/sdk AuthFetch clients of three identities,
// a real @bsv/overlay Engine admitting real signed notes, the native sled store. Each identity is
// its own access partition (as in the demo); the notes companion shows a partition the public
// notes and the notes addressed by or to it, and a grants table lets the policy widen that.
// Every observation every client receives is recorded: at the end, none was a row its
// principal may not see.

const { PrivateKey } = require('@bsv/sdk')
const { startNode, authClient, openReq, readReq, openAndDrain } = require('./helpers/node')
const { NoteFactory } = require('./helpers/engine')
const { createNotesCompanion } = require('../demo/notes/notesCompanion')

/** Outpoints of the output observations of a batch, in order. */
const outputs = (b) => b.groups.flatMap(g => g.observations.filter(o => o.kind === 'output').map(o => `${o.payload.evidence.txid}.${o.payload.evidence.outputIndex}`))
const op = (note) => `${note.txid}.${note.outputIndex}`

describe('access-controlled notes over BRC-103, three principals', () => {
  let node
  const keys = { alice: PrivateKey.fromRandom(), bob: PrivateKey.fromRandom(), carol: PrivateKey.fromRandom() }
  const id = Object.fromEntries(Object.entries(keys).map(([n, k]) => [n, k.toPublicKey().toString()]))
  // The host's policy: partition = identity key, unless moved; `grants[p]` are more readers
  // whose addressed notes partition p may also read (a widening the operator can make).
  const moved = new Map()
  const grants = new Map()
  // Every output each principal ever received, the readers of every note published, and the
  // readers whose notes each principal was ever allowed to see (its own, and what the policy
  // granted it at some point).
  const received = { alice: new Set(), bob: new Set(), carol: new Set() }
  const readersOf = new Map()
  const allowed = { alice: new Set(['*']), bob: new Set(['*']), carol: new Set(['*']) }
  let clients, factories

  function companion () {
    const base = createNotesCompanion({ addressed: true })
    return {
      ...base,
      visibility: ({ partition }) => ({ in: ['readers', ['*', partition, ...(grants.get(partition) || [])]] })
    }
  }

  /** Posts as `who`, recording every output observation received. */
  function as (who, client = clients[who]) {
    return {
      async post (opName, body) {
        const r = await client.post(opName, body)
        if (r.status === 200) for (const o of outputs(r.body)) received[who].add(o)
        return r
      }
    }
  }

  async function publish (who, specs) {
    const built = await factories[who].build({ notes: specs })
    await node.submit(built)
    for (const n of built.notes) readersOf.set(op(n), n.to ? [id[who], n.to] : ['*'])
    return built.notes
  }

  beforeAll(async () => {
    node = await startNode({
      companion: companion(),
      live: {
        accessPolicy: 'urn:test:notes-readers',
        authorize: ({ principal }) => principal ? { partition: moved.get(principal) || principal } : null
      }
    })
    clients = {}
    factories = {}
    for (const who of Object.keys(keys)) allowed[who].add(id[who])
    for (const [who, key] of Object.entries(keys)) {
      clients[who] = await authClient(node, key)
      factories[who] = new NoteFactory(node.t.chainTracker, { authorKey: key })
    }
  })

  afterAll(async () => { await node.close() })

  test('each partition sees its own catalogue, in snapshot and live; shared rows come in the same order; scope.access is derived', async () => {
    const [pub] = await publish('alice', ['public from alice'])
    const [aliceToBob] = await publish('alice', [{ text: 'alice to bob', to: id.bob }])
    const [carolToAlice] = await publish('carol', [{ text: 'carol to alice', to: id.alice }])
    const a = await openAndDrain(as('alice'))
    const b = await openAndDrain(as('bob'))
    const c = await openAndDrain(as('carol'))
    const rows = (s) => s.batches.flatMap(outputs)
    expect(rows(a)).toEqual([op(pub), op(aliceToBob), op(carolToAlice)])
    expect(rows(b)).toEqual([op(pub), op(aliceToBob)])
    expect(rows(c)).toEqual([op(pub), op(carolToAlice)])

    // scope.access: a digest per partition, naming neither the identity nor any credential.
    const access = { alice: a.first.scope.access, bob: b.first.scope.access, carol: c.first.scope.access }
    expect(new Set(Object.values(access)).size).toBe(3)
    for (const who of Object.keys(access)) {
      expect(access[who]).toMatch(/^[0-9a-f]{64}$/)
      expect(access[who]).toBe(node.live.accessOf(id[who]))
      expect(access[who]).not.toContain(id[who].slice(2, 20))
    }
    // Renewed credentials (a new BRC-103 handshake of the same identity): the same access, so
    // alice's session is served under the new one.
    const renewed = await authClient(node, keys.alice)
    const again = await openAndDrain(as('alice', renewed))
    expect(again.first.scope.access).toBe(access.alice)
    expect((await renewed.post('read', readReq(a.end))).status).toBe(200)

    // One transaction, three outputs: each live group holds what its partition may see, and
    // the rows two partitions share in the same order.
    const polls = [a, b, c].map((s, i) => as(['alice', 'bob', 'carol'][i]).post('read', readReq(s.end, { waitMs: 15000 })))
    await new Promise(resolve => setTimeout(resolve, 200))
    const mixed = await publish('alice', [{ text: 'for carol', to: id.carol }, 'public again', { text: 'for bob', to: id.bob }])
    const [ga, gb, gc] = (await Promise.all(polls)).map(r => { expect(r.status).toBe(200); return r.body })
    expect(outputs(ga)).toEqual(mixed.map(op))
    expect(outputs(gb)).toEqual([op(mixed[1]), op(mixed[2])])
    expect(outputs(gc)).toEqual([op(mixed[0]), op(mixed[1])])
    for (const other of [gb, gc]) {
      expect(other.groups[0].id).toBe(ga.groups[0].id)
      expect(other.groups[0].sequence).toBe(ga.groups[0].sequence)
      const shared = outputs(ga).filter(o => outputs(other).includes(o))
      expect(outputs(other).filter(o => shared.includes(o))).toEqual(shared)
    }
  })

  test('revocation during a waiting poll ends it with unauthorized; the others go on', async () => {
    const b = await openAndDrain(as('bob'))
    const c = await openAndDrain(as('carol'))
    const bobPoll = as('bob').post('read', readReq(b.end, { waitMs: 15000 }))
    await new Promise(resolve => setTimeout(resolve, 300))
    expect(await node.live.revoke(id.bob)).toBeGreaterThanOrEqual(1)
    const res = await bobPoll
    expect(res.status).toBe(401)
    expect(res.body.error.code).toBe('unauthorized')
    expect((await as('carol').post('read', readReq(c.end))).status).toBe(200)
  })

  test('a prohibition ends the sessions holding the row, answers a waiting poll, stops replay of an old cursor and never serves the row again', async () => {
    const beforeCursor = (await openAndDrain(as('carol'))).end
    const [secret] = await publish('carol', [{ text: 'carol to alice, to be prohibited', to: id.alice }])
    const [other] = await publish('carol', ['public, unaffected'])
    // Alice has the row in her snapshot; carol's live cursor is past it and waits.
    const a = await openAndDrain(as('alice'))
    expect(a.batches.flatMap(outputs)).toContain(op(secret))
    const cLive = (await as('carol').post('read', readReq(beforeCursor))).body
    expect(outputs(cLive)).toEqual([op(secret), op(other)])
    const carolPoll = as('carol').post('read', readReq(cLive, { waitMs: 15000 }))
    // Bob never held it: his session survives.
    const b = await openAndDrain(as('bob'))
    // A drain in progress, one row a page, that has not reached the row yet.
    const drainFirst = (await as('alice').post('open', openReq({}, { maxObservations: 1 }))).body
    await new Promise(resolve => setTimeout(resolve, 300))

    const out = await node.live.prohibit({ service: 'ls_notes', outpoints: [op(secret)], reason: 'takedown' })
    expect(out.rows).toBe(1)
    expect(out.sessions).toBeGreaterThanOrEqual(4)
    const polled = await carolPoll
    expect(polled.body.error.code).toBe('reset-required')
    // Replay of the historical live output from carol's old cursor: refused.
    expect((await as('carol').post('read', readReq(beforeCursor))).body.error.code).toBe('reset-required')
    expect((await as('alice').post('read', readReq(a.end))).body.error.code).toBe('reset-required')
    expect((await as('alice').post('read', readReq(drainFirst, { maxObservations: 1 }))).body.error.code).toBe('reset-required')
    expect((await as('bob').post('read', readReq(b.end))).status).toBe(200)
    // New snapshots do not hold it.
    for (const who of ['alice', 'carol']) {
      const fresh = await openAndDrain(as(who))
      expect(fresh.batches.flatMap(outputs)).not.toContain(op(secret))
      expect(fresh.batches.flatMap(outputs)).toContain(op(other))
    }
  })

  test('a policy change widening and then narrowing a partition resets its sessions (a waiting poll too); the others are untouched', async () => {
    const [aliceToBob] = await publish('alice', [{ text: 'alice to bob, later shown to carol', to: id.bob }])
    const c = await openAndDrain(as('carol'))
    expect(c.batches.flatMap(outputs)).not.toContain(op(aliceToBob))
    const a = await openAndDrain(as('alice'))
    const carolPoll = as('carol').post('read', readReq(c.end, { waitMs: 15000 }))
    await new Promise(resolve => setTimeout(resolve, 300))

    // Carol may now read what alice writes or receives.
    grants.set(id.carol, [id.alice])
    allowed.carol.add(id.alice)
    expect(await node.live.changePolicy({ partitions: [id.carol] })).toBeGreaterThanOrEqual(1)
    const polled = await carolPoll
    expect(polled.body.error.code).toBe('reset-required')
    const wide = await openAndDrain(as('carol'))
    expect(wide.first.scope.access).not.toBe(c.first.scope.access)
    expect(wide.batches.flatMap(outputs)).toContain(op(aliceToBob))
    expect((await as('alice').post('read', readReq(a.end))).status).toBe(200)

    // And narrowed again.
    grants.delete(id.carol)
    await node.live.changePolicy({ partitions: [id.carol] })
    expect((await as('carol').post('read', readReq(wide.end))).body.error.code).toBe('reset-required')
    const narrow = await openAndDrain(as('carol'))
    expect(narrow.batches.flatMap(outputs)).not.toContain(op(aliceToBob))
  })

  test('a principal the policy moves to another partition gets reset-required, then the other partition\'s catalogue', async () => {
    const [toCarol] = await publish('alice', [{ text: 'alice to carol only', to: id.carol }])
    const b = await openAndDrain(as('bob'))
    expect(b.batches.flatMap(outputs)).not.toContain(op(toCarol))
    // Bob is placed in carol's partition (say, he took over her role).
    moved.set(id.bob, id.carol)
    allowed.bob.add(id.carol)
    expect((await as('bob').post('read', readReq(b.end))).body.error.code).toBe('reset-required')
    const moved2 = await openAndDrain(as('bob'))
    expect(moved2.first.scope.access).toBe(node.live.accessOf(id.carol))
    expect(moved2.batches.flatMap(outputs)).toContain(op(toCarol))
    moved.delete(id.bob)
  })

  test('no principal ever received a row it was not allowed to see', () => {
    let checked = 0
    for (const who of Object.keys(received)) {
      for (const o of received[who]) {
        expect([who, o, readersOf.get(o).some(r => allowed[who].has(r))]).toEqual([who, o, true])
        checked++
      }
    }
    expect(checked).toBeGreaterThan(20)
  })
})
