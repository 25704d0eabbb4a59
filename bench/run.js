#!/usr/bin/env node
'use strict'
// `npm run bench`: runs every benchmark section, each in its own child process, and writes
// RESULTS.md, results.json and the SVG plots into the output directory (bench/ by default).
//
//   npm run bench                      full run (see bench/README.md for what is measured)
//   npm run bench -- --quick           tiny sizes, 2 runs: checks the harness in under a minute
//   npm run bench -- --out DIR         write the results elsewhere (the Jest test does this)
//   npm run bench -- --cargo           also run the native `cargo bench` targets and include them
//   npm run bench -- --only a,b        only these sections (catalogue, commits, waiters, http, disk, caps, auth, submit, gasp, access, nativeverify, receipt, clientscale)
//   npm run bench -- --engine-at-1m    also measure Engine.lookup at 1M rows (slow, several GB of heap)
//   node bench/run.js --render FILE    rewrite RESULTS.md and the plots from an existing results.json
// Figures are min/median/max of repeated runs; ratios pair values of the same run.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { fork, spawn } = require('node:child_process')
const { linePlot } = require('./lib/svg')
const { renderReport } = require('./lib/report')
const { machine, settleDisk } = require('./lib/machine')

const SECTIONS = ['catalogue', 'commits', 'waiters', 'http', 'disk', 'caps', 'auth', 'submit', 'gasp', 'access', 'nativeverify', 'receipt', 'clientscale']

function parseArgs (argv) {
  const a = { quick: false, out: __dirname, cargo: false, only: null, engineAt1m: false, tmp: os.tmpdir() }
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]
    if (k === '--quick') a.quick = true
    else if (k === '--out') a.out = path.resolve(argv[++i])
    else if (k === '--cargo') a.cargo = true
    else if (k === '--only') a.only = argv[++i].split(',')
    else if (k === '--engine-at-1m') a.engineAt1m = true
    else if (k === '--tmp') a.tmp = path.resolve(argv[++i])
    else if (k === '--render') a.render = path.resolve(argv[++i])
    else throw new Error(`unknown argument ${k} (see the header of bench/run.js)`)
  }
  for (const s of a.only || []) if (!SECTIONS.includes(s)) throw new Error(`unknown section ${s}`)
  return a
}

