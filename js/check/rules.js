'use strict'
// What each conformance check requires, in the checker's own words, and where the
// requirement is written. A FAIL line is "<what was seen>; <requirement> (<section>)".
// Each entry: [section, requirement, needs?] where needs lists what the check needs beyond a
// plain run: 'mutate' (--mutate), 'empty-query' (--empty-query), 'brc103' (--auth brc103), 'second-principal' (a second
// BRC-103 identity, made by the checker under --auth brc103), 'origin' (--origin) and 'long'
// (--long: waits for a session to expire). Without it the check is skipped, saying why.

const RULES = {
  'manifest.fetch': ['BRC-194 §1', 'GET {base}/overlay/v1/capabilities answers 200 with a signed {body, signature} manifest of at most 256 KiB'],
  'manifest.signature': ['BRC-194 §1', 'the manifest carries a BRC-77 signature by its own identity, which is also the BRC-104 peer when authenticated'],
  'manifest.base-url': ['BRC-194 §1, §6', 'the manifest baseURL is the canonical form of the base URL clients use'],
  'manifest.profile': ['BRC-193 §1, BRC-194 §1, §2', 'the manifest is current and well formed, and the service offers lookup-live-v1 with the checked authentication, payment none and in-bound parameters'],
  'auth.required': ['BRC-193 §1, §6', 'a BRC-103 service refuses an unauthenticated open with 401 unauthorized', ['brc103']],
  'selection.stale-capability': ['BRC-194 §1', 'a request naming a capability digest the provider did not issue is refused with 409 context-changed'],
  'selection.unknown-profile': ['BRC-194 §1', 'a request selecting a profile the service does not offer is refused with 422 unsupported'],
  'request.method': ['BRC-193 §2', 'lookup routes take POST only: a GET is refused with a 4xx answer'],
  'request.content-type': ['BRC-193 §2', 'a lookup request whose Content-Type is not application/json is refused with 400 invalid'],
  'request.content-encoding': ['BRC-193 §8', 'a lookup request with a Content-Encoding other than identity is refused with 422 unsupported'],
  'open.not-json': ['BRC-193 §2', 'an open whose body is not JSON is refused with 400 invalid'],
  'open.unknown-member': ['BRC-193 §2', 'an open with a member the Open type does not have is refused with 400 invalid'],
  'open.version': ['BRC-193 §2', 'an open of a version other than 1 is refused (400 invalid or 422 unsupported)'],
  'open.no-service': ['BRC-193 §2', 'an open without a service is refused with 400 invalid'],
  'open.request-id-short': ['BRC-193 §2', 'a requestId shorter than 16 characters is refused with 400 invalid'],
  'open.request-id-long': ['BRC-193 §2', 'a requestId longer than 128 characters is refused with 400 invalid'],
  'open.request-id-alphabet': ['BRC-193 §2', 'a requestId with a character other than ASCII letters, digits, _ and - is refused with 400 invalid'],
  'open.zero-max-bytes': ['BRC-193 §2', 'every limit but waitMs is positive: an open with maxBytes 0 is refused with 400 invalid'],
  'open.zero-max-observations': ['BRC-193 §2', 'every limit but waitMs is positive: an open with maxObservations 0 is refused with 400 invalid'],
  'open.limit-overflow': ['BRC-193 §2', 'a limit beyond U32 is refused with 400 invalid'],
  'open.no-limits': ['BRC-193 §2', 'an open without limits is refused with 400 invalid'],
  'open.critical-unknown': ['BRC-193 §2, §6', 'an open naming an extension the provider does not know as critical is refused with 422 unsupported'],
  'open.rules-digest-mismatch': ['BRC-193 §2', 'an open whose requiredRulesDigest differs from the service rules fails before opening, with 409 conflict'],
  'read.not-json': ['BRC-193 §2', 'a read whose body is not JSON is refused with 400 invalid'],
  'read.no-cursor': ['BRC-193 §2', 'a read without a cursor is refused with 400 invalid'],
  'read.unknown-member': ['BRC-193 §2', 'a read with a member the Read type does not have is refused with 400 invalid'],
  'read.zero-max-bytes': ['BRC-193 §2', 'every limit but waitMs is positive: a read with maxBytes 0 is refused with 400 invalid'],
  'read.zero-max-observations': ['BRC-193 §2', 'every limit but waitMs is positive: a read with maxObservations 0 is refused with 400 invalid'],
  'read.long-cursor': ['BRC-193 §2', 'a cursor over 1024 UTF-8 bytes is refused with 400 invalid'],
  'read.long-session': ['BRC-193 §2', 'a session identifier over 1024 UTF-8 bytes in a read is refused with 400 invalid'],
  'close.not-json': ['BRC-193 §2', 'a close whose body is not JSON is refused with 400 invalid'],
  'close.no-session': ['BRC-193 §2', 'a close without a session is refused with 400 invalid'],
  'close.unknown-member': ['BRC-193 §2', 'a close with a member the Close type does not have is refused with 400 invalid'],
  'close.long-session': ['BRC-193 §2, §8', 'a close whose session is not a syntactically valid identifier (over 1024 bytes) is refused with 400 invalid'],
  'open.unknown-service': ['BRC-193 §6, BRC-194 §6', 'an open naming a service the provider does not serve is refused with an error (404 not-found), never a session'],
  'open.request-id-bounds': ['BRC-193 §2', 'requestIds of exactly 16 and exactly 128 ASCII letters, digits, _ and - are accepted'],
  'open.rules-digest-match': ['BRC-193 §2', 'an open whose requiredRulesDigest equals the advertised rulesDigest is accepted'],
  'limited.bounded': ['BRC-193 §8', 'a byte limit too small for the envelope gets 413 limited whose complete body is at most 4096 bytes, with a valid limit kind, no minimum above the hard maxima, and no session or cursor'],
  'limits.clamp': ['BRC-193 §2', 'limits above the maxima are clamped (to at most 4 MiB, 1024 observations, 25000 ms and the advertised provider limits) and the result is returned, not refused'],
  'limits.minimum-allowance': ['BRC-193 §2', 'the provider supports a 64 KiB response allowance, 1 observation and immediate reads: it advertises at least that and an open asking exactly that is served with those limits'],
  'request.body-cap': ['BRC-193 §8, BRC-194 §1', 'a request body up to the advertised maxRequestBytes is accepted and one byte more is refused (413 limited)'],
  'request.header-cap': ['BRC-193 §8', 'a request whose header fields exceed 16 KiB is refused'],
  'cors.preflight': ['BRC-193 §8', 'a CORS preflight is answered; an allowed origin gets its own origin, POST and the lookup and BRC-104 headers allowed, and the answer exposes the x-bsv-* headers', ['origin']],
  'limits.echo': ['BRC-193 §2', 'the batch echoes the effective limits: the componentwise minimum of the request, the advertised provider limits and the profile maxima'],
  'scope.service': ['BRC-193 §1, §2', 'the batch scope names the opened service'],
  'scope.provider': ['BRC-193 §1', 'the batch scope names the provider: the authenticated identity key, or the exact origin in public mode'],
  'scope.rules': ['BRC-193 §2', 'the batch scope names the rules digest the manifest advertises for the service'],
  'scope.query': ['BRC-193 §2', 'the batch scope carries queryDigest = digest("lookup-query", {service, query})'],
  'scope.chain': ['BRC-193 §1', 'the batch scope names the chain of the manifest'],
  'replay.byte-identical': ['BRC-193 §4', 'reading the same (session, cursor) again returns the same page byte for byte (only highWater may have advanced)'],
  'limited.group': ['BRC-193 §3, §8', 'a page whose next group does not fit maxBytes is 413 limited of kind group (with a minimumBytes above the limit, if any), not a truncated group'],
  'open.retry': ['BRC-193 §8', 'repeating an open with the same requestId and parameters returns the saved first batch, even after reads advanced'],
  'open.conflict-limits': ['BRC-193 §2, §8', 'reusing a requestId with changed limits is refused with 409 conflict'],
  'open.conflict-query': ['BRC-193 §2, §8', 'reusing a requestId with a changed query is refused with 409 conflict'],
  'open.conflict-rules': ['BRC-193 §2, §8', 'reusing a requestId with a changed requiredRulesDigest is refused with 409 conflict'],
  'cursor.forged': ['BRC-193 §2, §8', 'a forged cursor is never accepted: the read gets 409 reset-required'],
  'session.unknown': ['BRC-193 §8', 'a read of an unknown session gets 409 reset-required'],
  'session.foreign-read': ['BRC-193 §2, §8', "another identity reading a session's cursor gets 409 reset-required (or 401 unauthorized), never a batch", ['brc103', 'second-principal']],
  'close.foreign': ['BRC-193 §2, §8', "another identity's close of a session answers {version:1, closed:true} and changes nothing: the owner still reads it", ['brc103', 'second-principal']],
  'auth.read-unauthenticated': ['BRC-193 §1, §2, §5', 'a read of an existing BRC-103 session without authentication is refused with 401 unauthorized', ['brc103']],
  'snapshot.through-w': ['BRC-193 §3', 'every snapshot batch has through = W, the through of the open'],
  'snapshot.complete-phase': ['BRC-193 §3', 'the last snapshot batch sets snapshotComplete and still has phase snapshot; no live batch comes before it'],
  'snapshot.live-after': ['BRC-193 §3', 'the batch after the last snapshot batch has phase live'],
  'snapshot.empty': ['BRC-193 §3', 'an empty collection still has a completed snapshot batch (snapshotComplete, phase snapshot, no groups), and the batch after it is live', ['empty-query']],
  'mutation.delivered': ['BRC-193 §3, §4, §7', 'a change committed after the open (before the snapshot boundary) arrives after the boundary as a live group with a sequence above W', ['mutate']],
  'mutation.once': ['BRC-193 §3, §7', 'a change committed after the open arrives exactly once: in the live feed, not also in the snapshot', ['mutate']],
  'replay.live': ['BRC-193 §4', 'a nonempty live batch read again from the same (session, cursor) is the same batch byte for byte (only highWater may have advanced)', ['mutate']],
  'mutation.last-page': ['BRC-193 §3, §7', "a change committed after a session's last snapshot page was served, before it read past the boundary, arrives in that session's live feed", ['mutate']],
  'live.stable': ['BRC-193 §3, §8', 'one live group has the same id and observation array in every session of the query and under any limits', ['mutate']],
  'long-poll.bound': ['BRC-193 §4', 'a caught-up long poll waits for its bound and returns an empty live batch with the same session, a cursor and coherent watermarks'],
  'long-poll.deadline': ['BRC-193 §4, §8', 'a caught-up long poll answers at min(arrival + effective waitMs, session expiry), not later'],
  'read.immediate': ['BRC-193 §2, §4', 'a caught-up read with waitMs 0 answers at once'],
  'long-poll.wake': ['BRC-193 §4', 'a change committed while a long poll waits ends the poll with that change before the wait bound', ['mutate']],
  'close.idempotent': ['BRC-193 §2, §8', 'close answers {version:1, closed:true}, and repeating it answers the same'],
  'read.after-close': ['BRC-193 §8', 'a read of a closed session gets 410 expired or 409 reset-required, never a batch'],
  'open.after-close': ['BRC-193 §8', 'repeating the open of a closed session returns 410 expired, never a new snapshot'],
  'close.unknown': ['BRC-193 §8', 'closing a syntactically valid unknown session answers {version:1, closed:true}, revealing nothing'],
  'long-poll.expiry-cap': ['BRC-193 §8', 'a long poll whose wait reaches past the session expiry answers by the expiry, and not with a successful batch after it', ['long']],
  'read.at-expiry': ['BRC-193 §8', 'a read after expiresAt gets 409 reset-required (or 410 expired), never a batch', ['long']],
  'open.after-expiry': ['BRC-193 §8', 'repeating the open of an expired session returns 410 expired, never a new snapshot', ['long']],
  'close.expired': ['BRC-193 §8', 'closing an expired session answers {version:1, closed:true}', ['long']],
  'headers.cache-control': ['BRC-193 §8', 'every lookup answer, errors and preflights included, carries Cache-Control: private, no-store (and the manifest too under BRC-103)'],
  'headers.vary': ['BRC-193 §8', 'every lookup answer, errors included, carries Vary: Authorization, x-bsv-auth-identity-key, x-bsv-overlay-capability, x-bsv-overlay-profile'],
  'headers.content-encoding': ['BRC-193 §8', 'answers use identity Content-Encoding, even when the client offers gzip, deflate or br'],
  'cors.credentials': ['BRC-193 §8', 'credentialed CORS is only for configured origins: no answer pairs Access-Control-Allow-Credentials: true with a wildcard or an arbitrary requesting origin'],
  'errors.envelope': ['BRC-193 §6', 'every error answer is {version:1, error:{code, message, retryable, retryAfterMs?, limit?}} with a known code, the status its code maps to, and no session or cursor'],
  'redirects.none': ['BRC-193 §2', 'lookup answers are never redirects: clients do not follow them, so the advertised base must answer directly'],
  'limits.respected': ['BRC-193 §2, §8', 'a batch body never exceeds the effective maxBytes and a batch never carries more observations than maxObservations'],
  'limited.permanent': ['BRC-193 §8', 'a limited group that no allowed limit can hold is of kind permanent-group: a limited answer of kind group names minimums within the provider\'s advertised limits'],
  'batch.through-highwater': ['BRC-193 §3, §8', 'through <= highWater in every batch'],
  'snapshot.sequence-w': ['BRC-193 §3', 'every snapshot group carries sequence W'],
  'live.through-monotonic': ['BRC-193 §3', 'during live replay through never decreases'],
  'live.sequence-order': ['BRC-193 §3, §8', 'live groups have strictly increasing sequences greater than the incoming through', ['mutate']],
  'live.sequence-in-range': ['BRC-193 §8', 'no live group has a sequence above the through of its batch', ['mutate']],
  'scope.constant': ['BRC-193 §1', 'every batch of a session carries the same scope'],
  'scope.observations': ['BRC-193 §8', "every group's observations carry the batch scope"],
  'observations.unique': ['BRC-193 §3, §8', 'an observation id maps to exactly one group'],
  'groups.namespaces': ['BRC-193 §3, §8', 'snapshot and live group and observation ids are disjoint: no live id equals a snapshot id of the session', ['mutate']],
  'session.id-bounded': ['BRC-193 §2', 'session identifiers are at most 1024 UTF-8 bytes'],
  'session.unguessable': ['BRC-193 §2', 'session identifiers are unguessable: long enough for 128 random bits'],
  'deadlines.fixed': ['BRC-193 §4', 'version 1 fixes expiresAt and replayUntil at open: every batch of a session carries the same deadlines'],
  'deadlines.replay': ['BRC-193 §4, §8', 'replayUntil = expiresAt + the advertised replaySeconds'],
  'deadlines.session-bound': ['BRC-193 §4, §8', 'expiresAt = the open time + the advertised sessionSeconds (within clock skew)']
}

/** `{section, requires, needs}` of a check. */
function ruleOf (check) {
  const r = RULES[check]
  if (!r) throw new Error(`no rule for check ${check}`)
  return { section: r[0], requires: r[1], needs: r[2] || [] }
}

/** Checks whose rule needs `what` ('mutate', 'empty-query', 'brc103', 'second-principal', 'origin', 'long'). */
function needing (what) {
  return Object.keys(RULES).filter(c => (RULES[c][2] || []).includes(what))
}

module.exports = { RULES, ruleOf, needing }
