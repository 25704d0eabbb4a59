'use strict'
// The conformance checker's fault matrix (__test__/check-faults.test.js): a real node (Express
// on loopback, the router, a real Engine and sled store; __test__/helpers/node.js) made faulty
// in one deliberate way at a time, and for each fault the checks it must fail. A fault acts at
// one of two places:
// - `live`: the provider itself. The router's handlers call the node's LiveLookup open, read
//   and closeSession; a fault replaces them on that instance with a version that changes the
//   request, the answer or its timing, and the router then sends (and under BRC-103 signs) the
//   faulty answer as the provider's own. These faults run in both modes.
// - `proxy`: an HTTP reverse proxy in front of the node (the node advertises the proxy's origin
//   as its base URL), for what a misconfigured proxy does: headers, redirects, caching, body
//   caps. A proxy fault that edits signed bytes is marked `modes: ['none']`.
// Each entry: { checks: the exact set of checks the fault fails (or, by mode, {none, brc103}),
// modes?, live?, proxy?, run?(node): checker options to change, long?: true for a fault of session
// expiry, run with --long against a node with short sessions }.

const http = require('node:http')
const zlib = require('node:zlib')
const crypto = require('node:crypto')
const { startNode } = require('./node')
const { PROBE_ORIGIN } = require('../../js/check/run')
const wire = require('../../js/common/wire')

const SERVICE = 'ls_notes'
/** A query of ls_notes that selects nothing (no note has this author). */
const EMPTY_QUERY = { author: 'nobody' }
const VARY = 'Authorization, x-bsv-auth-identity-key, x-bsv-overlay-capability, x-bsv-overlay-profile'
/** What the faults that change timing hold an answer for; well past the checker's slack. */
const HOLD_MS = 2500
const sleep = (ms) => new Promise(resolve => setTimeout(resolve, ms))

function parse (body) {
  try { return JSON.parse(Buffer.isBuffer(body) ? body.toString('utf8') : String(body)) } catch (_) { return undefined }
}
const isBatch = (j) => !!j && typeof j === 'object' && typeof j.cursor === 'string' && typeof j.session === 'string' && Array.isArray(j.groups)
const bytes = (j) => Buffer.from(JSON.stringify(j))
const rid = () => crypto.randomBytes(16).toString('hex')
const errorAnswer = (status, code, message, extra = {}) => ({ status, body: bytes({ version: 1, error: { code, message, retryable: false, ...extra } }) })
const SMALL = { maxBytes: 131072, maxObservations: 1, waitMs: 0 }

/**
 * A `live` fault editing every successful batch of `ops` (default open and read): `edit(batch,
 * {op, request, caller, state})` changes the parsed batch in place.
 */
function batches (edit, ops = ['open', 'read']) {
  const hooks = {}
  for (const op of ops) {
    hooks[op] = async (request, caller, next, state) => {
      const out = await next(request)
      const j = out.status === 200 ? parse(out.body) : undefined
      if (!isBatch(j)) return out
      edit(j, { op, request: parse(request), caller, state })
      return { status: out.status, body: bytes(j) }
    }
  }
  return hooks
}

/** A `live` fault that repairs one kind of malformed request of `op` before the provider sees it. */
function lenient (op, repair) {
  return {
    [op]: async (request, caller, next) => {
      const j = parse(request)
      const fixed = repair(j, request.toString('utf8'))
      return next(fixed === undefined ? request : bytes(fixed))
    }
  }
}

/** `j` without `key` (a copy). */
const without = (j, key) => { const c = { ...j }; delete c[key]; return c }
const isObject = (j) => !!j && typeof j === 'object' && !Array.isArray(j)

/** Changes the scope member `key` of the batch and of every observation in it. */
function setScope (j, key, value) {
  j.scope[key] = value
  for (const g of j.groups) for (const o of g.observations) if (o.scope) o.scope[key] = value
}

/** Per session: the W of its open, what it was issued, who opened it. */
function sessionOf (state, session) {
  if (!state.sessions) state.sessions = new Map()
  let s = state.sessions.get(session)
  if (!s) { s = { cursors: new Set(), last: null, owner: null, W: null, firstSnapshotId: null }; state.sessions.set(session, s) }
  return s
}

const FAULTS = {}
const fault = (name, entry) => { FAULTS[name] = entry }