/** Section configurations. Full: sized to fit about 10 minutes on 2 cores. */
function plans (args) {
  if (args.quick) {
    return {
      catalogue: { sizes: [200, 2000], runs: 2, http: true, lookupHttp: true, plan: { 2000: { engineInRoute: true } } },
      commits: { runs: 2, groups1: 50, groups8PerWriter: 10 },
      waiters: { runs: 2, sizes: [10, 100] },
      http: { pollers: [20], runs: 2, clients: [1, 4], snapshotRows: 500, windowMs: 200, readRuns: 2, authClients: [1, 2], authRuns: 2 },
      disk: { runs: 2, rows: 2000 },
      caps: {},
      auth: { windowMs: 300, runs: 2, warmupMs: 300, clientHosts: 2, cpuClients: 2, clients: [1, 2], processEachClients: [2], pollers: [20], pollProcesses: 2, pollRuns: 1, firstContacts: 3 },
      submit: { widths: [1, 8], batch: 8, rounds: 2 },
      gasp: { intervals: [250], runs: 2 },
      access: { rows: 2000, runs: 2, partitions: 10, pollers: 20, pollProcesses: 2, pollRuns: 1, memorySessions: 100, memoryRuns: 2 },
      nativeverify: { jobs: 100, sdkJobs: 20, runs: 2, batch: 16, workers: 2 },
      receipt: { runs: [{ snapshot: 300, engine: null }, { snapshot: 300, engine: 'native' }] },
      clientscale: { outputs: 300, runs: 2, cacheRoot: args.tmp }
    }
  }
  return {
    catalogue: {
      sizes: [1000, 10000, 100000, 1000000],
      runs: 5,
      http: true,
      lookupHttp: true,
      // Engine.lookup answers one outpoint per SQLite query: about 25 s per 100k rows here (35 s
      // through the HTTP /lookup route), and a million-output answer would not fit the time budget
      // (nor the default heap; over HTTP its JSON would pass V8's maximum string length). At 100k
      // the Engine.lookup figure is timed inside the HTTP /lookup route of the same round
      // (engineInRoute) rather than paying for a second full answer.
      plan: {
        10000: { lookupHttp: 3 },
        100000: { engine: 3, lookupHttp: 3, engineInRoute: true },
        1000000: { engine: args.engineAt1m ? 1 : 0, drain: 2, http: 1, lookupHttp: 0 }
      }
    },
    commits: { runs: 5, groups1: 1000, groups8PerWriter: 250 },
    waiters: { runs: 5, sizes: [100, 1000, 10000] },
    // 1,000 parked HTTP long polls (2,000 loopback sockets in this one process, well under the
    // usual file-descriptor limit); reads/s over 1-second windows.
    http: { pollers: [1000], runs: 5, clients: [1, 16], snapshotRows: 20000, windowMs: 1000, readRuns: 3, authClients: [1, 16], authRuns: 3 },
    disk: { runs: 5, rows: 20000 },
    caps: {},
    // Server and clients in separate processes (BRC-103 clients: NativeAuthFetch with NativeWallet).
    auth: { windowMs: 2000, runs: 3, warmupMs: 3000, clientHosts: 4, cpuClients: 16, clients: [1, 16, 64], processEachClients: [16, 64], pollers: [100, 1000], pollProcesses: 4, pollRuns: 3, firstContacts: 40 },
    // Engine.submit with the lookup service plain and wrapped, interleaved rounds.
    submit: { widths: [1, 8], batch: 60, rounds: 5 },
    // GASP propagation lag A -> B against B's sync interval.
    gasp: { intervals: [250, 1000, 2000], runs: 7 },
    // Access partitions: first batch of a 1% partition at 100k rows, 1,000 authenticated polls of
    // 1,000 principals in 10 partitions, memory per waiting session with and without partitions.
    access: { rows: 100000, runs: 5, partitions: 10, pollers: 1000, pollProcesses: 4, pollRuns: 3, memorySessions: 10000, memoryRuns: 3 },
    nativeverify: { jobs: 4000, sdkJobs: 400, runs: 5, batch: 64, workers: 4 },
    // Client receipt of a snapshot over HTTP, one run per row (a 100,000-output run is about a minute).
    receipt: {
      runs: [
        { snapshot: 10000, engine: null }, { snapshot: 10000, engine: 'native' }, { snapshot: 10000, engine: 'sdk' },
        { snapshot: 100000, engine: null }, { snapshot: 100000, engine: 'native' }
      ]
    },
    // Client receipt beside a plain SQLite client and a raw drain (issue 47), one run of each row
    // (about 2 minutes). The signed catalogue is cached under --tmp: its first build takes
    // minutes more, reported apart from the rows.
    clientscale: { outputs: 100000, runs: 1, cacheRoot: args.tmp }
  }
}

function runSection (name, cfg, heapMb) {
  return new Promise((resolve, reject) => {
    const child = fork(path.join(__dirname, 'lib', 'child.js'), [name, JSON.stringify(cfg)], {
      execArgv: ['--expose-gc', `--max-old-space-size=${heapMb}`],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc']
    })
    let message = null
    child.on('message', (m) => { message = m })
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      if (message && message.ok) return resolve(message.result)
      reject(new Error(`section ${name} failed (exit ${code}${signal ? ', ' + signal : ''}): ${message ? message.error : 'no result'}`))
    })
  })
}

