'use strict'
// LiveLookup: the operator-facing object. It owns the native provider (store,
// sessions, cursors, long polls) and runs the host callbacks that must stay in JS:
// the companion's `select(query)` and `visibility(scope)`, and the host's `authorize(...)`.

const native = require('../common/native')
const wire = require('../common/wire')
const ingest = require('./ingest')
const anchor = require('./anchor')
const { Metrics } = require('./observe')
const { createHash } = require('node:crypto')
const { Beef, Transaction } = require('@bsv/sdk')

const DEFAULTS = {
  sessionSeconds: 3600,
  replaySeconds: 3600
}

/** Converts an ingest change (see js/provider/ingest.d.ts) to the native shape. */
function toNativeChange (c) {
  if (c.op === 'refresh') {
    return { op: 'refresh', service: c.service, txid: c.txid, outputIndex: c.outputIndex, beef: Buffer.from(c.beef) }
  }
  if (c.op === 'invalidate') {
    return { op: 'invalidate', service: c.service, contextId: c.contextId, reason: c.reason }
  }
  if (c.op === 'admit') {
    return {
      op: 'admit',
      service: c.service,
      txid: c.txid,
      outputIndex: c.outputIndex,
      topic: c.topic,
      attributes: c.attributes || {},
      beef: Buffer.from(c.beef),
      contextSchema: c.context ? c.context.schema : undefined,
      contextBytes: c.context ? Buffer.from(c.context.bytes) : undefined,
      expiresAt: c.expiresAt == null ? undefined : c.expiresAt
    }
  }
  return {
    op: 'remove',
    service: c.service,
    txid: c.txid,
    outputIndex: c.outputIndex,
    reason: c.reason,
    spendingTxid: c.spend ? c.spend.spendingTxid : undefined,
    spendBeef: c.spend ? Buffer.from(c.spend.beef) : undefined
  }
}

function isPermanentGroup (err) {
  return !!(err && err.limit && err.limit.kind === 'permanent-group')
}

/**
 * A native cancellation token that `signal` trips (already tripped if it has aborted), and
 * `done`, which detaches it once the call is answered (null without a signal).
 */
function nativeCancel (signal) {
  const cancel = new native.NativeCancel()
  if (!signal) return { cancel, done: null }
  const onAbort = () => cancel.cancel()
  if (signal.aborted) cancel.cancel()
  else signal.addEventListener('abort', onAbort, { once: true })
  return { cancel, done: () => signal.removeEventListener('abort', onAbort) }
}

/** What opens and reads get while a restored store waits for its new epoch. */
function restoredResponse () {
  return errorResponse('unavailable', 'the store was restored from an older copy; it serves again once a new epoch is seeded from the Engine', { retryable: true, retryAfterMs: 1000 })
}

function errorResponse (code, message, extra) {
  return { status: wire.statusOf(code), body: wire.errorBody(code, message, extra) }
}

class LiveLookup {
  /**
   * Opens (or, with `create: true`, creates) the live store in `dataDir`.
   * A missing store is never silently created.
   */
  static async open (options) {
    const o = { ...DEFAULTS, ...options }
    if (!o.dataDir) throw new TypeError('LiveLookup.open needs dataDir')
    checkChain(o.chain)
    if (!o.provider || typeof o.provider !== 'string') {
      throw new TypeError('LiveLookup.open needs provider: the identity key of the router\'s privateKey (66 hex) with BRC-103, or the exact origin of baseURL (https://host[:port]) in public mode')
    }
    // A store created by this open has a new epoch nobody holds a cursor for: an anchor
    // from an earlier store in this place says nothing about it.
    const fresh = anchor.isEmptyDir(o.dataDir)
    const core = await native.openLive({
      dataDir: o.dataDir,
      create: !!o.create,
      provider: o.provider,
      network: o.chain.network,
      genesisHash: o.chain.genesisHash,
      sessionSeconds: o.sessionSeconds,
      replaySeconds: o.replaySeconds,
      maxBytes: o.maxBytes,
      maxObservations: o.maxObservations,
      maxWaitMs: o.maxWaitMs,
      maxRows: o.maxRows,
      maxRetainedBytes: o.maxRetainedBytes,
      maxSessionsPerPrincipal: o.maxSessionsPerPrincipal,
      maxWaiters: o.maxWaiters,
      maxWaitersPerPrincipal: o.maxWaitersPerPrincipal,
      maxConcurrentWork: o.maxConcurrentWork,
      accessPolicy: o.accessPolicy
    })
    // The restore anchor (js/provider/anchor.js): `null` turns restore detection off.
    const anchorPath = o.anchorPath === undefined ? anchor.defaultAnchorPath(o.dataDir) : o.anchorPath
    if (anchorPath !== null && typeof anchorPath !== 'string') {
      await core.closeStore()
      throw new TypeError('anchorPath must be a file path outside the data directory, or null')
    }
    let restored = null
    if (o.restored) restored = typeof o.restored === 'string' ? o.restored : 'the operator declared a restore'
    else if (anchorPath && !fresh) restored = anchor.restoredReason(anchor.readAnchor(anchorPath), core.epoch(), core.highWater())
    let providerChange
    try {
      providerChange = checkProvider(core, o.provider)
    } catch (e) {
      await core.closeStore()
      throw e
    }
    const live = new LiveLookup(core, o, { anchorPath, restored })
    if (providerChange) live.logEvent({ op: 'config', action: 'warning', reason: providerChange })
    if (restored) live.logEvent({ op: 'restore', action: 'serving-paused', reason: restored })
    else if (live.anchor) await live.anchor.update()
    return live
  }