// --- request strictness: the provider accepts one kind of malformed request -----------------
const LENIENT = {
  'open.not-json': ['open', (j) => j === undefined ? { version: 1, requestId: rid(), service: SERVICE, query: {}, limits: SMALL } : undefined],
  'open.unknown-member': ['open', (j) => isObject(j) && 'unexpected' in j ? without(j, 'unexpected') : undefined],
  'open.version': ['open', (j) => isObject(j) && j.version === 2 ? { ...j, version: 1 } : undefined],
  'open.no-service': ['open', (j) => isObject(j) && j.requestId && !('service' in j) ? { ...j, service: SERVICE } : undefined],
  'open.request-id-short': ['open', (j) => isObject(j) && typeof j.requestId === 'string' && j.requestId.length < 16 ? { ...j, requestId: j.requestId.padEnd(16, 'x') } : undefined],
  'open.request-id-long': ['open', (j) => isObject(j) && typeof j.requestId === 'string' && j.requestId.length > 128 ? { ...j, requestId: j.requestId.slice(0, 128) } : undefined],
  'open.request-id-alphabet': ['open', (j) => isObject(j) && typeof j.requestId === 'string' && /\./.test(j.requestId) ? { ...j, requestId: j.requestId.replace(/\./g, '_') } : undefined],
  'open.zero-max-bytes': ['open', (j) => isObject(j) && j.limits && j.limits.maxBytes === 0 ? { ...j, limits: { ...j.limits, maxBytes: 131072 } } : undefined],
  'open.zero-max-observations': ['open', (j) => isObject(j) && j.limits && j.limits.maxObservations === 0 ? { ...j, limits: { ...j.limits, maxObservations: 1 } } : undefined],
  'open.limit-overflow': ['open', (j) => isObject(j) && j.limits && j.limits.maxObservations > 4294967295 ? { ...j, limits: { ...j.limits, maxObservations: 1024 } } : undefined],
  'open.no-limits': ['open', (j) => isObject(j) && j.requestId && !('limits' in j) ? { ...j, limits: SMALL } : undefined],
  'open.critical-unknown': ['open', (j) => isObject(j) && 'critical' in j ? without(without(j, 'critical'), 'extensions') : undefined],
  'open.rules-digest-mismatch': ['open', (j) => isObject(j) && j.requiredRulesDigest === 'ee'.repeat(32) ? without(j, 'requiredRulesDigest') : undefined],
  'read.not-json': ['read', (j) => j === undefined ? { version: 1, session: rid(), cursor: rid(), limits: SMALL } : undefined],
  'read.no-cursor': ['read', (j) => isObject(j) && j.session && !('cursor' in j) ? { ...j, cursor: rid() } : undefined],
  'read.unknown-member': ['read', (j) => isObject(j) && 'unexpected' in j ? without(j, 'unexpected') : undefined],
  'read.zero-max-bytes': ['read', (j) => isObject(j) && j.limits && j.limits.maxBytes === 0 ? { ...j, limits: { ...j.limits, maxBytes: 131072 } } : undefined],
  'read.zero-max-observations': ['read', (j) => isObject(j) && j.limits && j.limits.maxObservations === 0 ? { ...j, limits: { ...j.limits, maxObservations: 1 } } : undefined],
  'read.long-cursor': ['read', (j) => isObject(j) && typeof j.cursor === 'string' && j.cursor.length > 1024 ? { ...j, cursor: rid() } : undefined],
  'read.long-session': ['read', (j) => isObject(j) && typeof j.session === 'string' && j.session.length > 1024 ? { ...j, session: rid() } : undefined],
  'close.not-json': ['close', (j) => j === undefined ? { version: 1, session: rid() } : undefined],
  'close.no-session': ['close', (j) => isObject(j) && !('session' in j) ? { ...j, session: rid() } : undefined],
  'close.unknown-member': ['close', (j) => isObject(j) && 'unexpected' in j ? without(j, 'unexpected') : undefined],
  'close.long-session': ['close', (j) => isObject(j) && typeof j.session === 'string' && j.session.length > 1024 ? { ...j, session: rid() } : undefined]
}
for (const [check, [op, repair]] of Object.entries(LENIENT)) fault(`lenient ${check}`, { checks: [check], live: lenient(op, repair) })

// --- opens at the edges, limits -------------------------------------------------------------
fault('refuses a requestId with _', {
  checks: ['open.request-id-bounds'],
  live: { open: async (request, caller, next) => /_/.test((parse(request) || {}).requestId || '') ? errorAnswer(400, 'invalid', 'bad requestId') : next(request) }
})
fault('refuses any requiredRulesDigest', {
  checks: ['open.rules-digest-match'],
  live: { open: async (request, caller, next) => (parse(request) || {}).requiredRulesDigest ? errorAnswer(409, 'conflict', 'rules') : next(request) }
})
fault('no 64 KiB allowance', {
  checks: ['limits.minimum-allowance'],
  live: { open: async (request, caller, next) => ((parse(request) || {}).limits || {}).maxBytes === 65536 ? errorAnswer(413, 'limited', 'too small', { limit: { kind: 'envelope', minimumBytes: 131072 } }) : next(request) }
})
fault('echoes one observation more', {
  checks: ['limits.echo', 'limits.minimum-allowance'],
  live: batches((j, { op }) => { if (op === 'open' && j.limits.maxObservations < 1024) j.limits.maxObservations += 1 }, ['open'])
})
fault('refuses limits over the maxima', {
  checks: ['limits.clamp'],
  live: { open: async (request, caller, next) => ((parse(request) || {}).limits || {}).maxBytes > 4194304 ? errorAnswer(400, 'invalid', 'limits too large') : next(request) }
})
fault('opens past maxBytes', {
  checks: ['limits.respected'],
  live: {
    open: async (request, caller, next) => {
      const out = await next(request)
      const max = ((parse(request) || {}).limits || {}).maxBytes
      if (out.status !== 200 || !(max <= 262144)) return out
      const body = Buffer.from(out.body)
      return { status: 200, body: Buffer.concat([body, Buffer.alloc(Math.max(0, max + 1 - body.length), ' ')]) }
    }
  }
})
fault('limited answers over 4 KiB', {
  checks: ['limited.bounded'],
  live: batchesOrErrors((e) => { if (e.code === 'limited') e.message = e.message + ' '.repeat(5000) })
})
fault('a group over budget is limited of kind envelope', {
  checks: ['limited.group'],
  live: batchesOrErrors((e) => { if (e.code === 'limited' && e.limit && e.limit.kind === 'group') e.limit.kind = 'envelope' })
})

