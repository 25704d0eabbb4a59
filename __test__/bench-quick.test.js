'use strict'
// The benchmark harness in quick mode: it must run every section to completion and write the
// report, the raw JSON and the plots. Nothing here looks at speed.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const SECTIONS = ['catalogue', 'commits', 'waiters', 'http', 'disk', 'caps', 'auth', 'submit', 'gasp', 'access', 'nativeverify', 'receipt', 'clientscale']

test('npm run bench -- --quick runs every section and writes RESULTS.md, results.json and the plots', () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-quick-'))
  try {
    const run = spawnSync(process.execPath, [path.join(__dirname, '..', 'bench', 'run.js'), '--quick', '--out', out], {
      encoding: 'utf8',
      timeout: 170000
    })
    if (run.status !== 0) throw new Error(`bench exited ${run.status} ${run.signal || ''}\n${run.stderr.slice(-3000)}`)

    const results = JSON.parse(fs.readFileSync(path.join(out, 'results.json'), 'utf8'))
    expect(results.quick).toBe(true)
    expect(Object.keys(results.sections).sort()).toEqual([...SECTIONS].sort())
    expect(results.machine.node).toBe(process.version)

    // Every catalogue size has both sides of each comparison, each from the same rounds.
    const cat = results.sections.catalogue
    expect(cat.sizes.map(s => s.size)).toEqual(results.plans.catalogue.sizes)
    for (const s of cat.sizes) {
      for (const key of ['firstBatchMs', 'engineLookupMs', 'engineOverFirstBatch', 'drainInProcessObsPerSec', 'drainHttpObsPerSec',
        'firstBatchHttpMs', 'firstBatchHttpSmallMs', 'lookupHttpMs', 'lookupHttpEngineMs', 'lookupHttpOverFirstBatchHttp']) {
        expect(s[key].n).toBe(results.plans.catalogue.runs)
        expect(s[key].min).toBeLessThanOrEqual(s[key].median)
        expect(s[key].median).toBeLessThanOrEqual(s[key].max)
      }
    }
    expect(results.sections.waiters.sizes.map(s => s.waiters)).toEqual(results.plans.waiters.sizes)

    // HTTP: every poller count measured on every run (the section itself throws if a poll got
    // anything but the committed group); reads/s for every client count, public and BRC-103.
    const http = results.sections.http
    const hp = results.plans.http
    expect(http.polls.map(p => p.pollers)).toEqual(hp.pollers)
    for (const p of http.polls) {
      expect(p.deliveryFromCommitCallP99Ms.n).toBe(hp.runs)
      expect(p.refusedPolls.n).toBe(hp.runs)
      expect(p.fdParked.open).toBeGreaterThanOrEqual(p.pollers)
    }
    for (const figure of [http.reads.snapshot, http.reads.caughtUp]) {
      expect(figure.map(f => f.clients)).toEqual(hp.clients)
      for (const f of figure) expect(f.readsPerSec.n).toBe(hp.readRuns)
    }
    expect(http.authReads.caughtUp.map(f => f.clients)).toEqual(hp.authClients)
    for (const f of http.authReads.caughtUp) expect(f.readsPerSec.n).toBe(hp.authRuns)
    const auth = results.sections.auth
    expect(auth.authReads.map(f => f.clients)).toEqual(results.plans.auth.clients)
    expect(auth.authReadsProcessEach.map(f => f.processes)).toEqual(results.plans.auth.processEachClients)
    for (const f of [...auth.authReads, ...auth.authReadsProcessEach]) {
      expect(f.serverCpuMsPerRead.n).toBe(results.plans.auth.runs)
      expect(f.clientCpuMsPerRead.n).toBe(results.plans.auth.runs)
    }
    expect(auth.polls.map(p => p.pollers)).toEqual(results.plans.auth.pollers)
    expect(auth.firstContact.serverCpuMsPerContact.n).toBe(results.plans.auth.runs)
    expect(results.sections.submit.widths.map(w => w.wrappedOverPlain.n)).toEqual(results.plans.submit.widths.map(() => results.plans.submit.rounds))
    // GASP: one lag per run for every sync interval.
    expect(results.sections.gasp.intervals.map(i => [i.intervalMs, i.lagMs.n])).toEqual(results.plans.gasp.intervals.map(ms => [ms, results.plans.gasp.runs]))
    // Access partitions: both callers in every round, polls and memory with and without partitions.
    const access = results.sections.access
    expect(access.firstBatch.onePercentOverEverything.n).toBe(results.plans.access.runs)
    expect(access.polls.map(p => [p.partitions, p.pollers])).toEqual([[0, results.plans.access.pollers], [results.plans.access.partitions, results.plans.access.pollers]])
    expect(access.memory.map(m => m.partitions)).toEqual([0, results.plans.access.partitions])
    expect(results.sections.commits.eightOverOne.n).toBe(results.plans.commits.runs)
    // Native verification: both kinds of evidence, every engine, one figure per run.
    const nv = results.sections.nativeverify
    for (const k of ['mined', 'p2pkh']) expect(nv.kinds[k].poolOverSdk.n).toBe(results.plans.nativeverify.runs)
    expect(results.sections.disk.afterCompactionBytesPerRow.n).toBe(results.plans.disk.runs)
    // Client receipt: every planned run, each received in full; with a verifier, all current after receipt.
    const rc = results.sections.receipt
    expect(rc.runs.map(r => [r.snapshot, r.engine])).toEqual(results.plans.receipt.runs.map(r => [r.snapshot, r.engine]))
    for (const r of rc.runs) {
      expect(r.commitCalls).toBeGreaterThan(0)
      if (r.engine) expect(r.doneMs).toBeGreaterThanOrEqual(r.receiptMs)
    }
    // Client scale: every row ran in every run (each throws unless it received every output);
    // the verifying row was all current after its receipt.
    const cs = results.sections.clientscale
    expect(cs.outputs).toBe(results.plans.clientscale.outputs)
    expect(cs.rows.map(r => r.row)).toEqual(['raw', 'verify', 'sqlite', 'client', 'verifying'])
    for (const r of cs.rows) {
      expect(r.receiptS.n).toBe(results.plans.clientscale.runs)
      expect(r.receiptOverSqlite.n).toBe(results.plans.clientscale.runs)
      expect(r.peakRssMiB.median).toBeGreaterThan(0)
      if (r.row !== 'raw' && r.row !== 'verify') expect(r.diskBytesPerOutput.median).toBeGreaterThan(0)
    }
    // The rows that verify report when every output was verified, never before receipt.
    for (const row of ['verify', 'verifying']) {
      for (const v of cs.raw.map(run => run[row])) expect(v.allCurrentMs).toBeGreaterThanOrEqual(v.receiptMs)
    }
    expect(cs.wireBytesPerObservation.median).toBeGreaterThan(0)

    // Past every cap: an explicit status, and the process still served afterwards.
    const caps = results.sections.caps.cases
    expect(caps.length).toBeGreaterThanOrEqual(10)
    for (const c of caps) {
      expect(typeof c.status).toBe('number')
      expect(c.alive).toBe(true)
    }
    const refused = caps.filter(c => c.status >= 400)
    for (const c of refused.filter(c => c.status !== 431)) expect(typeof c.code).toBe('string')

    const md = fs.readFileSync(path.join(out, 'RESULTS.md'), 'utf8')
    for (const heading of ['## Machine', '## 1. Catalogue size', '## 2. Snapshot drain', '## 3. Durable commit', '## 4. Commit-to-delivery', '## 5. Memory', '## 6. Bytes on disk', '## 7. Behaviour past each cap', '## 8. Native benchmarks', '## 9. HTTP transport', '### 9a.', '### 9b.', '### 9c.', '## 10. BRC-103', '## 11. The live layer', '## 13. Access-controlled', '## 14. Evidence verification', '## 15. Client receipt', '## 16. Client receipt at catalogue scale']) {
      expect(md).toContain(heading)
    }
    expect(md).toContain('npm run bench -- --quick --out ' + out)
    for (const svg of ['latency-vs-catalogue.svg', 'latency-vs-waiters.svg']) {
      const text = fs.readFileSync(path.join(out, svg), 'utf8')
      expect(text.startsWith('<svg')).toBe(true)
      expect(text).toContain('<polyline')
      expect(md).toContain(`(${svg})`)
    }
  } finally {
    fs.rmSync(out, { recursive: true, force: true })
  }
}, 180000)
