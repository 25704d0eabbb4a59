'use strict'
// Ingest layer: turns @bsv/overlay Engine activity into change groups for the live index.
//
//   wrapLookupService(name, inner, companion, sink)  -> a LookupService to register instead of inner
//   attachEngine(engine, sink)                       -> brackets engine.submit: one group per submit
//   backfill(engine, name, topics, companion, sink)  -> one starting-state group from Engine storage
//   (attachEngine also brackets engine.handleNewMerkleProof: one refresh group per proof update)
//   withSubmitsPaused(engine, fn)                    -> runs fn while no submit is in flight
//
// The native store is reached only through `sink.commit(changes) -> Promise`. Observed Engine
// behaviour that shapes this file is written up in docs/engine-notes.md.
const path = require('node:path')
const { AsyncLocalStorage } = require('node:async_hooks')
const { Transaction, MerklePath } = require('@bsv/sdk')
// The subject transaction of an Atomic BEEF, read natively (src/bitcoin/beef.rs: the client's reader).
const { beefSubject: subjectOfAtomicBeef } = require('../common/native')

const LEGACY_CONTEXT_SCHEMA = 'https://bsv.brc.dev/apps/0192#legacy-lookup-context-json-v1'
const SEQUENCE_FINAL = 0xffffffff
const HOOK_NAMES = ['outputAdmittedByTopic', 'outputSpent', 'outputNoLongerRetainedInHistory', 'outputEvicted']
// Every Storage method the Engine may call while a submit is running (Storage.ts of 0.4.6).
const STORAGE_METHODS = [
  'findOutput', 'findOutputsForTransaction', 'findUTXOsForTopic', 'deleteOutput', 'insertOutput',
  'markUTXOAsSpent', 'updateConsumedBy', 'updateTransactionBEEF', 'updateOutputBlockHeight',
  'insertAppliedTransaction', 'doesAppliedTransactionExist', 'updateLastInteraction', 'getLastInteraction'
]
// Failed submits whose removals wait for a retry of the same transaction (oldest dropped first).
const MAX_CARRIED_SUBMITS = 1024
const REMOVE_RANK = { spent: 3, evicted: 2, 'not-retained': 1 }

const LIVE_SERVICE = Symbol.for('overlay-lookup-live.service')
const TRACKED = Symbol.for('overlay-lookup-live.tracked')

// ---------------------------------------------------------------------------------------------
// Submit scopes: which Engine.submit a hook call belongs to.
// ---------------------------------------------------------------------------------------------

// AsyncLocalStorage follows promise continuations, so a hook the Engine calls from a promise it
// never awaits (outputSpent, the recursion of deleteUTXODeep) still finds the submit that caused it.
const currentSubmit = new AsyncLocalStorage()
const openScopes = new Set()
let nextScopeId = 1

function nextMacrotask () {
  return new Promise(resolve => setImmediate(resolve))
}

/** The changes, in-flight work and outcome of one Engine.submit. */
class SubmitScope {
  constructor () {
    this.id = nextScopeId++
    this.entries = [] // {sink, change}
    this.pending = new Set()
    this.admitting = new Set() // outpoint keys whose admission hook has started
    // Per sink, this submit's place in its admission order (docs/design.md "Admission gate"),
    // taken when the submit resolves; used by its group or given up. `ticketsDone` once they
    // are: nothing may be added after that.
    this.tickets = new Map()
    this.ticketsDone = false
    this.closed = false
    this.done = new Promise(resolve => { this.finish = resolve })
  }

  /** Counts `promise` as in-flight work of this submit until it settles. */
  track (promise) {
    const entry = promise.then(() => {}, () => {})
    this.pending.add(entry)
    entry.then(() => this.pending.delete(entry))
    return promise
  }

  /**
   * Resolves once nothing of this submit is in flight. Every tracked storage call counts one
   * macrotask beyond its settlement, and the Engine reacts to a settled call through microtasks
   * only, so by the time the set is empty after a macrotask no hook can still be about to start.
   */
  async settle () {
    for (;;) {
      while (this.pending.size > 0) await Promise.allSettled([...this.pending])
      await nextMacrotask()
      if (this.pending.size === 0) return
    }
  }

  /**
   * Takes this submit's place in the admission order of every sink that can receive its
   * changes, unless one was already put there for it (see `orderAdmittersFirst`). Runs
   * synchronously the moment the submit resolves: a change the host makes after that lands
   * after this submit's group, however long the group takes to assemble.
   */
  reserveTickets (sinks) {
    for (const sink of sinks) if (!this.tickets.has(sink)) this.tickets.set(sink, sink.reserve())
  }

  /** The other open submits that started admitting an outpoint this one removes. */
  admittersOfRemovals () {
    const removed = new Set(this.entries.filter(e => e.change.op === 'remove').map(e => outpointKey(e.change)))
    if (removed.size === 0) return []
    return [...openScopes].filter(other => other !== this && [...removed].some(key => other.admitting.has(key)))
  }

  /**
   * A client can spend an output as soon as the Engine stored it, before the submit that
   * admits it has resolved; the spend's group must still land after that admission. Every
   * such admitter's place is put right before this one's (a place is reserved for it there
   * when it has none yet). No waiting: the order does it. A sink that keeps no order (one
   * without `reserve`, e.g. a recorder in tests) gets the same guarantee by waiting for the
   * admitters to be done.
   */
  async orderAdmittersFirst () {
    const admitters = this.admittersOfRemovals()
    for (const other of admitters) {
      if (other.ticketsDone) continue
      for (const [sink, mine] of this.tickets) {
        other.tickets.set(sink, sink.orderBefore(other.tickets.get(sink) ?? null, mine))
      }
    }
    if (!this.entries.every(e => typeof e.sink.reserve === 'function')) await Promise.all(admitters.map(other => other.done))
  }

  /**
   * Commits the staged changes as one group per sink (one group when every service shares a
   * sink), each at this submit's place in that sink's order. The places it does not use are
   * given up when the submit's scope ends (`releaseTickets`, in `publish`).
   */
  async commit () {
    await this.orderAdmittersFirst()
    for (const [sink, changes] of groupBySink(this.entries)) {
      const ticket = this.tickets.get(sink) ?? null
      this.tickets.delete(sink)
      await sink.commit(normalizeGroup(changes), ticket)
    }
  }

