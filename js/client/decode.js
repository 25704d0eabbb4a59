'use strict'
// Decoders for what a follow hands an application: a member's `context`, and the
// observations of a committed batch (RevisionEvent.batch). BRC-192 §2 lists the payload of
// each kind; `Bytes` fields are canonical base64 (BRC-192 §1) and are returned as Buffers.
// These read bytes the store already accepted; they check shapes only as far as they use them.

const { LiveLookupError } = require('./errors')

// BRC-192 §2: the adapter schema whose bytes are the UTF-8 JSON of a BRC-24 context value.
const LEGACY_CONTEXT_SCHEMA = 'https://bsv.brc.dev/apps/0192#legacy-lookup-context-json-v1'

function invalid (message) {
  return new LiveLookupError('invalid', message)
}

function bytesOf (value, what) {
  if (typeof value !== 'string') throw invalid(`${what} is not base64 text`)
  const buf = Buffer.from(value, 'base64')
  // Canonical only: Node's decoder skips what it cannot read, so compare the round trip.
  if (buf.toString('base64') !== value) throw invalid(`${what} is not canonical base64`)
  return buf
}

/**
 * `{schema, bytes}` (a Member's or an output payload's context) with `bytes` decoded; under the
 * legacy schema, also `json`, the context value parsed from its UTF-8 JSON. null stays null.
 */
function decodeContext (context) {
  if (context === null || context === undefined) return null
  if (typeof context !== 'object' || typeof context.schema !== 'string') throw invalid('context has no schema')
  const bytes = bytesOf(context.bytes, 'context.bytes')
  if (context.schema !== LEGACY_CONTEXT_SCHEMA) return { schema: context.schema, bytes }
  let json
  try {
    json = JSON.parse(bytes.toString('utf8'))
  } catch (e) {
    throw invalid(`context under ${LEGACY_CONTEXT_SCHEMA} is not JSON: ${e.message}`)
  }
  return { schema: context.schema, bytes, json }
}

/** One observation as its kind's shape (docs/client.md "Decoding"), Bytes fields as Buffers. */
function decodeObservation (o) {
  if (!o || typeof o !== 'object' || !o.payload) throw invalid('not an observation')
  const p = o.payload
  switch (o.kind) {
    case 'output':
      return {
        id: o.id,
        kind: 'output',
        txid: p.evidence.txid,
        outputIndex: p.evidence.outputIndex,
        beef: bytesOf(p.evidence.beef, 'evidence.beef'),
        context: decodeContext(p.context)
      }
    case 'spend':
      return { id: o.id, kind: 'spend', previous: p.previous, spendingTxid: p.spendingTxid, beef: bytesOf(p.beef, 'spend beef') }
    case 'withdraw':
      return { id: o.id, kind: 'withdraw', outpoint: p.outpoint, reason: p.reason }
    case 'assessment-invalidated':
      return { id: o.id, kind: 'assessment-invalidated', contextId: p.contextId, reason: p.reason }
    default:
      throw invalid(`observation kind ${o.kind} is not one of lookup-live-v1's`)
  }
}

/**
 * A batch's bytes (RevisionEvent.batch) as `{phase, snapshotComplete, through, groups}`, each
 * group `{id, sequence, observations}` with decoded observations, in the batch's order.
 */
function decodeBatch (batch) {
  let b
  try {
    b = JSON.parse(Buffer.isBuffer(batch) ? batch.toString('utf8') : String(batch))
  } catch (e) {
    throw invalid(`batch is not JSON: ${e.message}`)
  }
  if (!b || !Array.isArray(b.groups)) throw invalid('batch has no groups')
  return {
    phase: b.phase,
    snapshotComplete: b.snapshotComplete,
    through: b.through,
    groups: b.groups.map(g => ({ id: g.id, sequence: g.sequence, observations: g.observations.map(decodeObservation) }))
  }
}

module.exports = { LEGACY_CONTEXT_SCHEMA, decodeContext, decodeObservation, decodeBatch }
