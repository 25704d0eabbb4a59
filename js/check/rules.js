'use strict'
// What each conformance check requires, in the checker's own words, and where the
// requirement is written. A FAIL line is "<what was seen>; <requirement> (<section>)".

const RULES = {
  'manifest.fetch': ['BRC-194 §1', 'GET {base}/overlay/v1/capabilities answers 200 with a signed {body, signature} manifest of at most 256 KiB'],
  'manifest.signature': ['BRC-194 §1', 'the manifest carries a BRC-77 signature by its own identity, which is also the BRC-104 peer when authenticated'],
  'manifest.base-url': ['BRC-194 §1, §6', 'the manifest baseURL is the canonical form of the base URL clients use'],
  'manifest.profile': ['BRC-194 §1, §2', 'the manifest is current and well formed, and the service offers lookup-live-v1 with the checked authentication, payment none and in-bound parameters'],
  'auth.required': ['BRC-193 §1, §6', 'a BRC-103 service refuses an unauthenticated lookup request with 401 unauthorized'],
  'selection.stale-capability': ['BRC-194 §1', 'a request naming a capability digest the provider did not issue is refused with 409 context-changed'],
  'selection.unknown-profile': ['BRC-194 §1', 'a request selecting a profile the service does not offer is refused with 422 unsupported'],
  'request.framing': ['BRC-193 §2, §8', 'lookup routes take POST with Content-Type application/json and identity Content-Encoding only; anything else is refused (400 invalid, 422 unsupported for an encoding)'],
  'open.strict': ['BRC-193 §2', 'an open that is not a well-formed version-1 Open (not JSON, unknown member, bad requestId, a zero or out-of-range limit, missing limits) is refused with 400 invalid (422 unsupported for another version)'],
  'open.unknown-service': ['BRC-193 §6, BRC-194 §6', 'an open naming a service the provider does not serve is refused with an error (404 not-found), never a session'],
  'read.strict': ['BRC-193 §2', 'a read that is not a well-formed Read (not JSON, missing cursor, unknown member, zero maxBytes, cursor over 1024 bytes) is refused with 400 invalid'],
  'close.strict': ['BRC-193 §2', 'a close that is not a well-formed Close (not JSON, missing session, unknown member) is refused with 400 invalid'],
  'limits.echo': ['BRC-193 §2', 'the batch echoes the effective limits: the componentwise minimum of the request, the advertised provider limits and the profile maxima'],
  'limits.clamp': ['BRC-193 §2', 'limits above the maxima are clamped (to at most 4 MiB, 1024 observations, 25000 ms and the advertised provider limits) and the result is returned, not refused'],
  'limits.respected': ['BRC-193 §2, §8', 'a batch body never exceeds the effective maxBytes and a batch never carries more observations than maxObservations'],
  'limited.bounded': ['BRC-193 §8', 'a byte limit too small for the envelope gets 413 limited whose complete body is at most 4096 bytes, with a valid limit kind, no minimum above the hard maxima, and no session or cursor'],
  'batch.scope': ['BRC-193 §1, §2', 'the batch scope names the service, the manifest chain and rules digest, digest("lookup-query", {service, query}), and the provider (the identity key, or the exact origin in public mode)'],
  'snapshot.boundary': ['BRC-193 §3', 'snapshot batches have phase snapshot and through = W; the last one sets snapshotComplete and is still phase snapshot; the batch after it is phase live'],
  'batch.watermarks': ['BRC-193 §3, §8', 'through <= highWater in every batch; snapshot groups carry sequence W; live groups increase strictly, exceed the incoming through and do not exceed the returned through; through never decreases'],
  'replay.byte-identical': ['BRC-193 §4', 'reading the same (session, cursor) again returns the same page byte for byte (only highWater may have advanced)'],
  'open.retry': ['BRC-193 §8', 'repeating an open with the same requestId and parameters returns the saved first batch, even after reads advanced'],
  'open.conflict': ['BRC-193 §2, §8', 'reusing a requestId with changed open parameters is refused with 409 conflict'],
  'cursor.forged': ['BRC-193 §2, §8', 'a forged cursor is never accepted: the read gets 409 reset-required'],
  'session.unknown': ['BRC-193 §8', 'a read of an unknown session gets 409 reset-required'],
  'session.principal-scoped': ['BRC-193 §2, §8', 'a session belongs to the principal that opened it: another identity reading its cursor gets 409 reset-required (or 401 unauthorized), and its close changes nothing'],
  'long-poll.bound': ['BRC-193 §4', 'a caught-up long poll returns at its wait bound with an empty live batch, the same session, a cursor and coherent watermarks'],
  'request.body-cap': ['BRC-193 §8, BRC-194 §1', 'a request body up to the advertised maxRequestBytes is accepted and one byte more is refused (413 limited)'],
  'request.header-cap': ['BRC-193 §8', 'a request whose header fields exceed 16 KiB is refused'],
  'close.idempotent': ['BRC-193 §2, §8', 'close answers {version:1, closed:true}, and repeating it answers the same'],
  'close.unknown': ['BRC-193 §8', 'closing a syntactically valid unknown session answers {version:1, closed:true}, revealing nothing'],
  'read.after-close': ['BRC-193 §8', 'a read of a closed session gets 410 expired or 409 reset-required, never a batch'],
  'headers.cache-control': ['BRC-193 §8', 'every lookup answer, errors and preflights included, carries Cache-Control: private, no-store (and the manifest too under BRC-103)'],
  'headers.vary': ['BRC-193 §8', 'every lookup answer, errors included, carries Vary: Authorization, x-bsv-auth-identity-key, x-bsv-overlay-capability, x-bsv-overlay-profile'],
  'headers.content-encoding': ['BRC-193 §8', 'answers use identity Content-Encoding, even when the client offers gzip, deflate or br'],
  'cors.preflight': ['BRC-193 §8', 'a CORS preflight is answered; an allowed origin gets its own origin, POST and the lookup and BRC-104 headers allowed, and the answer exposes the x-bsv-* headers'],
  'cors.credentials': ['BRC-193 §8', 'credentialed CORS is only for configured origins: no answer pairs Access-Control-Allow-Credentials: true with a wildcard or an arbitrary requesting origin'],
  'errors.envelope': ['BRC-193 §6', 'every error answer is {version:1, error:{code, message, retryable, retryAfterMs?, limit?}} with a known code, the status its code maps to, and no session or cursor'],
  'redirects.none': ['BRC-193 §2', 'lookup answers are never redirects: clients do not follow them, so the advertised base must answer directly'],
  'mutation.delivered': ['BRC-193 §3, §4', 'a change committed after the open (before the snapshot boundary) arrives after the boundary as a live group with a sequence above W'],
  'replay.live': ['BRC-193 §4', 'a nonempty live batch read again from the same (session, cursor) is the same batch byte for byte (only highWater may have advanced)'],
  'long-poll.wake': ['BRC-193 §4', 'a change committed while a long poll waits ends the poll with that change before the wait bound']
}

/** `{section, requires}` of a check. */
function ruleOf (check) {
  const r = RULES[check]
  if (!r) throw new Error(`no rule for check ${check}`)
  return { section: r[0], requires: r[1] }
}

module.exports = { RULES, ruleOf }