  /** Gives up every place not used (a failed submit, a group with nothing for a sink). */
  releaseTickets () {
    this.ticketsDone = true
    for (const [sink, ticket] of this.tickets) sink.cancel(ticket)
    this.tickets.clear()
  }
}

/** The distinct sinks of the live services registered on `engine` that keep an order. */
function orderedSinks (engine) {
  const sinks = new Set()
  for (const info of wrappedServices(engine)) if (typeof info.sink.reserve === 'function') sinks.add(info.sink)
  return sinks
}

function activeScope () {
  const scope = currentSubmit.getStore()
  return scope !== undefined && !scope.closed ? scope : null
}

function groupBySink (entries) {
  const bySink = new Map()
  for (const { sink, change } of entries) {
    if (!bySink.has(sink)) bySink.set(sink, [])
    bySink.get(sink).push(change)
  }
  return bySink
}

/**
 * One row change per (service, outpoint) removal, whichever topics reported it (a spend is
 * reported once per topic holding the outpoint), keeping the strongest reason: spent (with its
 * evidence) over evicted over not-retained. Removals come first, then admissions; both in a
 * fixed order so the group does not depend on the Engine's hook interleaving.
 */
function normalizeGroup (changes) {
  const removes = new Map()
  const admits = new Map()
  for (const c of changes) {
    if (c.op === 'remove') {
      const key = `${c.service}\u0000${outpointKey(c)}`
      const seen = removes.get(key)
      if (seen === undefined || REMOVE_RANK[c.reason] > REMOVE_RANK[seen.reason]) removes.set(key, c)
    } else {
      admits.set(`${c.service}\u0000${outpointKey(c)}\u0000${c.topic}`, c)
    }
  }
  const byOutpoint = (a, b) => cmp(a.service, b.service) || cmp(a.txid, b.txid) || a.outputIndex - b.outputIndex
  return [
    ...[...removes.values()].sort(byOutpoint),
    ...[...admits.values()].sort((a, b) => byOutpoint(a, b) || cmp(a.topic, b.topic))
  ]
}

function cmp (a, b) {
  return a < b ? -1 : a > b ? 1 : 0
}

function outpointKey (o) {
  return `${o.txid}.${o.outputIndex}`
}

/**
 * Commits changes that promise no atomicity between them (a starting state, evidence refreshes):
 * a sink that can split them into groups fitting the provider's limits does (LiveLookup does);
 * any other sink gets them as one group.
 */
function commitDivisible (sink, changes) {
  return typeof sink.commitDivisible === 'function' ? sink.commitDivisible(changes) : sink.commit(changes)
}

/** Stages a change in the running submit, or commits it as its own group when there is none. */
async function stage (scope, sink, change) {
  if (scope !== null && !scope.closed) {
    scope.entries.push({ sink, change })
    return
  }
  await sink.commit(normalizeGroup([change]))
}

// ---------------------------------------------------------------------------------------------
// Payload decoding (through bytes and hex only: objects from @bsv/sdk 1.x are never instanceof'd)
// ---------------------------------------------------------------------------------------------

function toByteArray (bytes, what) {
  if (Array.isArray(bytes)) return bytes
  if (bytes instanceof Uint8Array) return Array.from(bytes)
  throw new TypeError(`${what} must be a number[] or Uint8Array`)
}

function scriptHex (script) {
  if (typeof script === 'string') return script
  if (Buffer.isBuffer(script)) return script.toString('hex')
  if (script !== null && typeof script === 'object' && typeof script.toHex === 'function') return script.toHex()
  throw new TypeError('expected a Script object or hex')
}

/** The payload's bytes as number[] (what companions and whole-tx inner services get) and as a Buffer. */
function payloadBytes (bytes, what) {
  if (Array.isArray(bytes)) return { array: bytes, buffer: Buffer.from(bytes) }
  if (bytes instanceof Uint8Array) return { array: Array.from(bytes), buffer: Buffer.from(bytes) }
  throw new TypeError(`${what} must be a number[] or Uint8Array`)
}

/**
 * Everything the wrapper needs about an admitted output, from a whole-tx admission payload.
 * Only the subject transaction is read (src/bitcoin/beef.rs), not the Atomic BEEF's ancestry.
 */
function decodeAdmission (payload) {
  if (payload === null || typeof payload !== 'object') throw new TypeError('admission payload must be an object')
  if (payload.mode !== 'whole-tx') {
    throw new Error(`live-wrapped lookup services need whole-tx admission payloads, got ${String(payload.mode)}`)
  }
  const { array, buffer } = payloadBytes(payload.atomicBEEF, 'atomicBEEF')
  const tx = subjectOfAtomicBeef(buffer)
  const output = tx.outputs[payload.outputIndex]
  if (output === undefined) throw new Error(`admitted output index ${payload.outputIndex} is out of range`)
  return {
    txid: tx.txid,
    outputIndex: payload.outputIndex,
    topic: payload.topic,
    satoshis: output.satoshis,
    lockingScript: output.lockingScript.toString('hex'),
    atomicBEEF: array,
    beefBytes: buffer,
    offChainValues: payload.offChainValues
  }
}

/** Everything about a spend, from a whole-tx spend payload (the input index is found in the tx). */
function decodeSpend (payload) {
  if (payload === null || typeof payload !== 'object') throw new TypeError('spend payload must be an object')
  const base = { txid: payload.txid, outputIndex: payload.outputIndex, topic: payload.topic, offChainValues: payload.offChainValues }
  if (payload.mode !== 'whole-tx') {
    // A host calling us directly in another mode: keep what it gave; evidence needs the BEEF.
    return { ...base, spendingTxid: payload.spendingTxid, spendingAtomicBEEF: undefined, input: undefined, inputIndex: payload.inputIndex, given: payload }
  }
  const { array, buffer } = payloadBytes(payload.spendingAtomicBEEF, 'spendingAtomicBEEF')
  const tx = subjectOfAtomicBeef(buffer)
  const inputIndex = tx.inputs.findIndex(i => i.sourceTXID === payload.txid && i.sourceOutputIndex === payload.outputIndex)
  if (inputIndex < 0) throw new Error(`spending transaction ${tx.txid} does not spend ${payload.txid}.${payload.outputIndex}`)
  return { ...base, spendingTxid: tx.txid, spendingAtomicBEEF: array, beefBytes: buffer, input: tx.inputs[inputIndex], inputIndex }
}

