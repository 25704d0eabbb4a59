'use strict'
// LiveLookup: the operator-facing object. It owns the native provider (store,
// sessions, cursors, long polls) and runs the host callbacks that must stay in JS:
// the companion's `select(query)` and the host's `authorize(...)`.

const native = require('./native')
const wire = require('./wire')
const ingest = require('./ingest')

const DEFAULTS = {
  sessionSeconds: 3600,
  replaySeconds: 3600
}

/** Converts an ingest change (see js/ingest.d.ts) to the native shape. */
function toNativeChange (c) {
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

/**
 * Async native calls reject with a `[code] message` text (napi promises carry
 * no custom code); this restores `err.code` and `err.status`.
 */
function nativeError (err) {
  const m = /^\[([a-z-]+)\] ([\s\S]*)$/.exec(err && err.message)
  if (m) {
    err.message = m[2]
    err.code = m[1]
    err.status = wire.statusOf(m[1])
  }
  return err
}

async function call (promise) {
  try {
    return await promise
  } catch (err) {
    throw nativeError(err)
  }
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
    if (!o.chain || !o.chain.network || !o.chain.genesisHash) {
      throw new TypeError('LiveLookup.open needs chain: { network, genesisHash }')
    }
    if (!o.provider) throw new TypeError('LiveLookup.open needs provider (identity key or HTTPS origin)')
    const core = await call(native.openLive({
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
      maxConcurrentWork: o.maxConcurrentWork
    }))
    return new LiveLookup(core, o)
  }

  constructor (core, options) {
    this.core = core
    this.options = options
    this.services = new Map()
    this.authorizeHook = options.authorize || defaultAuthorize
    this.sink = { commit: (changes) => this.commit(changes) }
    this.closed = false
    this.compacting = null
    // Background compaction in bounded steps (DESIGN "Storage"): log groups and
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
      }
    })()
    return this.compacting
  }

  /** Commits one indivisible group; resolves with its sequence or null. */
  async commit (changes) {
    if (!changes || changes.length === 0) return null
    return call(this.core.commit(changes.map(toNativeChange)))
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
    const rulesDigest = this.core.registerService(name, companion.rules)
    const wrapped = ingest.wrapLookupService(name, lookupService, companion, this.sink)
    this.services.set(name, { name, companion, rulesDigest, rules: companion.rules, wrapped })
    return wrapped
  }

  /**
   * Brackets engine.submit so each transaction commits one group, and backfills
   * wrapped services that have no history yet from Engine storage.
   */
  async attach (engine) {
    ingest.attachEngine(engine, this.sink)
    for (const svc of this.services.values()) {
      if (!this.core.serviceHasHistory(svc.name)) {
        const topics = svc.companion.topics || topicsServedBy(engine, svc.name)
        await ingest.backfill(engine, svc.name, topics, svc.companion, this.sink)
      }
    }
    return this
  }

  async authorize (operation, stage, caller, service, query) {
    const result = await this.authorizeHook({ operation, stage, principal: caller.principal || null, service, query })
    if (!result || typeof result.access !== 'string' || result.access.length === 0) return null
    return result.access
  }

  /** POST .../lookup/open: resolves { status, body } with the exact body bytes. */
  async open (body, caller) {
    let req
    try {
      req = wire.parseOpen(body)
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
    const access = await this.authorize('open', 'request', caller, req.service, req.query)
    if (!access) return errorResponse('unauthorized', 'not authorized for this lookup')
    const res = await this.core.open(Buffer.from(body), caller, access, selection)
    return this.recheck(res, 'open', caller, req.service, req.query, access)
  }

  /** POST .../lookup/read. `signal` (AbortSignal) cancels a waiting poll. */
  async read (body, caller, { signal } = {}) {
    let req
    try {
      req = wire.parseRead(body)
    } catch (e) {
      return errorResponse(e.code || 'invalid', e.message)
    }
    const info = this.core.describeSession(req.session, caller)
    let access = ''
    if (info) {
      access = await this.authorize('read', 'request', caller, info.service, info.query)
      if (!access) {
        await this.core.revokeSession(req.session)
        return errorResponse('unauthorized', 'access to this session was revoked')
      }
    }
    const cancel = new native.NativeCancel()
    const onAbort = () => cancel.cancel()
    if (signal) {
      if (signal.aborted) cancel.cancel()
      else signal.addEventListener('abort', onAbort, { once: true })
    }
    try {
      const res = await this.core.read(Buffer.from(body), caller, access, cancel)
      if (!info) return res
      return await this.recheck(res, 'read', caller, info.service, info.query, access, req.session)
    } finally {
      if (signal) signal.removeEventListener('abort', onAbort)
    }
  }

  /** POST .../lookup/close: always `{version:1, closed:true}` for a valid body. */
  async closeSession (body, caller) {
    return this.core.close(Buffer.from(body), caller)
  }

  /**
   * Authorization again right before a batch is handed out (BRC-193 §5): a
   * changed or withdrawn access scope ends the session with unauthorized.
   */
  async recheck (res, operation, caller, service, query, access, sessionId) {
    if (res.status !== 200) return res
    const again = await this.authorize(operation, 'serialize', caller, service, query)
    if (again === access) return res
    const id = sessionId || JSON.parse(res.body.toString('utf8')).session
    await this.core.revokeSession(id)
    return errorResponse('unauthorized', 'access changed; the session has ended')
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

  /** Deliberate reset: starts a new epoch. */
  async resetEpoch () {
    return this.core.resetEpoch()
  }

  async compact (maxItems = 10000) {
    return this.core.compact(maxItems)
  }

  stats () {
    return this.core.stats()
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
    if (this.compacting) await this.compacting
    await this.core.closeStore()
  }
}

function defaultAuthorize ({ principal }) {
  // Without a host policy every caller sees the same public collection; the
  // access identifier names that policy, never a credential.
  return { access: 'public' }
}

function topicsServedBy (engine, serviceName) {
  // Topics whose lookup service is this one cannot be known from the Engine alone;
  // by convention a companion lists them (`companion.topics`). Fall back to every
  // topic the Engine manages.
  return Object.keys(engine.managers || {})
}

module.exports = { LiveLookup, toNativeChange, nativeError }
