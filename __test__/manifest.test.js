// BRC-77 signatures and BRC-194 manifests made by the Rust addon, checked
// with @bsv/sdk (the reference implementation), and the reverse.
//
// The preimage callback below uses a test-only JCS (sorted keys +
// JSON.stringify, which is RFC 8785 for the integer/string bodies used here,
// checked against the spec's capabilities vector). Once the `wire` module is
// merged the addon computes the preimage itself.
const crypto = require('crypto')
const { PrivateKey, SignedMessage, Utils } = require('@bsv/sdk')
const native = require('../js/common/native')

// Native errors carry their code as a field (js/common/native.js), not in the message.
function expectCode (fn, code) {
  let err
  try { fn() } catch (e) { err = e }
  expect(err && typeof err.message).toBe('string')
  expect(err.code).toBe(code)
}

const PROFILE = 'https://bsv.brc.dev/overlays/0193#lookup-live-v1'

function jcs (v) {
  if (Array.isArray(v)) return `[${v.map(jcs).join(',')}]`
  if (v !== null && typeof v === 'object') {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${jcs(v[k])}`).join(',')}}`
  }
  if (typeof v === 'number' && !Number.isSafeInteger(v)) throw new Error('test JCS: integers only')
  return JSON.stringify(v)
}
const preimage = (type, body) => Buffer.concat([Buffer.from(`BRC-OUTPUT/1/${type}`), Buffer.from([0]), Buffer.from(jcs(body))])

const sha256hex = (b) => crypto.createHash('sha256').update(b).digest('hex')

test('the test JCS reproduces the spec capabilities digest vector', () => {
  const body = { version: 1, probe: { '\ue000': 'BMP', '\ud83d\ude00': 'non-BMP', text: '\u00e9\n\t', empty: '' }, values: [null, false, true, 0, 1, 9007199254740991, '18446744073709551615', 'YQ=='] }
  expect(sha256hex(preimage('capabilities', body))).toBe('fec751a7791bbda899c866179189a3e21f56668ae9a46edeb45be360cb657f6b')
  expect(native.capabilityDigest(body, preimage)).toBe('fec751a7791bbda899c866179189a3e21f56668ae9a46edeb45be360cb657f6b')
})

describe('BRC-77', () => {
  const key = PrivateKey.fromRandom()
  const identity = key.toPublicKey().toString()
  const message = Buffer.from('BRC-OUTPUT/1/capabilities\u0000{"version":1}')

  test('a Rust signature verifies with SignedMessage.verify and names the signer', () => {
    const sig = native.signBrc77(key.toHex(), message)
    expect(SignedMessage.verify([...message], [...sig])).toBe(true)
    expect(Buffer.from(sig.subarray(4, 37)).toString('hex')).toBe(identity)
    expect(sig[37]).toBe(0) // anyone recipient
    expect(native.verifyBrc77(message, sig)).toBe(identity)
  })

  test('an SDK signature verifies in Rust', () => {
    const sig = SignedMessage.sign([...message], key)
    expect(native.verifyBrc77(message, Buffer.from(sig))).toBe(identity)
  })

  test('tampering is rejected on both sides', () => {
    const sig = native.signBrc77(key.toHex(), message)
    const otherMessage = Buffer.concat([message, Buffer.from('!')])
    expect(SignedMessage.verify([...otherMessage], [...sig])).toBe(false)
    expect(() => native.verifyBrc77(otherMessage, sig)).toThrow(/does not verify/)
    const badSig = Buffer.from(sig)
    badSig[50] ^= 1 // inside the key ID
    expect(SignedMessage.verify([...message], [...badSig])).toBe(false)
    expectCode(() => native.verifyBrc77(message, badSig), 'invalid')
  })

  test('bad keys and garbage are clean errors', () => {
    expectCode(() => native.signBrc77('00'.repeat(32), message), 'invalid')
    expectCode(() => native.signBrc77('zz', message), 'invalid')
    expectCode(() => native.verifyBrc77(message, Buffer.alloc(0)), 'invalid')
    expectCode(() => native.verifyBrc77(message, crypto.randomBytes(110)), 'invalid')
  })
})