// ---------------------------------------------------------------------------------------------
// Forwarding to the inner service in its own mode
// ---------------------------------------------------------------------------------------------

let hostSdkCache = null
/**
 * The @bsv/sdk the host's @bsv/overlay uses (0.4.6 nests a 1.x copy). Script objects handed to
 * an inner service are built from it, so the inner service sees the same classes as unwrapped.
 */
function hostSdk () {
  if (hostSdkCache !== null) return hostSdkCache
  try {
    const overlayMain = require.resolve('@bsv/overlay')
    hostSdkCache = require(require.resolve('@bsv/sdk', { paths: [path.dirname(overlayMain)] }))
  } catch (_) {
    hostSdkCache = require('@bsv/sdk')
  }
  return hostSdkCache
}

/** Admission payload in the inner service's mode; null when the Engine would not call it. */
function innerAdmissionPayload (inner, a) {
  if (inner.admissionMode === 'locking-script') {
    // Mirrors the Engine: an output without numeric satoshis is not announced in this mode.
    if (typeof a.satoshis !== 'number') return null
    return {
      mode: 'locking-script',
      txid: a.txid,
      outputIndex: a.outputIndex,
      lockingScript: hostSdk().LockingScript.fromHex(a.lockingScript),
      satoshis: a.satoshis,
      topic: a.topic,
      offChainValues: a.offChainValues
    }
  }
  // The Engine treats any other declared mode as whole-tx; so do we.
  return { mode: 'whole-tx', atomicBEEF: a.atomicBEEF.slice(), outputIndex: a.outputIndex, topic: a.topic, offChainValues: a.offChainValues }
}

/** Spend payload in the inner service's mode (the Engine treats an unknown mode as 'none'). */
function innerSpendPayload (inner, s) {
  const mode = inner.spendNotificationMode
  if (mode === 'txid') {
    return { mode: 'txid', spendingTxid: need(s.spendingTxid, 'spendingTxid'), txid: s.txid, outputIndex: s.outputIndex, topic: s.topic }
  }
  if (mode === 'script') {
    // Unlike the Engine (which never reports a spend at input 0 in this mode), the input index
    // is found in the spending transaction and every spend is reported.
    if (s.input === undefined && s.given?.mode === 'script') return s.given
    const input = need(s.input, 'the spending input')
    return {
      mode: 'script',
      spendingTxid: s.spendingTxid,
      inputIndex: s.inputIndex,
      sequenceNumber: input.sequence ?? SEQUENCE_FINAL,
      unlockingScript: hostSdk().UnlockingScript.fromHex(scriptHex(need(input.unlockingScript, 'the unlocking script'))),
      txid: s.txid,
      outputIndex: s.outputIndex,
      topic: s.topic,
      offChainValues: s.offChainValues
    }
  }
  if (mode === 'whole-tx') {
    return {
      mode: 'whole-tx',
      spendingAtomicBEEF: need(s.spendingAtomicBEEF, 'spendingAtomicBEEF').slice(),
      txid: s.txid,
      outputIndex: s.outputIndex,
      topic: s.topic,
      offChainValues: s.offChainValues
    }
  }
  return { mode: 'none', txid: s.txid, outputIndex: s.outputIndex, topic: s.topic }
}

function need (value, what) {
  if (value === undefined || value === null) throw new Error(`cannot derive ${what} for the inner lookup service from this payload`)
  return value
}

// ---------------------------------------------------------------------------------------------
// Companion results
// ---------------------------------------------------------------------------------------------

function isPlainObject (v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Uint8Array)
}

/**
 * `{schema, bytes}` with bytes as a Uint8Array passes through; any other value is a BRC-24 JSON
 * context and is carried under the legacy schema of BRC-192 (UTF-8 of its JSON text).
 */
function normalizeContext (context) {
  if (context === undefined || context === null) return null
  if (isPlainObject(context) && Object.keys(context).length === 2 &&
      typeof context.schema === 'string' && context.bytes instanceof Uint8Array) {
    return { schema: context.schema, bytes: Buffer.from(context.bytes) }
  }
  const json = JSON.stringify(context)
  if (typeof json !== 'string') throw new TypeError('companion context is not JSON-serializable')
  return { schema: LEGACY_CONTEXT_SCHEMA, bytes: Buffer.from(json, 'utf8') }
}

/** Validates what companion.index returned; null means "not in the collection". */
function normalizeIndexed (result) {
  if (result === null || result === undefined) return null
  if (!isPlainObject(result)) throw new TypeError('companion.index must return {attributes, context?, expiresAt?} or null')
  if (!isPlainObject(result.attributes)) throw new TypeError('companion.index: attributes must be a plain object')
  let expiresAt = null
  if (result.expiresAt !== undefined && result.expiresAt !== null) {
    // BRC-192 §2: times are whole Unix seconds.
    if (!Number.isSafeInteger(result.expiresAt) || result.expiresAt < 0) {
      throw new TypeError('companion.index: expiresAt must be whole Unix seconds (a non-negative safe integer)')
    }
    expiresAt = result.expiresAt
  }
  return { attributes: result.attributes, context: normalizeContext(result.context), expiresAt }
}

async function indexOutput (service, companion, output) {
  const indexed = normalizeIndexed(await companion.index({
    txid: output.txid,
    outputIndex: output.outputIndex,
    topic: output.topic,
    satoshis: output.satoshis,
    lockingScript: output.lockingScript,
    beef: output.atomicBEEF.slice(),
    offChainValues: output.offChainValues
  }))
  if (indexed === null) return null
  return {
    op: 'admit',
    service,
    txid: output.txid,
    outputIndex: output.outputIndex,
    topic: output.topic,
    satoshis: output.satoshis,
    lockingScript: output.lockingScript,
    beef: output.beefBytes ?? Buffer.from(output.atomicBEEF),
    attributes: indexed.attributes,
    context: indexed.context,
    expiresAt: indexed.expiresAt
  }
}

