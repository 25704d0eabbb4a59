'use strict'
// The BRC-194 capability manifest a provider serves at GET .../overlay/v1/capabilities.
// The body is built and signed natively (BRC-77 over preimage("capabilities", body)
// with the provider identity key); this class decides when to issue a new one and
// which capability digests requests may still select.

const { PrivateKey } = require('@bsv/sdk')
const native = require('../common/native')
const wire = require('../common/wire')

const { PROFILE, PROFILE_LIMITS } = wire
const KEEP_DIGESTS = 32
const META = 'capability-manifest'

class CapabilityManifest {
  /**
   * @param {import('./live').LiveLookup} live
   * @param {{privateKey: string, baseURL: string, authentication: 'brc103'|'none',
   *          allowLocalHttp?: boolean, ttlSeconds?: number, now?: () => number,
   *          service?: string}} options `service` restricts the manifest to that one service
   *          (a host that binds one service per base path, js/provider/overlay-express.js)
   */
  constructor (live, options) {
    if (!/^[0-9a-f]{64}$/.test(options.privateKey || '')) {
      throw new TypeError('the manifest needs privateKey: the provider identity key as 64 lowercase hex')
    }
    this.live = live
    this.options = options
    this.identity = PrivateKey.fromHex(options.privateKey).toPublicKey().toString()
    this.ttl = options.ttlSeconds || 86400
    this.now = options.now || (() => Math.floor(Date.now() / 1000))
    this.issued = null
    this.recent = [] // [{digest, validUntil}]
    this.only = options.service || null
    // A one-service manifest keeps its issuance apart from the router's.
    this.metaKey = this.only ? `${META}/${this.only}` : META
  }

  /** The services part of the configuration; a change issues a new manifest. */
  services () {
    const o = this.live.options
    return [...this.live.services.values()].filter(svc => !this.only || svc.name === this.only).map(svc => ({
      name: svc.name,
      rules: svc.rules,
      rulesDigest: svc.rulesDigest,
      profile: {
        authentication: this.options.authentication,
        maxRequestBytes: PROFILE_LIMITS.maxRequestBytes,
        maxResponseBytes: o.maxBytes || PROFILE_LIMITS.maxResponseBytes,
        sessionSeconds: o.sessionSeconds,
        replaySeconds: o.replaySeconds,
        maxObservations: o.maxObservations || PROFILE_LIMITS.maxObservations,
        maxWaitMs: o.maxWaitMs === undefined ? PROFILE_LIMITS.maxWaitMs : o.maxWaitMs
      }
    }))
  }

  /**
   * The issuance persisted by an earlier process (same store): reusing it keeps
   * the capability digest that open sessions selected valid across a restart.
   */
  restore () {
    this.restored = true
    try {
      const saved = JSON.parse(this.live.core.metaGet(this.metaKey) || 'null')
      if (!saved || !saved.issued) return
      this.issued = { ...saved.issued, bytes: Buffer.from(saved.issued.bytes, 'base64') }
      this.recent = Array.isArray(saved.recent) ? saved.recent : []
    } catch {
      this.issued = null
    }
  }

  persist () {
    const i = this.issued
    this.live.core.metaPut(this.metaKey, JSON.stringify({
      issued: { key: i.key, signed: i.signed, digest: i.digest, bytes: i.bytes.toString('base64'), expiresAt: i.expiresAt },
      recent: this.recent
    }))
  }

  /**
   * The services part and the issuance key of the configuration, computed again
   * only when the registered services changed (each registration is a new
   * entry object): current() runs for every request.
   */
  configuration () {
    const registered = this.live.services
    const seen = this.seen
    if (seen && seen.entries.length === registered.size) {
      let i = 0
      let same = true
      for (const svc of registered.values()) if (svc !== seen.entries[i++]) { same = false; break }
      if (same) return seen
    }
    const services = this.services()
    const key = JSON.stringify({ identity: this.identity, baseURL: this.options.baseURL, services })
    this.seen = { entries: [...registered.values()], services, key }
    return this.seen
  }

  /** The current signed manifest: `{signed, bytes, digest}`. */
  current () {
    if (!this.restored) this.restore()
    const now = this.now()
    const { services, key } = this.configuration()
    const i = this.issued
    if (i && i.key === key && now < i.expiresAt - Math.floor(this.ttl / 10)) return i
    const body = native.buildManifest({
      identity: this.identity,
      baseURL: this.options.baseURL,
      allowLocalHttp: !!this.options.allowLocalHttp,
      chain: this.live.options.chain,
      issuedAt: now,
      expiresAt: now + this.ttl,
      services
    })
    const signed = native.signManifest(body, this.options.privateKey)
    const digest = wire.digest('capabilities', body)
    this.issued = { key, signed, digest, bytes: Buffer.from(JSON.stringify(signed)), expiresAt: now + this.ttl }
    // A session keeps the manifest it was opened under for its whole lifetime
    // (BRC-194 §1), so digests stay acceptable for reads that long.
    const o = this.live.options
    this.recent.push({ digest, validUntil: now + this.ttl + o.sessionSeconds + o.replaySeconds })
    while (this.recent.length > KEEP_DIGESTS) this.recent.shift()
    this.persist()
    return this.issued
  }

  bytes () {
    return this.current().bytes
  }

  digest () {
    return this.current().digest
  }

  /**
   * Checks the selection headers (BRC-194 §1). Opens must select the current
   * manifest; reads and closes may select any manifest issued within their
   * sessions' lifetime. Returns `[code, message]` or null.
   */
  check (operation, capability, profile) {
    const current = this.current().digest
    const now = this.now()
    const open = operation === 'open'
    // The answer depends only on the acceptable digests (fixed within a second
    // and a manifest) and the two headers: the last one is kept per kind.
    const last = open ? this.lastOpenCheck : this.lastCheck
    if (last && last.current === current && last.now === now && last.capability === capability && last.profile === profile) return last.result
    const digests = open
      ? [current]
      : [current, ...this.recent.filter(r => r.validUntil > now).map(r => r.digest)]
    const failure = native.selectionCheck(digests, [PROFILE], capability == null ? null : capability, profile == null ? null : profile)
    const result = failure ? [failure.code, failure.message] : null
    const memo = { current, now, capability, profile, result }
    if (open) this.lastOpenCheck = memo
    else this.lastCheck = memo
    return result
  }
}

module.exports = { CapabilityManifest, PROFILE }
