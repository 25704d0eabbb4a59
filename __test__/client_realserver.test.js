'use strict'
// LiveLookupClient against the project's own server: LiveLookup (sled store,
// sessions, long polls) behind createRouter on real Express over loopback, in the
// explicitly unauthenticated public mode.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { PrivateKey } = require('@bsv/sdk')
const wire = require('../js/common/wire')
const { LiveLookupClient, CheckpointStore, digest } = require('../js/client/client.js')
const { CHAIN, plainService, notesCompanion, txid, admit, remove } = require('./helpers/live')
const { startNode } = require('./helpers/node')

const SERVICE = 'ls_notes'
const QUERY = { author: 'alice' }

let dir, node, live, origin
beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-real-'))
  node = await startNode({ authentication: 'none', packageDefaults: true, dir: path.join(dir, 'server'), service: plainService(), companion: notesCompanion() })
  ;({ live, origin } = node)
})
afterEach(async () => {
  await node.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

const present = members => members.filter(m => m.present).map(m => m.outpoint.txid).sort()
const txids = ns => ns.map(txid).sort()
const keyFor = () => ({ provider: origin, service: SERVICE, queryDigest: digest('lookup-query', { service: SERVICE, query: QUERY }) })

async function followUntil (store, until, step) {
  const ac = new AbortController()
  const events = []
  const client = new LiveLookupClient({ baseURL: origin, fetch, store, chain: CHAIN, allowInsecureHttp: true, limits: { maxObservations: 2, waitMs: 5000 } })
  await client.follow(SERVICE, QUERY, {
    membership: 'claims',
    signal: ac.signal,
    onRevision (e) { events.push(e); if (step) step(e); if (until(e)) ac.abort() }
  })
  return events
}

test('queryDigest and capability digest agree with the wire module', () => {
  expect(digest('lookup-query', { service: SERVICE, query: QUERY })).toBe(wire.digest('lookup-query', { service: SERVICE, query: QUERY }))
})

test('drains the paged snapshot, then follows live changes', async () => {
  for (const n of [1, 2, 3, 4, 5]) await live.commit([admit(n)])
  const store = CheckpointStore.open(path.join(dir, 'client'))
  let stepped = false
  const events = await followUntil(store, e => present(e.members).join() === txids([2, 3, 4, 5, 7]).join(), e => {
    if (!stepped && e.state.currentGeneration === 0 && e.members.length === 5) {
      stepped = true
      setImmediate(async () => { await live.commit([remove(1)]); await live.commit([admit(7)]) })
    }
  })
  const key = events[0].sourceKey
  expect(key).toEqual(keyFor())
  expect(events[0].members).toEqual([]) // nothing published before the snapshot completed
  const st = store.state(key)
  expect(st).toMatchObject({ currentGeneration: 0, pendingCount: 0 })
  expect(st.received).toBe(7) // 5 snapshot groups + 2 live groups, once each
  const row1 = store.members(key).find(m => m.outpoint.txid === txid(1))
  expect(row1).toMatchObject({ present: false, phase: 'live' })
  store.close()
})

test('an epoch reset produces a new generation and a clean swap', async () => {
  for (const n of [1, 2, 3]) await live.commit([admit(n)])
  const store = CheckpointStore.open(path.join(dir, 'client'))
  let reset = false
  const seen = []
  const want = txids([2, 3, 4]).join()
  await followUntil(store, e => e.state.currentGeneration === 1 && present(e.members).join() === want, e => {
    seen.push({ current: e.state.currentGeneration, gens: [...new Set(e.members.map(m => m.generation))], swapped: e.outcome.swapped })
    if (!reset && e.members.length === 3) {
      reset = true
      // A new epoch whose starting state is the rebuilt collection.
      setImmediate(async () => {
        await live.resetEpoch({ changes: [2, 3, 4].map(n => admit(n)) })
      })
    }
  })
  const key = keyFor()
  // Every revision showed one generation's membership, never a mixture; generation 0
  // stayed published until generation 1's snapshot completed.
  expect(seen.every(s => s.gens.length <= 1)).toBe(true)
  const swap = seen.findIndex(s => s.swapped && s.current === 1)
  expect(swap).toBeGreaterThan(0)
  expect(seen.slice(0, swap).every(s => s.gens.join() !== '1')).toBe(true)
  const m = store.members(key)
  expect(m.every(r => r.generation === 1 && !r.stale)).toBe(true)
  expect(present(m)).toEqual(txids([2, 3, 4]))
  expect(m.some(r => r.outpoint.txid === txid(1))).toBe(false) // unseen member removed by the swap
  expect(store.checkpoint(key).generation).toBe(1)
  store.close()
})

test('renewal: after afterGroups live groups a fresh generation replaces the old one, whose receipt keys, group records and absent rows are retired', async () => {
  for (const n of [1, 2, 3]) await live.commit([admit(n)])
  const store = CheckpointStore.open(path.join(dir, 'client'))
  const ac = new AbortController()
  const states = []
  const seen = []
  let usage = null
  let next = 4
  const client = new LiveLookupClient({ baseURL: origin, fetch, store, chain: CHAIN, allowInsecureHttp: true, limits: { maxObservations: 2, waitMs: 5000 } })
  const key = keyFor()
  await client.follow(SERVICE, QUERY, {
    membership: 'claims',
    signal: ac.signal,
    renew: { afterGroups: 3 },
    onState (st) { states.push(st) },
    onRevision (e) {
      seen.push({ current: e.state.currentGeneration, gens: [...new Set(e.members.map(m => m.generation))] })
      // Live changes one at a time: admit 4, remove 1, admit 5 (three live groups), then
      // admit 6 and 7 on the renewed generation.
      if (e.state.currentGeneration === 0 && e.state.pendingGeneration === null && e.members.length >= 3 && next <= 5) {
        const n = next++
        setImmediate(async () => {
          if (n === 4) await live.commit([admit(4)])
          if (n === 5) { await live.commit([remove(1)]); await live.commit([admit(5)]) }
        })
      }
      if (e.state.currentGeneration === 0 && present(e.members).join() === txids([2, 3, 4, 5]).join() && usage === null) usage = store.spaceUsage()
      if (e.state.currentGeneration === 1 && present(e.members).join() === txids([2, 3, 4, 5, 6]).join()) ac.abort()
      if (e.state.currentGeneration === 1 && next === 6) { next++; setImmediate(() => live.commit([admit(6)])) }
    }
  })
  // The renewal is said plainly, and the old generation stayed published until the new
  // one's snapshot completed (no revision mixed the two).
  expect(states).toContainEqual(expect.objectContaining({ connection: 'connected', progress: 'started-over', reason: 'renewal', generation: 1 }))
  expect(seen.every(s => s.gens.length <= 1)).toBe(true)
  const m = store.members(key)
  expect(m.every(r => r.generation === 1)).toBe(true)
  expect(present(m)).toEqual(txids([2, 3, 4, 5, 6]))
  // Generation 0 held an absent row (output 1 withdrawn) and its live groups' records and
  // identities; the swap retired them: generation 1 holds only its own (a snapshot of four
  // groups and one live group).
  expect(usage.M.keys).toBe(5)
  expect(usage.R.keys).toBe(6)
  const after = store.spaceUsage()
  expect(after.M.keys).toBe(5)
  expect(after.R.keys).toBe(5)
  // One identity per group and one per observation (each of these groups holds one).
  expect(after.J.keys).toBe(10)
  expect(m.some(r => r.outpoint.txid === txid(1))).toBe(false)
  store.close()
})

test('renewal counts survive a restart: the store keeps the live groups and the time since the snapshot completed', async () => {
  for (const n of [1, 2, 3]) await live.commit([admit(n)])
  const key = keyFor()
  const opts = { baseURL: origin, fetch, chain: CHAIN, allowInsecureHttp: true, limits: { maxObservations: 2, waitMs: 5000 } }
  // First run: the snapshot, then two live groups (admit 4, admit 5); the schedule wants three.
  let store = CheckpointStore.open(path.join(dir, 'client'))
  const ac1 = new AbortController()
  let next = 4
  const states1 = []
  await new LiveLookupClient({ ...opts, store }).follow(SERVICE, QUERY, {
    membership: 'claims',
    signal: ac1.signal,
    renew: { afterGroups: 3 },
    onState (st) { states1.push(st) },
    onRevision (e) {
      if (e.state.currentGeneration === 0 && e.members.length >= 3 && next <= 5) {
        const n = next++
        setImmediate(() => live.commit([admit(n)]))
      }
      if (present(e.members).join() === txids([1, 2, 3, 4, 5]).join()) ac1.abort()
    }
  })
  expect(states1.some(s => s.progress === 'started-over')).toBe(false)
  const before = Date.now()
  store.close()
  store = CheckpointStore.open(path.join(dir, 'client'))
  const r = store.renewal(key)
  expect(r).toMatchObject({ generation: 0, liveGroups: 2 })
  expect(r.liveSince).toBeLessThanOrEqual(before)
  // Second run, after the restart: one more live group is the third, so the generation is
  // renewed at once (a count kept in memory would have started again at zero).
  await live.commit([remove(1)])
  const ac2 = new AbortController()
  const states2 = []
  let timer = null
  await new LiveLookupClient({ ...opts, store }).follow(SERVICE, QUERY, {
    membership: 'claims',
    signal: ac2.signal,
    renew: { afterGroups: 3 },
    onState (st) {
      states2.push(st)
      if (st.progress === 'started-over') ac2.abort()
    },
    onRevision (e) {
      // Seen the third live group: the renewal must follow that commit, not three more.
      if (e.state.currentGeneration === 0 && !present(e.members).includes(txid(1)) && timer === null) timer = setTimeout(() => ac2.abort(), 3000)
    }
  })
  clearTimeout(timer)
  expect(states2).toContainEqual(expect.objectContaining({ progress: 'started-over', reason: 'renewal', generation: 1 }))
  store.close()
})

const CHILD = `
const { LiveLookupClient, CheckpointStore } = require(${JSON.stringify(path.join(__dirname, '../js/client/client.js'))})
const store = CheckpointStore.open(process.env.STORE)
const ac = new AbortController()
const client = new LiveLookupClient({ baseURL: process.env.BASE, fetch, store, chain: ${JSON.stringify(CHAIN)}, allowInsecureHttp: true, limits: { maxObservations: 2, waitMs: 5000 } })
client.follow(${JSON.stringify(SERVICE)}, ${JSON.stringify(QUERY)}, {
  membership: 'claims',
  signal: ac.signal,
  onRevision ({ members, state }) {
    if (members.filter(m => m.present).length === Number(process.env.WANT) && state.pendingCount === 0) ac.abort()
  }
}).then(() => { store.close(); process.exit(0) }, e => { console.error(e); process.exit(3) })
`

function runChild (env) {
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, ['-e', CHILD], {
      env: { ...process.env, STORE: path.join(dir, 'client'), BASE: origin, ...env },
      stdio: ['ignore', 'ignore', 'pipe']
    })
    let err = ''
    c.stderr.on('data', d => { err += d })
    c.on('error', reject)
    c.on('exit', (code, signal) => resolve({ code, signal, err }))
  })
}