function removeChange (service, txid, outputIndex, reason, spend) {
  return { op: 'remove', service, txid, outputIndex, reason, spend }
}

// ---------------------------------------------------------------------------------------------
// wrapLookupService
// ---------------------------------------------------------------------------------------------

function checkSink (sink) {
  if (sink === null || typeof sink !== 'object' || typeof sink.commit !== 'function') {
    throw new TypeError('sink must be an object with commit(changes) -> Promise')
  }
}

/**
 * Runs a hook body and counts it as in-flight work of the submit it belongs to. The scope is
 * read synchronously at the call, so it is the submit whose async context invoked the hook.
 */
function runHook (body) {
  const scope = activeScope()
  const promise = body(scope)
  if (scope !== null) scope.track(promise)
  return promise
}

/** Awaits `work`, then `after`, then rethrows an error of `work`: `after` always happens. */
async function thenAlways (work, after) {
  let failure
  let failed = false
  try { await work() } catch (e) { failure = e; failed = true }
  await after()
  if (failed) throw failure
}

/**
 * Wraps a LookupService so the live index learns of every admission and removal.
 *
 * Error policy: if companion.index throws (or returns something invalid), the admission hook
 * rejects before the inner service hears of the output, exactly as if the inner service had
 * failed; the Engine then rejects the submit and attachEngine commits nothing for it (its
 * removals wait for a retry of the same transaction, see carryRemovals). Errors of
 * the inner service are rethrown to the Engine unchanged (it propagates admission errors and
 * logs spend errors); a spend or non-retention is staged even when the inner service fails on
 * it, because it happened in Engine storage regardless. An eviction is staged only when the
 * inner service accepted it: the host asked for it, and a refused eviction leaves the output
 * listed by Engine.lookup, so the feed keeps it too.
 */
function wrapLookupService (name, inner, companion, sink) {
  if (typeof name !== 'string' || name === '') throw new TypeError('name must be a non-empty string')
  if (inner === null || typeof inner !== 'object' || typeof inner.outputAdmittedByTopic !== 'function' || typeof inner.lookup !== 'function') {
    throw new TypeError('inner must be a LookupService (outputAdmittedByTopic, lookup, ...)')
  }
  if (companion === null || typeof companion !== 'object' || typeof companion.index !== 'function') {
    throw new TypeError('companion must have index(output)')
  }
  checkSink(sink)
  // Optional: the topics the collection draws from. The Engine reports every topic's outputs to
  // every service; without this list, spends in unrelated topics become (no-op) removals.
  const topics = Array.isArray(companion.topics) ? new Set(companion.topics) : null
  const collects = (topic) => topics === null || topics.has(topic)

  const wrapped = {
    admissionMode: 'whole-tx',
    spendNotificationMode: 'whole-tx',

    outputAdmittedByTopic (payload) {
      return runHook(async (scope) => {
        const output = decodeAdmission(payload)
        const relevant = collects(output.topic)
        if (relevant && scope !== null) scope.admitting.add(outpointKey(output))
        const change = relevant ? await indexOutput(name, companion, output) : null
        const forwarded = innerAdmissionPayload(inner, output)
        if (forwarded !== null) await inner.outputAdmittedByTopic(forwarded)
        if (change !== null) await stage(scope, sink, change)
      })
    },

    outputSpent (payload) {
      return runHook(async (scope) => {
        const spend = decodeSpend(payload)
        const evidence = spend.spendingAtomicBEEF !== undefined
          ? { spendingTxid: spend.spendingTxid, beef: spend.beefBytes }
          : null
        await thenAlways(
          async () => { if (typeof inner.outputSpent === 'function') await inner.outputSpent(innerSpendPayload(inner, spend)) },
          () => collects(spend.topic) ? stage(scope, sink, removeChange(name, spend.txid, spend.outputIndex, 'spent', evidence)) : undefined)
      })
    },

    outputNoLongerRetainedInHistory (txid, outputIndex, topic) {
      return runHook((scope) => thenAlways(
        async () => { if (typeof inner.outputNoLongerRetainedInHistory === 'function') await inner.outputNoLongerRetainedInHistory(txid, outputIndex, topic) },
        () => collects(topic) ? stage(scope, sink, removeChange(name, txid, outputIndex, 'not-retained', null)) : undefined))
    },

    // An eviction is the host's act, not the Engine's: when the inner service refuses it, the
    // output stays in what Engine.lookup answers, so the feed must not withdraw it either.
    outputEvicted (txid, outputIndex) {
      return runHook(async (scope) => {
        if (typeof inner.outputEvicted === 'function') await inner.outputEvicted(txid, outputIndex)
        // Engine storage keeps an evicted output: a sink that reconciles with it must know.
        if (typeof sink.evicted === 'function') await sink.evicted(name, txid, outputIndex)
        await stage(scope, sink, removeChange(name, txid, outputIndex, 'evicted', null))
      })
    },

    lookup (question) { return inner.lookup(question) },
    getDocumentation () { return inner.getDocumentation() },
    getMetaData () { return inner.getMetaData() }
  }
  Object.defineProperty(wrapped, LIVE_SERVICE, { value: { name, inner, companion, sink } })
  Object.defineProperty(wrapped, TRACKED, { value: true }) // its hooks track themselves
  return wrapped
}

/** The {name, inner, companion, sink} behind a wrapped service, or null. */
function liveServiceInfo (service) {
  return (service !== null && typeof service === 'object' && service[LIVE_SERVICE]) || null
}

// ---------------------------------------------------------------------------------------------
// attachEngine
// ---------------------------------------------------------------------------------------------

const engineStates = new WeakMap()

/**
 * Makes every call of `method` on `target` made inside a submit count as in-flight work of it.
 * `extraTurn` adds a macrotask after settlement (for storage calls, see SubmitScope.settle).
 * Returns a function restoring the original own property.
 */
