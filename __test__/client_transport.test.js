'use strict'
// Transport checks of LiveLookupClient (BRC-193 §1, §6; BRC-194 §1), each against the
// project's real server (LiveLookup behind createRouter on Express over loopback, public
// mode, a real signed manifest) with one violation put in by a middleware in front of it.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { PrivateKey } = require('@bsv/sdk')
const { LiveLookupClient, CheckpointStore, LiveLookupError } = require('../js/client/client.js')
const { CHAIN, plainService, notesCompanion, admit, txid } = require('./helpers/live')
const { startNode } = require('./helpers/node')

const SERVICE = 'ls_notes'
const QUERY = { author: 'alice' }
jest.setTimeout(15000)

let dir, node, live, origin, serverKey, violation
beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-transport-'))
  violation = null
  // The public-mode node, a middleware in front of its router puts the violation in.
  node = await startNode({
    authentication: 'none',
    packageDefaults: true,
    dir: path.join(dir, 'server'),
    service: plainService(),
    companion: notesCompanion(),
    before: app => app.use((req, res, next) => violation ? violation(req, res, next) : next())
  })
  ;({ live, origin, serverKey } = node)
})
afterEach(async () => {
  await node.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

function clientOf (store, extra = {}) {
  return new LiveLookupClient({ baseURL: origin, fetch, store, chain: CHAIN, allowInsecureHttp: true, limits: { waitMs: 500 }, ...extra })
}

// Rewrites the JSON body of matching responses (Content-Length follows).
function rewriteBody (match, edit) {
  return (req, res, next) => {
    if (!match(req)) return next()
    const end = res.end.bind(res)
    res.end = (chunk, ...rest) => {
      if (chunk && !res.headersSent) {
        const text = Buffer.from(chunk).toString('utf8')
        let parsed = null
        try { parsed = JSON.parse(text) } catch {}
        if (parsed) {
          const out = Buffer.from(JSON.stringify(edit(parsed)))
          res.setHeader('Content-Length', out.length)
          return end(out, ...rest)
        }
      }
      return end(chunk, ...rest)
    }
    next()
  }
}

// Follows until `stop(state)` says so; returns the states seen.
async function statesUntil (client, stop, opts = {}) {
  const states = []
  const h = client.follow(SERVICE, QUERY, { membership: 'claims', ...opts, onState (s) { states.push(s); if (stop(s)) h.close() } })
  await h.done
  return states
}

test('http: base URLs need allowInsecureHttp; a chain is required', () => {
  const store = CheckpointStore.open(path.join(dir, 'client'))
  const make = o => () => new LiveLookupClient({ baseURL: origin, fetch, store, chain: CHAIN, ...o })
  expect(make({})).toThrow(LiveLookupError)
  expect(make({})).toThrow(expect.objectContaining({ code: 'invalid' }))
  expect(make({ allowInsecureHttp: 'yes' })).toThrow(expect.objectContaining({ code: 'invalid' }))
  expect(make({ allowInsecureHttp: true, chain: undefined })).toThrow(expect.objectContaining({ code: 'invalid' }))
  expect(make({ baseURL: 'https://overlay.example', allowInsecureHttp: false })).not.toThrow()
  expect(make({ allowInsecureHttp: true })).not.toThrow()
  store.close()
})

describe('the BRC-194 manifest is verified before any request selects it', () => {
  const cases = {
    'a body that its signature does not cover': rewriteBody(r => r.method === 'GET', m => ({ ...m, body: { ...m.body, expiresAt: String(Number(m.body.expiresAt) + 1) } })),
    'a valid signature by another identity': rewriteBody(r => r.method === 'GET', m => {
      const other = PrivateKey.fromRandom()
      return require('../js/common/native').signManifest({ ...m.body, identity: other.toPublicKey().toString() }, other.toHex())
    })
  }
  test.each(Object.keys(cases))('%s', async (name) => {
    await live.commit([admit(1)])
    violation = cases[name]
    const store = CheckpointStore.open(path.join(dir, 'client'))
    const client = clientOf(store, { providerIdentity: serverKey.toPublicKey().toString() })
    await expect(client.follow(SERVICE, QUERY, { membership: 'claims' })).rejects.toMatchObject({ code: 'invalid' })
    expect(store.revision()).toBe(0)
    store.close()
  })

  test('another provider identity, base URL or chain than expected', async () => {
    await live.commit([admit(1)])
    const store = CheckpointStore.open(path.join(dir, 'client'))
    const other = PrivateKey.fromRandom().toPublicKey().toString()
    await expect(clientOf(store, { providerIdentity: other }).follow(SERVICE, QUERY, { membership: 'claims' })).rejects.toMatchObject({ code: 'invalid', message: expect.stringMatching(/identity/) })
    await expect(clientOf(store, { chain: { network: 'main', genesisHash: '11'.repeat(32) } }).follow(SERVICE, QUERY, { membership: 'claims' })).rejects.toMatchObject({ code: 'invalid', message: expect.stringMatching(/chain/) })
    await expect(clientOf(store, { baseURL: origin.replace('127.0.0.1', 'localhost') }).follow(SERVICE, QUERY, { membership: 'claims' })).rejects.toMatchObject({ code: 'invalid', message: expect.stringMatching(/baseURL/) })
    expect(store.revision()).toBe(0)
    // The right identity is accepted.
    const ok = clientOf(store, { providerIdentity: serverKey.toPublicKey().toString() })
    const h = ok.follow(SERVICE, QUERY, { membership: 'claims', onRevision (e) { if (e.members.length === 1) h.close() } })
    await h.done
    expect(ok.manifest.identity).toBe(serverKey.toPublicKey().toString())
    store.close()
  })
})

test('a success that does not echo the selection headers is refused', async () => {
  await live.commit([admit(1)])
  violation = (req, res, next) => {
    const set = res.setHeader.bind(res)
    res.setHeader = (name, value) => /^x-bsv-overlay-capability$/i.test(name) ? res : set(name, value)
    next()
  }
  const store = CheckpointStore.open(path.join(dir, 'client'))
  await expect(clientOf(store).follow(SERVICE, QUERY, { membership: 'claims' })).rejects.toMatchObject({ code: 'invalid', message: expect.stringMatching(/echo x-bsv-overlay-capability/) })
  expect(store.revision()).toBe(0)
  store.close()
})

test('scope.chain other than the configured chain: reset-required handling, nothing committed', async () => {
  await live.commit([admit(1)])
  violation = rewriteBody(r => r.method === 'POST', b => b.scope ? { ...b, scope: { ...b.scope, chain: { network: 'test', genesisHash: '22'.repeat(32) } } } : b)
  const store = CheckpointStore.open(path.join(dir, 'client'))
  const states = await statesUntil(clientOf(store, { retry: { initialMs: 10, maxMs: 20 } }), s => s.attempt === 2)
  expect(states.map(s => s.connection)).toEqual(['reset-required', 'reset-required', 'closed'])
  expect(states[0].error).toMatchObject({ code: 'reset-required', mismatch: 'chain' })
  expect(store.revision()).toBe(0)
  store.close()
})

test('scope.rulesDigest other than the pinned digest: the published generation turns stale, nothing of the new one is committed', async () => {
  for (const n of [1, 2]) await live.commit([admit(n)])
  const pinned = live.services.get(SERVICE).rulesDigest
  const store = CheckpointStore.open(path.join(dir, 'client'))
  const client = clientOf(store, { retry: { initialMs: 10, maxMs: 20 } })
  const states = []
  let key = null
  let flipped = false
  const h = client.follow(SERVICE, QUERY, {
    membership: 'claims',
    requiredRulesDigest: pinned,
    onRevision (e) {
      key = e.sourceKey
      if (!flipped && e.members.length === 2) {
        flipped = true
        // The provider now answers under other rules (its reset makes the client reopen).
        violation = rewriteBody(r => r.path.endsWith('/open'), b => b.scope ? { ...b, scope: { ...b.scope, rulesDigest: 'ee'.repeat(32) } } : b)
        setImmediate(() => live.resetEpoch({ changes: [admit(3)] }))
      }
    },
    onState (s) { states.push(s); if (s.connection === 'reset-required' && s.attempt === 2) h.close() }
  })
  await h.done
  expect(flipped).toBe(true)
  const refused = states.filter(s => s.connection === 'reset-required')
  expect(refused[0].error).toMatchObject({ code: 'reset-required', mismatch: 'rulesDigest' })
  // The old generation stays visible, marked stale; the new rules' rows never arrived.
  const st = store.state(key)
  expect(st).toMatchObject({ currentGeneration: 0, pendingGeneration: 1, stale: true })
  expect(store.members(key).map(m => [m.outpoint.txid, m.stale])).toEqual([txid(1), txid(2)].sort().map(t => [t, true]))
  expect(store.partialMembers(key)).toEqual([])
  store.close()
})

test('retryAfterMs is validated as a U32 and capped locally', async () => {
  const store = CheckpointStore.open(path.join(dir, 'client'))
  let answer = null
  violation = (req, res, next) => {
    if (req.method !== 'POST' || !answer) return next()
    const body = answer
    answer = null
    res.status(503).type('application/json').send(JSON.stringify({ version: 1, error: body }))
  }
  const client = clientOf(store, { retry: { initialMs: 10, maxMs: 250 } })
  // A valid but huge retryAfterMs waits no longer than the local cap.
  answer = { code: 'unavailable', message: 'busy', retryable: true, retryAfterMs: 4000000000 }
  let before = Date.now()
  let [s] = await statesUntil(client, s => s.connection === 'retrying')
  expect(s.error).toMatchObject({ code: 'unavailable', retryAfterMs: 4000000000, status: 503 })
  expect(s.nextRetryAt - before).toBeLessThanOrEqual(250 + (Date.now() - before))
  // Over U32: not a protocol error body at all; retried as a transport failure.
  answer = { code: 'unavailable', message: 'busy', retryable: true, retryAfterMs: 2 ** 32 }
  before = Date.now();
  [s] = await statesUntil(client, s => s.connection === 'retrying')
  expect(s.error).toMatchObject({ code: 'unavailable', transport: true, status: 503 })
  expect(s.error.retryAfterMs).toBeUndefined()
  expect(s.nextRetryAt - before).toBeLessThanOrEqual(250 + (Date.now() - before))
  store.close()
})

test('response headers and bodies are bounded before parsing', async () => {
  await live.commit([admit(1)])
  const store = CheckpointStore.open(path.join(dir, 'client'))
  violation = (req, res, next) => { res.setHeader('x-padding', 'p'.repeat(6000)); next() }
  await expect(clientOf(store, { maxHeaderBytes: 4096 }).follow(SERVICE, QUERY, { membership: 'claims' })).rejects.toMatchObject({ code: 'limited', message: expect.stringMatching(/headers/) })
  violation = null
  await expect(clientOf(store, { limits: { maxBytes: 300 } }).follow(SERVICE, QUERY, { membership: 'claims' })).rejects.toMatchObject({ code: 'limited' })
  expect(store.revision()).toBe(0)
  store.close()
})

test('a full pending budget pauses reads until verification drains it', async () => {
  for (const n of [1, 2, 3, 4, 5, 6]) await live.commit([admit(n)])
  const store = CheckpointStore.open(path.join(dir, 'client'))
  const client = clientOf(store, { limits: { maxObservations: 2, waitMs: 500 } })
  const states = []
  let key = null
  let maxPending = 0
  const h = client.follow(SERVICE, QUERY, {
    membership: 'manual',
    pendingBudget: 4,
    pollIntervalMs: 20,
    onRevision (e) {
      key = e.sourceKey
      maxPending = Math.max(maxPending, e.state.pendingCount)
      if (e.state.received === 6) h.close()
    },
    onState (s) {
      states.push(s.connection)
      if (s.connection === 'paused') {
        // The application's verifier accepts what is waiting.
        const st = store.state(s.sourceKey)
        for (const g of st.pendingGroups) store.markVerified(s.sourceKey, g.generation, g.groupId)
      }
    }
  })
  await h.done
  // Receipt paused at the budget (never an error) and went on once it was drained.
  expect(states.filter(s => s === 'paused').length).toBeGreaterThanOrEqual(1)
  expect(states).not.toContain('retrying')
  expect(maxPending).toBeLessThanOrEqual(4)
  expect(store.state(key)).toMatchObject({ received: 6, pendingCount: 2 })
  expect(store.members(key)).toEqual([])
  for (const g of store.state(key).pendingGroups) store.markVerified(key, g.generation, g.groupId)
  expect(store.state(key)).toMatchObject({ received: 6, accepted: 6, pendingCount: 0 })
  expect(store.members(key).filter(m => m.present)).toHaveLength(6)
  store.close()
})

test('several sources: a provider whose follow fails for good is reported failed while the others continue', async () => {
  for (const n of [1, 2]) await live.commit([admit(n)])
  const store = CheckpointStore.open(path.join(dir, 'client'))
  const client = clientOf(store)
  // Nothing lookup-live is served under this base: its manifest request gets a plain 404.
  const broken = origin + '/elsewhere'
  const states = []
  let members = null
  let added = false
  const h = client.follow(SERVICE, QUERY, {
    membership: 'claims',
    sources: [broken, origin],
    onState (s) { states.push([s.source, s.connection]) },
    onRevision (e) {
      members = e.members
      if (e.members.length === 2 && !added) { added = true; setImmediate(() => live.commit([admit(3)])) }
      if (e.members.length === 3) h.close()
    }
  })
  const result = await h.done
  expect(states).toContainEqual([broken, 'failed'])
  expect(members.map(m => m.outpoint.txid).sort()).toEqual([txid(1), txid(2), txid(3)].sort())
  expect(result.sources[0]).toMatchObject({ source: broken, sourceKey: null, error: { code: 'unavailable', status: 404 } })
  expect(result.sources[1]).toMatchObject({ source: origin, error: null })
  store.close()
})
