'use strict'
// Bytes on disk per present row: after loading R rows, after churn (half of the rows spent, with
// spend evidence, and as many new rows admitted), after compaction (LiveLookup.compact until done,
// then close and reopen so sled can settle its segments), and after the same churn once more
// (showing whether freed space is reused). No session is open, so the compaction horizon is the
// high-water mark. A fresh store per run.

const fs = require('node:fs')
const path = require('node:path')
const { LiveLookup } = require('../../js')
const { now, summary, dirBytes, progress } = require('../lib/common')
const rows = require('../lib/rows')

const OPTIONS = { chain: { network: 'test', genesisHash: '00'.repeat(32) }, provider: '02' + '11'.repeat(32), sessionSeconds: 600, replaySeconds: 600, compactionIntervalMs: 0 }

function reading (live, dir) {
  const s = live.stats()
  return { rows: s.rows, diskBytes: s.diskBytes, dirBytes: dirBytes(dir), logBytes: s.logBytes }
}

/**
 * Spends every other row of [0, count) starting at `parity` (with spend evidence) and admits as
 * many new rows from `admitFrom`, 2000 changes per commit; the number of present rows is kept.
 * Each commit is divisible: 3000 observations are more than one batch can carry (1024), so the
 * provider splits them into groups that fit, written in one store batch as before.
 */
async function churn (live, templates, count, parity, admitFrom) {
  let next = admitFrom
  for (let start = 0; start < count; start += 2000) {
    const changes = []
    for (let n = start + parity; n < Math.min(count, start + 2000); n += 2) changes.push(rows.spendChange(rows.row(templates, n)))
    const spent = changes.length
    for (let k = 0; k < spent; k++) changes.push(rows.admitChange(rows.row(templates, next++)))
    await live.commitDivisible(changes)
  }
  return next
}

async function oneRun (cfg, templates) {
  const dir = fs.mkdtempSync(path.join(cfg.dir, 'disk-'))
  const liveDir = path.join(dir, 'live')
  let live = await LiveLookup.open({ ...OPTIONS, dataDir: liveDir, create: true })
  try {
    await rows.loadLive(live, templates, 0, cfg.rows)
    const loaded = reading(live, liveDir)
    const next = await churn(live, templates, cfg.rows, 0, cfg.rows)
    const churned = reading(live, liveDir)
    const t0 = now()
    let steps = 0
    while (await live.compact(20000)) steps++
    const compactMs = now() - t0
    await live.close()
    live = await LiveLookup.open({ ...OPTIONS, dataDir: liveDir, create: false })
    const compacted = reading(live, liveDir)
    // The same amount of churn again, to see whether the space compaction freed is reused.
    await churn(live, templates, cfg.rows, 1, next)
    const churnedAgain = reading(live, liveDir)
    if ([loaded, churned, compacted, churnedAgain].some(x => x.rows !== cfg.rows)) throw new Error('row count changed')
    return { loaded, churned, compacted, churnedAgain, compactMs, steps }
  } finally {
    await live.close()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

async function run (cfg) {
  const templates = await rows.standaloneTemplates()
  const out = { loaded: [], churned: [], compacted: [], again: [], growth1: [], growth2: [], logLoaded: [], logChurned: [], logCompacted: [], compactMs: [] }
  for (let r = 0; r < cfg.runs; r++) {
    const x = await oneRun(cfg, templates)
    out.loaded.push(x.loaded.diskBytes / cfg.rows)
    out.churned.push(x.churned.diskBytes / cfg.rows)
    out.compacted.push(x.compacted.diskBytes / cfg.rows)
    out.again.push(x.churnedAgain.diskBytes / cfg.rows)
    out.growth1.push((x.churned.diskBytes - x.loaded.diskBytes) / cfg.rows)
    out.growth2.push((x.churnedAgain.diskBytes - x.compacted.diskBytes) / cfg.rows)
    out.logLoaded.push(x.loaded.logBytes / cfg.rows)
    out.logChurned.push(x.churned.logBytes / cfg.rows)
    out.logCompacted.push(x.compacted.logBytes / cfg.rows)
    out.compactMs.push(x.compactMs)
    progress(`disk run ${r + 1}/${cfg.runs}: ${[x.loaded, x.churned, x.compacted, x.churnedAgain].map(v => (v.diskBytes / cfg.rows).toFixed(0)).join(' -> ')} bytes/row`)
  }
  return {
    rows: cfg.rows,
    beefBytes: templates[0].beef.length,
    afterLoadBytesPerRow: summary(out.loaded, 'bytes/row'),
    afterChurnBytesPerRow: summary(out.churned, 'bytes/row'),
    afterCompactionBytesPerRow: summary(out.compacted, 'bytes/row'),
    afterSecondChurnBytesPerRow: summary(out.again, 'bytes/row'),
    firstChurnGrowthBytesPerRow: summary(out.growth1, 'bytes/row'),
    secondChurnGrowthBytesPerRow: summary(out.growth2, 'bytes/row'),
    logBytesPerRowAfterLoad: summary(out.logLoaded, 'bytes/row'),
    logBytesPerRowAfterChurn: summary(out.logChurned, 'bytes/row'),
    logBytesPerRowAfterCompaction: summary(out.logCompacted, 'bytes/row'),
    compactionMs: summary(out.compactMs, 'ms')
  }
}

module.exports = { run }