/** A `live` fault editing the error object of every error answer. */
function batchesOrErrors (edit) {
  const hooks = {}
  for (const op of ['open', 'read', 'close']) {
    hooks[op] = async (request, caller, next) => {
      const out = await next(request)
      const j = out.status !== 200 ? parse(out.body) : undefined
      if (!j || !j.error) return out
      edit(j.error, out)
      return { status: out.status, body: bytes(j) }
    }
  }
  return hooks
}

// --- scope -----------------------------------------------------------------------------------
fault('an empty snapshot is completed as live', {
  checks: ['snapshot.empty'],
  live: batches((j) => { if (j.phase === 'snapshot' && j.snapshotComplete && j.groups.length === 0) j.phase = 'live' })
})
fault('a group no limit can hold is limited of kind group', {
  checks: ['limited.permanent'],
  live: batchesOrErrors((e) => { if (e.code === 'limited' && e.limit && e.limit.kind === 'group') e.limit.minimumObservations = 4096 })
})

fault('scope names another service', { checks: ['scope.service'], live: batches((j) => setScope(j, 'service', 'ls_other')) })
fault('scope names another provider', { checks: ['scope.provider'], live: batches((j) => setScope(j, 'provider', 'https://elsewhere.example')) })
fault('scope names other rules', { checks: ['scope.rules'], live: batches((j) => setScope(j, 'rulesDigest', 'ab'.repeat(32))) })
fault('scope has another query digest', { checks: ['scope.query'], live: batches((j) => setScope(j, 'queryDigest', 'cd'.repeat(32))) })
fault('scope names another chain', { checks: ['scope.chain'], live: batches((j) => setScope(j, 'chain', { network: 'main', genesisHash: '11'.repeat(32) })) })
fault('scope changes after the open', { checks: ['scope.constant'], live: batches((j) => setScope(j, 'access', 'ef'.repeat(32)), ['read']) })
fault('observations carry another scope', {
  checks: ['scope.observations'],
  live: batches((j) => { for (const g of j.groups) if (g.observations[0] && g.observations[0].scope) g.observations[0].scope = { ...g.observations[0].scope, epoch: '00'.repeat(16) } })
})

// --- replay, retry, conflict -------------------------------------------------------------------
/** A read repeated with the same body gets a page whose first observation changed, for batches of `phase`. */
function drift (phase) {
  return {
    read: async (request, caller, next, state) => {
      const out = await next(request)
      const key = Buffer.from(request).toString('utf8')
      state.seen = state.seen || new Set()
      if (!state.seen.has(key)) { state.seen.add(key); return out }
      const j = out.status === 200 ? parse(out.body) : undefined
      if (!isBatch(j) || j.phase !== phase || j.groups.length === 0) return out
      j.groups[0].observations[0].payload = { ...j.groups[0].observations[0].payload, drift: true }
      return { status: 200, body: bytes(j) }
    }
  }
}
fault('a snapshot page drifts on replay', { checks: ['replay.byte-identical'], live: drift('snapshot') })
fault('a live batch drifts on replay', { checks: ['replay.live'], live: drift('live') })

/** Opens by requestId: the first body seen for each. */
function firstOpen (state, j, raw) {
  state.opens = state.opens || new Map()
  if (!state.opens.has(j.requestId)) state.opens.set(j.requestId, raw)
  return state.opens.get(j.requestId)
}
fault('an identical retry opens a new snapshot', {
  checks: ['open.retry', 'open.after-close'],
  live: {
    open: async (request, caller, next, state) => {
      const j = parse(request)
      if (!isObject(j) || typeof j.requestId !== 'string') return next(request)
      const raw = Buffer.from(request).toString('utf8')
      const first = firstOpen(state, j, raw)
      return next(first === raw && state.repeat && state.repeat.has(j.requestId) ? bytes({ ...j, requestId: rid() }) : request)
        .finally(() => { state.repeat = state.repeat || new Set(); state.repeat.add(j.requestId) })
    }
  }
})
for (const [check, key] of [['open.conflict-limits', 'limits'], ['open.conflict-query', 'query'], ['open.conflict-rules', 'requiredRulesDigest']]) {
  fault(`a retry with another ${key} is served`, {
    checks: [check],
    live: {
      open: async (request, caller, next, state) => {
        const j = parse(request)
        if (!isObject(j) || typeof j.requestId !== 'string') return next(request)
        const first = parse(firstOpen(state, j, Buffer.from(request).toString('utf8')))
        const same = JSON.stringify(without(first, key)) === JSON.stringify(without(j, key))
        return next(same && JSON.stringify(first[key]) !== JSON.stringify(j[key]) ? bytes(first) : request)
      }
    }
  })
}
fault('a closed session opens again', {
  checks: ['open.after-close'],
  live: {
    open: async (request, caller, next) => {
      const out = await next(request)
      const j = parse(request)
      return out.status === 410 && isObject(j) ? next(bytes({ ...j, requestId: rid() })) : out
    }
  }
})

// --- sessions, cursors, principals -------------------------------------------------------------
/** `live` hooks that record what every batch issued, then run `inner` hooks. */
function tracked (inner = {}) {
  const hooks = {}
  for (const op of ['open', 'read', 'close']) {
    hooks[op] = async (request, caller, next, state) => {
      const run = inner[op] || ((r, c, n) => n(r))
      const out = await run(request, caller, next, state)
      const j = out.status === 200 ? parse(out.body) : undefined
      if (isBatch(j)) {
        const s = sessionOf(state, j.session)
        s.cursors.add(j.cursor)
        s.last = j.cursor
        if (op === 'open' && s.owner === null) { s.owner = caller; s.W = j.through; s.expiresAt = j.expiresAt }
      }
      return out
    }
  }
  return hooks
}
const known = (state, session) => state.sessions && state.sessions.get(session)

