'use strict'
// Following a provider whatever it speaks (issue #51): negotiation through its BRC-194
// manifest, and the finite refresh adapter for a provider that answers only BRC-24
// `/lookup` (docs/client.md "Providers that answer only BRC-24").
//
// A finite source is a source of the same store as a live one, with this difference: each
// refresh is one BRC-24 answer, turned into a lookup-live-v1 batch made here (never sent
// anywhere) and committed as a new serial local generation of the source (BRC-193 §9
// "finite refresh adapters use serial local refresh generations and make no live replay
// claim"). The batch is the whole answer as one snapshot group (BRC-192 §9: a finite
// source maps its entire response to one group, sequence zero), so the native commit
// checks it and journals its evidence like any other batch, and the store swaps the
// generation in only once that group is accepted: the answer is published whole, and rows
// it no longer lists leave in that one revision. A kill before the commit leaves an empty
// pending generation, which the next refresh abandons (begins a new one).
//
// The session and cursor of a finite generation are local words; CheckpointStore.checkpoint
// reports them as null with phase 'finite' (localCheckpoint below), so nothing reads from,
// resumes or closes them against a host, and nothing claims a replay.

const crypto = require('node:crypto')
const { Beef } = require('@bsv/sdk')
const { PROFILE, PROFILE_LIMITS, digest } = require('../common/wire')
const { LiveLookupError } = require('./errors')
const { LEGACY_CONTEXT_SCHEMA } = require('./decode')

// The access of a finite refresh generation: no access partition was negotiated (the host
// answered an unauthenticated BRC-24 request), so its scope names the adapter instead. The
// source is the same as a live one of that provider, service and query (its key has no
// access): a provider that gains the profile is followed live from the next generation.
const FINITE_ACCESS = 'finite'
// Session and cursor prefix of a synthesized batch (local only).
const LOCAL = 'local-finite:'
// Observation id prefix of a refreshed output: how a member row says it came from a refresh.
const FINITE_OBSERVATION = 'finite:'
// A BRC-24 host states no rules for its answers: a finite source's rulesDigest is this
// fixed local value, which no requiredRulesDigest pin can match.
const UNSTATED_RULES = { id: 'urn:overlay-lookup-live:finite-refresh:unstated-rules', parameters: {} }
const FINITE_RULES_DIGEST = digest('service-rules', UNSTATED_RULES)

const BATCH_MAX_BYTES = PROFILE_LIMITS.maxResponseBytes // one refresh is one batch (4 MiB)
const MAX_OUTPUTS = PROFILE_LIMITS.maxObservations // and one group (1024 observations)
const DEFAULT_ANSWER_BYTES = 16 * 1024 * 1024
const MAX_ANSWER_BYTES = 256 * 1024 * 1024
const MANIFEST_MAX = 256 * 1024
const ERROR_BODY_MAX = 64 * 1024
const FINITE_KEYS = ['refreshMs', 'maxBytes', 'maxOutputs']
// Transaction ids of BEEFs already read, per follow (a refresh mostly repeats the last).
const MEMO_MAX = 4096

// client.js requires this module, so its internals are read at call time, not load time.
function internals () { return require('./client')._internal }

// --- options -------------------------------------------------------------------

function positiveInt (name, v, max) {
  if (!Number.isSafeInteger(v) || v < 1 || (max !== undefined && v > max)) {
    throw new LiveLookupError('invalid', `${name} must be an integer from 1${max !== undefined ? ` to ${max}` : ''}`, { option: name.split('.').pop() })
  }
}