  constructor (core, options, { anchorPath = null, restored = null } = {}) {
    this.core = core
    this.options = options
    // A store restored from an older copy (or declared restored) serves nothing until a
    // new epoch re-seeded from the Engine replaces it (attach, or resetEpoch).
    this.restoredPending = restored
    this.anchor = anchorPath === null
      ? null
      : new anchor.AnchorKeeper(anchorPath, () => this.restoredPending ? null : { epoch: core.epoch(), highWater: core.highWater() },
        options.anchorIntervalMs === undefined ? 1000 : options.anchorIntervalMs,
        (e) => this.logEvent({ op: 'anchor', error: String(e && e.message) }))
    this.services = new Map()
    this.authorizeHook = options.authorize || defaultAuthorize
    // What the ingest layer commits already happened in the Engine, which has no rollback:
    // it is recorded whatever the limits and caps say (see `recorded`), so the feed and the
    // Engine never tell two stories.
    // A change takes its place in the admission order when the host makes it (`reserve`, a
    // ticket): a submit's group at the moment the submit resolves, anything else at its call
    // (docs/design.md "Admission gate").
    this.sink = {
      commit: (changes, ticket) => this.recorded(changes, false, ticket),
      commitDivisible: (changes) => this.recorded(changes, true),
      reserve: () => {
        const ticket = this.core.reserve()
        this.metrics.reserved(ticket)
        return ticket
      },
      cancel: (ticket) => {
        this.metrics.forget(ticket)
        this.core.cancel(ticket)
      },
      orderBefore: (first, then) => this.core.orderBefore(first ?? null, then),
      evicted: (service, txid, outputIndex) => this.rememberEviction(service, txid, outputIndex),
      log: (entry) => this.logEvent(entry)
    }
    this.overRetention = false
    // Commit latency, publication lag, prohibitions and answered requests, for the router's
    // metrics route (js/provider/observe.js).
    this.metrics = new Metrics()
    this.closed = false
    this.compacting = null
    // Reads and opens are answered in batches through one callback (src/node/delivery.rs):
    // a commit that wakes many long polls wakes this thread once, not once per poll.
    this.pendingCalls = new Map()
    this.nextTicket = 1
    core.setDelivery((answers) => this.settleCalls(answers))
    // Background compaction in bounded steps (docs/design.md "Storage"): log groups and
    // removed row versions that no retained session can still need are deleted.
    const every = options.compactionIntervalMs === undefined ? 60_000 : options.compactionIntervalMs
    if (every > 0) {
      this.compactionTimer = setInterval(() => { this.compactInBackground() }, every)
      this.compactionTimer.unref()
    }
  }

  /** Runs bounded compaction steps until caught up; never overlaps itself. */
  compactInBackground () {
    if (this.compacting || this.closed) return this.compacting
    this.compacting = (async () => {
      try {
        for (let i = 0; i < 1000 && !this.closed; i++) {
          if (!(await this.core.compact(10_000))) break
          await new Promise(resolve => setImmediate(resolve))
        }
      } catch (e) {
        if (typeof this.options.log === 'function') this.options.log({ op: 'compact', error: String(e && e.message) })
      } finally {
        this.compacting = null
        this.noteRetention()
      }
    })()
    return this.compacting
  }

  /**
   * Commits one indivisible group; resolves with its sequence or null. It lands after every
   * change made before this call (a submit that resolved earlier included) and before every
   * change made after it (docs/design.md "Admission gate"); an admission of a prohibited row
   * becomes its removal. A group that no session could ever be served under the provider's
   * limits (maxObservations, maxBytes) is refused with a `limited` error
   * (`err.limit.kind === 'permanent-group'`), nothing of it is written, and the refusal is
   * logged (BRC-193 §8: groups are bounded at admission); so is a group beyond `maxRows` or
   * `maxRetainedBytes`.
   */
  async commit (changes) {
    if (!changes || changes.length === 0) return null
    try {
      return (await this.admit(changes.map(toNativeChange), { divisible: false, recorded: false })).sequence ?? null
    } catch (err) {
      if (isPermanentGroup(err)) this.logEvent({ op: 'commit', action: 'refused', changes: changes.length, reason: err.message })
      throw err
    }
  }

  /**
   * The one way into the native admission gate: takes the change's ticket now (or uses the
   * one reserved for it) and resolves with what the gate did.
   */
  admit (nativeChanges, { divisible, recorded, ticket = null }) {
    return this.inOrder((t) => this.core.admit(t, nativeChanges, divisible, recorded), ticket)
  }

  /**
   * Calls `call(ticket)` with `ticket`, or one taken now: the change's place in the admission
   * order. A call refused before the native side took the ticket over (its arguments did not
   * convert) gives the place up, so nothing made later waits for it forever.
   */
  inOrder (call, ticket = null) {
    const t = ticket ?? this.core.reserve()
    try {
      return call(t)
    } catch (e) {
      this.core.cancel(t)
      throw e
    }
  }

  /**
   * Commits changes the attached Engine has already applied (one indivisible group, or with
   * `divisible` groups that fit), at the place of `ticket` (reserved when the submit
   * resolved) or, without one, at this call's place. Never refused for the provider's limits
   * or the store's caps: a group no session can be served is committed all the same, and
   * sessions that reach it get `limited` / `permanent-group` (BRC-193 §8); `maxRows` and
   * `maxRetainedBytes` are exceeded rather than the Engine contradicted, and no retained
   * history is discarded to make room: while the store is over `maxRetainedBytes` new opens
   * are refused (503) until compaction removes history no session was promised (BRC-193 §4).
   * Each case is logged and counted in `stats()`. Resolves with the (last) sequence or null.
   */
  async recorded (changes, divisible, ticket = null) {
    let native
    try {
      native = (changes || []).map(toNativeChange)
    } catch (e) {
      if (ticket !== null) this.sink.cancel(ticket)
      throw e
    }
    if (native.length === 0) {
      if (ticket !== null) this.sink.cancel(ticket)
      return null
    }
    const started = process.hrtime.bigint()
    let r
    try {
      r = await this.admit(native, { divisible, recorded: true, ticket })
    } catch (e) {
      this.metrics.failed(ticket)
      throw e
    }
    this.metrics.committed(started, ticket)
    const sequence = r.sequence ?? null
    if (r.unservable > 0) this.logEvent({ op: 'commit', action: 'unservable', changes: changes.length, groups: r.unservable, sequence })
    if (r.overCap) this.logEvent({ op: 'commit', action: 'over-cap', changes: changes.length, sequence })
    this.noteRetention()
    return sequence
  }

