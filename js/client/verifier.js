'use strict'
// The evidence verifier behind the store's verification port (BRC-192 §8, §10;
// BRC-193 §9: a source's assertion becomes a fact only after its evidence checks).
// For each pending job it reads the job's exact evidence bytes from the store, bounds
// and decodes them, checks that they carry the job's txid, verifies Merkle paths
// against the application's ChainTracker and script-verifies the unconfirmed ancestry
// with @bsv/sdk's `Transaction.verify` (the ecosystem's interpreter, reused as is).
// The result of every job goes to `acceptVerificationsAsync`; the store records the Merkle
// claims of a verified bundle itself (it read them at receipt), and applies results in
// journal order whatever order the workers finish in. Jobs are durable in the store, so
// a restart simply runs again.
//
// A proof for a block the ChainTracker has not reached yet (its height above
// `currentHeight()`) is not a forgery: the job stays pending and is tried again once
// the tracker has advanced (polled every `heightPollMs` while such jobs wait).

const { Beef } = require('@bsv/sdk')
const native = require('../common/native')

const DEFAULTS = { engine: 'native', maxBytes: 1 << 20, maxTransactions: 256, maxDepth: 64, maxScriptBytes: 1 << 20, concurrency: 4, acceptEvery: 4096, acceptMs: 250, heightPollMs: 10000, batch: 16, page: 4096 }
const ENGINES = ['native', 'sdk']
// Blocks a coinbase output must be below the block that spends it (the node's rule).
const COINBASE_MATURITY = 100

// A bound exceeded is a retained `limited` outcome, never `invalid` (BRC-192 §8).
class Limited extends Error {}
// The chain tracker could not answer: the job stays pending.
class Unavailable extends Error {}

function trackerOf (chainTracker) {
  if (chainTracker && chainTracker[WRAPPED]) return chainTracker
  // Errors of the tracker itself are not evidence failures.
  return {
    [WRAPPED]: true,
    async isValidRootForHeight (root, height) {
      try { return await chainTracker.isValidRootForHeight(root, height) } catch (e) { throw new Unavailable(`chain tracker: ${e.message}`) }
    },
    async currentHeight () {
      try { return await chainTracker.currentHeight() } catch (e) { throw new Unavailable(`chain tracker: ${e.message}`) }
    }
  }
}

const WRAPPED = Symbol('wrapped tracker')

/**
 * A tracker that asks `isValidRootForHeight` once per distinct (height, root) and
 * `currentHeight` once, for as long as it is used (one verifier run). A failed question
 * is not kept: it is asked again. `questions` counts what reached the real tracker.
 */
function cachedTracker (chainTracker) {
  const inner = trackerOf(chainTracker)
  const roots = new Map()
  let height = null
  const t = {
    [WRAPPED]: true,
    questions: { roots: 0, heights: 0 },
    isValidRootForHeight (root, h) {
      const key = `${h}:${root}`
      let p = roots.get(key)
      if (!p) {
        t.questions.roots++
        p = inner.isValidRootForHeight(root, h)
        roots.set(key, p)
        p.catch(() => roots.delete(key))
      }
      return p
    },
    currentHeight () {
      if (!height) {
        t.questions.heights++
        height = inner.currentHeight()
        height.catch(() => { height = null })
      }
      return height
    }
  }
  return t
}

// Depth of the unconfirmed ancestry below `tx` and the script bytes it would run.
function measure (tx, limits) {
  let scriptBytes = 0
  const depthOf = new Map()
  const walk = (t, depth) => {
    const id = t.id('hex')
    if (depthOf.has(id) && depthOf.get(id) >= depth) return
    if (depth > limits.maxDepth) throw new Limited(`ancestry deeper than ${limits.maxDepth}`)
    depthOf.set(id, depth)
    if (t.merklePath) return
    for (const input of t.inputs) {
      const src = input.sourceTransaction
      if (!src) continue // Transaction.verify reports it
      scriptBytes += (input.unlockingScript?.toBinary().length ?? 0) + (src.outputs[input.sourceOutputIndex]?.lockingScript.toBinary().length ?? 0)
      if (scriptBytes > limits.maxScriptBytes) throw new Limited(`script work over ${limits.maxScriptBytes} bytes`)
      walk(src, depth + 1)
    }
  }
  walk(tx, 0)
}