fault('a forged cursor is read as the last one', {
  checks: ['cursor.forged'],
  live: tracked({
    read: async (request, caller, next, state) => {
      const j = parse(request)
      const s = isObject(j) && known(state, j.session)
      return next(s && s.last && !s.cursors.has(j.cursor) ? bytes({ ...j, cursor: s.last }) : request)
    }
  })
})
/** `op` of a session never issued answers not-found where the provider answered `status`. */
function revealsUnknown (op, status) {
  return tracked({
    [op]: async (request, caller, next, state) => {
      const out = await next(request)
      const j = parse(request)
      return out.status === status && isObject(j) && !known(state, j.session) ? errorAnswer(404, 'not-found', 'no such session') : out
    }
  })
}
fault('an unknown session is not-found', { checks: ['session.unknown'], live: revealsUnknown('read', 409) })
fault('close of an unknown session is not-found', { checks: ['close.unknown'], live: revealsUnknown('close', 200) })
fault('another identity reads a session', {
  checks: ['session.foreign-read'],
  modes: ['brc103'],
  live: tracked({
    read: async (request, caller, next, state) => {
      const out = await next(request)
      const s = known(state, (parse(request) || {}).session)
      return out.status === 409 && s && s.owner && s.owner.principal !== caller.principal ? next(request, s.owner) : out
    }
  })
})
fault("another identity's close is honoured", {
  checks: ['close.foreign'],
  modes: ['brc103'],
  live: tracked({
    close: async (request, caller, next, state) => {
      const s = known(state, (parse(request) || {}).session)
      return next(request, s && s.owner ? s.owner : caller)
    }
  })
})
fault('a second close is expired', {
  checks: ['close.idempotent'],
  live: {
    close: async (request, caller, next, state) => {
      const session = (parse(request) || {}).session
      state.closed = state.closed || new Set()
      if (typeof session !== 'string') return next(request)
      if (state.closed.has(session)) return errorAnswer(410, 'expired', 'closed')
      state.closed.add(session)
      return next(request)
    }
  }
})
fault('close does nothing', {
  checks: ['read.after-close', 'open.after-close'],
  live: {
    close: async (request, caller, next) => {
      const j = parse(request)
      const wellFormed = isObject(j) && typeof j.session === 'string' && j.session.length <= 1024 && Object.keys(j).every(k => k === 'version' || k === 'session')
      return wellFormed ? { status: 200, body: bytes({ version: 1, closed: true }) } : next(request)
    }
  }
})

/** Session ids renamed on the way out (`rename`) and back on the way in. */
function renamed (rename) {
  const out = new Map()
  const back = new Map()
  const outward = (id) => {
    if (!out.has(id)) { const r = rename(id, out.size); out.set(id, r); back.set(r, id) }
    return out.get(id)
  }
  const inward = (request) => {
    const j = parse(request)
    return isObject(j) && back.has(j.session) ? bytes({ ...j, session: back.get(j.session) }) : request
  }
  const hooks = {}
  for (const op of ['open', 'read', 'close']) {
    hooks[op] = async (request, caller, next) => {
      const res = await next(op === 'open' ? request : inward(request))
      const j = res.status === 200 ? parse(res.body) : undefined
      if (!isBatch(j)) return res
      j.session = outward(j.session)
      return { status: 200, body: bytes(j) }
    }
  }
  return hooks
}
// The checker forges an unknown session from a known one by changing its middle character,
// which here lands in the padding: an id over 1024 bytes, refused as invalid. The padding is
// added after the provider fitted the page to maxBytes, so a page can exceed it.
fault('session ids over 1024 bytes', { checks: ['session.id-bounded', 'session.unknown', 'close.unknown', 'limits.respected', 'limited.group'], live: renamed((id) => id + 'x'.repeat(1025 - id.length)) })
fault('short sequential session ids', { checks: ['session.unguessable'], live: renamed((id, n) => `session-${n}`) })