  /**
   * Logs when the store goes over or comes back under `maxRetainedBytes`, and while it is
   * over, compacts at once (and every second) so opens are served again as soon as the
   * promises that hold the history pass.
   */
  noteRetention () {
    if (this.closed) return
    const r = this.core.retention()
    if (r.over === this.overRetention) return
    this.overRetention = r.over
    this.logEvent({ op: 'retention', action: r.over ? 'over-budget' : 'under-budget', retainedBytes: r.retainedBytes, maxRetainedBytes: r.maxRetainedBytes })
    if (this.overRetention) {
      this.retentionTimer = setInterval(() => { this.compactInBackground() }, 1000)
      this.retentionTimer.unref()
      this.compactInBackground()
    } else if (this.retentionTimer) {
      clearInterval(this.retentionTimer)
      this.retentionTimer = null
    }
  }

  /**
   * Commits changes that promise no atomicity between them (evidence refreshes, a starting
   * state) as consecutive groups that each fit the provider's limits; they are written and
   * published together. Resolves with the last sequence or null.
   */
  async commitDivisible (changes) {
    if (!changes || changes.length === 0) return null
    return (await this.admit(changes.map(toNativeChange), { divisible: true, recorded: false })).sequence ?? null
  }

  /**
   * Wraps an existing LookupService. Register the returned service in place of
   * the original (engine.lookupServices[name] = ...).
   */
  wrap (name, lookupService, companion) {
    if (!companion || typeof companion.index !== 'function' || typeof companion.select !== 'function') {
      throw new TypeError('a live companion needs index(output) and select(query)')
    }
    if (!companion.rules || typeof companion.rules !== 'object') {
      throw new TypeError('a live companion needs rules: { id, parameters }')
    }
    if (companion.visibility !== undefined && typeof companion.visibility !== 'function') {
      throw new TypeError('a live companion\'s visibility must be a function ({partition, service, query}) => filter')
    }
    const rules = rulesIdentity(companion, this.authorizeHook)
    const rulesDigest = this.core.registerService(name, rules)
    const wrapped = ingest.wrapLookupService(name, lookupService, companion, this.sink)
    this.services.set(name, { name, companion, rulesDigest, rules, wrapped })
    return wrapped
  }

  /**
   * Brackets engine.submit so each transaction commits one group, then brings each wrapped
   * service in line with Engine storage: a service with no history is backfilled; one with
   * history is reconciled (only what differs is committed: outputs a crash kept from the
   * store, or that the Engine admitted or dropped while the live layer was not attached). A
   * service whose rules digest differs from the one its rows were indexed under (changed
   * companion code or rules), like a restored store, gets a new epoch re-seeded from the
   * Engine instead.
   */
  async attach (engine) {
    ingest.attachEngine(engine, this.sink)
    this.engine = engine
    this.bracketEngineReorg(engine)
    const restored = this.restoredPending
    const changed = this.changedRules()
    if (restored || changed.length > 0) {
      const reason = restored || `the rules of ${changed.join(', ')} changed since their rows were indexed`
      const { epoch } = await this.inChainEventTurn(() => this.reseedEpoch(engine))
      this.logEvent(restored ? { op: 'restore', action: 'reset-epoch', reason, epoch } : { op: 'reset-epoch', reason, epoch })
    } else {
      for (const svc of this.services.values()) await this.reconcileService(engine, svc)
    }
    this.rememberRules()
    return this
  }

  /** See `attach`; pauses the Engine's submits while it reads and commits. */
  async reconcileService (engine, svc) {
    const topics = svc.companion.topics || topicsServedBy(engine, svc.name)
    const evicted = this.evictions(svc.name)
    const r = await ingest.reconcile(engine, svc.name, topics, svc.companion, this.sink, {
      members: () => this.members(svc.name),
      skip: (key) => evicted.has(key),
      nowSeconds: Math.floor(this.core.nowMs() / 1000)
    })
    if (r.admitted + r.removed > 0) {
      this.logEvent({ op: 'reconcile', service: svc.name, admitted: r.admitted, removed: r.removed, ...(r.refused > 0 ? { refused: r.refused } : {}) })
    }
    return r
  }

  /** The current members of a service ({txid, outputIndex, topic}), read at one snapshot. */
  async members (service) {
    const out = []
    let at = null
    let after = null
    do {
      const page = await this.core.scanMembers(service, at, after, 1024, false)
      at = page.at
      after = page.next
      for (const row of page.rows) out.push({ txid: row.txid, outputIndex: row.outputIndex, topic: row.topic })
    } while (after)
    return out
  }

  /**
   * Services whose rules digest differs from the one recorded for this epoch, among those
   * with rows (their rows were indexed under other rules or code).
   */
  changedRules () {
    const saved = readMeta(this.core, RULES_META)
    if (!saved || saved.epoch !== this.core.epoch() || typeof saved.digests !== 'object') return []
    return [...this.services.values()]
      .filter(svc => typeof saved.digests[svc.name] === 'string' && saved.digests[svc.name] !== svc.rulesDigest && this.core.serviceHasHistory(svc.name))
      .map(svc => svc.name)
  }

  /** Records the rules digest each service's rows are now indexed under, for this epoch. */
  rememberRules () {
    const saved = readMeta(this.core, RULES_META)
    const digests = saved && saved.epoch === this.core.epoch() && typeof saved.digests === 'object' ? { ...saved.digests } : {}
    for (const svc of this.services.values()) digests[svc.name] = svc.rulesDigest
    this.core.metaPut(RULES_META, JSON.stringify({ epoch: this.core.epoch(), digests }))
  }

  /** Outpoints (`txid.outputIndex`) of a service the host evicted; Engine storage keeps them. */
  evictions (service) {
    const saved = readMeta(this.core, EVICTED_META + service)
    return new Set(Array.isArray(saved) ? saved : [])
  }

  /**
   * Remembers an eviction (durably, before its withdraw is committed), so that neither a
   * reconciliation nor a re-seeded epoch brings the output back from Engine storage.
   */
  rememberEviction (service, txid, outputIndex) {
    const evicted = this.evictions(service)
    evicted.add(`${txid}.${outputIndex}`)
    this.core.metaPut(EVICTED_META + service, JSON.stringify([...evicted]))
  }