/** Checks follow's `finite`, `resolver` and `resolveIntervalMs` before anything starts. */
function checkFollowOptions (opts) {
  const { knownKeys } = internals()
  if (opts.finite !== undefined) {
    const f = opts.finite
    if (f === null || typeof f !== 'object') throw new LiveLookupError('invalid', 'finite must be an object: {refreshMs, maxBytes?, maxOutputs?}', { option: 'finite' })
    knownKeys('finite', f, FINITE_KEYS)
    positiveInt('finite.refreshMs', f.refreshMs)
    if (f.maxBytes !== undefined) positiveInt('finite.maxBytes', f.maxBytes, MAX_ANSWER_BYTES)
    if (f.maxOutputs !== undefined) positiveInt('finite.maxOutputs', f.maxOutputs, MAX_OUTPUTS)
    if (opts.requiredRulesDigest !== undefined) {
      // A pin is a live promise about rules; a BRC-24 answer states none.
      throw new LiveLookupError('invalid', 'requiredRulesDigest cannot be combined with finite: a finite source states no rules', { option: 'requiredRulesDigest' })
    }
  }
  if (opts.resolver !== undefined) {
    const r = opts.resolver
    const list = Array.isArray(r) && r.length > 0 && r.every(u => typeof u === 'string')
    const sdk = r !== null && typeof r === 'object' && !Array.isArray(r) && typeof r.query === 'function'
    if (!list && !sdk) throw new LiveLookupError('invalid', "resolver must be @bsv/sdk's LookupResolver or a non-empty list of SLAP tracker URLs", { option: 'resolver' })
    if (opts.sources !== undefined) throw new LiveLookupError('invalid', 'resolver and sources cannot be combined', { option: 'sources' })
  }
  if (opts.resolveIntervalMs !== undefined) {
    if (opts.resolver === undefined) throw new LiveLookupError('invalid', 'resolveIntervalMs needs a resolver', { option: 'resolveIntervalMs' })
    positiveInt('resolveIntervalMs', opts.resolveIntervalMs)
  }
}

// --- the finite source and its batches --------------------------------------------

/** The source key of `baseURL`'s answers for this query: the host's exact origin. */
function finiteSourceKey (baseURL, service, queryDigest) {
  return { provider: new URL(baseURL).origin, service, queryDigest }
}

/** Whether the newest generation of `key` in `store` is a finite refresh. */
function isFiniteSource (store, key) {
  if (!key) return false
  const cp = store.checkpoint(key)
  return !!cp && cp.access === FINITE_ACCESS
}

/**
 * What CheckpointStore.checkpoint reports: a finite generation has no session and no cursor
 * (its local words never leave the store) and says phase 'finite'; live ones are unchanged.
 */
function localCheckpoint (cp) {
  if (!cp || typeof cp.session !== 'string' || !cp.session.startsWith(LOCAL)) return cp
  return { ...cp, session: null, cursor: null, phase: 'finite' }
}

/** Member rows from a refresh say phase 'finite' (BRC-192 §10.5), not 'snapshot'. */
function finiteRows (rows) {
  if (!Array.isArray(rows)) return rows
  for (const r of rows) if (typeof r.observationId === 'string' && r.observationId.startsWith(FINITE_OBSERVATION)) r.phase = 'finite'
  return rows
}

function finiteSnapshot (snap) {
  if (!snap) return snap
  finiteRows(snap.members)
  finiteRows(snap.partialMembers)
  return snap
}

/** BRC-192 §10.5 memberships of finite scopes say phase 'finite'. */
function finiteReconciled (state) {
  if (!state || !Array.isArray(state.memberships)) return state
  for (const m of state.memberships) if (m.scope && m.scope.access === FINITE_ACCESS) m.phase = 'finite'
  return state
}

function byteArray (v) {
  if (!Array.isArray(v) || v.length === 0) return null
  for (const b of v) if (!Number.isInteger(b) || b < 0 || b > 255) return null
  return v
}

/**
 * The transaction a BRC-24 output's BEEF asserts, read as @bsv/sdk's LookupResolver reads it
 * (Transaction.fromBEEF without a txid: the Atomic subject, else the last transaction). The
 * native commit finds it again by the txid computed from its bytes and checks the output.
 */
function subjectOf (bytes, memo) {
  const h = crypto.createHash('sha256').update(Buffer.from(bytes)).digest('hex')
  let s = memo.get(h)
  if (s === undefined) {
    try {
      const beef = Beef.fromBinary(bytes)
      const target = beef.atomicTxid ?? beef.txs[beef.txs.length - 1]?.txid
      const tx = target ? beef.findTxid(target)?.tx : undefined
      s = tx ? { txid: target, outputs: tx.outputs.length } : null
    } catch {
      s = null
    }
    if (memo.size >= MEMO_MAX) memo.delete(memo.keys().next().value)
    memo.set(h, s)
  }
  return s
}