describe('BRC-194 manifest', () => {
  const key = PrivateKey.fromRandom()
  const identity = key.toPublicKey().toString()
  const config = {
    identity,
    baseURL: 'https://Overlay.Example.test/',
    chain: { network: 'mainnet', genesisHash: '000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f' },
    issuedAt: 1764460800,
    expiresAt: '1764547200',
    services: [{
      name: 'ls_notes',
      rules: { id: 'urn:example:notes-rules:1', parameters: {} },
      rulesDigest: 'ab'.repeat(32),
      profile: { authentication: 'brc103', maxRequestBytes: 1048576, maxResponseBytes: 4194304, sessionSeconds: 3600, replaySeconds: 86400, maxObservations: 1024, maxWaitMs: 25000 }
    }]
  }

  test('a manifest signed in Rust verifies with @bsv/sdk over preimage("capabilities", body)', () => {
    const body = native.buildManifest(config)
    expect(body.baseURL).toBe('https://overlay.example.test')
    expect(body.services[0].profiles[0]).toEqual({
      id: PROFILE,
      authentication: 'brc103',
      payment: 'none',
      maxRequestBytes: 1048576,
      maxResponseBytes: 4194304,
      parameters: { replaySeconds: '86400', sessionSeconds: '3600', maxObservations: 1024, maxWaitMs: 25000 }
    })
    const signed = native.signManifest(body, key.toHex(), preimage)
    expect(Object.keys(signed).sort()).toEqual(['body', 'signature'])
    const sig = Utils.toArray(signed.signature, 'base64')
    expect(SignedMessage.verify([...preimage('capabilities', signed.body)], sig)).toBe(true)
    expect(Utils.toHex(sig.slice(4, 37))).toBe(body.identity)
    // The same signature does not cover a changed body.
    const changed = { ...signed.body, expiresAt: '1864547200' }
    expect(SignedMessage.verify([...preimage('capabilities', changed)], sig)).toBe(false)
    expectCode(() => native.verifySignedManifest({ body: changed, signature: signed.signature }, preimage), 'invalid')
    expect(native.verifySignedManifest(signed, preimage)).toBe(identity)
  })

  test('an SDK-signed manifest verifies in Rust; the capability digest is sha256 of the preimage', () => {
    const body = native.buildManifest(config)
    const signature = Utils.toBase64(SignedMessage.sign([...preimage('capabilities', body)], key))
    expect(native.verifySignedManifest({ body, signature }, preimage)).toBe(identity)
    const digest = native.capabilityDigest(body, preimage)
    expect(digest).toBe(sha256hex(preimage('capabilities', body)))
    expect(native.selectionCheck([digest], [PROFILE], digest, PROFILE)).toBeNull()
    expect(native.selectionCheck([digest], [PROFILE], 'cd'.repeat(32), PROFILE).code).toBe('context-changed')
    expect(native.selectionCheck([digest], [PROFILE], digest, 'https://bsv.brc.dev/overlays/0195#paid-lookup-v1').code).toBe('unsupported')
    expect(native.selectionCheck([digest], [PROFILE], undefined, PROFILE).code).toBe('invalid')
  })

  test('acceptManifest: an SDK-signed manifest is accepted with its lookup-live offer; expiry and identity are enforced', () => {
    const body = native.buildManifest(config)
    const signed = { body, signature: Utils.toBase64(SignedMessage.sign([...preimage('capabilities', body)], key)) }
    const expectation = { identity, baseURL: 'https://overlay.example.test', network: 'mainnet', genesisHash: config.chain.genesisHash, now: 1764500000, maxFutureSkew: 300 }
    const accepted = native.acceptManifest(signed, expectation, preimage)
    expect(accepted.digest).toBe(sha256hex(preimage('capabilities', body)))
    expect(accepted.identity).toBe(identity)
    expect(accepted.expiresAt).toBe('1764547200')
    expect(accepted.live).toEqual([{ service: 'ls_notes', rulesDigest: 'ab'.repeat(32), authentication: 'brc103', maxRequestBytes: 1048576, maxResponseBytes: 4194304, sessionSeconds: '3600', replaySeconds: '86400', maxObservations: 1024, maxWaitMs: 25000 }])
    expectCode(() => native.acceptManifest(signed, { ...expectation, now: 1764547200 }, preimage), 'expired')
    expectCode(() => native.acceptManifest(signed, { ...expectation, identity: PrivateKey.fromRandom().toPublicKey().toString() }, preimage), 'invalid')
    expect(() => native.acceptManifest(signed, { ...expectation, now: -1 }, preimage)).toThrow(/expectation.now/)
  })

  test('signing key must be the manifest identity; bad configs and callbacks are clean errors', () => {
    const body = native.buildManifest(config)
    expect(() => native.signManifest(body, PrivateKey.fromRandom().toHex(), preimage)).toThrow(/identity/)
    expect(() => native.buildManifest({ ...config, expiresAt: 1 })).toThrow(/issuedAt/)
    expect(() => native.buildManifest({ ...config, extra: 1 })).toThrow(/unknown field/)
    expect(() => native.signManifest(body, key.toHex(), () => { throw new Error('boom') })).toThrow(/boom/)
  })

  test("without a callback the package's own JCS preimage is used, and the SDK verifies it", () => {
    const body = native.buildManifest(config)
    const signed = native.signManifest(body, key.toHex())
    const ownPreimage = [...preimage('capabilities', body)]
    expect(SignedMessage.verify(ownPreimage, Utils.toArray(signed.signature, 'base64'))).toBe(true)
    expect(native.capabilityDigest(body)).toBe(require('../js/common/wire').digest('capabilities', body))
    expect(native.verifySignedManifest(signed)).toBe(identity)
  })
})