// Heights of the Merkle paths a verification of `tx` relies on: its own, or those of
// the proven ancestors its unconfirmed ancestry reaches.
function proofHeights (tx) {
  const heights = []
  const seen = new Set()
  const walk = t => {
    const id = t.id('hex')
    if (seen.has(id)) return
    seen.add(id)
    if (t.merklePath) { heights.push(t.merklePath.blockHeight); return }
    for (const input of t.inputs) if (input.sourceTransaction) walk(input.sourceTransaction)
  }
  walk(tx)
  return heights
}

// Interpreter errors carry a stack dump; a stored reason stays short.
const REASON_MAX = 512
const bounded = m => (m.length > REASON_MAX ? m.slice(0, REASON_MAX - 1) + '…' : m)

/**
 * Checks one job's evidence with `limits.engine` ('native' unless 'sdk'). Resolves with
 * `{status, reason, raw?, retry?, waitHeight?}`; never throws for bad evidence.
 */
async function checkEvidence (job, evidence, chainTracker, limits) {
  if ((limits.engine ?? DEFAULTS.engine) === 'sdk') return checkEvidenceSdk(job, evidence, chainTracker, limits)
  const pre = precheck(evidence, limits)
  if (pre) return pre
  return settle(await native.verifyBeefAsync(evidence, job.txid, nativeOptions(limits)), trackerOf(chainTracker))
}

// What both engines decide before reading the bundle.
function precheck (evidence, limits) {
  if (!evidence) return { status: 'unresolved', reason: 'the evidence bytes are not retained' }
  if (evidence.length > limits.maxBytes) return { status: 'limited', reason: `evidence is ${evidence.length} bytes, over ${limits.maxBytes}` }
  return null
}

function nativeOptions (limits) {
  const o = { maxBytes: limits.maxBytes, maxTransactions: limits.maxTransactions, maxDepth: limits.maxDepth, maxScriptBytes: limits.maxScriptBytes }
  if (limits.memoryLimit !== undefined) o.memoryLimit = limits.memoryLimit
  if (limits.budget !== undefined) o.budget = limits.budget
  return o
}

/**
 * Applies the tracker's answers to a native verification, as `Transaction.verify` would
 * have met them: a proof above the tracker's height defers the job; the root claims are
 * asked together and read in the walk's order (the first refused one, or a coinbase spent
 * by an unmined transaction before it is 100 blocks deep, makes the job invalid; the first
 * that cannot be answered leaves it pending); otherwise the native outcome stands.
 */
async function settle (v, tracker) {
  try {
    let height = null
    if (v.proofHeight !== undefined && v.proofHeight !== null) {
      height = await tracker.currentHeight()
      if (v.proofHeight > height) return { status: 'unresolved', reason: `a Merkle path is for height ${v.proofHeight}, above the chain tracker's ${height}`, retry: true, waitHeight: v.proofHeight }
    }
    const answers = await Promise.allSettled(v.claims.map(c => tracker.isValidRootForHeight(c.root, c.height)))
    for (let i = 0; i < v.claims.length; i++) {
      const c = v.claims[i]
      // The node's maturity rule (src/bitcoin/verify.rs `settle`): an unmined spender is
      // mined at the next block at the earliest.
      if (c.coinbase && c.spent && height !== null && height + 1 < c.height + COINBASE_MATURITY) {
        return { status: 'invalid', reason: `coinbase ${c.txid} at height ${c.height} is spent before maturity (height ${height + 1} at the earliest)` }
      }
      if (answers[i].status === 'rejected') throw answers[i].reason
      if (answers[i].value !== true) return { status: 'invalid', reason: `Invalid merkle path for transaction ${c.txid}` }
    }
  } catch (e) {
    if (e instanceof Unavailable) return { status: 'unresolved', reason: bounded(e.message), retry: true }
    throw e
  }
  const r = { status: v.status, reason: bounded(v.reason) }
  if (v.status === 'verified') r.raw = v.raw
  return r
}

