'use strict'
// Client CPU per authenticated (BRC-103/104) caught-up read, @bsv/sdk's AuthFetch against the
// package's NativeAuthFetch, both on NativeWallet, against the current router. The server runs
// in its own process (bench/lib/live-server.js) and each client in its own
// (bench/lib/live-client.js), which reports its own process.cpuUsage() over each window. Both
// client processes are started and warmed up first (JIT compilation is most of a young
// process's CPU), then read in alternating windows, one at a time, so that both see the same
// machine; every figure is min/median/max over the rounds.
//
//   node bench/authclient.js [--rounds 5] [--ms 2000] [--sessions 4] [--warmup 5000] [--client]
//
// `authfetch` and `native` read with fetch() and the Response's text(), as an application would.
// With --client a third process, `client`, reads through LiveLookupClient's request path
// (js/client/client.js: its deadline, signal and header checks over NativeAuthFetch, which hands it the
// verified bytes without a Response), without its store commit; this file is that process
// (started with its configuration in argv[2]).
//
// Prints one line per round and a summary per transport: client ms CPU per read, reads/s, and
// server ms CPU per read (the server's share is the same router for both).

const { summary } = require('./lib/common')
const { start } = require('./lib/child-process')

function arg (name, fallback) {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? Number(process.argv[i + 1]) : fallback
}

async function main () {
  const rounds = arg('rounds', 5)
  const ms = arg('ms', 2000)
  const sessions = arg('sessions', 4)
  const warmup = arg('warmup', 5000)
  const server = await start('live-server.js', { authentication: 'brc103' })
  const cpu = async () => (await server.ask({ cmd: 'cpu' }, 'cpuMicros')).cpuMicros
  const transports = ['authfetch', 'native', ...(process.argv.includes('--client') ? ['client'] : [])]
  const results = Object.fromEntries(transports.map((t) => [t, { client: [], server: [], perSec: [] }]))
  const clients = {}
  try {
    for (const transport of transports) {
      const script = transport === 'client' ? '../authclient.js' : 'live-client.js'
      clients[transport] = await start(script, { ...server.ready, authentication: 'brc103', sessions, transport })
      await clients[transport].ask({ cmd: 'reads', ms: warmup }, 'reads')
    }
    for (let r = 0; r < rounds; r++) {
      for (const transport of r % 2 === 0 ? transports : [...transports].reverse()) {
        const client = clients[transport]
        const s0 = await cpu()
        const t0 = performance.now()
        const { reads, cpuMicros } = await client.ask({ cmd: 'reads', ms }, 'reads')
        const seconds = (performance.now() - t0) / 1000
        const s1 = await cpu()
        const row = results[transport]
        row.client.push(cpuMicros / 1000 / reads)
        row.server.push((s1 - s0) / 1000 / reads)
        row.perSec.push(reads / seconds)
        console.log(`round ${r + 1}/${rounds} ${transport.padEnd(9)} ${reads} reads, client ${(cpuMicros / 1000 / reads).toFixed(3)} ms CPU/read, server ${((s1 - s0) / 1000 / reads).toFixed(3)} ms CPU/read, ${(reads / seconds).toFixed(0)} reads/s`)
      }
    }
  } finally {
    for (const c of Object.values(clients)) await c.stop()
    await server.stop()
  }
  const fmt = (s, d = 3) => `${s.median.toFixed(d)} (min ${s.min.toFixed(d)}, max ${s.max.toFixed(d)})`
  console.log(`\n${rounds} rounds of ${ms} ms after ${warmup} ms of warm-up, 1 client process of each with ${sessions} sessions, median (min, max):`)
  for (const t of transports) {
    const row = results[t]
    console.log(`${t.padEnd(9)} client ms CPU/read ${fmt(summary(row.client))}; server ms CPU/read ${fmt(summary(row.server))}; reads/s ${fmt(summary(row.perSec), 0)}`)
  }
  // The ratio per round, from the two windows of that round.
  const ratios = results.authfetch.client.map((a, r) => a / results.native.client[r])
  console.log(`client CPU per read, AuthFetch / NativeAuthFetch (per round): ${fmt(summary(ratios), 2)}`)
}

/**
 * The `client` process: one LiveLookupClient over a NativeAuthFetch of its own identity, with
 * `sessions` sessions opened and read to the end, then caught-up reads (waitMs 0) through its
 * request path (_post: what follow() sends and checks for each read) on every session at once.
 * The live server advertises another base URL than the loopback one, so its manifest would not
 * verify here: the client is given the capability digest the server reported.
 */
async function clientProcess (cfg) {
  const fs = require('node:fs')
  const os = require('node:os')
  const path = require('node:path')
  const { PrivateKey } = require('@bsv/sdk')
  const { NativeWallet, NativeAuthFetch, LiveLookupClient, CheckpointStore } = require('../js')
  const { openBody, caughtUpReads } = require('./lib/client')
  const NOWAIT = { maxBytes: 65536, maxObservations: 100, waitMs: 0 }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'authclient-'))
  const store = CheckpointStore.open(path.join(dir, 'store'))
  const authFetch = new NativeAuthFetch(NativeWallet.fromPrivateKey(PrivateKey.fromRandom().toHex()))
  const client = new LiveLookupClient({ baseURL: cfg.base, allowInsecureHttp: true, authFetch, store, chain: { network: 'test', genesisHash: '00'.repeat(32) } })
  client._capability = cfg.headers['x-bsv-overlay-capability']
  const post = async (op, payload) => JSON.parse((await client._post(op, payload, undefined, 0)).toString('utf8'))
  const read = (s) => post('read', { version: 1, session: s.session, cursor: s.cursor, limits: NOWAIT })
  const sessions = []
  for (let i = 0; i < cfg.sessions; i++) {
    let b = await post('open', JSON.parse(openBody({}, NOWAIT)))
    while (!b.snapshotComplete) b = await read(b)
    sessions.push({ session: b.session, cursor: b.cursor })
  }
  process.on('message', async (m) => {
    if (m.cmd === 'reads') {
      process.send(await caughtUpReads(sessions, m.ms, read))
    } else if (m.cmd === 'close') {
      authFetch.close()
      store.close()
      fs.rmSync(dir, { recursive: true, force: true })
      process.exit(0)
    }
  })
  process.send({ ready: true })
}

const fail = (e) => { console.error(e); process.exit(1) }
if (process.send && process.argv[2] && process.argv[2].startsWith('{')) clientProcess(JSON.parse(process.argv[2])).catch(fail)
else main().catch(fail)
