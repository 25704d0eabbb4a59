'use strict'
// Health and Prometheus metrics of a LiveLookup and its router (docs/operators.md
// "Health and metrics"). Opt-in: the router serves them only at the paths its `health` and
// `metrics` options name. The text follows the Prometheus text exposition format 0.0.4.

/** Upper bounds (seconds) of the latency histograms. */
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
/** Submits whose place was taken and whose group is not yet published, timed at once at most. */
const MAX_TRACKED = 100000

class Histogram {
  constructor () {
    this.counts = BUCKETS.map(() => 0)
    this.sum = 0
    this.count = 0
  }

  observe (seconds) {
    for (let i = 0; i < BUCKETS.length; i++) if (seconds <= BUCKETS[i]) this.counts[i]++
    this.sum += seconds
    this.count++
  }
}

/**
 * What a LiveLookup counts for its metrics (it keeps one, `live.metrics`): commit latency (a
 * recorded group handed to the store until it is published), publication lag (a submit's
 * place taken, when it resolved, until its group is published), failed commits, prohibitions,
 * and the router's answered requests.
 */
class Metrics {
  constructor () {
    this.commitLatency = new Histogram()
    this.publicationLag = new Histogram()
    this.commitFailures = 0
    this.prohibitions = 0
    this.prohibitedRows = 0
    this.lastLagMs = undefined
    this.requests = new Map() // `${op}\0${status}\0${code}` -> count
    this.reservedAt = new Map() // a submit's ticket -> when it was taken
  }

  /** A submit took its place in the admission order. */
  reserved (ticket) {
    this.reservedAt.set(ticket, process.hrtime.bigint())
    // Bounded: a ticket given up without `forget` is dropped eventually.
    if (this.reservedAt.size > MAX_TRACKED) this.reservedAt.delete(this.reservedAt.keys().next().value)
  }

  forget (ticket) {
    this.reservedAt.delete(ticket)
  }

  /** A recorded commit that started at `started` (hrtime) is published; `ticket` its place. */
  committed (started, ticket) {
    const now = process.hrtime.bigint()
    this.commitLatency.observe(Number(now - started) / 1e9)
    const since = ticket == null ? undefined : this.reservedAt.get(ticket)
    if (since === undefined) return
    this.reservedAt.delete(ticket)
    this.publicationLag.observe(Number(now - since) / 1e9)
    this.lastLagMs = Number(now - since) / 1e6
  }

  failed (ticket) {
    this.commitFailures++
    if (ticket != null) this.reservedAt.delete(ticket)
  }

  prohibited (rows) {
    this.prohibitions++
    this.prohibitedRows += Number.isSafeInteger(rows) ? rows : 0
  }
}

/** Counts one answered lookup request (`code` is the BRC-192 error code, '' for a 200). */
function countRequest (m, op, status, body) {
  let code = ''
  if (status !== 200) {
    try {
      const parsed = JSON.parse(Buffer.from(body).toString('utf8'))
      code = String((parsed && parsed.code) || (parsed && parsed.error && parsed.error.code) || 'unknown')
    } catch (_) {
      code = 'unknown'
    }
  }
  const key = `${op}\0${status}\0${code}`
  m.requests.set(key, (m.requests.get(key) || 0) + 1)
}

/**
 * The health of a LiveLookup: `ok` once the store is open and serving (not closed, not waiting
 * for a re-seed after a restore), at least one service is wrapped, and an Engine is attached.
 */
function healthOf (live, { mode, baseURL } = {}) {
  const services = [...live.services.keys()]
  const storeOpen = !live.closed
  const engineAttached = !!live.engine
  const restoredPending = !!live.restoredPending
  const problems = []
  if (!storeOpen) problems.push('the live store is closed')
  if (restoredPending) problems.push('the store was restored from an older copy and waits for a new epoch (live.attach(engine) or live.resetEpoch())')
  if (services.length === 0) problems.push('no lookup service is wrapped (live.wrap(name, service, companion))')
  if (!engineAttached) problems.push('no Engine is attached (await live.attach(engine))')
  const body = { status: problems.length === 0 ? 'ok' : 'unavailable', services, storeOpen, engineAttached, restoredPending, problems }
  if (mode) body.mode = mode
  if (baseURL) body.baseURL = baseURL
  if (storeOpen) {
    const s = live.stats()
    body.epoch = s.epoch
    body.highWater = s.highWater
    body.sessions = s.sessions
    body.waitingPolls = s.waiters
    body.gateWaiting = s.gateWaiting
    body.publishedAgoMs = s.publishedAgoMs ?? null
    body.overRetentionBudget = s.overRetentionBudget
    body.lastPublicationLagMs = live.metrics.lastLagMs !== undefined ? live.metrics.lastLagMs : null
  }
  return body
}

function escapeLabel (v) {
  return String(v).replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')
}