// --- snapshot boundary and watermarks -----------------------------------------------------------
// The live group after the boundary then has a sequence no higher than the incoming through.
fault('a snapshot page has another through', {
  checks: ['snapshot.through-w', 'live.sequence-order'],
  live: batches((j, { op }) => {
    if (op !== 'read' || j.phase !== 'snapshot') return
    j.through = String(BigInt(j.through) + 1n)
    if (BigInt(j.highWater) < BigInt(j.through)) j.highWater = j.through
  })
})
// Its groups then read as live groups with sequence W, and an empty collection has no
// completed snapshot batch.
fault('the last snapshot batch says live', {
  checks: ['snapshot.complete-phase', 'live.sequence-order', 'mutation.delivered', 'snapshot.empty'],
  live: batches((j) => { if (j.phase === 'snapshot' && j.snapshotComplete) j.phase = 'live' })
})
// Its live group (the mutation) then reads as a snapshot group past W.
fault('the batch after the boundary says snapshot', {
  checks: ['snapshot.live-after', 'snapshot.through-w', 'snapshot.sequence-w', 'mutation.delivered'],
  live: tracked({
    read: async (request, caller, next, state) => {
      const out = await next(request)
      const j = out.status === 200 ? parse(out.body) : undefined
      state.boundary = state.boundary || new Set()
      if (!isBatch(j)) return out
      const cursor = (parse(request) || {}).cursor
      if (j.phase === 'snapshot' && j.snapshotComplete) state.boundary.add(j.cursor)
      if (!state.boundary.has(cursor)) return out
      j.phase = 'snapshot'
      return { status: 200, body: bytes(j) }
    }
  })
})
fault('snapshot groups carry another sequence', {
  checks: ['snapshot.sequence-w'],
  live: batches((j) => { if (j.phase === 'snapshot') for (const g of j.groups) g.sequence = String(BigInt(g.sequence) + 1n) })
})
fault('through above highWater', {
  checks: ['batch.through-highwater'],
  live: batches((j) => { if (BigInt(j.through) > 0n) j.highWater = String(BigInt(j.through) - 1n) })
})
fault('an empty live batch goes back to W', {
  checks: ['live.through-monotonic'],
  live: tracked({
    read: async (request, caller, next, state) => {
      const out = await next(request)
      const j = out.status === 200 ? parse(out.body) : undefined
      const s = isBatch(j) && known(state, j.session)
      if (!s || j.phase !== 'live' || j.groups.length > 0 || BigInt(j.through) === BigInt(s.W)) return out
      j.through = s.W
      return { status: 200, body: bytes(j) }
    }
  })
})
fault('a live group has sequence W', {
  checks: ['live.sequence-order', 'mutation.delivered'],
  live: tracked({
    read: async (request, caller, next, state) => {
      const out = await next(request)
      const j = out.status === 200 ? parse(out.body) : undefined
      const s = isBatch(j) && known(state, j.session)
      if (!s || j.phase !== 'live' || j.groups.length === 0) return out
      j.groups[0].sequence = s.W
      return { status: 200, body: bytes(j) }
    }
  })
})
fault('a live group is past through', {
  checks: ['live.sequence-in-range'],
  live: batches((j) => {
    if (j.phase !== 'live' || j.groups.length === 0) return
    const last = j.groups[j.groups.length - 1]
    last.sequence = String(BigInt(j.through) + 1n)
    if (BigInt(j.highWater) < BigInt(last.sequence)) j.highWater = last.sequence
  }, ['read'])
})
fault('snapshot observations share one id', {
  checks: ['observations.unique'],
  live: batches((j) => { if (j.phase === 'snapshot') for (const g of j.groups) for (const o of g.observations) o.id = 's-shared.0' })
})
fault('live ids use the snapshot namespace', {
  // Live observation ids then sit in a different group in each session.
  checks: ['groups.namespaces', 'live.stable', 'observations.unique'],
  live: batches((j, { state }) => {
    state.first = state.first || new Map()
    if (j.phase === 'snapshot' && j.groups.length > 0 && !state.first.has(j.session)) state.first.set(j.session, j.groups[0].id)
    if (j.phase !== 'live' || !state.first.has(j.session)) return
    for (const g of j.groups) g.id = state.first.get(j.session)
  })
})
// A session whose snapshot completed in its open starts replay at the highWater of its first
// live read instead of after W: a change committed in between is lost.
fault('a change after the last page is lost', {
  checks: ['mutation.last-page'],
  live: {
    open: async (request, caller, next, state) => {
      const out = await next(request)
      const j = out.status === 200 ? parse(out.body) : undefined
      if (isBatch(j) && j.snapshotComplete) (state.complete = state.complete || new Set()).add(j.cursor)
      return out
    },
    read: async (request, caller, next, state) => {
      const out = await next(request)
      const j = out.status === 200 ? parse(out.body) : undefined
      if (!isBatch(j) || !state.complete || !state.complete.has((parse(request) || {}).cursor)) return out
      j.groups = []
      return { status: 200, body: bytes(j) }
    }
  }
})
fault('live group ids differ by session', {
  checks: ['live.stable', 'observations.unique'],
  live: batches((j) => { if (j.phase === 'live') for (const g of j.groups) g.id = `${g.id}-${j.session.slice(0, 6)}` }, ['read'])
})

fault('an unknown service is opened as the known one', {
  checks: ['open.unknown-service'],
  live: lenient('open', (j) => isObject(j) && typeof j.service === 'string' && j.service.startsWith('overlay-lookup-live-check-') ? { ...j, service: SERVICE } : undefined)
})

/** `txid.vout` of each output observation of `groups`. */
const outpoints = (groups) => groups.flatMap(g => g.observations.filter(o => o.kind === 'output').map(o => `${o.payload.evidence.txid}.${o.payload.evidence.outputIndex}`))

// Offset pagination over the live table: the last snapshot page also carries rows committed
// after the open (taken from a fresh snapshot), which the live feed then delivers again.
fault('the last snapshot page leaks later rows', {
  checks: ['mutation.once'],
  live: {
    open: async (request, caller, next, state) => {
      const out = await next(request)
      const j = out.status === 200 ? parse(out.body) : undefined
      if (isBatch(j)) (state.served = state.served || new Map()).set(j.session, new Set(outpoints(j.groups)))
      return out
    },
    read: async (request, caller, next, state) => {
      const key = Buffer.from(request).toString('utf8')
      state.answers = state.answers || new Map()
      if (state.answers.has(key)) return state.answers.get(key)
      const out = await next(request)
      const j = out.status === 200 ? parse(out.body) : undefined
      const served = isBatch(j) && state.served && state.served.get(j.session)
      if (!served || j.phase !== 'snapshot') return out
      for (const o of outpoints(j.groups)) served.add(o)
      if (!j.snapshotComplete) return out
      const limits = { maxBytes: 4194304, maxObservations: 1024, waitMs: 0 }
      const now = await state.open(bytes({ version: 1, requestId: rid(), service: SERVICE, query: {}, limits }), caller)
      let b = parse(now.body)
      const fresh = [...b.groups]
      while (!b.snapshotComplete) {
        b = parse((await next(bytes({ version: 1, session: b.session, cursor: b.cursor, limits }))).body)
        fresh.push(...b.groups)
      }
      await state.close(bytes({ version: 1, session: b.session }), caller)
      const leaked = fresh.filter(g => outpoints([g]).some(o => !served.has(o)))
      j.groups.push(...leaked.map(g => ({ ...g, sequence: j.through })))
      const faulty = { status: 200, body: bytes(j) }
      state.answers.set(key, faulty)
      return faulty
    }
  }
})
fault('polls answer at once', {
  checks: ['long-poll.bound', 'long-poll.wake'],
  live: waitRewrite((w) => 0)
})

