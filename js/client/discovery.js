'use strict'
// Discovery (issue #51, docs/client.md "Hosts found through SLAP"): `follow(service, query,
// {resolver})` follows every host @bsv/sdk's LookupResolver finds for the service, each as a
// source of the one store (as `sources` does), negotiated one by one (finite.js: live when
// it offers lookup-live-v1, by refresh when `finite` allows it), and asks the resolver
// again every `resolveIntervalMs`. Hosts are found through the SDK itself: the resolver's
// own query of its SLAP trackers (`ls_slap`), each advertisement read with the SDK's
// OverlayAdminTokenTemplate, as LookupResolver reads them; nothing here speaks SLAP.

const { LookupResolver, HTTPSOverlayLookupFacilitator, OverlayAdminTokenTemplate, Transaction } = require('@bsv/sdk')
const { LiveLookupError } = require('./errors')
const { followProvider } = require('./finite')

// The SDK caches a service's hosts for 5 minutes (LookupResolver hostsTtlMs); so does this.
const DEFAULT_RESOLVE_MS = 5 * 60 * 1000

function internals () { return require('./client')._internal }

/**
 * `resolver` as given: a LookupResolver, or a list of SLAP tracker URLs, from which one is
 * made with the SDK's own facilitator over this client's fetch (plain HTTP only with
 * allowInsecureHttp, as the SDK's `local` preset allows it).
 */
function resolverOf (resolver, client) {
  if (!Array.isArray(resolver)) return resolver
  const fetch = client._options.fetch ?? globalThis.fetch
  return new LookupResolver({
    slapTrackers: [...resolver],
    facilitator: new HTTPSOverlayLookupFacilitator(fetch, client._options.allowInsecureHttp === true)
  })
}

// How long one tracker is waited for (the SDK's own bound for SLAP queries).
const TRACKER_WAIT_MS = 5000

/**
 * The SLAP advertisements of `service` the resolver's trackers hold: the resolver's own
 * query of them (`ls_slap`, its facilitator, reputation and aggregation), each output read
 * with OverlayAdminTokenTemplate.decode exactly as LookupResolver's host extraction reads
 * it (protocol SLAP, this service, a domain). Unlike the SDK's host list, the identity key
 * of each advertisement is kept: a host's manifest must be signed by one that advertised it
 * (BRC-194 §1: SHIP/SLAP identity expectations apply).
 */
async function advertisements (resolver, service) {
  const answer = await resolver.query({ service: 'ls_slap', query: { service } }, TRACKER_WAIT_MS)
  const ads = []
  if (!answer || answer.type !== 'output-list' || !Array.isArray(answer.outputs)) return ads
  for (const output of answer.outputs) {
    try {
      const script = Transaction.fromBEEF(output.beef).outputs[output.outputIndex]?.lockingScript
      if (!script) continue
      const ad = OverlayAdminTokenTemplate.decode(script)
      if (ad.protocol !== 'SLAP' || ad.topicOrService !== service || typeof ad.domain !== 'string' || ad.domain.length === 0) continue
      ads.push({ domain: ad.domain, identityKey: ad.identityKey })
    } catch {}
  }
  return ads
}

/**
 * The hosts LookupResolver.query() would ask for `service`, chosen as it chooses them
 * (@bsv/sdk 2.x, overlay-tools/LookupResolver.js): the resolver's host overrides for the
 * service if any, localhost under the `local` preset, otherwise the hosts its SLAP trackers
 * advertise; then its additional hosts. Returns [{domain, identities}], `identities` null
 * for a host named by configuration rather than advertised. (`hostOverrides`,
 * `networkPreset` and `additionalHosts` are private in the SDK's types only.)
 */
async function competentHosts (resolver, service) {
  const hosts = []
  const overrides = resolver.hostOverrides && resolver.hostOverrides[service]
  if (Array.isArray(overrides)) hosts.push(...overrides.map(domain => ({ domain, identities: null })))
  else if (resolver.networkPreset === 'local') hosts.push({ domain: 'http://localhost:8080', identities: null })
  else hosts.push(...(await advertisements(resolver, service)).map(a => ({ domain: a.domain, identities: [a.identityKey] })))
  const extra = resolver.additionalHosts && resolver.additionalHosts[service]
  if (Array.isArray(extra)) hosts.push(...extra.map(domain => ({ domain, identities: null })))
  return hosts
}

/** One entry per base URL; a host advertised by several identities accepts any of them. */
function byBase (hosts, allowHttp) {
  const out = new Map()
  for (const h of hosts) {
    const base = typeof h.domain === 'string' ? baseOf(h.domain, allowHttp) : null
    if (!base) continue
    const seen = out.get(base)
    if (!seen) out.set(base, { base, identities: h.identities ? [...h.identities] : null })
    else if (seen.identities && h.identities) seen.identities.push(...h.identities.filter(i => !seen.identities.includes(i)))
    else seen.identities = null // also named by configuration: not bound to an advertisement
  }
  return out
}

