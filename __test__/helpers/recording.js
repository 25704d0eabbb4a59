'use strict'
// A LookupService that records every hook call it receives, in any admission/spend mode.
// Used to compare what the Engine gives an unwrapped service with what the live wrapper gives
// the same service wrapped.
class RecordingLookupService {
  constructor (admissionMode, spendNotificationMode) {
    this.admissionMode = admissionMode
    this.spendNotificationMode = spendNotificationMode
    this.calls = []
  }

  async outputAdmittedByTopic (payload) { this.calls.push(['outputAdmittedByTopic', payload]) }
  async outputSpent (payload) { this.calls.push(['outputSpent', payload]) }
  async outputNoLongerRetainedInHistory (txid, outputIndex, topic) {
    this.calls.push(['outputNoLongerRetainedInHistory', { txid, outputIndex, topic }])
  }

  async outputEvicted (txid, outputIndex) { this.calls.push(['outputEvicted', { txid, outputIndex }]) }
  async lookup () { return [] }
  async getDocumentation () { return 'recording' }
  async getMetaData () { return { name: 'recording', shortDescription: 'records hook calls' } }
}

/**
 * A comparable form of recorded calls: script objects become {script: constructor name, hex},
 * byte arrays become hex; sorted, because the Engine runs hooks concurrently.
 */
function normalizedCalls (calls) {
  return calls.map(([hook, payload]) => JSON.stringify([hook, normalizeValue(payload)])).sort()
}

function normalizeValue (v) {
  if (Array.isArray(v)) return { bytes: Buffer.from(v).toString('hex') }
  if (v !== null && typeof v === 'object') {
    if (typeof v.toHex === 'function' && Array.isArray(v.chunks)) return { script: v.constructor.name, hex: v.toHex() }
    const out = {}
    for (const key of Object.keys(v).sort()) out[key] = normalizeValue(v[key])
    return out
  }
  return v
}

module.exports = { RecordingLookupService, normalizedCalls }
