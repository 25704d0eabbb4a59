'use strict'
// Durable commit groups/s through LiveLookup.commit with 1 and 8 concurrent writers. A group is
// one admitted output (an Engine.submit admitting one note); a commit resolves only once its
// group is flushed to disk. Each run uses a fresh store; the 8/1 ratio pairs the two figures of
// one run.

const fs = require('node:fs')
const path = require('node:path')
const { LiveLookup } = require('../../js')
const { now, summary, percentile, progress } = require('../lib/common')
const rows = require('../lib/rows')

const CHAIN = { network: 'test', genesisHash: '00'.repeat(32) }
const PROVIDER = '02' + '11'.repeat(32)

async function openStore (dir) {
  return LiveLookup.open({ dataDir: dir, create: true, chain: CHAIN, provider: PROVIDER, sessionSeconds: 600, replaySeconds: 600, compactionIntervalMs: 0 })
}

/** `writers` async loops, each committing `perWriter` one-output groups; returns groups/s and latencies. */
async function commitRate (live, templates, writers, perWriter, base) {
  const latencies = []
  const t0 = now()
  await Promise.all(Array.from({ length: writers }, async (_, w) => {
    for (let g = 0; g < perWriter; g++) {
      const n = base + w * perWriter + g
      const s = now()
      await live.commit([rows.admitChange(rows.row(templates, n))])
      latencies.push(now() - s)
    }
  }))
  const ms = now() - t0
  return { groupsPerSec: (writers * perWriter) / (ms / 1000), latencies }
}

async function run (cfg) {
  const templates = await rows.standaloneTemplates()
  const one = []; const eight = []; const ratio = []; const lat1 = []; const lat8 = []
  for (let r = 0; r < cfg.runs; r++) {
    const dir = fs.mkdtempSync(path.join(cfg.dir, 'commits-'))
    const live = await openStore(path.join(dir, 'live'))
    try {
      const a = await commitRate(live, templates, 1, cfg.groups1, 0)
      const b = await commitRate(live, templates, 8, cfg.groups8PerWriter, 1e6)
      if (live.stats().rows !== cfg.groups1 + 8 * cfg.groups8PerWriter) throw new Error('a commit went missing')
      one.push(a.groupsPerSec)
      eight.push(b.groupsPerSec)
      ratio.push(b.groupsPerSec / a.groupsPerSec)
      lat1.push(percentile(a.latencies, 50))
      lat8.push(percentile(b.latencies, 50))
      progress(`commits run ${r + 1}/${cfg.runs}: 1 writer ${a.groupsPerSec.toFixed(0)} groups/s, 8 writers ${b.groupsPerSec.toFixed(0)} groups/s`)
    } finally {
      await live.close()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
  return {
    groups1: cfg.groups1,
    groups8: 8 * cfg.groups8PerWriter,
    oneWriterGroupsPerSec: summary(one, 'groups/s'),
    eightWritersGroupsPerSec: summary(eight, 'groups/s'),
    eightOverOne: summary(ratio, 'x'),
    oneWriterCommitP50Ms: summary(lat1, 'ms'),
    eightWritersCommitP50Ms: summary(lat8, 'ms')
  }
}

module.exports = { run }