/**
 * One BRC-24 `output-list` answer as the bytes of one lookup-live-v1 snapshot batch (the
 * shape src/wire/response.rs parses: closed objects, every field required). Outputs whose
 * BEEF cannot be read or has no such output are skipped and counted, as LookupResolver
 * skips them; a repeated outpoint is listed once.
 */
function answerBatch (answer, scope, memo, maxOutputs, id) {
  const observations = []
  const seen = new Set()
  let skipped = 0
  for (const o of answer.outputs) {
    const bytes = o && typeof o === 'object' ? byteArray(o.beef) : null
    const index = o && o.outputIndex
    const subject = bytes && Number.isInteger(index) && index >= 0 && index <= 0xffffffff ? subjectOf(bytes, memo) : null
    if (!subject || index >= subject.outputs) { skipped++; continue }
    const id = `${FINITE_OBSERVATION}${subject.txid}.${index}`
    if (seen.has(id)) continue
    seen.add(id)
    const payload = { evidence: { txid: subject.txid, outputIndex: index, beef: Buffer.from(bytes).toString('base64') } }
    if (o.context !== undefined && o.context !== null) {
      // A BRC-24 context value travels as its UTF-8 JSON under BRC-192's adapter schema.
      payload.context = { schema: LEGACY_CONTEXT_SCHEMA, bytes: Buffer.from(JSON.stringify(o.context), 'utf8').toString('base64') }
    }
    observations.push({ id, scope, kind: 'output', payload })
  }
  if (observations.length > maxOutputs) {
    throw new LiveLookupError('limited', `the answer lists ${observations.length} outputs, over finite.maxOutputs ${maxOutputs}`)
  }
  const session = LOCAL + id
  const body = {
    version: 1,
    session,
    scope,
    phase: 'snapshot',
    // An empty answer is still a completed snapshot: the source then lists nothing.
    groups: observations.length ? [{ id: 'refresh', sequence: '0', observations }] : [],
    cursor: session + ':end',
    snapshotComplete: true,
    through: '0',
    highWater: '0',
    // No session to expire and no replay promised.
    expiresAt: '0',
    replayUntil: '0',
    limits: { maxBytes: BATCH_MAX_BYTES, maxObservations: MAX_OUTPUTS, waitMs: 0 }
  }
  const bytes = Buffer.from(JSON.stringify(body), 'utf8')
  if (bytes.length > BATCH_MAX_BYTES) {
    throw new LiveLookupError('limited', `the answer's ${observations.length} outputs make a ${bytes.length}-byte batch, over the ${BATCH_MAX_BYTES}-byte bound of one refresh`)
  }
  // What the answer says, whatever refresh it came in: its outputs, evidence and contexts.
  const content = crypto.createHash('sha256').update(JSON.stringify(observations.map(o => [o.id, o.payload]))).digest('hex')
  return { bytes, outputs: observations.length, skipped, content }
}

// --- plain HTTP (the manifest probe and BRC-24 /lookup) ---------------------------

// As @bsv/sdk's HTTPSOverlayLookupFacilitator asks a host: plain fetch, the client's
// `fetch` or the global one, bounded like the client's own requests.
async function plainSend (client, method, url, headers, body, signal) {
  const { plainFetch, checkHeaders } = internals()
  const res = await plainFetch(client._options.fetch ?? globalThis.fetch, method, url, headers, body, client.requestTimeoutMs, signal)
  checkHeaders(res, client.maxHeaderBytes)
  return res
}

/**
 * The provider's BRC-194 manifest, read with a plain GET (the manifest is a public, signed
 * document) and verified natively: its signature (by `providerIdentity` when configured),
 * base URL, chain and validity. Resolves `{mode, offer, digest, reason}`: 'live' when it
 * offers lookup-live-v1 for the service, 'finite' when there is no manifest (a 4xx) or it
 * offers none. A manifest that fails verification is an error, never a reason to refresh
 * instead (BRC-194 §1: a required capability failure does not fall back silently).
 * With `identities` (a discovered host: who advertised it in SLAP), the manifest must be
 * signed by one of them.
 */
