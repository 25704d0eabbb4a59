'use strict'
// Client CPU per authenticated (BRC-103/104) caught-up read, @bsv/sdk's AuthFetch against the
// package's NativeAuthFetch, both on NativeWallet, against the current router. The server runs
// in its own process (bench/lib/live-server.js) and each client in its own
// (bench/lib/live-client.js), which reports its own process.cpuUsage() over each window. Both
// client processes are started and warmed up first (JIT compilation is most of a young
// process's CPU), then read in alternating windows, one at a time, so that both see the same
// machine; every figure is min/median/max over the rounds.
//
//   node bench/authclient.js [--rounds 5] [--ms 2000] [--sessions 4] [--warmup 5000]
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
  const transports = ['authfetch', 'native']
  const results = Object.fromEntries(transports.map((t) => [t, { client: [], server: [], perSec: [] }]))
  const clients = {}
  try {
    for (const transport of transports) {
      clients[transport] = await start('live-client.js', { ...server.ready, authentication: 'brc103', sessions, transport })
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

main().catch((e) => { console.error(e); process.exit(1) })
