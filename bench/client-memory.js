#!/usr/bin/env node
'use strict'
// Client memory at N tracked outputs (issue 33): a LiveLookupClient (public mode, loopback
// HTTP) drains an N-output snapshot from a notes node in another process
// (bench/lib/notes-child.js) into a CheckpointStore whose page cache is bounded to --cache-mb,
// with the reconciler configured (every output is a journaled transaction with its evidence;
// no verifier runs, so all N stay tracked as pending). The callback reads only `state`.
// Reports the client process's peak and final RSS and V8 heap, with the cache bound beside
// them, and the store's size on disk.
//
//   node --expose-gc bench/client-memory.js [--outputs 1000000] [--cache-mb 64]

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const readline = require('node:readline')
const { spawn } = require('node:child_process')
const { LiveLookupClient, CheckpointStore } = require('../js')
const { CHAIN } = require('../__test__/helpers/live')
const { dirBytes, gc } = require('./lib/common')

function arg (name, dflt) {
  const i = process.argv.indexOf('--' + name)
  return i < 0 ? dflt : process.argv[i + 1]
}
const OUTPUTS = Number(arg('outputs', 100000))
const CACHE_MB = Number(arg('cache-mb', 64))
const MiB = 1024 * 1024

async function main () {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'oll-bench-memory-'))
  const child = spawn(process.execPath, ['--max-old-space-size=16384', path.join(__dirname, 'lib', 'notes-child.js'), String(OUTPUTS)], { stdio: ['pipe', 'pipe', 'inherit'] })
  try {
    let t = performance.now()
    const first = await new Promise((resolve, reject) => {
      readline.createInterface({ input: child.stdout }).once('line', l => resolve(JSON.parse(l)))
      child.once('exit', code => reject(new Error(`the notes node exited (${code})`)))
    })
    console.log(`notes node with ${OUTPUTS} outputs ready in ${((performance.now() - t) / 1000).toFixed(1)} s`)
    const baseline = process.memoryUsage().rss
    const store = CheckpointStore.open(path.join(tmp, 'client'), { cacheBytes: CACHE_MB * MiB })
    store.defineContext('tip', { tipHeight: String(first.height + 1000000), medianTimePast: '4000000000' })
    store.configureReconciler({ journalId: 'bench', nonFinal: true, initialContext: 'tip' })
    const client = new LiveLookupClient({ baseURL: first.origin, chain: CHAIN, allowInsecureHttp: true, fetch, store, limits: { waitMs: 0 } })
    const ac = new AbortController()
    let peak = 0
    let key = null
    t = performance.now()
    await client.follow('ls_notes', { author: 'alice' }, {
      membership: 'claims',
      signal: ac.signal,
      onRevision ({ state, sourceKey }) {
        key = sourceKey
        peak = Math.max(peak, process.memoryUsage().rss)
        if (state.received >= OUTPUTS) ac.abort()
      }
    })
    const receiptS = (performance.now() - t) / 1000
    gc()
    const m = process.memoryUsage()
    const st = store.state(key)
    const f = b => (b / MiB).toFixed(0) + ' MiB'
    console.log(`${st.received} groups received in ${receiptS.toFixed(1)} s`)
    console.log(`client RSS: baseline ${f(baseline)}, peak ${f(peak)}, final ${f(m.rss)} (heap used ${f(m.heapUsed)}, external ${f(m.external)}); page cache bound ${CACHE_MB} MiB`)
    // The tracked transactions, counted a page at a time (as the verifier walks them).
    let tracked = 0
    for (let page = [], after = null; ; after = page[page.length - 1]) {
      page = store.pendingVerifications(null, { after, limit: 65536 })
      tracked += page.length
      if (page.length < 65536) break
    }
    store.close()
    console.log(`${tracked} tracked transactions pending verification; store on disk ${f(dirBytes(path.join(tmp, 'client')))}`)
  } finally {
    child.stdin.end()
    fs.rmSync(tmp, { recursive: true, force: true })
  }
}

main().catch(e => { console.error(e); process.exit(1) })