  /**
   * A newer Engine's `handleReorg(event)` becomes this object's handleReorg, which calls the
   * Engine's own handling first and then commits the chain-view change (docs/chain-events.md).
   */
  bracketEngineReorg (engine) {
    const original = engine.handleReorg
    if (typeof original !== 'function' || original[LIVE_REORG] === true) return
    this.engineReorg = original
    const live = this
    const bracketed = function handleReorgLive (event) { return live.handleReorg(event) }
    Object.defineProperty(bracketed, LIVE_REORG, { value: true })
    engine.handleReorg = bracketed
  }

  /**
   * The chain view the collection's evidence is assessed under: `id` names it after the
   * sequence of the group that began it (`chain-view/0` until the first reorganization of the
   * epoch). `tipHeight` is the tip the host last reported with a reorganization (null if none).
   */
  get chainView () {
    const since = this.core.viewSince()
    let tipHeight = null
    try {
      const saved = JSON.parse(this.core.metaGet(CHAIN_META) || 'null')
      if (saved && saved.epoch === this.core.epoch() && saved.since === since) tipHeight = saved.tipHeight ?? null
    } catch (_) {
      tipHeight = null // a malformed informational record does not hide the view
    }
    return { id: chainViewId(since), since, tipHeight }
  }

  /**
   * A chain reorganization reported by the host (or by the attached Engine's handleReorg).
   * Members whose evidence carries a merkle proof at a height >= rebuildFromHeight may cite an
   * orphaned block. If any member is affected, ONE group commits for every wrapped service:
   * `assessment-invalidated` naming the view that ended, then a new `output` for each affected
   * member whose evidence the Engine has since changed. Nothing is withdrawn or spent. If the
   * store cannot tell which members are affected (unreadable evidence, or a member the Engine
   * no longer has), or the group cannot fit the provider's limits, a new epoch starts instead
   * (sessions get reset-required) and every wrapped service is backfilled again; the reason is
   * logged.
   * @returns {Promise<{action: 'none'|'invalidated'|'reset', affected: number, refreshed: number, sequence: string|null, reason?: string}>}
   */
  async handleReorg (event) {
    const e = checkReorgEvent(event)
    const engine = this.engine
    const run = async () => {
      if (this.engineReorg) await this.engineReorg.call(engine, event)
      const found = await this.affectedMembers(e.rebuildFromHeight)
      if (found.unreadable !== null) return this.resetForChainEvent(engine, found.unreadable)
      if (found.affected.length === 0) return { action: 'none', affected: 0, refreshed: 0, sequence: null }
      const refreshes = []
      for (const m of found.affected) {
        const current = await engineEvidence(engine, m)
        if (current === undefined) return this.resetForChainEvent(engine, `the Engine no longer holds member ${m.txid}.${m.outputIndex} of ${m.service}`)
        if (current !== null && !sameEvidence(current, m.beef)) {
          refreshes.push({ op: 'refresh', service: m.service, txid: m.txid, outputIndex: m.outputIndex, beef: current })
        }
      }
      const ended = this.chainView.id
      const reason = reorgReason(e)
      const invalidations = [...this.services.keys()].sort().map(service => ({ op: 'invalidate', service, contextId: ended, reason }))
      let sequence
      try {
        sequence = (await this.admit([...invalidations, ...refreshes].map(toNativeChange), { divisible: false, recorded: false })).sequence ?? null
      } catch (err) {
        // The coherent group cannot fit the provider's own limits (more affected members than
        // one batch carries): a new epoch re-seeded from the Engine instead (BRC-193 §3).
        if (!isPermanentGroup(err)) throw err
        return this.resetForChainEvent(engine, `the reorganization group (${invalidations.length + refreshes.length} changes for ${found.affected.length} affected members) cannot fit the provider's limits: ${err.message}`)
      }
      this.rememberTip(e.newTipHeight)
      this.logEvent({ op: 'chain-reorg', action: 'invalidated', ended, next: this.chainView.id, affected: found.affected.length, refreshed: refreshes.length })
      return { action: 'invalidated', affected: found.affected.length, refreshed: refreshes.length, sequence }
    }
    // Chain events are handled one at a time: each names the view the previous one began.
    return this.inChainEventTurn(run)
  }

  /** Current members (all wrapped services) with a proof at height >= `height`. */
  async affectedMembers (height) {
    const affected = []
    for (const service of [...this.services.keys()].sort()) {
      const found = await this.scanService(service, height)
      if (found.unreadable !== null) return found
      affected.push(...found.affected)
    }
    return { affected, unreadable: null }
  }

  /**
   * One service's scan at one snapshot. Background compaction may remove that snapshot between
   * pages (the scan is not a session that holds it back); the scan then starts over, a few times.
   */
  async scanService (service, height) {
    for (let attempt = 1; ; attempt++) {
      const affected = []
      let at = null
      let after = null
      try {
        do {
          const page = await this.core.scanMembers(service, at, after, 256)
          at = page.at
          after = page.next
          for (const row of page.rows) {
            let heights
            try {
              heights = proofHeights(row.beef)
            } catch (err) {
              return { affected, unreadable: `the evidence of member ${row.txid}.${row.outputIndex} of ${service} cannot be parsed (${String(err && err.message)})` }
            }
            if (heights.some(h => h >= height)) affected.push({ service, ...row })
          }
        } while (after)
        return { affected, unreadable: null }
      } catch (err) {
        if (attempt >= 3 || at === null) throw err
      }
    }
  }

  /** The store cannot reassess coherently: a new epoch, then every service backfilled again. */
  async resetForChainEvent (engine, reason) {
    this.logEvent({ op: 'chain-reorg', action: 'reset-epoch', reason })
    const { sequence } = await this.reseedEpoch(engine)
    return { action: 'reset', affected: 0, refreshed: 0, sequence, reason }
  }