/** The 'sdk' engine: @bsv/sdk's Beef and Transaction.verify on this thread. */
async function checkEvidenceSdk (job, evidence, chainTracker, limits) {
  if (!evidence) return { status: 'unresolved', reason: 'the evidence bytes are not retained' }
  if (evidence.length > limits.maxBytes) return { status: 'limited', reason: `evidence is ${evidence.length} bytes, over ${limits.maxBytes}` }
  let beef
  try {
    beef = Beef.fromBinary(Array.from(evidence))
  } catch (e) {
    // Received without a bundle: raw bytes alone prove nothing about the inputs.
    return { status: 'unresolved', reason: bounded(`evidence is not a BEEF: ${e.message}`) }
  }
  if (beef.txs.length > limits.maxTransactions) return { status: 'limited', reason: `${beef.txs.length} transactions, over ${limits.maxTransactions}` }
  // The txid is computed from the bytes, so a bundle that names the job's txid
  // without holding those exact bytes does not find it.
  let tx
  try { tx = beef.findAtomicTransaction(job.txid) } catch (e) { return { status: 'invalid', reason: bounded(`bundle structure: ${e.message}`) } }
  if (!tx || tx.id('hex') !== job.txid) return { status: 'invalid', reason: `evidence does not hold transaction ${job.txid}` }
  try {
    measure(tx, limits)
    const tracker = trackerOf(chainTracker)
    // A path into a block the tracker does not know yet cannot be judged now.
    const ahead = Math.max(-1, ...proofHeights(tx))
    if (ahead >= 0) {
      const height = await tracker.currentHeight()
      if (ahead > height) return { status: 'unresolved', reason: `a Merkle path is for height ${ahead}, above the chain tracker's ${height}`, retry: true, waitHeight: ahead }
    }
    let ok
    try {
      ok = await tx.verify(tracker, undefined, limits.memoryLimit)
    } catch (e) {
      if (e instanceof Unavailable) throw e
      const m = String(e && e.message)
      if (/missing an associated source transaction/.test(m)) return { status: 'unresolved', reason: bounded(m) }
      if (/stack memory usage has exceeded/i.test(m)) return { status: 'limited', reason: bounded(`script work: ${m}`) }
      return { status: 'invalid', reason: bounded(m) }
    }
    if (!ok) return { status: 'invalid', reason: 'a script or the amounts of the unconfirmed ancestry do not verify' }
  } catch (e) {
    if (e instanceof Limited) return { status: 'limited', reason: e.message }
    if (e instanceof Unavailable) return { status: 'unresolved', reason: bounded(e.message), retry: true }
    throw e
  }
  return { status: 'verified', reason: tx.merklePath ? 'its merkle path verifies' : 'merkle paths and scripts verify', raw: Buffer.from(tx.toBinary()) }
}

