'use strict'
// BRC-103 authenticated serving with the server in its own process (bench/lib/live-server.js),
// so that the server's CPU time is measured alone, and clients in their own processes
// (bench/lib/live-client.js; BRC-103 clients are NativeAuthFetch, or AuthFetch with
// cfg.transport 'authfetch', on the package's NativeWallet):
// (a) server CPU per caught-up live read (waitMs 0), BRC-103 against public mode (1 and
//     cpuClients public clients), and
//     authenticated reads/s with 1, 16 and 64 clients, each client its own identity and
//     session, on up to `clientHosts` client processes (4) warmed up first; and the same
//     with one process per client (a process making a few reads a second never gets its
//     code optimized, so there the clients' cold JS is most of the machine's work);
// (b) commit-to-delivery of one group to N authenticated long polls (N = 100, 1,000), from the
//     moment the server calls live.commit to each answer received and verified by its client
//     (wall clocks of processes on one machine), and until the server handed its last signed
//     answer to the OS;
// (c) first contact: server CPU and client latency of a new identity's first request (the
//     BRC-103 handshake, then an open).

const { summary, percentile, progress } = require('../lib/common')
const { start } = require('../lib/child-process')

async function startServer (cfg, authentication) {
  const server = await start('live-server.js', { authentication, dir: cfg.dir, access: cfg.access })
  // The BRC-103 clients' transport (bench/lib/live-client.js; default NativeAuthFetch).
  if (cfg.transport) server.ready = { ...server.ready, transport: cfg.transport }
  return server
}

async function startClients (server, authentication, processes, sessionsEach, sessionsPerIdentity = 16) {
  const cfg = { ...server.ready, authentication, sessions: sessionsEach, sessionsPerIdentity }
  const clients = []
  // A few at a time: each opens its sessions (and handshakes) on startup.
  for (let i = 0; i < processes; i += 8) {
    clients.push(...await Promise.all(Array.from({ length: Math.min(8, processes - i) }, () => start('live-client.js', cfg))))
  }
  return clients
}

const cpu = async (server) => (await server.ask({ cmd: 'cpu' }, 'cpuMicros')).cpuMicros

/**
 * Reads/s, server and client CPU per read over `runs` windows of `ms` with `clients` clients
 * (each its own identity and session) on `hosts` client processes (one per client when
 * `hosts` is null), after `warmupMs` of reads.
 */
async function readFigure (server, authentication, clientCount, hosts, runs, ms, warmupMs) {
  const processes = hosts ? Math.min(clientCount, hosts) : clientCount
  const clients = await startClients(server, authentication, processes, Math.ceil(clientCount / processes), 1)
  try {
    await Promise.all(clients.map((c) => c.ask({ cmd: 'reads', ms: warmupMs }, 'reads')))
    const perSec = []; const cpuPerRead = []; const clientCpuPerRead = []
    for (let r = 0; r < runs; r++) {
      const c0 = await cpu(server)
      const t0 = performance.now()
      const counts = await Promise.all(clients.map((c) => c.ask({ cmd: 'reads', ms }, 'reads')))
      const seconds = (performance.now() - t0) / 1000
      const c1 = await cpu(server)
      const reads = counts.reduce((a, m) => a + m.reads, 0)
      const clientCpu = counts.reduce((a, m) => a + m.cpuMicros, 0)
      perSec.push(reads / seconds)
      cpuPerRead.push((c1 - c0) / 1000 / reads)
      clientCpuPerRead.push(clientCpu / 1000 / reads)
      progress(`auth ${authentication}, ${clientCount} client(s) on ${processes} process(es): run ${r + 1}/${runs} ${(reads / seconds).toFixed(0)} reads/s, server ${((c1 - c0) / 1000 / reads).toFixed(3)} ms, clients ${(clientCpu / 1000 / reads).toFixed(3)} ms CPU per read`)
    }
    return { clients: clientCount, processes, readsPerSec: summary(perSec, 'reads/s'), serverCpuMsPerRead: summary(cpuPerRead, 'ms'), clientCpuMsPerRead: summary(clientCpuPerRead, 'ms') }
  } finally {
    for (const c of clients) await c.stop()
  }
}

/**
 * Commit-to-delivery for n authenticated long polls spread over `processes` client processes,
 * `sessionsPerIdentity` sessions per client identity.
 */