  /**
   * A new epoch whose first group restates every wrapped service from Engine storage (the
   * backfill of `attach`). The caller keeps submits paused (ingest.withSubmitsPaused), so no
   * submit falls between the read and the reset. The starting state is written in the same
   * atomic step as the reset: a session opened meanwhile sees the old epoch or the restated
   * collection, never an empty new epoch (BRC-193 §4).
   */
  async reseedEpoch (engine, extra = []) {
    const groups = []
    if (engine) {
      const nowSeconds = Math.floor(this.core.nowMs() / 1000)
      for (const svc of this.services.values()) {
        const topics = svc.companion.topics || topicsServedBy(engine, svc.name)
        const evicted = this.evictions(svc.name)
        const skip = (key) => evicted.has(key)
        groups.push((await ingest.collectBackfill(engine, svc.name, topics, svc.companion, { skip, nowSeconds })).changes)
      }
    }
    const changes = [...groups.flat(), ...extra]
    const native = changes.map(toNativeChange)
    const { epoch, sequence } = await this.inOrder((t) => this.core.resetEpochWith(t, native))
    // A new epoch re-seeded from the Engine is what a restored store waits for.
    this.restoredPending = null
    // Its rows are indexed under the services' current rules.
    this.rememberRules()
    if (this.anchor) await this.anchor.update()
    return { epoch, sequence: sequence ?? null }
  }

  rememberTip (tipHeight) {
    this.core.metaPut(CHAIN_META, JSON.stringify({ epoch: this.core.epoch(), since: this.core.viewSince(), tipHeight: tipHeight ?? null }))
  }

  logEvent (entry) {
    if (typeof this.options.log === 'function') this.options.log(entry)
  }

  /**
   * The access partition the host's hook places the caller in, or null (denied);
   * synchronous when the hook is (a woken poll's recheck then adds no promise hops), a
   * promise when it is not.
   */
  authorizeNow (operation, stage, caller, service, query) {
    const result = this.authorizeHook({ operation, stage, principal: caller.principal || null, service, query })
    return result && typeof result.then === 'function' ? result.then(partitionOf) : partitionOf(result)
  }

  /**
   * The selection a session of `partition` gets: the query's, narrowed by the companion's
   * visibility for the partition (a filter in the same language, so the snapshot scan uses
   * the attribute index for it). Resolves null when the companion grants nothing.
   */
  async visibleSelection (svc, selection, partition, service, query) {
    if (typeof svc.companion.visibility !== 'function') return selection
    const visible = await svc.companion.visibility({ partition, service, query })
    if (visible === null || visible === undefined || typeof visible !== 'object') return null
    if (visible.all === true && Object.keys(visible).length === 1) return selection
    if (selection === null || typeof selection !== 'object') return selection // the core reports it
    return { ...selection, where: { and: [selection.where, visible] } }
  }

  /**
   * POST .../lookup/open: resolves { status, body } with the exact body bytes. `signal`
   * (AbortSignal) cancels it: an open whose client went away stops its snapshot scan and
   * stores nothing.
   */
  async open (body, caller, { signal } = {}) {
    if (this.restoredPending) return restoredResponse()
    let req // parsed once, here; the native open takes it as it is
    try {
      req = this.core.parseOpen(wire.requestBytes(body))
    } catch (e) {
      return errorResponse(e.code || 'invalid', e.message)
    }
    const svc = this.services.get(req.service)
    if (!svc) return errorResponse('not-found', 'no such lookup service')
    if (req.requiredRulesDigest && req.requiredRulesDigest !== svc.rulesDigest) {
      return errorResponse('conflict', 'requiredRulesDigest does not match the service rules')
    }
    let selection
    try {
      selection = await svc.companion.select(req.query)
    } catch (e) {
      return errorResponse('invalid', 'the service rejected the query: ' + String(e && e.message))
    }
    const partition = await this.authorizeNow('open', 'request', caller, req.service, req.query)
    if (!partition) return errorResponse('unauthorized', 'not authorized for this lookup')
    try {
      selection = await this.visibleSelection(svc, selection, partition, req.service, req.query)
    } catch (e) {
      return errorResponse('unauthorized', 'the service declares no visibility for this caller: ' + String(e && e.message))
    }
    if (selection === null) return errorResponse('unauthorized', 'the service declares no visibility for this caller')
    const { cancel, done } = nativeCancel(signal)
    const start = (ticket) => this.core.openTicketed(req, caller, partition, selection, cancel, ticket)
    return this.ticketed(start, (res) => this.recheck(res, 'open', caller, req.service, req.query, partition), done)
  }

  /**
   * POST .../lookup/read. `signal` (AbortSignal) cancels a waiting poll. Not an async
   * function: when the host's hook is synchronous, a woken poll's answer reaches the
   * caller in one promise step (a commit can wake thousands of polls at once).
   */
  read (body, caller, { signal } = {}) {
    if (this.restoredPending) return Promise.resolve(restoredResponse())
    let info // the read parsed once, with its session's service and query when the caller owns it
    try {
      info = this.core.describeRead(wire.requestBytes(body), caller)
    } catch (e) {
      return Promise.resolve(errorResponse(e.code || 'invalid', e.message))
    }
    try {
      // Unknown or another principal's session: the provider answers reset-required.
      if (!info.owned) return this.nativeRead(info, caller, '', signal, null)
      const start = (partition) => {
        if (!partition) {
          return this.core.revokeSession(info.session, false).then(() => errorResponse('unauthorized', 'access to this session was revoked'))
        }
        const recheck = (res) => this.recheck(res, 'read', caller, info.service, info.query, partition, info.session)
        // A caught-up read that neither waits nor writes is answered here, without a
        // trip through the tokio pool (src/session/mod.rs read_now); null otherwise.
        const now = this.core.readNow(info, caller, partition)
        if (now !== null) return Promise.resolve(recheck(now))
        return this.nativeRead(info, caller, partition, signal, recheck)
      }
      const partition = this.authorizeNow('read', 'request', caller, info.service, info.query)
      return partition && typeof partition.then === 'function' ? partition.then(start) : start(partition)
    } catch (e) {
      return Promise.reject(e)
    }
  }

  /** The native read under a ticket (see `ticketed`); `signal` cancels a waiting poll. */
  nativeRead (read, caller, partition, signal, then) {
    const { cancel, done } = nativeCancel(signal)
    return this.ticketed((ticket) => this.core.readTicketed(read, caller, partition, cancel, ticket), then, done)
  }