// --- deadlines ---------------------------------------------------------------------------------
fault('deadlines extended on every read', {
  checks: ['deadlines.fixed'],
  live: batches((j) => {
    const now = BigInt(Math.floor(Date.now() / 1000)) + 1000n
    const delta = now - BigInt(j.expiresAt)
    j.expiresAt = String(now)
    j.replayUntil = String(BigInt(j.replayUntil) + delta)
  }, ['read'])
})
fault('replayUntil equals expiresAt', { checks: ['deadlines.replay'], live: batches((j) => { j.replayUntil = j.expiresAt }) })
fault('sessions promised an hour longer', {
  checks: ['deadlines.session-bound'],
  live: batches((j) => {
    j.expiresAt = String(BigInt(j.expiresAt) + 3600n)
    j.replayUntil = String(BigInt(j.replayUntil) + 3600n)
  })
})

// --- long polls --------------------------------------------------------------------------------
/** Reads with their request waitMs replaced by `wait(waitMs)`, the echoed limits restored. */
function waitRewrite (wait) {
  return {
    read: async (request, caller, next) => {
      const j = parse(request)
      if (!isObject(j) || !j.limits || typeof j.limits.waitMs !== 'number') return next(request)
      const waitMs = wait(j.limits.waitMs)
      if (waitMs === j.limits.waitMs) return next(request)
      const out = await next(bytes({ ...j, limits: { ...j.limits, waitMs } }))
      const b = out.status === 200 ? parse(out.body) : undefined
      if (!isBatch(b)) return out
      b.limits.waitMs = j.limits.waitMs
      return { status: 200, body: bytes(b) }
    }
  }
}
fault(`polls held to ${HOLD_MS} ms whatever their waitMs`, { checks: ['long-poll.deadline'], live: waitRewrite((w) => w > 0 ? Math.max(w, HOLD_MS) : w) })
fault('caught-up reads with waitMs 0 wait', {
  checks: ['read.immediate'],
  live: {
    read: async (request, caller, next) => {
      const out = await next(request)
      const j = parse(request)
      const b = out.status === 200 ? parse(out.body) : undefined
      if (isObject(j) && j.limits && j.limits.waitMs === 0 && isBatch(b) && b.phase === 'live' && b.groups.length === 0) await sleep(HOLD_MS)
      return out
    }
  }
})
fault('a commit does not wake a poll', {
  checks: ['long-poll.wake'],
  live: {
    read: async (request, caller, next) => {
      const j = parse(request)
      if (!isObject(j) || !j.limits || !(j.limits.waitMs > 0)) return next(request)
      const now = bytes({ ...j, limits: { ...j.limits, waitMs: 0 } })
      let out = await next(now)
      const b = out.status === 200 ? parse(out.body) : undefined
      if (!isBatch(b) || b.groups.length > 0) return restoreWait(out, j)
      await sleep(j.limits.waitMs)
      out = await next(now)
      return restoreWait(out, j)
    }
  }
})
function restoreWait (out, j) {
  const b = out.status === 200 ? parse(out.body) : undefined
  if (!isBatch(b)) return out
  b.limits.waitMs = Math.min(j.limits.waitMs, b.limits.waitMs === 0 ? j.limits.waitMs : b.limits.waitMs)
  return { status: 200, body: bytes(b) }
}

// --- errors -------------------------------------------------------------------------------------
fault('reset-required comes with status 404', {
  checks: ['errors.envelope'],
  live: batchesOrErrors((e, out) => { if (e.code === 'reset-required') out.status = 404 })
})