function instrument (target, method, extraTurn) {
  const original = target[method]
  if (typeof original !== 'function') return () => {}
  const hadOwn = Object.prototype.hasOwnProperty.call(target, method)
  const instrumented = function (...args) {
    const scope = activeScope()
    const result = original.apply(this, args)
    if (scope !== null && result !== null && typeof result === 'object' && typeof result.then === 'function') {
      const settled = Promise.resolve(result)
      scope.track(extraTurn ? settled.then(nextMacrotask, nextMacrotask) : settled)
    }
    return result
  }
  target[method] = instrumented
  return () => {
    if (target[method] !== instrumented) return
    if (hadOwn) target[method] = original
    else delete target[method]
  }
}

/**
 * Brackets engine.submit so all changes one submit causes (spends of its inputs, outputs no
 * longer retained, admitted outputs, on every topic and every wrapped service) commit as ONE
 * group after the Engine is done, including the hooks it does not await. A submit that rejects
 * commits nothing and rejects with the Engine's error; a sink failure rejects the submit.
 *
 * Also instruments engine.storage and the hooks of unwrapped services registered now, so that
 * un-awaited Engine work (which may call a wrapped hook only after them) is waited for.
 * Returns {detach()}; attaching twice returns the existing handle.
 */
function attachEngine (engine, sink) {
  if (engine === null || typeof engine !== 'object' || typeof engine.submit !== 'function') {
    throw new TypeError('engine must be an @bsv/overlay Engine')
  }
  if (sink !== undefined) checkSink(sink)
  const existing = engineStates.get(engine)
  if (existing !== undefined) return existing.handle

  for (const [serviceName, service] of Object.entries(engine.lookupServices ?? {})) {
    const info = liveServiceInfo(service)
    if (info !== null && sink !== undefined && info.sink !== sink) {
      throw new Error(`lookup service ${serviceName} commits to another sink: one submit could not commit as one group`)
    }
  }

  const restores = []
  for (const method of STORAGE_METHODS) restores.push(instrument(engine.storage, method, true))
  for (const service of Object.values(engine.lookupServices ?? {})) {
    if (service === null || typeof service !== 'object' || service[TRACKED] === true) continue
    try {
      for (const hook of HOOK_NAMES) restores.push(instrument(service, hook, false))
    } catch (_) {
      // A frozen foreign service cannot be instrumented; its hooks simply are not waited for.
    }
  }

  const state = { engine, active: new Set(), barrier: null, handle: null, carried: new Map() }
  const originalSubmit = engine.submit
  const hadOwnSubmit = Object.prototype.hasOwnProperty.call(engine, 'submit')
  const submit = function submitAsOneGroup (...args) {
    return runSubmit(state, args[0], () => originalSubmit.apply(engine, args))
  }
  engine.submit = submit
  const restoreProof = bracketProofUpdates(engine, state, sink)
  state.handle = {
    detach () {
      if (engine.submit === submit) {
        if (hadOwnSubmit) engine.submit = originalSubmit
        else delete engine.submit
      }
      restoreProof()
      for (const restore of restores.reverse()) restore()
      engineStates.delete(engine)
    }
  }
  engineStates.set(engine, state)
  return state.handle
}

/**
 * One bracketed submit. It resolves as soon as the Engine's own call does: the group is
 * published after its own flush, off the submit's promise (`publish`), so the store's write
 * and fsync overlap the host's next work instead of adding to every submit. A crash between
 * the two leaves Engine storage ahead of the live store; `reconcile` at the next attach
 * commits exactly the difference, so nothing is lost and nothing is served twice.
 * A rejected submit still settles first (its removals wait for a retry, see carryRemovals).
 */
async function runSubmit (state, taggedBEEF, call) {
  while (state.barrier !== null) await state.barrier // a backfill is reading Engine storage
  const scope = new SubmitScope()
  state.active.add(scope)
  openScopes.add(scope)
  let result
  try {
    result = await currentSubmit.run(scope, call)
  } catch (failure) {
    try {
      await scope.settle()
      scope.closed = true // from here on a stray hook commits its own group
      carryRemovals(state, submittedTxid(taggedBEEF), scope)
    } finally {
      scope.releaseTickets()
      finishScope(state, scope)
    }
    throw failure
  }
  // The submit's place in the admission order is taken now, before the host's code after
  // `await engine.submit(...)` can make another change.
  scope.reserveTickets(orderedSinks(state.engine))
  publish(state, scope, taggedBEEF)
  // An earlier submit still waiting for the macrotask that lets its group be assembled (see
  // SubmitScope.settle) would wait for the end of a whole burst when the host submits again
  // at once and its storage answers without I/O (SQLite): one turn of the event loop first.
  if (state.active.size > 1) await nextMacrotask()
  return result
}

/**
 * Commits a successful submit's group once nothing of the submit is in flight any more, and
 * only then ends its scope (submits spending its outputs, pauses and `whenPublished` wait for
 * that). A failure cannot reach the submit, which has resolved: it is logged, and the next
 * attach reconciles the live store with Engine storage.
 */
function publish (state, scope, taggedBEEF) {
  const run = async () => {
    await scope.settle()
    scope.closed = true // from here on a stray hook commits its own group
    // Parsed only when a failed submit's removals are waiting.
    const txid = state.carried.size > 0 ? submittedTxid(taggedBEEF) : null
    const carried = txid === null ? undefined : state.carried.get(txid)
    if (carried !== undefined) {
      scope.entries.unshift(...carried)
      state.carried.delete(txid)
    }
    await scope.commit()
  }
  run().catch((err) => {
    for (const sink of new Set(scope.entries.map(e => e.sink))) {
      try {
        if (typeof sink.log === 'function') sink.log({ op: 'commit', action: 'failed', error: String(err && err.message) })
      } catch (_) {
        // A throwing log hook must not turn a logged failure into an unhandled rejection.
      }
    }
  }).finally(() => {
    scope.releaseTickets()
    finishScope(state, scope)
  })
}

function finishScope (state, scope) {
  openScopes.delete(scope)
  state.active.delete(scope)
  scope.finish()
}

/**
 * Resolves once every submit of `engine` that has started has settled and its group is
 * published (or its failure logged). `LiveLookup.close` waits for it; tests that read right
 * after a submit use it too (`live.published()`).
 */