class EvidenceVerifier {
  /**
   * @param {object} o
   * @param {import('./client').CheckpointStore} o.store a store with configureReconciler done
   * @param {{isValidRootForHeight: Function, currentHeight: Function}} o.chainTracker
   */
  constructor ({ store, chainTracker, engine, maxBytes, maxTransactions, maxDepth, maxScriptBytes, memoryLimit, budget, concurrency, acceptEvery, acceptMs, heightPollMs, batch, page } = {}) {
    if (!store) throw new TypeError('a CheckpointStore is required')
    if (!chainTracker || typeof chainTracker.isValidRootForHeight !== 'function') throw new TypeError('a ChainTracker is required')
    engine = engine ?? DEFAULTS.engine
    if (!ENGINES.includes(engine)) throw new TypeError(`verification engine is 'native' or 'sdk', not ${JSON.stringify(engine)}`)
    this.engine = engine
    this.store = store
    this.chainTracker = chainTracker
    this.limits = {
      engine,
      maxBytes: maxBytes ?? DEFAULTS.maxBytes,
      maxTransactions: maxTransactions ?? DEFAULTS.maxTransactions,
      maxDepth: maxDepth ?? DEFAULTS.maxDepth,
      maxScriptBytes: maxScriptBytes ?? DEFAULTS.maxScriptBytes,
      memoryLimit,
      budget
    }
    this.concurrency = Math.max(1, concurrency ?? DEFAULTS.concurrency)
    // Jobs per native pool task (the 'sdk' engine takes one at a time).
    this.batch = engine === 'sdk' ? 1 : Math.max(1, batch ?? DEFAULTS.batch)
    this.acceptEvery = Math.max(1, acceptEvery ?? DEFAULTS.acceptEvery)
    this.acceptMs = Math.max(0, acceptMs ?? DEFAULTS.acceptMs)
    // Jobs listed per page of a run: a run holds one page of jobs, not the whole backlog.
    this.page = Math.max(1, page ?? DEFAULTS.page)
    this.heightPollMs = Math.max(1, heightPollMs ?? DEFAULTS.heightPollMs)
    // The budget `limited` verdicts are recorded against: another budget tries them again.
    // (The native engine's operation budget is part of it: the SDK has none.)
    const bounds = [this.limits.maxBytes, this.limits.maxTransactions, this.limits.maxDepth, this.limits.maxScriptBytes, this.limits.memoryLimit ?? null]
    this.policy = JSON.stringify(engine === 'sdk' ? ['sdk', ...bounds] : ['native', ...bounds, budget ?? null])
    this.stats = { verified: 0, invalid: 0, limited: 0, unresolved: 0, deferred: 0, runs: 0, rootQuestions: 0, heightQuestions: 0 }
    this._running = null
    this._again = false
    this._requeued = false
    this._heightTimer = null
  }

  /**
   * Verifies every pending job once; a call while a run is active schedules one more
   * run after it (so jobs committed meanwhile are picked up). Resolves when idle.
   */
  run () {
    if (this._running) { this._again = true; return this._running }
    this._running = (async () => {
      try {
        do {
          this._again = false
          await this._runOnce()
        } while (this._again)
      } finally {
        this._running = null
      }
    })()
    return this._running
  }

  /** Resolves when no run is active. */
  idle () { return this._running ?? Promise.resolve() }

  /** Stops the wait for the chain tracker to advance (jobs stay pending in the store). */
  close () {
    if (this._heightTimer) clearTimeout(this._heightTimer)
    this._heightTimer = null
  }

  // Jobs waiting for the tracker to reach a block: run again after a while (the timer
  // does not keep the process alive).
  _waitForHeight () {
    if (this._heightTimer) return
    this._heightTimer = setTimeout(() => {
      this._heightTimer = null
      this.run().catch(e => { this.error = e })
    }, this.heightPollMs)
    this._heightTimer.unref()
  }

  // A receipt commit running on the pool would block these synchronous store calls (and
  // with them the JS thread) until it is durable: the verifier waits for it instead.
  // (The promise itself, not an async wrapper: one hop, so the verifier's call runs before
  // the follow loop can start its next commit.)
  _storeIdle () {
    return typeof this.store.whenIdle === 'function' ? this.store.whenIdle() : Promise.resolve()
  }