// --- what a proxy in front of the node does -----------------------------------------------------
const lookupRoute = (req) => /\/overlay\/v1\/lookup\//.test(req.url)
fault('errors lose Cache-Control', { checks: ['headers.cache-control'], proxy: { answer (req, body, res) { if (res.status >= 400) res.headers['cache-control'] = 'no-cache' } } })
fault('answers lose Vary', { checks: ['headers.vary'], proxy: { answer (req, body, res) { if (lookupRoute(req)) delete res.headers.vary } } })
fault('gzip-compressed answers', {
  checks: ['headers.content-encoding'],
  modes: ['none'],
  proxy: {
    answer (req, body, res) {
      if (/gzip/.test(req.headers['accept-encoding'] || '') && res.body.length > 0) {
        res.body = zlib.gzipSync(res.body)
        res.headers['content-encoding'] = 'gzip'
      }
    }
  }
})
fault('credentials for any origin', {
  checks: ['cors.credentials'],
  proxy: { answer (req, body, res) { res.headers['access-control-allow-origin'] = '*'; res.headers['access-control-allow-credentials'] = 'true' } }
})
fault('preflights allow only content-type', {
  checks: ['cors.preflight'],
  proxy: { answer (req, body, res) { if (req.method === 'OPTIONS' && res.headers['access-control-allow-headers']) res.headers['access-control-allow-headers'] = 'content-type' } }
})
const proxyAnswer = (status, body, extra = {}) => ({ status, headers: { 'content-type': 'application/json', 'cache-control': 'private, no-store', vary: VARY, ...extra }, body: Buffer.from(body) })
fault('a redirect for a foreign origin', {
  checks: ['redirects.none'],
  proxy: { respond (req) { if (req.method === 'POST' && req.headers.origin === PROBE_ORIGIN) return proxyAnswer(307, '', { location: 'https://elsewhere.example' + req.url }) } }
})
fault('GET of a lookup route is answered', {
  checks: ['request.method'],
  proxy: { respond (req) { if (req.method === 'GET' && lookupRoute(req)) return proxyAnswer(200, '{}') } }
})
fault('text/plain passed on as JSON', {
  checks: ['request.content-type'],
  modes: ['none'],
  proxy: { request (req, body, headers) { if (headers['content-type'] === 'text/plain') headers['content-type'] = 'application/json'; return body } }
})
fault('gzip request bodies decoded', {
  checks: ['request.content-encoding'],
  modes: ['none'],
  proxy: {
    request (req, body, headers) {
      if (headers['content-encoding'] !== 'gzip') return body
      delete headers['content-encoding']
      return zlib.gunzipSync(body)
    }
  }
})
fault('a stale capability replaced by the current one', {
  checks: ['selection.stale-capability'],
  modes: ['none'],
  proxy: {
    request (req, body, headers, state) {
      const cap = headers['x-bsv-overlay-capability']
      if (cap === 'ff'.repeat(32) && state.cap) headers['x-bsv-overlay-capability'] = state.cap
      return body
    },
    answer (req, body, res, state) {
      const j = /\/capabilities$/.test(req.url) && res.status === 200 ? parse(res.body) : undefined
      if (j && j.body) state.cap = wire.digest('capabilities', j.body)
    }
  }
})
fault('an unknown profile replaced by the live one', {
  checks: ['selection.unknown-profile'],
  modes: ['none'],
  proxy: { request (req, body, headers) { if (headers['x-bsv-overlay-profile'] === 'urn:example:not-a-profile') headers['x-bsv-overlay-profile'] = 'https://bsv.brc.dev/overlays/0193#lookup-live-v1'; return body } }
})
fault('request bodies capped at 64 KiB', {
  checks: ['request.body-cap'],
  proxy: { respond (req, body) { if (body.length > 65536) return proxyAnswer(413, JSON.stringify({ version: 1, error: { code: 'limited', message: 'body too large', retryable: false } })) } }
})
fault('oversized header fields dropped', {
  checks: ['request.header-cap'],
  modes: ['none'],
  proxy: { request (req, body, headers) { delete headers['x-padding']; return body } }
})
fault('no manifest', { checks: ['manifest.fetch'], proxy: { respond (req) { if (/\/capabilities$/.test(req.url)) return proxyAnswer(404, '{}') } } })
fault('a manifest edited in transit', {
  checks: ['manifest.signature'],
  modes: ['none'],
  proxy: {
    answer (req, body, res) {
      const j = /\/capabilities$/.test(req.url) ? parse(res.body) : undefined
      if (!j || !j.body) return
      j.body.issuedAt = String(BigInt(j.body.issuedAt) - 1n)
      res.body = bytes(j)
    }
  }
})
fault('unauthenticated opens are invalid', {
  checks: ['auth.required'],
  modes: ['brc103'],
  proxy: {
    respond (req, body) {
      if (req.method !== 'POST' || !/\/lookup\/open$/.test(req.url) || req.headers['x-bsv-auth-identity-key'] || body.length > 65536) return
      if (isObject(parse(body)) && parse(body).requestId) return proxyAnswer(400, JSON.stringify({ version: 1, error: { code: 'invalid', message: 'who are you', retryable: false } }))
    }
  }
})
fault('a cache answers unauthenticated reads', {
  checks: ['auth.read-unauthenticated'],
  modes: ['brc103'],
  proxy: {
    respond (req, body, state) {
      if (!/\/lookup\/read$/.test(req.url) || req.headers['x-bsv-auth-identity-key']) return
      const hit = state.cache && state.cache.get(body.toString('utf8'))
      if (hit) return hit
    },
    answer (req, body, res, state) {
      if (!/\/lookup\/read$/.test(req.url) || res.status !== 200) return
      state.cache = state.cache || new Map()
      state.cache.set(body.toString('utf8'), { status: 200, headers: { ...res.headers }, body: res.body })
    }
  }
})

// --- the checker pointed at the wrong thing --------------------------------------------------
fault('the manifest names another base URL', {
  checks: { none: ['manifest.base-url', 'scope.provider'], brc103: ['manifest.base-url'] },
  run: (n) => ({ baseURL: n.origin.replace('127.0.0.1', 'localhost') })
})
fault('the service offers no lookup-live profile', {
  checks: ['manifest.profile'],
  run: () => ({ service: 'ls_finite_only' })
})

