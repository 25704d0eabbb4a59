'use strict'
// Judgements of the conformance checker that need no network: is this a Batch, is this an
// error envelope, how do two answers differ. js/check/run.js applies them to what arrived.

const wire = require('../common/wire')

const U32_MAX = 4294967295
const U64_MAX = (1n << 64n) - 1n
/** Error codes a provider may send (BRC-192 codes plus not-found; `cancelled` is local only). */
const SERVER_CODES = new Set(['invalid', 'unauthorized', 'not-found', 'conflict', 'equivocation', 'reset-required', 'context-changed', 'expired', 'limited', 'unsupported', 'unavailable'])

function u64 (v) {
  if (typeof v !== 'string' || !/^(0|[1-9][0-9]{0,19})$/.test(v)) return null
  const n = BigInt(v)
  return n <= U64_MAX ? n : null
}

function isU32 (v) {
  return Number.isInteger(v) && v >= 0 && v <= U32_MAX
}

function snippet (buf) {
  if (!buf || buf.length === 0) return '(empty body)'
  const text = buf.subarray(0, 96).toString('utf8')
  return JSON.stringify(buf.length > 96 ? text + '…' : text)
}

/** The error object of an envelope answer, or null. */
function errorOf (answer) {
  const j = answer.json
  return j && typeof j === 'object' && j.error && typeof j.error === 'object' && typeof j.error.code === 'string' ? j.error : null
}

/** `409 reset-required`, or `502 "<html>…"` when the answer is no envelope. */
function describe (answer) {
  const e = errorOf(answer)
  if (e) return `${answer.status} ${e.code}`
  if (answer.status === 200) return '200'
  if (answer.status >= 300 && answer.status < 400) return `${answer.status}, a redirect to ${JSON.stringify(answer.header('location') || null)}`
  return `${answer.status} ${snippet(answer.body)}`
}

/** Why `b` is not a well-formed Batch, or null. */
function batchProblem (b) {
  if (!b || typeof b !== 'object' || Array.isArray(b)) return 'the body is not a JSON object'
  if (b.version !== 1) return `version is ${JSON.stringify(b.version)}`
  if (typeof b.session !== 'string' || b.session.length === 0) return 'no session'
  if (typeof b.cursor !== 'string' || b.cursor.length === 0 || Buffer.byteLength(b.cursor) > 1024) return 'no cursor of 1-1024 bytes'
  if (b.phase !== 'snapshot' && b.phase !== 'live') return `phase is ${JSON.stringify(b.phase)}`
  if (typeof b.snapshotComplete !== 'boolean') return 'snapshotComplete is not a boolean'
  for (const k of ['through', 'highWater', 'expiresAt', 'replayUntil']) if (u64(b[k]) === null) return `${k} is not a U64 string`
  if (!b.scope || typeof b.scope !== 'object') return 'no scope'
  if (!b.limits || !isU32(b.limits.maxBytes) || !isU32(b.limits.maxObservations) || !isU32(b.limits.waitMs)) return 'limits are not three U32 values'
  if (!Array.isArray(b.groups)) return 'groups is not an array'
  for (const g of b.groups) {
    if (!g || typeof g.id !== 'string' || u64(g.sequence) === null || !Array.isArray(g.observations)) return 'a group lacks id, sequence or observations'
  }
  return null
}

/** The first path at which two JSON values differ, or null. */
function firstDifference (a, b, path = '') {
  if (a === b) return null
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return path || '(the whole body)'
  if (Array.isArray(a) !== Array.isArray(b)) return path || '(the whole body)'
  if (Array.isArray(a)) {
    if (a.length !== b.length) return `${path}.length`
    for (let i = 0; i < a.length; i++) {
      const d = firstDifference(a[i], b[i], `${path}[${i}]`)
      if (d !== null) return d
    }
    return null
  }
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
    const d = firstDifference(a[k], b[k], path ? `${path}.${k}` : k)
    if (d !== null) return d
  }
  return null
}

/**
 * How a replayed answer differs from the first one, or null when it is the same page:
 * the same bytes, or bodies that differ only in highWater (the highest sequence the
 * provider knew when answering, which may advance between the two reads).
 */
function replayDifference (first, again) {
  if (first.status !== again.status) return `the first read answered ${describe(first)}, the repeat ${describe(again)}`
  if (first.body.equals(again.body)) return null
  const x = first.json
  const y = again.json
  if (!x || !y) return `the two bodies differ (${first.body.length} and ${again.body.length} bytes)`
  const { highWater: _hx, ...rx } = x
  const { highWater: _hy, ...ry } = y
  const d = firstDifference(rx, ry)
  return d === null ? null : `the repeat differs at ${d}`
}

/** `id` with one character in the middle replaced by another of the same kind. */
function forge (id) {
  const i = Math.floor(id.length / 2)
  const c = id[i]
  let r
  if (/[0-9]/.test(c)) r = String((Number(c) + 1) % 10)
  else if (/[a-z]/.test(c)) r = c === 'a' ? 'b' : 'a'
  else if (/[A-Z]/.test(c)) r = c === 'A' ? 'B' : 'A'
  else r = c === '-' ? '_' : '-'
  return id.slice(0, i) + r + id.slice(i + 1)
}

function tokens (value) {
  return (value || '').split(',').map(s => s.trim().toLowerCase()).filter(Boolean)
}

/** Why an error answer is not a proper BRC-193 §6 envelope, or null. */
function envelopeProblem (a) {
  const j = a.json
  if (!j || typeof j !== 'object' || Array.isArray(j)) return `the body is no JSON envelope: ${snippet(a.body)}`
  const extra = Object.keys(j).filter(k => k !== 'version' && k !== 'error')
  if (j.version !== 1 || extra.length > 0) return `the envelope has version ${JSON.stringify(j.version)}${extra.length ? ' and members ' + extra.join(', ') : ''}`
  const e = j.error
  if (!e || typeof e !== 'object') return 'error is not an object'
  const unknown = Object.keys(e).filter(k => !['code', 'message', 'retryable', 'retryAfterMs', 'limit'].includes(k))
  if (unknown.length > 0) return `error has members ${unknown.join(', ')}`
  if (!SERVER_CODES.has(e.code)) return `error.code ${JSON.stringify(e.code)} is not a protocol code`
  if (typeof e.message !== 'string' || typeof e.retryable !== 'boolean') return 'error lacks a message string or a retryable boolean'
  if (e.retryAfterMs !== undefined && !isU32(e.retryAfterMs)) return `retryAfterMs is ${JSON.stringify(e.retryAfterMs)}`
  if (e.limit !== undefined && e.code !== 'limited') return `a ${e.code} error carries limit`
  if (wire.statusOf(e.code) !== a.status) return `code ${e.code} came with status ${a.status}, it maps to ${wire.statusOf(e.code)}`
  return null
}

module.exports = { U32_MAX, u64, isU32, snippet, errorOf, describe, batchProblem, firstDifference, replayDifference, forge, tokens, envelopeProblem }