async function pollFigure (server, n, processes, runs, sessionsPerIdentity = 16) {
  const clients = await startClients(server, 'brc103', processes, Math.ceil(n / processes), sessionsPerIdentity)
  const total = Math.ceil(n / processes) * processes
  const p50 = []; const p99 = []; const max = []; const cpuPerAnswer = []; const written = []
  try {
    for (let r = 0; r <= runs; r++) {
      const answered = clients.map((c) => c.ask({ cmd: 'park' }, 'parked').then(() => c.ask(null, 'answered')))
      for (;;) {
        if ((await server.ask({ cmd: 'waiters' }, 'waiters')).waiters >= total) break
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      const c0 = await cpu(server)
      const done = server.ask({ cmd: 'commit', expect: total }, 'at')
      const times = (await Promise.all(answered)).flatMap((m) => m.answered)
      const { at, lastWrittenAt } = await done
      for (let i = 0; i < times.length; i++) times[i] -= at
      const c1 = await cpu(server)
      if (r === 0) continue // warm-up
      p50.push(percentile(times, 50)); p99.push(percentile(times, 99)); max.push(percentile(times, 100))
      cpuPerAnswer.push((c1 - c0) / 1000 / total)
      written.push(lastWrittenAt - at)
      progress(`auth polls ${total}: run ${r}/${runs} p50 ${percentile(times, 50).toFixed(1)} ms p99 ${percentile(times, 99).toFixed(1)} ms`)
    }
  } finally {
    for (const c of clients) await c.stop()
  }
  return { pollers: total, clientProcesses: processes, p50Ms: summary(p50, 'ms'), p99Ms: summary(p99, 'ms'), maxMs: summary(max, 'ms'), lastWrittenMs: summary(written, 'ms'), serverCpuMsPerAnswer: summary(cpuPerAnswer, 'ms') }
}

/** A new identity's first request (handshake + open), `n` in turn, `runs` times. */
async function firstContactFigure (server, n, runs) {
  const [c] = await startClients(server, 'brc103', 1, 0)
  const cpuPer = []; const p50 = []
  try {
    await c.ask({ cmd: 'first', n: Math.min(n, 5) }, 'firstMs') // warm-up
    for (let r = 0; r < runs; r++) {
      const c0 = await cpu(server)
      const { firstMs } = await c.ask({ cmd: 'first', n }, 'firstMs')
      const c1 = await cpu(server)
      cpuPer.push((c1 - c0) / 1000 / n)
      p50.push(percentile(firstMs, 50))
    }
  } finally {
    await c.stop()
  }
  return { contacts: n, serverCpuMsPerContact: summary(cpuPer, 'ms'), clientLatencyP50Ms: summary(p50, 'ms') }
}

async function run (cfg) {
  const out = { windowMs: cfg.windowMs }
  out.clientHosts = cfg.clientHosts
  out.warmupMs = cfg.warmupMs
  const pub = await startServer(cfg, 'none')
  try {
    // One public client reading back to back: the round trip without BRC-104, next to the
    // authenticated single client.
    if (cfg.clients.includes(1)) out.publicReadsOne = await readFigure(pub, 'none', 1, cfg.clientHosts, cfg.runs, cfg.windowMs, cfg.warmupMs)
    out.publicReads = await readFigure(pub, 'none', cfg.cpuClients, cfg.clientHosts, cfg.runs, cfg.windowMs, cfg.warmupMs)
    out.publicReadsProcessEach = await readFigure(pub, 'none', cfg.cpuClients, null, cfg.runs, cfg.windowMs, cfg.warmupMs)
  } finally {
    await pub.stop()
  }
  const auth = await startServer(cfg, 'brc103')
  try {
    out.authReads = []
    for (const n of cfg.clients) out.authReads.push(await readFigure(auth, 'brc103', n, cfg.clientHosts, cfg.runs, cfg.windowMs, cfg.warmupMs))
    out.authReadsProcessEach = []
    for (const n of cfg.processEachClients) out.authReadsProcessEach.push(await readFigure(auth, 'brc103', n, null, cfg.runs, cfg.windowMs, cfg.warmupMs))
    const same = out.authReads.find((x) => x.clients === cfg.cpuClients)
    out.cpuRatio = same ? same.serverCpuMsPerRead.median / out.publicReads.serverCpuMsPerRead.median : null
    out.polls = []
    for (const n of cfg.pollers) out.polls.push(await pollFigure(auth, n, cfg.pollProcesses, cfg.pollRuns))
    out.firstContact = await firstContactFigure(auth, cfg.firstContacts, cfg.runs)
  } finally {
    await auth.stop()
  }
  return out
}

module.exports = { run, startServer, pollFigure }