async function probe (client, service, signal, identities) {
  const { readCapped, errorFrom } = internals()
  const res = await plainSend(client, 'GET', client.baseURL + '/overlay/v1/capabilities', { 'Cache-Control': 'no-store' }, undefined, signal)
  if (res.status !== 200) {
    const bytes = await readCapped(res, ERROR_BODY_MAX).catch(() => Buffer.alloc(0))
    if (res.status >= 500 || res.status === 429) throw errorFrom(res.status, bytes) // the path to the host: retried
    // A host that authenticates even its manifest may still offer the profile to a
    // BRC-103 caller: the live follow reads it with the client's own transport.
    if ((res.status === 401 || res.status === 403) && client.authFetch) return { mode: 'live', offer: null, digest: null, identity: null, reason: 'authenticated-manifest' }
    return { mode: 'finite', offer: null, digest: null, identity: null, reason: `no manifest (HTTP ${res.status})` }
  }
  const bytes = await readCapped(res, MANIFEST_MAX)
  let signed
  try { signed = JSON.parse(bytes.toString('utf8')) } catch { signed = null }
  if (!signed || typeof signed.body !== 'object' || signed.body === null || typeof signed.signature !== 'string') {
    throw new LiveLookupError('invalid', 'capabilities response is not a signed manifest')
  }
  const accepted = internals().acceptManifestFor(client, signed, client.providerIdentity)
  if (identities && !identities.includes(accepted.identity)) {
    throw new LiveLookupError('invalid', `capability manifest: signed by ${accepted.identity}, which is not an identity that advertised ${client.baseURL} in SLAP`)
  }
  const offer = accepted.live.find(x => x.service === service) ?? null
  return offer
    ? { mode: 'live', offer, digest: accepted.digest, identity: accepted.identity, reason: 'offered' }
    : { mode: 'finite', offer: null, digest: accepted.digest, identity: accepted.identity, reason: `the manifest offers no ${PROFILE} for ${service}` }
}

/** The refusal of a service the client's accepted manifest does not offer (before an open). */
function notOffered (client, service) {
  if (!client.manifest || client.manifest.live.some(x => x.service === service)) return null
  return new LiveLookupError('unsupported', `${client.baseURL} offers no ${PROFILE} for ${service} in its BRC-194 manifest; follow it by periodic BRC-24 refresh with the \`finite\` option`, { offered: false })
}

/** One BRC-24 lookup: `{type: 'output-list', outputs}`, bounded in bytes and outputs. */
async function lookup (client, service, query, fin, signal) {
  const { readCapped, transportError } = internals()
  const maxBytes = fin.maxBytes ?? DEFAULT_ANSWER_BYTES
  const maxOutputs = fin.maxOutputs ?? MAX_OUTPUTS
  const res = await plainSend(client, 'POST', client.baseURL + '/lookup', { 'Content-Type': 'application/json', Accept: 'application/json' }, JSON.stringify({ service, query }), signal)
  if (res.status !== 200) {
    const text = (await readCapped(res, ERROR_BODY_MAX).catch(() => Buffer.alloc(0))).toString('utf8')
    let said = ''
    try {
      const e = JSON.parse(text)
      said = [e.code, e.description ?? e.message].filter(x => typeof x === 'string').join(': ').slice(0, 512)
    } catch {}
    const message = `BRC-24 lookup answered HTTP ${res.status}${said ? ` (${said})` : ''}`
    if (res.status >= 500 || res.status === 429) throw new LiveLookupError('unavailable', message, { status: res.status, retryable: true, transport: true })
    // Never pays (BRC-193 §1 forbids it for this client, and nothing here funds a 402).
    if (res.status === 402) throw new LiveLookupError('unsupported', message + '; this client does not pay', { status: 402 })
    throw new LiveLookupError('unavailable', message, { status: res.status })
  }
  let bytes
  try {
    bytes = await readCapped(res, maxBytes)
  } catch (e) {
    if (e.code === 'limited') throw new LiveLookupError('limited', `the BRC-24 answer is over finite.maxBytes ${maxBytes}`)
    throw transportError(e)
  }
  let answer
  try { answer = JSON.parse(bytes.toString('utf8')) } catch { answer = null }
  if (!answer || typeof answer !== 'object') throw new LiveLookupError('invalid', 'the BRC-24 answer is not a JSON object')
  if (answer.type !== 'output-list') throw new LiveLookupError('unsupported', `the BRC-24 answer is of type ${String(answer.type).slice(0, 64)}; only output-list can be followed`)
  if (!Array.isArray(answer.outputs)) throw new LiveLookupError('invalid', 'the BRC-24 answer has no outputs array')
  if (answer.outputs.length > maxOutputs) throw new LiveLookupError('limited', `the answer lists ${answer.outputs.length} outputs, over finite.maxOutputs ${maxOutputs}`)
  return answer
}

