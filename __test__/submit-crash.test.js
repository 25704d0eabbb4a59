'use strict'
// A bracketed Engine.submit resolves before its group is published (docs/engine-notes.md), so
// a crash can fall between the two: Engine storage then holds a transaction the live store may
// lack. The child (fixtures/submit-crash-child.js) is killed with SIGKILL at every point of
// that window; the restarted node reconciles at attach, and nothing is lost or served twice:
// the session opened before the crash reads the transaction's changes exactly once, as one
// group, a new snapshot equals what Engine.lookup lists, and a further restart commits nothing.

const path = require('path')
const { spawn } = require('child_process')
const { Transaction } = require('@bsv/sdk')
const h = require('./helpers/live')
const { startEngineNode, summary } = require('./helpers/node')

const CHILD = path.join(__dirname, 'fixtures', 'submit-crash-child.js')

/** Runs the child to its death; resolves with its JSON lines and how it ended. */
function runChild (dataDir, engineDir, point, crashPoint) {
  return new Promise((resolve, reject) => {
    const env = { ...process.env }
    delete env.OLL_CRASH_POINT
    if (crashPoint) env.OLL_CRASH_POINT = crashPoint
    const child = spawn(process.execPath, [CHILD, dataDir, engineDir, point], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.on('data', (d) => { out += d })
    child.stderr.on('data', (d) => { err += d })
    child.on('error', reject)
    child.on('exit', (code, signal) => resolve({ lines: out.trim().split('\n').filter(Boolean).map(l => JSON.parse(l)), code, signal, err }))
  })
}

/** The node restarted on the child's store and Engine storage. */
async function restart (dataDir, engineDir) {
  const logged = []
  const n = await startEngineNode({ dir: dataDir, engineDir, live: { create: false, compactionIntervalMs: 0, log: (e) => logged.push(e) } })
  return { ...n, logged }
}

async function engineLists (t) {
  const answer = await t.engine.lookup({ service: 'ls_notes', query: {} })
  return answer.outputs.map(o => `${Transaction.fromBEEF(o.beef).id('hex')}.${o.outputIndex}`).sort()
}

/** Every live group the session reads from `from` until it is caught up. */
async function liveGroups (live, from) {
  const groups = []
  let b = from
  for (;;) {
    const res = await live.read(h.readBody(b.session, b.cursor), h.ALICE)
    expect(res.status).toBe(200)
    b = h.json(res)
    groups.push(...summary(b))
    if (b.through === b.highWater) return groups
  }
}

// Between Engine.submit resolving and the group's publication: before the commit reaches the
// store, before its write, after the write (not flushed), after the flush (not published);
// and after publication, where there is nothing to reconcile.
test.each([
  ['the submit resolved, the commit not yet asked', 'submit-resolved', null],
  ['the commit asked, nothing written', 'store', 'before-write:2'],
  ['written, not flushed', 'store', 'after-write:2'],
  ['flushed, not published', 'store', 'after-flush:2'],
  ['published', 'published', null]
])('SIGKILL with %s: after restart the change is served once, as one group', async (_, point, crashPoint) => {
  const dataDir = path.join(h.tempDir('submit-crash-'), 'live')
  const engineDir = h.tempDir('submit-crash-engine-')
  const child = await runChild(dataDir, engineDir, point, crashPoint)
  expect({ signal: child.signal, err: child.err }).toEqual({ signal: 'SIGKILL', err: '' })
  const [{ session, cursor, highWater, first, replacement }] = child.lines

  let n = await restart(dataDir, engineDir)
  try {
    expect(await engineLists(n.t)).toEqual([`${first}.0`, `${replacement}.0`].sort())
    // The session from before the crash: the replacement's changes once, in one group.
    const groups = await liveGroups(n.live, { session, cursor, highWater })
    expect(groups).toEqual([[`withdraw ${first}.1 spent`, `spend ${first}.1`, `output ${replacement}.0`]])
    // A new session holds what the Engine lists.
    const snap = await h.drainSnapshot(n.live, h.json(await n.live.open(h.openBody(), h.ALICE)))
    const members = snap.flatMap(summary).flat().map(s => s.replace(/^output /, '')).sort()
    expect(members).toEqual(await engineLists(n.t))
    // Where the group never reached the disk, attach committed it; where it was durable, nothing.
    const reconciled = n.logged.filter(e => e.op === 'reconcile')
    if (point === 'submit-resolved' || crashPoint === 'before-write:2') expect(reconciled).toEqual([{ op: 'reconcile', service: 'ls_notes', admitted: 1, removed: 1 }])
    if (point === 'published' || crashPoint === 'after-flush:2') expect(reconciled).toEqual([])
    const after = n.live.highWater
    await n.close()

    // Nothing is left to reconcile: another restart commits nothing.
    n = await restart(dataDir, engineDir)
    expect(n.live.highWater).toBe(after)
    expect(n.logged.filter(e => e.op === 'reconcile')).toEqual([])
  } finally {
    await n.close()
  }
})