async function whenPublished (engine) {
  const state = engineStates.get(engine)
  if (state === undefined) return
  while (state.active.size > 0) await Promise.all([...state.active].map(scope => scope.done))
}

function submittedTxid (taggedBEEF) {
  try {
    return Transaction.fromBEEF(toByteArray(taggedBEEF.beef, 'beef')).id('hex')
  } catch (_) {
    return null // the Engine rejected it before any mutation
  }
}

/**
 * A rejected submit commits nothing, but the Engine has no rollback: the spends and deletions it
 * already made are not reported again when the same transaction is submitted anew (a deleted
 * input is no longer found). Its removals are therefore kept, bounded, and join the group of the
 * next successful submit of the same transaction, which then is the whole transaction's group.
 * Admissions are not kept: a retry inserts and announces the outputs again.
 */
function carryRemovals (state, txid, scope) {
  if (txid === null) return
  const removals = scope.entries.filter(e => e.change.op === 'remove')
  if (removals.length === 0) return
  const earlier = state.carried.get(txid) ?? []
  state.carried.delete(txid) // re-inserted last: the map's order is the eviction order
  state.carried.set(txid, [...earlier, ...removals])
  while (state.carried.size > MAX_CARRIED_SUBMITS) state.carried.delete(state.carried.keys().next().value)
}

// ---------------------------------------------------------------------------------------------
// backfill
// ---------------------------------------------------------------------------------------------

/**
 * Indexes the unspent outputs already in Engine storage for `topics` and commits them as one
 * starting-state group, in the Engine's admission order (score). Meant for the first time a
 * service is wrapped. If the engine is attached, submits wait while it reads and commits, so no
 * submit can spend an output between its read and the group's commit.
 * @returns {Promise<{examined: number, admitted: number}>}
 */
async function backfill (engine, name, topics, companion, sink) {
  checkReconcileArgs(name, topics, companion, sink)
  const release = await pauseSubmits(engineStates.get(engine))
  try {
    const { examined, changes } = await collectBackfill(engine, name, topics, companion)
    if (changes.length > 0) await commitDivisible(sink, changes)
    return { examined, admitted: changes.length }
  } finally {
    release()
  }
}

function checkReconcileArgs (name, topics, companion, sink) {
  if (typeof name !== 'string' || name === '') throw new TypeError('name must be a non-empty string')
  if (!Array.isArray(topics)) throw new TypeError('topics must be an array of topic names')
  if (companion === null || typeof companion !== 'object' || typeof companion.index !== 'function') {
    throw new TypeError('companion must have index(output)')
  }
  checkSink(sink)
}

/**
 * Brings a service's live collection in line with Engine storage, committing only what
 * differs: unspent outputs of `topics` the store lacks are indexed and admitted, members the
 * Engine no longer holds unspent are removed. This is what makes a crash between a submit's
 * resolution and its group's publication harmless (docs/engine-notes.md): the transaction is
 * in Engine storage, so its group is committed here, once; a group that was already durable
 * leaves nothing to reconcile. Also catches up with anything the Engine did while the live
 * layer was not attached. Members present on both sides are left as they are.
 *
 * `members()` resolves with the store's current members of the service ({txid, outputIndex,
 * topic}); `skip(key)` leaves out outpoints `txid.outputIndex` the host evicted (the Engine
 * keeps their outputs, the wrapped service does not); an output whose `expiresAt` is at or
 * before `nowSeconds` is not admitted (its withdraw already happened, or would at once).
 * A removed member spent by a transaction admitted here is withdrawn as `spent`, with that
 * transaction as evidence, in the same group as the admission; one the Engine keeps as spent
 * is `spent` without evidence; otherwise it is `not-retained`. The changes are committed as
 * divisible groups (one, unless the provider's limits split them), with submits paused.
 * @returns {Promise<{examined: number, admitted: number, removed: number, refused: number}>}
 */
async function reconcile (engine, name, topics, companion, sink, { members, skip = () => false, nowSeconds = null }) {
  checkReconcileArgs(name, topics, companion, sink)
  const release = await pauseSubmits(engineStates.get(engine))
  try {
    const held = await members()
    const r = await collectReconcile(engine, name, topics, companion, { held, skip, nowSeconds })
    const refused = r.changes.length > 0 ? await commitEachIfRefused(sink, r.changes) : 0
    return { examined: r.examined, admitted: r.admitted, removed: r.removed, refused }
  } finally {
    release()
  }
}

/**
 * Commits `changes` as divisible groups. If the store refuses them as invalid (a companion
 * result beyond the store's bounds, say), each change is committed on its own instead and the
 * refused ones are left out and logged: one bad row must neither keep the rest out of the
 * feed nor stop the host from attaching. Resolves with how many were refused.
 */
async function commitEachIfRefused (sink, changes) {
  try {
    await commitDivisible(sink, changes)
    return 0
  } catch (err) {
    if (!err || err.code !== 'invalid') throw err
  }
  let refused = 0
  for (const change of changes) {
    try {
      await commitDivisible(sink, [change])
    } catch (err) {
      if (!err || err.code !== 'invalid') throw err
      refused++
      if (typeof sink.log === 'function') {
        sink.log({ op: 'reconcile', action: 'refused', service: change.service, outpoint: `${change.txid}.${change.outputIndex}`, reason: String(err.message) })
      }
    }
  }
  return refused
}

/** Engine storage's unspent outputs of `topics`, in admission (score) order. */
async function engineOutputs (engine, topics) {
  const found = []
  for (const topic of topics) {
    const outputs = await engine.storage.findUTXOsForTopic(topic, undefined, undefined, true)
    for (const o of outputs) found.push({ o, topic })
  }
  found.sort((a, b) => Number(a.o.score ?? 0) - Number(b.o.score ?? 0))
  return found
}

