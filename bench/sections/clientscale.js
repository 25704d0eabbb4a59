'use strict'
// The client's receipt beside a plain SQLite client and a raw drain (issue 47, section 16),
// measured as a new user would: a provider in its own process (lib/catalogue-provider.js:
// public mode, loopback HTTP, one wrapped notes service) serving N outputs, each a signed
// P2PKH transaction with its proven parent as Atomic BEEF (lib/p2pkh-catalogue.js, built once
// and cached); pages of 1,024 observations, no long poll. Each row receives the whole snapshot
// in a fresh process of its own with a fresh data directory (lib/clientscale-row.js), all rows
// against the same provider process, in order; every row checks it holds exactly N outputs.
// Figures per row: receipt time, observations/s, disk bytes per output, peak RSS, and for the
// verifying row the time until every output is current; ratios pair rows of the same run.
// `bench/client-scale.js` runs it from the command line.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { fork } = require('node:child_process')
const { start } = require('../lib/child-process')
const catalogue = require('../lib/p2pkh-catalogue')
const { ROWS } = require('../lib/clientscale-row')
const { settleDisk } = require('../lib/machine')
const { summary, progress } = require('../lib/common')

const MiB = 1024 * 1024

/**
 * One row in a fresh process with Node's default flags (as an application runs), resolving its
 * result. The section's own --expose-gc and heap size are not passed on.
 */
function runRowProcess (cfg) {
  return new Promise((resolve, reject) => {
    const child = fork(path.join(__dirname, '..', 'lib', 'clientscale-row.js'), [JSON.stringify(cfg)], {
      execArgv: [],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc']
    })
    let message = null
    child.on('message', (m) => { message = m })
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      if (message && message.ok) return resolve(message.result)
      reject(new Error(`row ${cfg.row} failed (exit ${code}${signal ? ', ' + signal : ''}): ${message ? message.error : 'no result'}`))
    })
  })
}

/** Every row once, in order, each after a disk settle and with a data directory of its own. */
async function oneRun (rows, base) {
  const out = {}
  for (const row of rows) {
    const dataDir = fs.mkdtempSync(path.join(base.dir, `clientscale-${row}-`))
    try {
      settleDisk()
      out[row] = await runRowProcess({ ...base, row, dataDir })
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
    const r = out[row]
    progress(`clientscale ${row}: ${r.outputs} outputs received in ${(r.receiptMs / 1000).toFixed(2)} s` +
      (r.allCurrentMs !== null ? `, all current ${(r.allCurrentMs / 1000).toFixed(2)} s` : '') +
      `, peak RSS ${(r.peakRssBytes / MiB).toFixed(0)} MiB` +
      (r.writtenBytes !== null ? `, ${(r.writtenBytes / MiB).toFixed(0)} MiB written` : '') +
      (r.diskBytesPerOutput !== null ? `, ${r.diskBytesPerOutput.toFixed(0)} B/output on disk` : '') +
      (r.loopDelayMaxMs !== undefined ? `, longest JS stall ${r.loopDelayMaxMs.toFixed(0)} ms` : ''))
  }
  return out
}

/** `key` of `row` over `key` of `against` in each run where both ran; null if one never ran. */
function ratio (runs, row, against, key) {
  if (!runs[0][row] || !runs[0][against]) return null
  return summary(runs.map(r => r[row][key] / r[against][key]), 'ratio')
}

/** Per row: its figures over the runs, and its ratios to the SQLite and raw rows of each run. */
function rowSummary (runs, row) {
  const values = key => runs.map(r => r[row][key])
  const has = key => runs[0][row][key] !== null
  return {
    row,
    receiptS: summary(values('receiptMs').map(ms => ms / 1000), 's'),
    obsPerSec: summary(values('obsPerSec'), 'obs/s'),
    allCurrentS: has('allCurrentMs') ? summary(values('allCurrentMs').map(ms => ms / 1000), 's') : null,
    allCurrentOverReceipt: has('allCurrentMs') ? summary(runs.map(r => r[row].allCurrentMs / r[row].receiptMs), 'ratio') : null,
    paused: has('paused') ? summary(values('paused'), 'polls') : null,
    diskBytesPerOutput: has('diskBytesPerOutput') ? summary(values('diskBytesPerOutput'), 'B') : null,
    peakRssMiB: summary(values('peakRssBytes').map(b => b / MiB), 'MiB'),
    writtenMiB: has('writtenBytes') ? summary(values('writtenBytes').map(b => b / MiB), 'MiB') : null,
    loopDelayMaxMs: runs[0][row].loopDelayMaxMs !== undefined ? summary(values('loopDelayMaxMs'), 'ms') : null,
    receiptOverSqlite: ratio(runs, row, 'sqlite', 'receiptMs'),
    receiptOverRaw: ratio(runs, row, 'raw', 'receiptMs'),
    diskOverSqlite: has('diskBytesPerOutput') ? ratio(runs, row, 'sqlite', 'diskBytesPerOutput') : null,
    peakRssOverSqlite: ratio(runs, row, 'sqlite', 'peakRssBytes'),
    peakRssOverRaw: ratio(runs, row, 'raw', 'peakRssBytes')
  }
}

/**
 * cfg: {outputs, rows (default all five), runs (default 1), dir (scratch), cacheRoot (where the
 * catalogue is cached, default os.tmpdir())}.
 */
async function run (cfg) {
  const outputs = cfg.outputs
  const rows = cfg.rows || ROWS
  for (const r of rows) if (!ROWS.includes(r)) throw new Error(`unknown row ${r} (rows: ${ROWS.join(', ')})`)
  const runsWanted = cfg.runs || 1
  const dir = cfg.dir || os.tmpdir()
  let t = performance.now()
  const cat = await catalogue.ensure(outputs, { root: cfg.cacheRoot || os.tmpdir(), log: progress })
  const catalogueS = (performance.now() - t) / 1000
  progress(`clientscale: catalogue of ${outputs} outputs ${cat.cached ? 'reused from' : 'built in ' + cat.meta.buildSeconds.toFixed(1) + ' s into'} ${cat.dir}`)
  t = performance.now()
  const provider = await start('catalogue-provider.js', { catalogue: cat.dir, dir })
  const providerS = (performance.now() - t) / 1000
  if (provider.ready.outputs !== outputs) throw new Error(`the provider serves ${provider.ready.outputs} outputs, expected ${outputs}`)
  const runs = []
  try {
    for (let i = 0; i < runsWanted; i++) {
      runs.push(await oneRun(rows, { origin: provider.ready.origin, outputs, catalogue: cat.dir, dir }))
    }
  } finally {
    await provider.stop()
  }
  const wire = runs.flatMap(r => rows.map(row => r[row].wireBytesPerObservation).filter(v => v !== null))
  return {
    outputs,
    runs: runsWanted,
    rowOrder: rows,
    cpus: os.cpus().length,
    pageObservations: 1024,
    catalogue: {
      cached: cat.cached,
      // The build's own time (when this run reused the cache: the time of the run that built it).
      buildS: cat.meta.buildSeconds,
      thisRunS: catalogueS,
      beefBytes: cat.meta.beefBytes,
      blockLevels: cat.meta.blockLevels,
      version: cat.meta.version
    },
    providerLoadS: provider.ready.loadS,
    providerStartS: providerS,
    wireBytesPerObservation: wire.length ? summary(wire, 'B') : null,
    rows: rows.map(row => rowSummary(runs, row)),
    raw: runs
  }
}

module.exports = { run }