/** Runs a cargo bench target, streaming its stderr, and returns its stdout. */
function cargoBench (target, env) {
  return new Promise((resolve) => {
    const t0 = Date.now()
    const child = spawn('cargo', ['bench', '--profile', 'ci', '--bench', target], { cwd: path.join(__dirname, '..'), env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (d) => { out += d; process.stderr.write(d) })
    child.on('error', (e) => resolve({ target, ok: false, output: String(e), seconds: 0 }))
    child.on('exit', (code) => resolve({ target, ok: code === 0, output: out, seconds: (Date.now() - t0) / 1000 }))
  })
}

function writePlots (results, out) {
  const files = []
  const cat = results.sections.catalogue
  if (cat) {
    const pt = (s, key) => ({ x: s.size, y: s[key].median, min: s[key].min, max: s[key].max })
    const svg = linePlot({
      title: 'Latency against catalogue size',
      xLabel: 'rows in the catalogue (log)',
      yLabel: 'milliseconds (log)',
      logX: true,
      logY: true,
      series: [
        { name: 'live open: first batch', points: cat.sizes.map(s => pt(s, 'firstBatchMs')) },
        { name: 'Engine.lookup: full answer', points: cat.sizes.filter(s => s.engineLookupMs.n > 0).map(s => pt(s, 'engineLookupMs')) },
        { name: 'live: full snapshot drain', points: cat.sizes.filter(s => s.drainInProcessMs.n > 0).map(s => pt(s, 'drainInProcessMs')) },
        { name: 'live: drain over HTTP', points: cat.sizes.filter(s => s.drainHttpMs.n > 0).map(s => pt(s, 'drainHttpMs')) }
      ]
    })
    fs.writeFileSync(path.join(out, 'latency-vs-catalogue.svg'), svg)
    files.push('latency-vs-catalogue.svg')
  }
  const w = results.sections.waiters
  if (w) {
    const pt = (s, key) => ({ x: s.waiters, y: s[key].median, min: s[key].min, max: s[key].max })
    const svg = linePlot({
      title: 'Commit-to-delivery latency against waiting sessions',
      xLabel: 'waiting sessions (log)',
      yLabel: 'milliseconds (log)',
      logX: true,
      logY: true,
      series: [
        { name: 'p50 from publication', points: w.sizes.map(s => pt(s, 'deliveryFromPublicationP50Ms')) },
        { name: 'p99 from publication', points: w.sizes.map(s => pt(s, 'deliveryFromPublicationP99Ms')) },
        { name: 'p99 from the commit call', points: w.sizes.map(s => pt(s, 'deliveryFromCommitCallP99Ms')) },
        { name: 'durable commit ack', points: w.sizes.map(s => pt(s, 'commitAckMs')) }
      ]
    })
    fs.writeFileSync(path.join(out, 'latency-vs-waiters.svg'), svg)
    files.push('latency-vs-waiters.svg')
  }
  return files
}

/** Re-renders the report and plots of a finished run next to its results.json (no measuring). */
function renderOnly (file) {
  const results = JSON.parse(fs.readFileSync(file, 'utf8'))
  results.reRenderedAt = new Date().toISOString()
  const out = path.dirname(file)
  writePlots(results, out)
  fs.writeFileSync(path.join(out, 'RESULTS.md'), renderReport(results))
  process.stderr.write(`[bench] re-rendered ${path.join(out, 'RESULTS.md')} from ${file}\n`)
}

async function main () {
  const args = parseArgs(process.argv.slice(2))
  if (args.render) return renderOnly(args.render)
  const started = Date.now()
  fs.mkdirSync(args.out, { recursive: true })
  const tmp = fs.mkdtempSync(path.join(args.tmp, 'overlay-live-bench-'))
  const results = {
    command: 'npm run bench' + (process.argv.length > 2 ? ' -- ' + process.argv.slice(2).join(' ') : ''),
    quick: args.quick,
    startedAt: new Date(started).toISOString(),
    machine: machine(),
    sections: {},
    sectionSeconds: {},
    cargo: null
  }
  const cfgs = plans(args)
  results.plans = cfgs
  const heapMb = Math.max(2048, Math.floor(os.totalmem() / (1024 * 1024) / 2))
  const write = () => {
    results.durationSeconds = (Date.now() - started) / 1000
    results.machine.loadAverageAtEnd = os.loadavg()
    results.plots = writePlots(results, args.out)
    fs.writeFileSync(path.join(args.out, 'results.json'), JSON.stringify(results, null, 2) + '\n')
    fs.writeFileSync(path.join(args.out, 'RESULTS.md'), renderReport(results))
  }
  try {
    for (const name of SECTIONS) {
      if (args.only && !args.only.includes(name)) continue
      settleDisk()
      const t0 = Date.now()
      process.stderr.write(`[bench] section ${name}\n`)
      results.sections[name] = await runSection(name, { ...cfgs[name], dir: tmp }, heapMb)
      results.sectionSeconds[name] = (Date.now() - t0) / 1000
    }
    if (args.cargo) {
      write() // the JS sections are kept even if a cargo bench fails to build or run
      const env = { OLL_BENCH_DIR: tmp, ...(args.quick ? { OLL_BENCH_QUICK: '1' } : {}) }
      const t0 = Date.now()
      settleDisk()
      results.cargo = [await cargoBench('wire', env), await cargoBench('store', env), await cargoBench('session', env)]
      results.sectionSeconds.cargo = (Date.now() - t0) / 1000
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
  write()
  process.stderr.write(`[bench] done in ${results.durationSeconds.toFixed(0)} s; wrote ${path.join(args.out, 'RESULTS.md')}\n`)
}

main().catch((err) => {
  process.stderr.write((err && err.stack ? err.stack : String(err)) + '\n')
  process.exit(1)
})