// --- session expiry (a node with short sessions, the checker with --long) -----------------------
fault('polls outlive the session', {
  checks: ['long-poll.expiry-cap'],
  long: true,
  live: {
    read: async (request, caller, next) => {
      const started = Date.now()
      const out = await next(request)
      const waitMs = ((parse(request) || {}).limits || {}).waitMs || 0
      if (out.status !== 200 && waitMs > 0) await sleep(started + waitMs - Date.now())
      return out
    }
  }
})
fault('a cache serves expired sessions', {
  checks: ['read.at-expiry'],
  long: true,
  live: {
    read: async (request, caller, next, state) => {
      const out = await next(request)
      const j = parse(request)
      state.last = state.last || new Map()
      const b = out.status === 200 ? parse(out.body) : undefined
      if (isBatch(b)) { state.last.set(b.session, { out, expiresMs: Number(b.expiresAt) * 1000 }); return out }
      const hit = isObject(j) && out.status === 409 && state.last.get(j.session)
      return hit && Date.now() >= hit.expiresMs ? hit.out : out
    }
  }
})
fault('an expired session opens again', {
  checks: ['open.after-expiry', 'open.after-close'],
  long: true,
  live: FAULTS['a closed session opens again'].live
})
fault('close of an expired session is expired', {
  checks: ['close.expired'],
  long: true,
  live: tracked({
    close: async (request, caller, next, state) => {
      const s = known(state, (parse(request) || {}).session)
      const out = await next(request)
      return s && s.expiresAt && BigInt(s.expiresAt) * 1000n <= BigInt(Date.now()) ? errorAnswer(410, 'expired', 'expired') : out
    }
  })
})

const HOP_BY_HOP = ['connection', 'keep-alive', 'transfer-encoding', 'content-length']

/** The proxy in front of the node: forwards everything, with the current fault's proxy hooks. */
async function startProxy (slot) {
  const proxy = { target: null }
  const server = http.createServer({ maxHeaderSize: 64 * 1024 }, (req, res) => {
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => {
      const hooks = slot.proxy || {}
      let body = Buffer.concat(chunks)
      const send = (answer) => {
        for (const h of HOP_BY_HOP) delete answer.headers[h]
        answer.headers['content-length'] = answer.body.length
        res.writeHead(answer.status, answer.headers)
        res.end(answer.body)
      }
      const early = hooks.respond && hooks.respond(req, body, slot.state)
      if (early) return send({ ...early, headers: { ...early.headers } })
      const headers = { ...req.headers, host: new URL(proxy.target).host }
      if (hooks.request) body = hooks.request(req, body, headers, slot.state)
      headers['content-length'] = body.length
      delete headers['transfer-encoding']
      const up = http.request(proxy.target + req.url, { method: req.method, headers, agent: false }, (ur) => {
        const parts = []
        ur.on('data', (c) => parts.push(c))
        ur.on('end', () => {
          const answer = { status: ur.statusCode, headers: { ...ur.headers }, body: Buffer.concat(parts) }
          if (hooks.answer) hooks.answer(req, body, answer, slot.state)
          send(answer)
        })
      })
      up.on('error', () => { if (!res.headersSent) { res.statusCode = 502; res.end() } })
      up.end(body.length > 0 ? body : undefined)
    })
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  proxy.origin = `http://127.0.0.1:${server.address().port}`
  proxy.close = () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()) })
  return proxy
}

/**
 * A node (`auth` 'none' or 'brc103') behind the proxy, with three notes, and a slot for the
 * current fault: `use(name)` installs a fault (null: none) with fresh state. `live` options go
 * to the node's LiveLookup (a short session for the expiry checks).
 */
async function startFaultyNode (auth, { origins = [], live } = {}) {
  const slot = { live: null, proxy: null, state: null }
  const proxy = await startProxy(slot)
  const node = await startNode({ authentication: auth, baseURL: proxy.origin, allowedOrigins: origins, live })
  proxy.target = node.origin
  await node.submit(await node.factory.createNotes(['one', 'two', 'three']))
  const real = { open: node.live.open.bind(node.live), read: node.live.read.bind(node.live), close: node.live.closeSession.bind(node.live) }
  const via = (op) => (body, caller, options) => {
    const hook = slot.live && slot.live[op]
    const next = (b, c = caller) => Promise.resolve(real[op](b, c, options))
    return hook ? hook(Buffer.from(body), caller, next, slot.state) : next(body)
  }
  // What a fault may call besides `next`: the provider's own open and close.
  const fresh = () => ({ open: (b, c) => Promise.resolve(real.open(b, c)), close: (b, c) => Promise.resolve(real.close(b, c)) })
  node.live.open = via('open')
  node.live.read = via('read')
  node.live.closeSession = via('close')
  slot.state = fresh()
  let mutations = 0
  return {
    node,
    proxy,
    origin: proxy.origin,
    use (name) {
      const f = name ? FAULTS[name] : null
      if (name && !f) throw new Error(`unknown fault ${name}`)
      slot.live = f ? f.live || null : null
      slot.proxy = f ? f.proxy || null : null
      slot.state = fresh()
    },
    /** Commits a note the query selects (the checker's --mutate, as a function). */
    async mutate () {
      mutations++
      await node.submit(await node.factory.createNotes([`mutation ${mutations}`]))
    },
    async close () {
      await proxy.close()
      await node.close()
    }
  }
}

/**
 * Checks shown failing in public mode only: their faults change bytes that BRC-104 signs (the
 * manifest, selection and content headers of a signed request) or, for request.header-cap and
 * request.content-encoding, the BRC-103 probe is an unauthenticated request that the provider
 * refuses for that reason first, so a proxy that lets the fault through still gets a refusal.
 */
const PUBLIC_ONLY = ['manifest.signature', 'selection.stale-capability', 'selection.unknown-profile', 'request.content-type', 'request.content-encoding', 'request.header-cap', 'headers.content-encoding']

module.exports = { FAULTS, PUBLIC_ONLY, startFaultyNode, HOLD_MS, SERVICE, EMPTY_QUERY }
