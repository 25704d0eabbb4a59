const fs = require('fs')
const path = require('path')
const crypto = require('crypto')
const wire = require('../js/common/wire.js')

// The vendored spec vectors (tests/fixtures/spec); a missing file fails the test.
const vectors = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'tests', 'fixtures', 'spec', 'digest-vectors.json'), 'utf8'))

const RID = 'req_0123456789abcdef'
const openBody = (over = {}) => JSON.stringify({
  version: 1,
  requestId: RID,
  service: 'ls_notes',
  query: { author: 'alice' },
  limits: { maxBytes: 65536, maxObservations: 10, waitMs: 0 },
  ...over
})

function thrown (fn) {
  try {
    fn()
  } catch (err) {
    return err
  }
  throw new Error('expected a throw')
}

describe('digest and canonicalize', () => {
  test('match every shared digest vector', () => {
    expect(wire.canonicalize(vectors.body)).toBe(vectors.canonical)
    expect(vectors.vectors).toHaveLength(27)
    for (const v of vectors.vectors) {
      expect(wire.digest(v.domain, vectors.body)).toBe(v.sha256)
      // Independent check of the preimage definition with Node's own SHA-256.
      const pre = Buffer.from(v.preimage, 'hex')
      expect(crypto.createHash('sha256').update(pre).digest('hex')).toBe(v.sha256)
      expect(pre.equals(Buffer.concat([Buffer.from('BRC-OUTPUT/1/' + v.domain), Buffer.from([0]), Buffer.from(vectors.canonical)]))).toBe(true)
    }
  })

  test('numbers are serialized as ECMAScript does', () => {
    const values = [1.5, -0, 1e21, 1e-7, 0.1, 123456789.125, 5e-324, 2 ** 60, -1e300, 333333333.3333333]
    expect(wire.canonicalize(values)).toBe(JSON.stringify(values))
    expect(wire.canonicalize({ b: 1, a: [true, null, 'é\n'] })).toBe('{"a":[true,null,"é\\n"],"b":1}')
  })

  test('number serialization agrees with V8 on 20,000 seeded random doubles', () => {
    // Random bit patterns cover every exponent; scaled integers cover the 2^53 edge.
    let seed = 0x9e3779b97f4a7c15n
    const next = () => {
      seed ^= seed << 13n; seed &= 0xffffffffffffffffn
      seed ^= seed >> 7n
      seed ^= seed << 17n; seed &= 0xffffffffffffffffn
      return seed
    }
    const view = new DataView(new ArrayBuffer(8))
    const values = []
    while (values.length < 20000) {
      view.setBigUint64(0, next())
      const d = view.getFloat64(0)
      if (Number.isFinite(d)) values.push(d)
      const k = Number(next() % 70n)
      values.push(Math.round(Number(next() % 1000000n) * 2 ** k) * (k % 2 ? -1 : 1))
    }
    for (let i = 0; i < values.length; i += 1000) {
      const chunk = values.slice(i, i + 1000)
      expect(wire.canonicalize(chunk)).toBe(JSON.stringify(chunk))
    }
  })

  test('values JCS cannot represent are invalid', () => {
    for (const bad of [[NaN], { x: Infinity }, ['\ud800'], [10n], undefined]) {
      const err = thrown(() => wire.canonicalize(bad))
      expect(err.code).toBe('invalid')
      expect(err.status).toBe(400)
    }
    let deep = 1
    for (let i = 0; i < 33; i++) deep = [deep]
    expect(thrown(() => wire.digest('x', deep)).code).toBe('invalid')
    expect(thrown(() => wire.digest('a\u0000b', {})).code).toBe('invalid')
  })
})

describe('request parsers', () => {
  test('parseOpen returns the normalized request', () => {
    const open = wire.parseOpen(Buffer.from(openBody({ limits: { maxBytes: 1e9, maxObservations: 5000, waitMs: 60000 } })))
    expect(open).toEqual({
      version: 1,
      requestId: RID,
      service: 'ls_notes',
      query: { author: 'alice' },
      limits: { maxBytes: 4194304, maxObservations: 1024, waitMs: 25000 }
    })
    expect(wire.parseOpen(new Uint8Array(Buffer.from(openBody()))).requestId).toBe(RID)
  })

  test('parseRead and parseClose', () => {
    const limits = { maxBytes: 70000, maxObservations: 5, waitMs: 100 }
    expect(wire.parseRead(JSON.stringify({ version: 1, session: 's', cursor: 'c', limits }))).toEqual({ version: 1, session: 's', cursor: 'c', limits })
    expect(wire.parseClose('{"version":1,"session":"s"}')).toEqual({ version: 1, session: 's' })
  })

  test('rejections carry the wire code as .code and the HTTP status as .status', () => {
    const cases = [
      ['{"version":1,"session":"a","s\\u0065ssion":"b"}', wire.parseClose, 'invalid', 400],
      ['{"version":2,"session":"a"}', wire.parseClose, 'unsupported', 422],
      ['{"version":"1","session":"a"}', wire.parseClose, 'invalid', 400],
      [openBody({ extra: 1 }), wire.parseOpen, 'invalid', 400],
      [openBody({ query: { s: '\\ud800' } }).replace('"\\\\ud800"', '"\\ud800"'), wire.parseOpen, 'invalid', 400],
      [openBody({ extensions: { 'urn:a': 1 }, critical: ['urn:a'] }), wire.parseOpen, 'unsupported', 422],
      [' '.repeat(1024 * 1024 + 1), wire.parseRead, 'limited', 413]
    ]
    for (const [body, fn, code, status] of cases) {
      const err = thrown(() => fn(body))
      // Native errors come from Node's realm, not Jest's sandbox: check the brand, not instanceof.
      expect(require('util').types.isNativeError(err)).toBe(true)
      expect([err.code, err.status]).toEqual([code, status])
      expect(typeof err.message).toBe('string')
    }
    expect(thrown(() => wire.parseOpen(42)).code).toBe('invalid')
    // A raw (unescaped) lone surrogate in a JS string body.
    const raw = thrown(() => wire.parseClose('{"version":1,"session":"a\ud800"}'))
    expect([raw.code, raw.status]).toEqual(['invalid', 400])
  })
})

describe('errors', () => {
  test('status table comes from Rust and covers every code', () => {
    expect(wire.STATUS).toEqual({
      invalid: 400,
      unsupported: 422,
      unauthorized: 401,
      conflict: 409,
      equivocation: 409,
      limited: 413,
      unavailable: 503,
      expired: 410,
      'reset-required': 409,
      cancelled: 503,
      'context-changed': 409,
      'not-found': 404
    })
    expect(Object.isFrozen(wire.STATUS)).toBe(true)
  })

  test('errorBody is bounded and well-formed', () => {
    const body = wire.errorBody('limited', 'x'.repeat(100000), { retryAfterMs: 5, limit: { kind: 'group', minimumBytes: 70000 } })
    expect(body.length).toBeLessThanOrEqual(4096)
    const parsed = JSON.parse(body.toString('utf8'))
    expect(parsed.version).toBe(1)
    expect(parsed.error).toMatchObject({ code: 'limited', retryable: false, retryAfterMs: 5, limit: { kind: 'group', minimumBytes: 70000 } })
    expect(JSON.parse(wire.errorBody('unavailable', 'down').toString())).toEqual({ version: 1, error: { code: 'unavailable', message: 'down', retryable: true } })
    expect(thrown(() => wire.errorBody('bogus', 'm')).code).toBe('invalid')
  })
})