  /**
   * A native call answered through the delivery function under a ticket, not through a
   * promise of its own (src/node/delivery.rs). Resolves with `then(response)` (the
   * response itself when `then` is null) once `settleCalls` gets its answer; `done`
   * runs first, whether the call was answered or failed to start.
   */
  ticketed (start, then, done) {
    const ticket = this.nextTicket
    this.nextTicket = ticket >= 0xffffffff ? 1 : ticket + 1
    return new Promise((resolve, reject) => {
      this.pendingCalls.set(ticket, (res) => {
        if (done) done()
        // A hook that throws fails this call only, not the others delivered with it.
        try {
          resolve(then ? then(res) : res)
        } catch (e) {
          reject(e)
        }
      })
      try {
        // Node keeps running while a call is outstanding, as it would for a pending promise.
        if (this.pendingCalls.size === 1) this.core.holdDeliveries(true)
        start(ticket)
      } catch (e) {
        this.pendingCalls.delete(ticket)
        if (this.pendingCalls.size === 0) this.core.holdDeliveries(false)
        if (done) done()
        reject(e)
      }
    })
  }

  /**
   * Settles the reads and opens answered since the last delivery. `index` (a
   * Uint32Array) holds (ticket, status, body length) per answer; `bodies` is a list of
   * regions (Uint8Arrays) holding the bodies end to end, each ending exactly at its
   * last body (src/node/delivery.rs), so a body that does not fit in what is left of
   * a region is at the start of the next. Each body is a Buffer view into a chunk the
   * provider filled, not a copy: copying doubled the JS thread's cost per woken poll.
   * Like Node's own pooled buffers, a body kept for long keeps its whole chunk in
   * memory; copy it to keep it.
   */
  settleCalls ({ index, bodies }) {
    let c = 0
    let chunk = bodies[0]
    let at = 0
    for (let i = 0; i < index.length; i += 3) {
      const len = index[i + 2]
      if (at + len > chunk.length) {
        chunk = bodies[++c]
        at = 0
      }
      const body = Buffer.from(chunk.buffer, chunk.byteOffset + at, len)
      at += len
      const settle = this.pendingCalls.get(index[i])
      if (!settle) continue
      this.pendingCalls.delete(index[i])
      settle({ status: index[i + 1], body })
    }
    if (this.pendingCalls.size === 0) this.core.holdDeliveries(false)
  }

  /** POST .../lookup/close: always `{version:1, closed:true}` for a valid body. */
  async closeSession (body, caller) {
    return this.core.close(Buffer.from(body), caller)
  }

  /**
   * Authorization again right before a batch is handed out (BRC-193 §5): a withdrawn
   * authorization ends the session with unauthorized, another partition with
   * reset-required (what the caller may see changed: a new snapshot, never silently
   * different rows).
   */
  recheck (res, operation, caller, service, query, partition, sessionId) {
    if (res.status !== 200) return res
    const again = this.authorizeNow(operation, 'serialize', caller, service, query)
    if (again && typeof again.then === 'function') {
      return again.then((a) => this.afterRecheck(res, a, partition, sessionId))
    }
    return this.afterRecheck(res, again, partition, sessionId)
  }

  /** The batch when the partition is unchanged; otherwise the session ends. */
  afterRecheck (res, again, partition, sessionId) {
    if (again === partition) return res
    const id = sessionId || JSON.parse(res.body.toString('utf8')).session
    if (!again) return this.core.revokeSession(id, false).then(() => errorResponse('unauthorized', 'access was withdrawn; the session has ended'))
    return this.core.revokeSession(id, true).then(() => errorResponse('reset-required', 'the access partition changed; open a new session'))
  }

  /**
   * The Express router for the HTTP routes and the capability manifest. Mount it
   * at the application root, before any body parser or compression.
   */
  router (options) {
    return require('./router').createRouter(this, options)
  }

  /** Ends every session of a principal with unauthorized, waiting polls included. */
  async revoke (principal) {
    return this.core.revoke(principal)
  }

  /**
   * Prohibits serving rows of `service` to anyone, from now on (BRC-193 §8): those at
   * `outpoints` and/or those whose attributes match `where` (a filter of the selection
   * language). Durable; in force when it resolves: every session whose snapshot or retained
   * log holds such a row has ended with reset-required (waiting polls included), present
   * rows are withdrawn (reason `evicted`) in one group, and no snapshot, live group or
   * replay serializes them again. Resolves `{number, sequence, rows, sessions}`.
   * @param {{service: string, outpoints?: Array<string|{txid: string, outputIndex: number}>, where?: object, reason?: string}} p
   */
  async prohibit ({ service, outpoints = [], where, reason = 'operator prohibition' } = {}) {
    if (typeof service !== 'string') throw new TypeError('prohibit needs a service')
    if (!Array.isArray(outpoints)) throw new TypeError('outpoints must be an array')
    const named = outpoints.map(o => typeof o === 'string' ? o : `${o && o.txid}.${o && o.outputIndex}`)
    // Its place in the admission order is this call's: groups of submits that resolved
    // before it are published first, and no change made after it lands before it.
    const r = await this.inOrder((t) => this.core.prohibit(t, service, named, where === undefined ? null : where, String(reason)))
    this.metrics.prohibited(r.rows)
    return r
  }

  /**
   * A change of the access policy that widens or narrows what callers see (BRC-193 §5): the
   * sessions it affects end with reset-required (waiting polls included) and their clients
   * open new snapshots under the new policy. `partitions`: what those partitions may see
   * changed (each gets a new generation, so a new `scope.access`); `principals`: the host
   * now places them elsewhere (their sessions end; their next open asks `authorize`);
   * neither: the whole policy changed (a new version). Durable. Resolves with the sessions
   * ended.
   * @param {{partitions?: string[], principals?: string[]}} [change]
   */
  async changePolicy ({ partitions, principals } = {}) {
    for (const list of [partitions, principals]) {
      if (list !== undefined && (!Array.isArray(list) || !list.every(x => typeof x === 'string'))) {
        throw new TypeError('partitions and principals must be arrays of strings')
      }
    }
    return this.inOrder((t) => this.core.changePolicy(t, partitions ?? null, principals ?? null))
  }

  /** The `scope.access` that sessions of `partition` get now (a digest, never a credential). */
  accessOf (partition) {
    return this.core.accessOf(String(partition))
  }