// --- following ---------------------------------------------------------------------

// A connection-state reporter with the follow loop's rule: repeated attempts and progress
// are reported each time, steady states once. Every event names its mode.
function reporter (client, onState, keyOf) {
  const { CallbackFailure } = internals()
  let connection = null
  return async (next, extra = {}) => {
    if (next === connection && !('attempt' in extra) && !('progress' in extra)) return
    connection = next
    if (!onState) return
    try {
      await onState({ source: client.baseURL, sourceKey: keyOf(), connection: next, ...extra })
    } catch (e) {
      throw new CallbackFailure(e)
    }
  }
}

// Resolves after `ms`, when the verifier is idle, or on abort, whichever is first.
function idleOrTimeout (verifier, ms, signal) {
  const { sleep } = internals()
  return Promise.race([verifier.idle().catch(() => {}), sleep(ms, signal)])
}

/**
 * Refreshes `query` on `service` at `client.baseURL` every `finite.refreshMs` until the
 * signal aborts, or until the provider's manifest offers lookup-live-v1 (then resolves
 * `{switchTo: 'live', probe}` for the caller to follow it live from its next generation).
 */
async function followFinite (client, service, query, o, run) {
  const { sleep, crashPoint, CallbackFailure } = internals()
  const { store } = client
  const { signal } = o
  const fin = o.finite
  const key = finiteSourceKey(client.baseURL, service, run.queryDigest)
  let begun = isFiniteSource(store, store.sourceForLabel(run.label))
  const setState = reporter(client, run.onState, () => (begun ? key : null))
  const refresh = async () => {
    const answer = await lookup(client, service, query, fin, signal)
    const id = crypto.randomBytes(16).toString('hex')
    const scope = {
      chain: { network: client.chain.network, genesisHash: client.chain.genesisHash },
      provider: key.provider,
      service: key.service,
      queryDigest: key.queryDigest,
      rulesDigest: FINITE_RULES_DIGEST,
      access: FINITE_ACCESS,
      // Each refresh is its own epoch: nothing carries over from one answer to the next.
      epoch: 'finite-refresh:' + id
    }
    const { bytes, outputs, skipped, content } = answerBatch(answer, scope, run.memo, fin.maxOutputs ?? MAX_OUTPUTS, id)
    // The same answer as the published generation's (valid or found invalid): nothing new
    // to apply. Committing it again would only add a receipt per listed transaction to the
    // journal at every refresh.
    const held = store.state(key)
    if (run.held && run.held.content === content && held.currentGeneration === run.held.generation && held.pendingGeneration === null) {
      await setState('connected', { mode: 'finite', progress: 'refreshed', generation: run.held.generation, outputs, skipped, unchanged: true, nextRefreshAt: Date.now() + fin.refreshMs })
      return
    }
    // A new generation for this answer; a pending one a crash left (begun, never
    // committed) is retired by it.
    const generation = store.beginGeneration(key, run.label)
    begun = true
    crashPoint('after-receive')
    const outcome = await store.commitBatchAsync(key, generation, null, bytes, { maxBytes: BATCH_MAX_BYTES, maxObservations: MAX_OUTPUTS, membership: o.membership })
    crashPoint('after-commit')
    run.held = null
    client._verifyAfterCommit()
    await setState('connected', { mode: 'finite', progress: 'refreshed', generation, outputs, skipped, nextRefreshAt: Date.now() + fin.refreshMs })
    // Under `verified` the answer is published once its evidence is judged: the event
    // waits for the verifier (at most until the next refresh is due), so its lists show
    // the published result rather than an answer still being checked.
    if (o.membership === 'verified' && client.verifier) await idleOrTimeout(client.verifier, fin.refreshMs, signal)
    if (signal.aborted) return
    // A later identical answer is skipped only once the application was shown this one
    // published (otherwise it is committed again, and settles at once if its evidence has).
    run.held = store.state(key).currentGeneration === generation ? { generation, content } : null
    await client._emit(run.onRevision, key, outcome, bytes)
  }
  let first = true
  let attempt = 0
  while (!signal.aborted) {
    try {
      if (!first) {
        // The provider may have gained the profile: its next generation is then live.
        const p = await probe(client, service, signal, run.identities)
        if (p.mode === 'live' && p.digest !== run.refusedDigest && liveUsable(client, p)) return { switchTo: 'live', probe: p }
      }
      first = false
      await refresh()
      attempt = 0
      await sleep(fin.refreshMs, signal)
    } catch (e) {
      if (e instanceof CallbackFailure) throw e.error
      if (signal.aborted) break
      const err = e instanceof LiveLookupError ? e : new LiveLookupError('invalid', String(e && e.message), { cause: e })
      if (!err.retryable && !err.transport) throw err
      attempt++
      const delay = client._delay(attempt, err)
      await setState('retrying', { mode: 'finite', attempt, nextRetryAt: Date.now() + delay, error: err })
      await sleep(delay, signal)
    }
  }
  await setState('closed', { mode: 'finite' }).catch(() => {})
  return { sourceKey: begun ? key : store.sourceForLabel(run.label) }
}