test.each(['after-receive', 'after-commit'])('client SIGKILLed %s the second batch: nothing lost, nothing applied twice', async (point) => {
  for (const n of [1, 2, 3, 4, 5]) await live.commit([admit(n)])
  const crashed = await runChild({ OLL_CLIENT_CRASH: point, OLL_CLIENT_CRASH_AT: '2', WANT: '5' })
  expect(crashed.signal).toBe('SIGKILL')
  let store = CheckpointStore.open(path.join(dir, 'client'))
  const before = store.state(keyFor())
  expect(before.received).toBe(point === 'after-receive' ? 2 : 4)
  store.close()
  await live.commit([admit(6)]) // while the client is down
  const done = await runChild({ WANT: '6' })
  expect(done).toMatchObject({ code: 0, signal: null })
  store = CheckpointStore.open(path.join(dir, 'client'))
  const key = keyFor()
  expect(present(store.members(key))).toEqual(txids([1, 2, 3, 4, 5, 6]))
  expect(store.state(key)).toMatchObject({ received: 6, accepted: 6, pendingCount: 0, currentGeneration: 0 })
  store.close()
})

test('follows over BRC-103: AuthFetch, signed answers, provider identity from the handshake', async () => {
  const { AuthFetch, ProtoWallet } = require('@bsv/sdk')
  const serverKey = PrivateKey.fromRandom()
  const authDir = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-real-auth-'))
  // A BRC-103 node of its own, beside the public one.
  const authNode = await startNode({ authentication: 'brc103', serverKey, packageDefaults: true, dir: path.join(authDir, 'server'), service: plainService(), companion: notesCompanion() })
  const authLive = authNode.live
  try {
    for (const n of [1, 2]) await authLive.commit([admit(n)])
    const store = CheckpointStore.open(path.join(authDir, 'client'))
    const ac = new AbortController()
    const events = []
    const client = new LiveLookupClient({
      baseURL: authNode.origin,
      chain: CHAIN,
      allowInsecureHttp: true,
      authFetch: new AuthFetch(new ProtoWallet(PrivateKey.fromRandom())),
      store,
      limits: { maxObservations: 1, waitMs: 5000 }
    })
    let stepped = false
    await client.follow(SERVICE, QUERY, {
      membership: 'claims',
      signal: ac.signal,
      onRevision (e) {
        events.push(e)
        if (!stepped && present(e.members).length === 2) {
          stepped = true
          setImmediate(() => authLive.commit([admit(3)]))
        }
        if (present(e.members).join() === txids([1, 2, 3]).join()) ac.abort()
      }
    })
    const key = events[events.length - 1].sourceKey
    expect(key.provider).toBe(serverKey.toPublicKey().toString())
    expect(store.state(key).received).toBe(3)
    store.close()
  } finally {
    await authNode.close()
    fs.rmSync(authDir, { recursive: true, force: true })
  }
})