  /**
   * Deliberate reset: a new epoch (every existing cursor gets reset-required) that starts from
   * the collection as it is, never empty (docs/operators.md "Resets, restores and shutdown").
   * With an attached Engine the starting state is read from Engine storage while submits wait,
   * atomically with the reset. A LiveLookup with no Engine (the host commits itself) passes
   * the new epoch's starting rows as `changes` (admissions; `[]` for a collection that really
   * is empty). Resolves with the new epoch.
   * @param {{ reason?: string, changes?: object[] }} [options]
   */
  async resetEpoch (options = {}) {
    if (options === null || typeof options !== 'object') throw new TypeError('resetEpoch options must be an object')
    const { reason = 'operator reset', changes } = options
    if (changes !== undefined && !Array.isArray(changes)) throw new TypeError('resetEpoch changes must be an array of changes')
    if (changes === undefined && !this.engine) {
      throw new TypeError('resetEpoch needs an attached Engine to restate the collection from, or the starting rows as { changes }')
    }
    const engine = changes === undefined ? this.engine : null
    const run = async () => {
      const { epoch, sequence } = await this.reseedEpoch(engine, changes || [])
      this.logEvent({ op: 'reset-epoch', reason, epoch, sequence })
      return epoch
    }
    return this.inChainEventTurn(run)
  }

  /**
   * Runs `fn` after the chain events and resets queued before it, with the attached Engine's
   * submits paused: each of them reads Engine storage and commits a group (or a new epoch)
   * that must not interleave with a submit's.
   */
  inChainEventTurn (fn) {
    const engine = this.engine
    const turn = (this.chainEventTail || Promise.resolve()).then(() => engine ? ingest.withSubmitsPaused(engine, fn) : fn())
    this.chainEventTail = turn.then(() => {}, () => {})
    return turn
  }

  async compact (maxItems = 10000) {
    return this.core.compact(maxItems)
  }

  stats () {
    return { ...this.core.stats(), chainView: this.chainView }
  }

  get epoch () {
    return this.core.epoch()
  }

  get highWater () {
    return this.core.highWater()
  }

  /**
   * `close()` flushes and releases the data directory. `close(body, caller)` is
   * the session close of BRC-193 (same as `closeSession`).
   */
  async close (body, caller) {
    if (body !== undefined) return this.closeSession(body, caller)
    if (this.closed) return
    this.closed = true
    if (this.compactionTimer) clearInterval(this.compactionTimer)
    if (this.retentionTimer) clearInterval(this.retentionTimer)
    // Submits that resolved before the close have their groups published before the store goes.
    await this.published()
    // Every waiting poll is answered now (an empty live batch with current watermarks), so
    // an HTTP server closing after this does not wait out long polls; later opens and reads
    // get 503 unavailable with retryAfterMs.
    await this.core.shutDown()
    await this.settled()
    if (this.compacting) await this.compacting
    try {
      if (this.anchor) {
        await this.anchor.stop()
        await this.anchor.update()
      }
    } finally {
      await this.core.closeStore()
    }
  }

  /**
   * Resolves once the group of every attached `engine.submit` that has started is published.
   * A bracketed submit resolves when the Engine's call does, before its group is flushed
   * (docs/engine-notes.md), so a caller that must see its own change in the feed right away
   * (a test, a script) awaits this after the submit.
   */
  async published () {
    if (this.engine) await ingest.whenPublished(this.engine)
  }

  /** Resolves once every open and read handed to the core has been answered. */
  async settled () {
    while (this.pendingCalls.size > 0) await new Promise(resolve => setTimeout(resolve, 5))
  }
}

/** Validates `chain` with messages that say what to pass. */
function checkChain (chain) {
  if (!chain || typeof chain !== 'object') {
    throw new TypeError('LiveLookup.open needs chain: { network, genesisHash } (the chain the Engine\'s chain tracker follows)')
  }
  if (typeof chain.network !== 'string' || chain.network.length === 0) {
    throw new TypeError("LiveLookup.open chain.network must be a non-empty string such as 'main' or 'test'")
  }
  if (typeof chain.genesisHash !== 'string' || !/^[0-9a-f]{64}$/.test(chain.genesisHash)) {
    throw new TypeError(`LiveLookup.open chain.genesisHash must be 64 lowercase hex characters, the hash of the chain's genesis block (main: ${MAIN_GENESIS}); got ${JSON.stringify(String(chain.genesisHash)).slice(0, 80)}`)
  }
}

/**
 * A store answers for one kind of provider (every scope names it): reopening a public-mode
 * store (an origin) as a BRC-103 provider (an identity key), or the other way round, is
 * refused. Another value of the same kind (a public host on a new origin, a new identity key)
 * is accepted and returned as a warning to log. The provider is recorded at every open.
 */
function checkProvider (core, provider) {
  const saved = readMeta(core, PROVIDER_META)
  const kind = providerKind(provider)
  let warning = null
  if (saved && typeof saved.provider === 'string' && saved.provider !== provider) {
    const was = providerKind(saved.provider)
    if (was !== kind) {
      const named = (k, p) => k === 'identity' ? `a BRC-103 provider (identity key ${p})` : `a public-mode provider (origin ${p})`
      throw new TypeError(`this store was created for ${named(was, saved.provider)}, not ${named(kind, provider)}: open it in the mode it was created for, or use a new dataDir with create: true for this mode (its clients start over)`)
    }
    warning = `the provider changed from ${saved.provider} to ${provider} since this store was last opened: scopes now name the new one`
  }
  if (!saved || saved.provider !== provider) core.metaPut(PROVIDER_META, JSON.stringify({ provider }))
  return warning
}

/** 'identity' for a compressed public key (BRC-103), 'origin' otherwise (public mode). */
function providerKind (provider) {
  return /^0[23][0-9a-f]{64}$/i.test(provider) ? 'identity' : 'origin'
}

const MAIN_GENESIS = '000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f'
const PROVIDER_META = 'provider'
const LIVE_REORG = Symbol.for('overlay-lookup-live.reorg')
const CHAIN_META = 'chain-view'
const RULES_META = 'service-rules'
const EVICTED_META = 'evicted/'

/** A JS-layer record of the store, parsed; null when absent or unreadable. */
function readMeta (core, name) {
  try {
    return JSON.parse(core.metaGet(name) || 'null')
  } catch (_) {
    return null
  }
}