function num (v) {
  if (typeof v === 'string') return v // u64 decimals (sequences) stay exact
  if (v === true) return '1'
  if (v === false) return '0'
  return Number.isFinite(v) ? String(v) : 'NaN'
}

/** The metrics of `live` in the Prometheus text format. */
function metricsText (live) {
  const m = live.metrics
  const out = []
  const metric = (name, type, help, samples) => {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`)
    for (const [labels, value] of samples) {
      const l = Object.entries(labels)
      out.push(`${name}${l.length ? '{' + l.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(',') + '}' : ''} ${num(value)}`)
    }
  }
  const histogram = (name, help, h) => {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} histogram`)
    BUCKETS.forEach((b, i) => out.push(`${name}_bucket{le="${b}"} ${h.counts[i]}`))
    out.push(`${name}_bucket{le="+Inf"} ${h.count}`, `${name}_sum ${h.sum}`, `${name}_count ${h.count}`)
  }
  const up = !live.closed
  metric('overlay_live_up', 'gauge', 'Whether the live store is open (1) or closed (0).', [[{}, up]])
  metric('overlay_live_engine_attached', 'gauge', 'Whether an Engine is attached (1) or not (0).', [[{}, !!live.engine]])
  metric('overlay_live_services', 'gauge', 'Wrapped lookup services.', [[{}, live.services.size]])
  if (up) {
    const s = live.stats()
    metric('overlay_live_sessions', 'gauge', 'Live sessions held in memory.', [[{}, s.sessions]])
    metric('overlay_live_waiting_polls', 'gauge', 'Reads waiting on a long poll.', [[{}, s.waiters]])
    metric('overlay_live_high_water', 'gauge', 'Sequence of the last published group.', [[{}, s.highWater]])
    metric('overlay_live_compacted_through', 'gauge', 'Log groups at or below this sequence are compacted away.', [[{}, s.compactedThrough]])
    metric('overlay_live_published_ago_seconds', 'gauge', 'Seconds since a commit of this process last became visible (absent before the first).',
      s.publishedAgoMs === undefined ? [] : [[{}, s.publishedAgoMs / 1000]])
    metric('overlay_live_log_bytes', 'gauge', 'Bytes of the change log.', [[{}, s.logBytes]])
    metric('overlay_live_rows', 'gauge', 'Rows (current members) in the store.', [[{}, s.rows]])
    metric('overlay_live_disk_bytes', 'gauge', 'Bytes of the data directory on disk.', [[{}, s.diskBytes]])
    metric('overlay_live_retained_bytes', 'gauge', 'Retained bytes (log, row versions, evidence).', [[{}, s.retainedBytes]])
    metric('overlay_live_retained_bytes_budget', 'gauge', 'maxRetainedBytes (absent without a budget).',
      s.maxRetainedBytes === undefined || s.maxRetainedBytes === null ? [] : [[{}, s.maxRetainedBytes]])
    metric('overlay_live_over_retention_budget', 'gauge', 'Whether retained bytes are over maxRetainedBytes (new opens are refused).', [[{}, s.overRetentionBudget]])
    metric('overlay_live_retention_refusals_total', 'counter', 'Opens refused while over the retention budget.', [[{}, s.retentionRefusals]])
    metric('overlay_live_gate_waiting', 'gauge', 'Changes holding a place in the admission order, not yet committed.', [[{}, s.gateWaiting]])
    metric('overlay_live_unservable_groups_total', 'counter', 'Groups an attached Engine applied that no session can be served.', [[{}, s.unservableGroups]])
    metric('overlay_live_scan_examined_total', 'counter', 'Entries snapshot scans have read.', [[{}, s.scanExamined]])
  }
  const requests = [...m.requests].map(([key, n]) => {
    const [op, status, code] = key.split('\0')
    return [{ op, outcome: status === '200' ? 'ok' : 'error', status, code }, n]
  })
  metric('overlay_live_requests_total', 'counter', 'Answered lookup requests (open, read, close) by outcome, HTTP status and error code.', requests)
  metric('overlay_live_commit_failures_total', 'counter', 'Commits of the store\'s sink that failed.', [[{}, m.commitFailures]])
  histogram('overlay_live_commit_seconds', 'Commit latency: a group handed to the store until it is published.', m.commitLatency)
  histogram('overlay_live_publication_lag_seconds', 'Publication lag: a submit resolved (its place taken) until its group is published.', m.publicationLag)
  metric('overlay_live_prohibitions_total', 'counter', 'Prohibitions made through live.prohibit by this process.', [[{}, m.prohibitions]])
  metric('overlay_live_prohibited_rows_total', 'counter', 'Present rows those prohibitions withdrew.', [[{}, m.prohibitedRows]])
  return out.join('\n') + '\n'
}

module.exports = { Metrics, countRequest, healthOf, metricsText, BUCKETS }