/** See `reconcile`; `held` are the store's current members. Reads Engine storage only. */
async function collectReconcile (engine, name, topics, companion, { held = [], skip = () => false, nowSeconds = null } = {}) {
  const found = await engineOutputs(engine, topics)
  const present = new Map(held.map(m => [outpointKey(m), m]))
  const unspent = new Set()
  const admits = []
  for (const { o, topic } of found) {
    const key = `${o.txid}.${Number(o.outputIndex)}`
    if (unspent.has(key)) continue // the same outpoint in another topic: one row per service
    unspent.add(key)
    if (present.has(key) || skip(key)) continue
    const change = await indexOutput(name, companion, await storedOutput(engine, o, topic))
    if (change === null) continue
    if (nowSeconds !== null && change.expiresAt !== null && change.expiresAt <= nowSeconds) continue
    admits.push(change)
  }
  const gone = [...present.values()].filter(m => !unspent.has(outpointKey(m)))
  // Members spent by a transaction admitted here: withdrawn with it, as its submit would have.
  const spentBy = new Map()
  if (gone.length > 0) {
    for (const a of admits) {
      for (const input of subjectOfAtomicBeef(a.beef).inputs) spentBy.set(`${input.sourceTXID}.${input.sourceOutputIndex}`, a)
    }
  }
  const explained = new Map()
  const unexplained = []
  for (const m of gone) {
    const spender = spentBy.get(outpointKey(m))
    if (spender !== undefined) {
      const list = explained.get(spender) ?? []
      list.push(removeChange(name, m.txid, m.outputIndex, 'spent', { spendingTxid: spender.txid, beef: spender.beef }))
      explained.set(spender, list)
      continue
    }
    const kept = await engine.storage.findOutput(m.txid, m.outputIndex, m.topic, true, false)
    unexplained.push(removeChange(name, m.txid, m.outputIndex, kept ? 'spent' : 'not-retained', null))
  }
  const changes = [...unexplained]
  for (const a of admits) changes.push(...(explained.get(a) ?? []), a)
  return { examined: found.length, changes, admitted: admits.length, removed: gone.length }
}

async function storedOutput (engine, o, topic) {
  let beef = o.beef
  if (beef === undefined || beef === null) {
    // A Storage implementation whose findUTXOsForTopic ignores includeBEEF.
    beef = (await engine.storage.findOutput(o.txid, o.outputIndex, topic, undefined, true))?.beef
  }
  if (beef === undefined || beef === null) throw new Error(`Engine storage has no BEEF for ${o.txid}.${o.outputIndex}`)
  const tx = Transaction.fromBEEF(toByteArray(beef, 'stored BEEF'), o.txid)
  return {
    txid: o.txid,
    outputIndex: Number(o.outputIndex),
    topic,
    satoshis: Number(o.satoshis),
    lockingScript: Buffer.from(o.outputScript).toString('hex'),
    atomicBEEF: tx.toAtomicBEEF(),
    offChainValues: undefined
  }
}

// ---------------------------------------------------------------------------------------------
// Proof updates (BRC-193 §3: clients learn when the evidence under the collection changes)
// ---------------------------------------------------------------------------------------------

// Bounds the descendant walk of one proof update (each step is one storage query).
const MAX_PROOF_LINEAGE_TXS = 10000
// Set while a chain event (a reorganization) is handled: its proof updates join its group.
const currentChainEvent = new AsyncLocalStorage()

/**
 * Replaces engine.handleNewMerkleProof so that each proof update commits ONE group per sink,
 * refreshing the evidence of every member whose transaction or ancestor gains the proof.
 *
 * Which members: the transactions the Engine itself rewrites (Engine.updateMerkleProof): the
 * proven transaction's outputs and, through consumedBy, their descendants; read before the
 * Engine runs. What evidence: the member's BEEF as stored before the update with the proof set
 * on the proven transaction (docs/chain-events.md). The Engine's rewritten BEEF is not used:
 * @bsv/overlay 0.4.6 also overwrites the proofs of already-proven ancestors of descendants with
 * the new proof, which makes their BEEF unverifiable. The proof is checked against the Engine's
 * chain tracker first; a proof that does not verify refreshes nothing (and is logged).
 * A refresh of a non-member is no change in the store, so a proof nobody in the collection
 * cites commits no group. Submits wait meanwhile, so an admission cannot capture a BEEF
 * half-way through the update. Returns the restore function.
 */
function bracketProofUpdates (engine, state, sink) {
  const original = engine.handleNewMerkleProof
  if (typeof original !== 'function') return () => {}
  const hadOwn = Object.prototype.hasOwnProperty.call(engine, 'handleNewMerkleProof')
  const bracketed = function proofAsOneGroup (txid, proof, ...rest) {
    const call = () => original.call(engine, txid, proof, ...rest)
    // Inside a reorganization the caller reassesses every member itself, in its own group.
    if (currentChainEvent.getStore() !== undefined) return call()
    return proofUpdate(engine, state, sink, txid, proof, call)
  }
  engine.handleNewMerkleProof = bracketed
  return () => {
    if (engine.handleNewMerkleProof !== bracketed) return
    if (hadOwn) engine.handleNewMerkleProof = original
    else delete engine.handleNewMerkleProof
  }
}

async function proofUpdate (engine, state, sink, txid, proof, call) {
  const release = await pauseSubmits(state)
  try {
    const before = typeof txid === 'string' ? await lineage(engine, txid) : new Map()
    // The Engine's rejection (e.g. no outputs for txid) is the host's answer; what it may have
    // rewritten before failing is still reported, since the refreshed evidence is checked here.
    let failure
    let failed = false
    let result
    try { result = await call() } catch (e) { failure = e; failed = true }
    const merklePath = before.size > 0 ? await checkedProof(engine, txid, proof, sink) : null
    if (merklePath !== null) {
      for (const [target, group] of refreshesFor(engine, before, txid, merklePath, sink)) await commitDivisible(target, group)
    }
    if (failed) throw failure
    return result
  } finally {
    release()
  }
}

/**
 * The proof as an @bsv/sdk MerklePath of this package's SDK, if it proves `txid` and (when the
 * Engine has a chain tracker) its root is valid for its height; otherwise null, logged.
 */