/**
 * The rules a service's rulesDigest covers (BRC-193 §2: the exact selection, ordering and
 * visibility rules), as the manifest lists them (BRC-194: exactly `{id, parameters}`).
 * Unless the companion's `rules.parameters` carries an explicit `version`, the parameters
 * gain `codeDigest`: a SHA-256 over the source text of the code that applies the rules, every
 * function of the companion (`index`, `select`, any other) and the provider's `authorize`
 * hook. Deploying code that behaves differently under the same `rules` then changes the
 * digest (and, at attach, the epoch). With `parameters.version` the operator takes that on:
 * the code is not hashed, and `version` must change whenever behaviour does (a reformatted or
 * minified build then keeps its digest). Functions the companion calls from elsewhere
 * (module-level helpers, libraries) are not covered either way.
 */
function rulesIdentity (companion, authorize) {
  const rules = companion.rules
  const parameters = rules.parameters ?? {}
  if (parameters === null || typeof parameters !== 'object' || Array.isArray(parameters)) {
    throw new TypeError('a live companion needs rules: { id, parameters } with parameters an object')
  }
  if (parameters.version !== undefined) return rules
  if (parameters.codeDigest !== undefined) {
    throw new TypeError('rules.parameters.codeDigest is computed by the live layer; set parameters.version to name the code yourself')
  }
  const names = new Set()
  for (let o = companion; o !== null && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
    for (const name of Object.getOwnPropertyNames(o)) if (name !== 'constructor') names.add(name)
  }
  const sources = [...names].sort()
    .filter(name => typeof companion[name] === 'function')
    .map(name => [name, Function.prototype.toString.call(companion[name])])
  sources.push(['authorize', Function.prototype.toString.call(authorize)])
  const codeDigest = createHash('sha256').update(JSON.stringify(sources)).digest('hex')
  return { ...rules, parameters: { ...parameters, codeDigest } }
}
const HEX32 = /^[0-9a-f]{64}$/i

function chainViewId (since) {
  return `chain-view/${since}`
}

function isHeight (v) {
  return Number.isSafeInteger(v) && v >= 0
}

/** Validates a reorganization event; throws a TypeError naming what is wrong. */
function checkReorgEvent (event) {
  if (event === null || typeof event !== 'object') throw new TypeError('handleReorg needs { orphanedBlockHashes, rebuildFromHeight, newTipHeight }')
  const { orphanedBlockHashes = [], rebuildFromHeight, newTipHeight } = event
  if (!isHeight(rebuildFromHeight)) throw new TypeError('rebuildFromHeight must be a non-negative safe integer')
  if (newTipHeight !== undefined && newTipHeight !== null && !isHeight(newTipHeight)) {
    throw new TypeError('newTipHeight must be a non-negative safe integer')
  }
  if (!Array.isArray(orphanedBlockHashes) || !orphanedBlockHashes.every(h => typeof h === 'string' && HEX32.test(h))) {
    throw new TypeError('orphanedBlockHashes must be an array of 64-hex block hashes')
  }
  return { orphanedBlockHashes, rebuildFromHeight, newTipHeight: newTipHeight ?? null }
}

/** Heights of every merkle proof (BUMP) in a BEEF; throws on unreadable bytes. */
function proofHeights (beef) {
  const parsed = Beef.fromBinary(Array.from(beef))
  return parsed.bumps.map(b => b.blockHeight)
}

/** The reason text of a chain-view invalidation (BRC-192 §2: at most 1024 bytes). */
function reorgReason ({ orphanedBlockHashes, rebuildFromHeight, newTipHeight }) {
  const tip = newTipHeight === null ? '' : ` newTipHeight=${newTipHeight}`
  return `reorg rebuildFromHeight=${rebuildFromHeight}${tip} orphanedBlocks=${orphanedBlockHashes.length}`
}

/**
 * The Engine's current evidence for a member as atomic BEEF; null when there is no engine to
 * ask (nothing can be reassessed), undefined when the Engine no longer holds the output.
 */
async function engineEvidence (engine, m) {
  if (!engine || !engine.storage || typeof engine.storage.findOutput !== 'function') return null
  const o = await engine.storage.findOutput(m.txid, m.outputIndex, m.topic, undefined, true)
  if (!o || o.beef == null) return undefined
  let atomic
  try {
    atomic = ingest.atomicFromStored(o.beef, m.txid)
  } catch (_) {
    return null // unreadable Engine evidence cannot reassess anything
  }
  // Only evidence valid in the Engine's (new) chain view reassesses a member; otherwise the
  // member stays invalidated until a later proof update (BRC-192 §3: stale, never assumed).
  const tracker = engine.chainTracker
  if (tracker && typeof tracker.isValidRootForHeight === 'function') {
    let ok = false
    try { ok = await Beef.fromBinary(Array.from(atomic)).verify(tracker, false) } catch (_) { ok = false }
    if (!ok) return null
  }
  return atomic
}

/** Same evidence: the same transaction with the same proofs, whatever the serialization. */
function sameEvidence (a, b) {
  try {
    const x = Transaction.fromBEEF(Array.from(a)).toAtomicBEEF()
    const y = Transaction.fromBEEF(Array.from(b)).toAtomicBEEF()
    return Buffer.compare(Buffer.from(x), Buffer.from(y)) === 0
  } catch (_) {
    return false
  }
}

/** The partition of a hook's answer (`access` is its older name), or null when denied. */
function partitionOf (result) {
  if (!result) return null
  const p = result.partition !== undefined ? result.partition : result.access
  if (typeof p !== 'string' || p.length === 0) return null
  return p
}

function defaultAuthorize ({ principal }) {
  // Without a host policy every caller is in one partition and sees the same public
  // collection; scope.access is derived from it, never from a credential.
  return { partition: 'public' }
}

function topicsServedBy (engine, serviceName) {
  // Topics whose lookup service is this one cannot be known from the Engine alone;
  // by convention a companion lists them (`companion.topics`). Fall back to every
  // topic the Engine manages.
  return Object.keys(engine.managers || {})
}

module.exports = { LiveLookup, toNativeChange }