/** A SLAP domain as a base URL (no trailing slash), or null when it cannot be one. */
function baseOf (domain, allowHttp) {
  let u
  try { u = new URL(domain) } catch { return null }
  if (u.protocol !== 'https:' && !(u.protocol === 'http:' && allowHttp)) return null
  if (u.username || u.password || u.search || u.hash) return null
  return (u.origin + u.pathname).replace(/\/+$/, '')
}

async function followDiscovered (client, service, query, opts) {
  const { sleep, CallbackFailure } = internals()
  const { LiveLookupClient } = require('./client')
  const { resolver: given, resolveIntervalMs, onState, ...rest } = opts
  const resolver = resolverOf(given, client)
  const every = resolveIntervalMs ?? DEFAULT_RESOLVE_MS
  const allowHttp = client._options.allowInsecureHttp === true
  // A callback's own error ends every host's follow, as with `sources`.
  const all = new AbortController()
  if (rest.signal.aborted) all.abort()
  else rest.signal.addEventListener('abort', () => all.abort(), { once: true })
  let failure = null
  const fail = (e) => { if (!failure) failure = e; all.abort() }
  const followed = new Map() // base URL -> { ac, ended, removed, done }
  const results = new Map() // base URL -> { source, sourceKey, error }
  const running = []
  const tell = async (s) => {
    if (!onState) return
    try { await onState(s) } catch (e) { fail(e) }
  }

  const start = (host, identities) => {
    const entry = { ac: new AbortController(), ended: false, removed: false }
    all.signal.addEventListener('abort', () => entry.ac.abort(), { once: true })
    // Each host has its own client on this client's store, options and verifier.
    let c
    try {
      // Each host is its own provider: no configured providerIdentity applies to it (its
      // advertisements name who may sign its manifest).
      c = new LiveLookupClient({ ...client._options, baseURL: host, chainTracker: undefined, providerIdentity: undefined })
      c.verifier = client.verifier
    } catch (error) {
      entry.ended = true
      followed.set(host, entry)
      results.set(host, { source: host, sourceKey: null, error })
      running.push(tell({ source: host, sourceKey: null, connection: 'failed', error }))
      return
    }
    const hostState = onState && ((s) => onState(s.connection === 'closed' && entry.removed ? { ...s, reason: 'not-advertised' } : s))
    entry.done = followProvider(c, service, query, { ...rest, onState: hostState, signal: entry.ac.signal, discovered: true, identities }).then(
      (r) => {
        entry.ended = true
        results.set(host, { source: host, sourceKey: r.sourceKey, error: null })
      },
      async (error) => {
        entry.ended = true
        if (!(error instanceof LiveLookupError)) return fail(error)
        // One host failing for good leaves the others running; it is tried again when a
        // later resolution still lists it.
        results.set(host, { source: host, sourceKey: c.sourceKey(service, query), error })
        await tell({ source: host, sourceKey: null, connection: 'failed', error })
      })
    running.push(entry.done)
    followed.set(host, entry)
  }

  let attempt = 0
  while (!all.signal.aborted) {
    let hosts = null
    let error = null
    try {
      hosts = await competentHosts(resolver, service)
    } catch (e) {
      error = e
    }
    const bases = byBase(hosts ?? [], allowHttp)
    if (all.signal.aborted) break
    if (bases.size > 0) {
      attempt = 0
      for (const { base, identities } of bases.values()) {
        const entry = followed.get(base)
        if (!entry || entry.ended) start(base, identities)
      }
      // A host no longer advertised is no longer followed (its rows stay, as it left them).
      for (const [host, entry] of followed) {
        if (!bases.has(host) && !entry.ended && !entry.removed) {
          entry.removed = true
          entry.ac.abort()
        }
      }
      await sleep(every, all.signal)
      continue
    }
    // Nothing found: the trackers may be unreachable (the SDK answers an empty list for
    // that too), so the hosts already followed are kept, and resolution is tried again,
    // with backoff until a first host is found, else at the interval.
    attempt++
    const delay = followed.size > 0 ? every : client._delay(attempt)
    const why = error ? `resolving hosts for ${service} failed: ${error.message}` : `the SLAP trackers list no host for ${service}`
    await tell({ source: null, sourceKey: null, connection: 'retrying', discovery: true, attempt, nextRetryAt: Date.now() + delay, error: new LiveLookupError('unavailable', why, { retryable: true, cause: error ?? undefined }) })
    await sleep(delay, all.signal)
  }
  await Promise.all(running)
  if (failure) throw failure instanceof CallbackFailure ? failure.error : failure
  return { sources: [...results.values()] }
}

module.exports = { followDiscovered, competentHosts, advertisements, resolverOf }