  async _runOnce () {
    this.stats.runs++
    await this._storeIdle()
    if (!this._requeued) {
      // `limited` verdicts of another budget are verified again under this one.
      this.store.requeueLimited(this.policy)
      this._requeued = true
    }
    const skipped = this._unresolved ?? new Set()
    // One cache of tracker answers for the run: each distinct (height, root) asked once.
    const tracker = cachedTracker(this.chainTracker)
    const results = []
    let deferred = false
    let flushedAt = Date.now()
    // Results are committed on the libuv pool, one group after the other (the store orders
    // them by journal position whatever order they arrive in): the JS thread, and with it
    // receipt, runs on while a group is written. The worker that flushed waits for its
    // group, so at most one group per worker is held in memory beyond `results`.
    let accepting = Promise.resolve()
    const flush = () => {
      if (!results.length) return accepting
      flushedAt = Date.now()
      const group = results.splice(0)
      accepting = accepting.then(() => this.store.acceptVerificationsAsync(group))
      return accepting
    }
    const record = (job, r) => {
      this.stats[r.status]++
      // Evidence that cannot complete is not retried in this process; a tracker
      // failure is, on the next run; a proof above the tracker's height, once it moved.
      if (r.status === 'unresolved') {
        if (r.waitHeight !== undefined) { this.stats.deferred++; deferred = true } else if (!r.retry) skipped.add(job.variantId + job.txid)
        return
      }
      results.push({ txid: job.txid, variantId: job.variantId, contextId: job.contextId, status: r.status, raw: r.raw, reason: r.reason, policy: r.status === 'limited' ? this.policy : undefined })
    }
    // Results go back in groups: one durable commit per group, not per job. A commit costs
    // about the same for 32 results as for thousands (its keys are spread over the store's
    // pages), so a backlog commits `acceptEvery` at a time, and `acceptMs` bounds how long a
    // result waits to be published (bench/RESULTS.md section 16; docs/client.md).
    const flushFull = () => results.length >= this.acceptEvery || (results.length && Date.now() - flushedAt >= this.acceptMs) ? flush() : undefined
    this._unresolved = skipped
    // The backlog is walked a page at a time (memory stays bounded by the page, not by the
    // backlog); a job answered meanwhile is simply no longer listed.
    let after = null
    let failed = null
    for (;;) {
      await this._storeIdle()
      const page = this.store.pendingVerifications(null, { after, limit: this.page })
      if (page.length === 0) break
      after = page[page.length - 1]
      const queue = page.filter(j => !skipped.has(j.variantId + j.txid))
      let next = 0
      let stop = false
      const worker = async () => {
        while (next < queue.length && !stop) {
          const jobs = queue.slice(next, next + this.batch)
          next += jobs.length
          await this._storeIdle()
          const evidence = jobs.map(job => this.store.verificationEvidence(job.txid, job.variantId))
          if (this.engine === 'sdk') {
            const r = await checkEvidenceSdk(jobs[0], evidence[0], tracker, this.limits)
            // Script checks are CPU work on this thread: yield to I/O between jobs so receipt
            // (and anything else the application does) is not starved by a long run.
            await new Promise(resolve => setImmediate(resolve))
            record(jobs[0], r)
            await flushFull()
            continue
          }
          // Native: the bundles go to the pool in one task; the JS thread only settles the claims.
          const pre = evidence.map(e => precheck(e, this.limits))
          const todo = jobs.map((job, i) => ({ job, i })).filter(x => !pre[x.i])
          const computed = todo.length ? await native.verifyBeefBatch(todo.map(({ job, i }) => ({ beef: evidence[i], txid: job.txid })), nativeOptions(this.limits)) : []
          const out = pre.slice()
          const settled = await Promise.all(computed.map(v => settle(v, tracker)))
          todo.forEach((x, k) => { out[x.i] = settled[k] })
          jobs.forEach((job, i) => record(job, out[i]))
          await flushFull()
        }
      }
      const guarded = () => worker().catch(e => { stop = true; throw e })
      // Every worker ends before the page does (no orphan still writing); the first
      // failure is reported after the finished results are accepted.
      const settled = await Promise.allSettled(Array.from({ length: Math.min(this.concurrency, queue.length) }, guarded))
      await flush()
      failed = settled.find(x => x.status === 'rejected')
      if (failed || page.length < this.page) break
    }
    this.stats.rootQuestions += tracker.questions.roots
    this.stats.heightQuestions += tracker.questions.heights
    if (deferred) this._waitForHeight()
    if (failed) throw failed.reason
  }
}

module.exports = { EvidenceVerifier, checkEvidence, checkEvidenceSdk, cachedTracker, settle, nativeOptions, VERIFIER_DEFAULTS: DEFAULTS }