// A source a mode no longer follows under another key keeps its rows, shown stale: a
// replacement generation is begun and never completed (as for a provider that changed its
// chain). Under the same key the next mode's generation replaces it anyway.
function leave (store, key, next) {
  if (!key || (next && JSON.stringify(key) === JSON.stringify(next))) return
  const st = store.state(key)
  if (st.currentGeneration !== null && st.pendingGeneration === null) store.beginGeneration(key)
}

// Whether this client can follow an offer live: a BRC-103 offer needs an AuthFetch.
function liveUsable (client, p) {
  return !(p.offer && p.offer.authentication === 'brc103' && !client.authFetch)
}

// An error of a live follow that says the provider does not serve the profile for this
// service: the open's 404 or 422 (BRC-193 §6), a manifest that is gone (404), or the
// client's own refusal of a service the manifest does not offer.
function refusesLive (e) {
  return e instanceof LiveLookupError && (e.offered === false || e.status === 404 || e.status === 422)
}

// A follow without `finite` refused by a provider that does not serve the profile: the
// same error, saying so and what to do.
function clarify (client, service, e) {
  if (!refusesLive(e) || e.offered === false) return e
  return new LiveLookupError(e.code, `${client.baseURL} does not serve ${PROFILE} for ${service} (${e.message}); to follow it by periodic BRC-24 refresh, pass the \`finite\` option`, { ...e, cause: e })
}

/**
 * Follows one provider: live when it offers lookup-live-v1 for the service, by finite
 * refresh when it does not and `o.finite` allows it, refused with a clear error otherwise.
 * Without `o.finite` (and not discovered) this is the live follow as it always was.
 */