async function checkedProof (engine, txid, proof, sink) {
  const note = (why) => {
    if (typeof sink?.log === 'function') sink.log({ op: 'merkle-proof', txid, action: 'not-refreshed', reason: why })
    return null
  }
  let mp
  try {
    mp = proof instanceof MerklePath ? proof : MerklePath.fromBinary(Array.from(proof.toBinary()))
    mp.computeRoot(txid) // throws unless the path holds txid
  } catch (e) {
    return note(`the proof is not a merkle path for this transaction: ${String(e && e.message)}`)
  }
  const tracker = engine.chainTracker
  if (tracker && typeof tracker.isValidRootForHeight === 'function') {
    let ok = false
    try { ok = await mp.verify(txid, tracker) } catch (_) { ok = false }
    if (!ok) return note(`the proof's root is not valid for height ${mp.blockHeight} in the Engine's chain tracker`)
  }
  return mp
}

/**
 * The transactions whose stored BEEF a proof for `txid` can rewrite: txid itself and, through
 * consumedBy, its descendants. Map txid -> {beef, outputs: [outputIndex]} as stored now.
 */
async function lineage (engine, txid) {
  const seen = new Map()
  const queue = [txid]
  while (queue.length > 0 && seen.size < MAX_PROOF_LINEAGE_TXS) {
    const t = queue.shift()
    if (seen.has(t)) continue
    const outputs = (await engine.storage.findOutputsForTransaction(t, true)) ?? []
    if (outputs.length === 0) continue
    const beef = outputs.find(o => o.beef != null)?.beef ?? null
    const indexes = [...new Set(outputs.map(o => Number(o.outputIndex)))].sort((a, b) => a - b)
    seen.set(t, { beef, outputs: indexes })
    for (const o of outputs) {
      for (const c of o.consumedBy ?? []) if (typeof c?.txid === 'string' && !seen.has(c.txid)) queue.push(c.txid)
    }
  }
  return seen
}

/**
 * Atomic BEEF of `memberTxid` from `beef` with `merklePath` set on the unproven transaction
 * `txid` in its ancestry; null when txid is not there or already proven (nothing changes).
 * Ancestors of the newly proven transaction are pruned (they no longer matter for SPV).
 */
function withProof (beef, memberTxid, txid, merklePath) {
  const tx = Transaction.fromBEEF(toByteArray(beef, 'stored BEEF'), memberTxid)
  const visited = new Set()
  let changed = false
  const walk = (t) => {
    const id = t.id('hex')
    if (visited.has(id)) return
    visited.add(id)
    if (id === txid) {
      if (t.merklePath === undefined) {
        t.merklePath = merklePath
        changed = true
      }
      return
    }
    if (t.merklePath !== undefined) return // proven: its ancestry is not evidence
    for (const input of t.inputs) if (input.sourceTransaction) walk(input.sourceTransaction)
  }
  walk(tx)
  return changed ? Buffer.from(tx.toAtomicBEEF()) : null
}

/** The live services registered on the engine, with their sinks. */
function wrappedServices (engine, sink) {
  const out = []
  for (const service of Object.values(engine.lookupServices ?? {})) {
    const info = liveServiceInfo(service)
    if (info !== null && (sink === undefined || info.sink === sink)) out.push(info)
  }
  return out
}

/** Per sink, the refresh changes (one per wrapped service and outpoint) of a proof update. */
function refreshesFor (engine, before, txid, merklePath, sink) {
  const services = wrappedServices(engine, sink)
  const bySink = new Map()
  for (const [memberTxid, stored] of before) {
    if (stored.beef === null) continue
    let atomic
    try {
      atomic = withProof(stored.beef, memberTxid, txid, merklePath)
    } catch (e) {
      if (typeof sink?.log === 'function') sink.log({ op: 'merkle-proof', txid: memberTxid, action: 'not-refreshed', reason: `stored BEEF unreadable: ${String(e && e.message)}` })
      continue
    }
    if (atomic === null) continue
    for (const info of services) {
      if (!bySink.has(info.sink)) bySink.set(info.sink, [])
      for (const outputIndex of stored.outputs) {
        bySink.get(info.sink).push({ op: 'refresh', service: info.name, txid: memberTxid, outputIndex, beef: atomic })
      }
    }
  }
  for (const changes of bySink.values()) {
    changes.sort((a, b) => cmp(a.service, b.service) || cmp(a.txid, b.txid) || a.outputIndex - b.outputIndex)
  }
  return [...bySink].filter(([, changes]) => changes.length > 0)
}

/** Atomic BEEF (BRC-95) of `txid` from a stored BEEF, as admissions and backfill carry it. */
function atomicFromStored (beef, txid) {
  return Buffer.from(Transaction.fromBEEF(toByteArray(beef, 'stored BEEF'), txid).toAtomicBEEF())
}

/**
 * Runs `fn` while no submit of the attached engine is in flight and new ones wait (a chain
 * event reads Engine storage and commits a group that must not interleave with a submit's).
 * Proof updates the Engine makes inside `fn` join fn's work instead of committing themselves.
 */
async function withSubmitsPaused (engine, fn) {
  const release = await pauseSubmits(engineStates.get(engine))
  try {
    return await currentChainEvent.run(true, fn)
  } finally {
    release()
  }
}

/**
 * The changes a backfill of one service would commit, read from Engine storage: every unspent
 * output of `topics` the companion indexes, except those `skip` names and those already
 * expired at `nowSeconds` (see `reconcile`). The caller must keep submits paused while reading
 * and committing (see withSubmitsPaused).
 */
async function collectBackfill (engine, name, topics, companion, { skip, nowSeconds } = {}) {
  const { examined, changes } = await collectReconcile(engine, name, topics, companion, { skip, nowSeconds })
  return { examined, changes }
}

/** Blocks new submits and waits for running ones; returns the release function. */
async function pauseSubmits (state) {
  if (state === undefined) return () => {}
  while (state.barrier !== null) await state.barrier
  let open
  state.barrier = new Promise(resolve => { open = resolve })
  await Promise.all([...state.active].map(scope => scope.done))
  return () => {
    state.barrier = null
    open()
  }
}

module.exports = {
  LEGACY_CONTEXT_SCHEMA,
  wrapLookupService,
  attachEngine,
  backfill,
  reconcile,
  collectBackfill,
  withSubmitsPaused,
  whenPublished,
  atomicFromStored,
  liveServiceInfo,
  normalizeContext
}
