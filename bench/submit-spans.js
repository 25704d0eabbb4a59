'use strict'
// Where one wrapped Engine.submit spends its time (docs/engine-notes.md "The live layer's cost to
// a submit"): the setup of sections/submit.js (two real Engines on SQLite, real signed note
// transactions, plain against wrapped + attached), one submitter, rounds of 60 submits alternating
// between the Engines, with timing spans around the parts: the Engine's own call, its
// toAtomicBEEF, the companion, the inner service, the store commit (after the submit resolved),
// what the bracket adds after the Engine's return, and each SQLite statement.
//   node bench/submit-spans.js [N=300]      (REPO=dir measures another checkout of the package; its
//   bench/sections/submit.js must export engineOf with the `tap` argument)
const path = require('node:path')
const repo = process.env.REPO || path.join(__dirname, '..')
const fs = require('node:fs'); const os = require('node:os')
const { NOTES_TOPIC } = require(repo + '/demo/notes/notesProtocol')
const overlayMain = require.resolve('@bsv/overlay', { paths: [repo] })
const hostSdk = require(require.resolve('@bsv/sdk', { paths: [path.dirname(overlayMain)] }))
const sdk = require(require.resolve('@bsv/sdk', { paths: [repo] }))

const spans = {}
function add (k, ms) { (spans[k] ??= []).push(ms) }
let enabled = false
function timeSync (obj, name, key) {
  const orig = obj[name]
  obj[name] = function (...a) { if (!enabled) return orig.apply(this, a); const t = performance.now(); try { return orig.apply(this, a) } finally { add(key, performance.now() - t) } }
}
function timeAsync (obj, name, key) {
  const orig = obj[name]
  obj[name] = async function (...a) { if (!enabled) return orig.apply(this, a); const t = performance.now(); try { return await orig.apply(this, a) } finally { add(key, performance.now() - t) } }
}
let current = 'x'
const Database = require(require.resolve('better-sqlite3', { paths: [repo] }))
const origPrepare = Database.prototype.prepare
Database.prototype.prepare = function (...a) {
  const st = origPrepare.apply(this, a)
  for (const m of ['run', 'all', 'get']) {
    const o = st[m]
    st[m] = function (...b) { if (!enabled) return o.apply(this, b); const t = performance.now(); try { return o.apply(this, b) } finally { add(current + '.sqlite.' + m, performance.now() - t) } }
  }
  return st
}
timeSync(hostSdk.Transaction.prototype, 'toAtomicBEEF', 'engine.toAtomicBEEF')
timeSync(sdk.Transaction, 'fromAtomicBEEF', 'sdk.fromAtomicBEEF')

const { engineOf } = require(repo + '/bench/sections/submit')
const tap = {
  service (inner, companion) {
    timeAsync(inner, 'outputAdmittedByTopic', 'inner.outputAdmittedByTopic')
    timeAsync(companion, 'index', 'companion.index')
  },
  // The store's commit of each group (recorded: the Engine applied it), after the submit resolved.
  attached (live) { timeAsync(live.core, 'commitRecorded', 'core.commitRecorded') }
}

const { Engine } = require(overlayMain)
const origSubmit = Engine.prototype.submit
Engine.prototype.submit = async function (...a) { if (!enabled) return origSubmit.apply(this, a); const t = performance.now(); try { return await origSubmit.apply(this, a) } finally { add((this.__w ? 'wrapped' : 'plain') + '.engineCall', performance.now() - t); this.__engineDone = performance.now() } }
async function main () {
  const N = Number(process.argv[2] || 200)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'spans-'))
  const plain = await engineOf(dir, false); const wrapped = await engineOf(dir, true, tap); wrapped.t.engine.__w = true
  // the original (unbracketed) submit of the wrapped engine, to time the Engine's own call
  const build = async (e, n) => { const txs = []; for (let i = 0; i < n; i++) txs.push(await e.factory.createNotes([`spans ${i} ${Math.random()}`])); return txs }
  for (const e of [plain, wrapped]) for (const tx of await build(e, 20)) await e.t.engine.submit({ beef: tx.beef, topics: [NOTES_TOPIC] })
  const a = await build(plain, N); const b = await build(wrapped, N)
  enabled = true
  const R = 60
  for (let r = 0; r * R < N; r++) {
    const blocks = [['plain', plain, a.slice(r * R, r * R + R)], ['wrapped', wrapped, b.slice(r * R, r * R + R)]]
    if (r % 2 === 1) blocks.reverse()
    for (const [k, e, txs] of blocks) {
      current = k
      const tb = performance.now()
      for (const tx of txs) {
        const t = performance.now()
        await e.t.engine.submit({ beef: tx.beef, topics: [NOTES_TOPIC] })
        const end = performance.now()
        add(k + '.submit', end - t)
        // What the bracket adds after the Engine returns before the submit resolves (the group's
        // settle and commit follow off the submit's promise).
        if (k === 'wrapped') add('wrapped.afterEngine', end - e.t.engine.__engineDone)
      }
      if (e.live && e.live.published) await e.live.published() // the round's last groups are part of its work
      add(k + '.round(ms/submit)', (performance.now() - tb) / txs.length)
    }
  }
  enabled = false
  const med = v => { const s = [...v].sort((x, y) => x - y); return s[Math.floor((s.length - 1) / 2)] }
  const mean = v => v.reduce((x, y) => x + y, 0) / v.length
  for (const [k, v] of Object.entries(spans).sort()) { const q = [...v].sort((x, y) => x - y); const p = f => q[Math.min(q.length - 1, Math.floor(f * q.length))].toFixed(3); console.log(k.padEnd(36), 'n', String(v.length).padStart(4), 'mean', mean(v).toFixed(3), 'p10', p(0.1), 'p50', p(0.5), 'p90', p(0.9), 'p99', p(0.99)) }
  await plain.t.close(); await wrapped.t.close(); await wrapped.live.close(); fs.rmSync(dir, { recursive: true, force: true })
}
main().catch(e => { console.error(e); process.exit(1) })