async function followProvider (client, service, query, o) {
  if (!o.finite && !o.discovered) {
    try {
      return await client._follow(service, query, o)
    } catch (e) {
      throw clarify(client, service, e)
    }
  }
  const { sleep, CallbackFailure, sourceLabel } = internals()
  const { store } = client
  const { signal } = o
  const label = sourceLabel(client.baseURL, service, query)
  const queryDigest = digest('lookup-query', { service, query })
  // One restored event per follow, before anything is asked (each mode's loop would
  // deliver its own), and every event and state names the mode of its source.
  let restored = false
  const onRevision = o.onRevision && ((e) => {
    if (e.restored && restored) return
    e.mode = isFiniteSource(store, e.sourceKey) ? 'finite' : 'live'
    return o.onRevision(e)
  })
  const onState = o.onState && ((s) => o.onState('mode' in s ? s : { ...s, mode: 'live' }))
  const identities = Array.isArray(o.identities) && o.identities.length > 0 ? o.identities : null
  const run = { label, queryDigest, onRevision, onState, identities, memo: new Map(), refusedDigest: undefined }
  const report = reporter(client, onState, () => store.sourceForLabel(label))
  const unwrap = (e) => { throw e instanceof CallbackFailure ? e.error : e }

  const stored = store.sourceForLabel(label)
  if (stored && store.checkpoint(stored)) await client._emit(onRevision, stored, null, null).catch(unwrap)
  restored = true // the stored state is delivered here, at the start, and not again by a mode's loop

  // Negotiation: the manifest decides, before anything is opened.
  let p
  for (let attempt = 1; ; attempt++) {
    try {
      p = await probe(client, service, signal, identities)
      break
    } catch (e) {
      if (signal.aborted) {
        await report('closed', { mode: null }).catch(() => {})
        return { sourceKey: stored }
      }
      if (!e.retryable && !e.transport) throw e
      const delay = client._delay(attempt, e)
      await report('retrying', { mode: null, attempt, nextRetryAt: Date.now() + delay, error: e }).catch(unwrap)
      await sleep(delay, signal)
    }
  }
  let mode = p.mode === 'live' && liveUsable(client, p) ? 'live' : 'finite'
  for (;;) {
    if (mode === 'live') {
      // A provider whose offer is unauthenticated is followed with plain fetch, whatever
      // transport the application configured for the others; a discovered one must keep
      // the identity its manifest was accepted with (one that advertised it).
      const overrides = {}
      if (p.offer && p.offer.authentication === 'none' && client.authFetch) overrides.authFetch = undefined
      if (identities) overrides.providerIdentity = p.identity ?? (identities.length === 1 ? identities[0] : undefined)
      const live = Object.keys(overrides).length > 0 ? twin(client, overrides) : client
      // The source's next generation is live; the refreshed one stays published (stale)
      // until the live snapshot replaces it. A live provider named by its identity key
      // (BRC-103) is another source than the origin the refreshes named: that one is left.
      const prev = store.sourceForLabel(label)
      if (isFiniteSource(store, prev)) leave(store, prev, null)
      try {
        return await live._follow(service, query, { ...o, onRevision, onState })
      } catch (e) {
        if (!o.finite || !refusesLive(e) || signal.aborted) throw clarify(client, service, e)
        // Followed by refresh from now on, until the manifest changes.
        run.refusedDigest = p.digest
        mode = 'finite'
        continue
      }
    }
    if (!o.finite) {
      const why = p.offer ? `its ${PROFILE} offer needs BRC-103 (configure authFetch)` : p.reason
      throw new LiveLookupError('unsupported', `${client.baseURL} cannot be followed live: ${why}; to follow it by periodic BRC-24 refresh, pass the \`finite\` option`, { offered: false })
    }
    const prev = store.sourceForLabel(label)
    if (prev && !isFiniteSource(store, prev)) leave(store, prev, finiteSourceKey(client.baseURL, service, queryDigest))
    const r = await followFinite(client, service, query, o, run)
    if (!r.switchTo) return r
    p = r.probe
    mode = 'live'
  }
}

/** A client of the same provider, store, options and verifier, with `overrides`. */
function twin (client, overrides) {
  const { LiveLookupClient } = require('./client')
  const c = new LiveLookupClient({ ...client._options, baseURL: client.baseURL, chainTracker: undefined, ...overrides })
  c.verifier = client.verifier
  return c
}

module.exports = {
  FINITE_ACCESS,
  FINITE_RULES_DIGEST,
  checkFollowOptions,
  finiteSourceKey,
  isFiniteSource,
  localCheckpoint,
  finiteRows,
  finiteSnapshot,
  finiteReconciled,
  answerBatch,
  probe,
  notOffered,
  followProvider,
  twin
}
