'use strict'
// The follow survives its provider: a real node (Express, BRC-103 with AuthFetch, a real
// @bsv/overlay Engine on SQLite, the native live store) is stopped while the client
// follows and restarted on the same address, data directories and identity. The
// client keeps running, reports `retrying`, and resumes from its committed cursor:
// every note arrives once, none is lost.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { AuthFetch, ProtoWallet, PrivateKey } = require('@bsv/sdk')
const { LiveLookupClient, CheckpointStore } = require('../js/client/client.js')
const { startNode } = require('./helpers/node')
const { LocalChainTracker } = require('./helpers/engine')
const { CHAIN } = require('./helpers/live')

jest.setTimeout(60000)

let tmp
beforeEach(() => { tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-resilience-')) })
afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }))

const present = members => members.filter(m => m.present).map(m => `${m.outpoint.txid}.${m.outpoint.outputIndex}`).sort()

test('the provider is stopped and restarted while the client follows: retrying, then resumed with no loss and no duplicate', async () => {
  const serverKey = PrivateKey.fromRandom()
  const dirs = { dir: path.join(tmp, 'live'), engineDir: path.join(tmp, 'engine') }
  fs.mkdirSync(dirs.engineDir)
  const chainTracker = new LocalChainTracker() // one chain across the restart
  let node = await startNode({ ...dirs, serverKey, chainTracker })
  const port = node.srv.port
  const notes = [await node.factory.createNotes(['one']), await node.factory.createNotes(['two'])]
  for (const n of notes) await node.submit(n)

  const store = CheckpointStore.open(path.join(tmp, 'client'))
  const client = new LiveLookupClient({
    baseURL: node.origin,
    chain: CHAIN,
    allowInsecureHttp: true,
    authFetch: new AuthFetch(new ProtoWallet(PrivateKey.fromRandom())),
    store,
    limits: { waitMs: 2000 },
    retry: { initialMs: 50, maxMs: 400 }
  })
  const states = []
  const revisions = []
  let stopped = null
  let restarted = null
  const third = await node.factory.createNotes(['three'])
  const fourth = await node.factory.createNotes(['four'])
  const want = [...notes, third, fourth].map(n => `${n.txid}.0`).sort()
  const handle = client.follow('ls_notes', {}, {
    membership: 'claims',
    onRevision (e) {
      revisions.push(e)
      if (!stopped && present(e.members).length === 2) {
        // Stop the provider with the client between polls; it is down until restarted.
        stopped = node.close()
      }
      if (present(e.members).join() === want.join()) handle.close()
    },
    async onState (s) {
      states.push({ connection: s.connection, attempt: s.attempt, nextRetryAt: s.nextRetryAt, code: s.error && s.error.code })
      // After a few failed attempts, the provider comes back (same port, data, identity),
      // having admitted a note while the client could not reach it.
      if (s.connection === 'retrying' && s.attempt === 3 && !restarted) {
        restarted = (async () => {
          await stopped
          node = await startNode({ ...dirs, serverKey, port, chainTracker })
          await node.submit(third)
        })()
      }
      if (s.connection === 'connected' && restarted) {
        await restarted
        await node.submit(fourth)
      }
    }
  })
  const result = await handle.done
  await restarted
  const key = result.sourceKey
  expect(key.provider).toBe(serverKey.toPublicKey().toString())
  // Visible as states, never as a rejection.
  const retrying = states.filter(s => s.connection === 'retrying')
  expect(retrying.length).toBeGreaterThanOrEqual(3)
  expect(retrying.slice(0, 3).map(s => s.attempt)).toEqual([1, 2, 3])
  expect(retrying.every(s => s.code === 'unavailable' && typeof s.nextRetryAt === 'number')).toBe(true)
  const firstRetry = states.findIndex(s => s.connection === 'retrying')
  expect(states.slice(firstRetry).some(s => s.connection === 'connected')).toBe(true)
  expect(states[states.length - 1].connection).toBe('closed')
  // No loss, no duplicate: one open, each note received exactly once.
  expect(present(store.members(key))).toEqual(want)
  expect(store.state(key)).toMatchObject({ received: 4, accepted: 4, currentGeneration: 0, pendingCount: 0 })
  expect(store.checkpoint(key).generation).toBe(0)
  expect(revisions.reduce((n, e) => n + e.outcome.applied, 0)).toBe(4)
  expect(revisions.reduce((n, e) => n + e.outcome.duplicates, 0)).toBe(0)
  store.close()
  await node.close()
})
