'use strict'
// NativeWallet (Rust core) against @bsv/sdk's ProtoWallet: random keys,
// protocol IDs, key IDs, counterparties and data agree byte for byte in both
// directions, and malformed inputs get the same accept/reject answer.

const { ProtoWallet, PrivateKey, PublicKey, Utils } = require('@bsv/sdk')
const { NativeWallet } = require('../js')

/** Deterministic PRNG (mulberry32) so a failure names a reproducible case. */
function rng (seed) {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (n) => Math.floor(next() * n)
  const bytes = (n) => Array.from({ length: n }, () => int(256))
  const pick = (list) => list[int(list.length)]
  return { next, int, bytes, pick }
}

function randomKey (r) {
  for (;;) {
    try {
      const k = PrivateKey.fromHex(Buffer.from(r.bytes(32)).toString('hex'))
      if (k.toHex().length === 64) return k
    } catch (_) {}
  }
}

const WORDS = ['auth', 'message', 'signature', 'server', 'hmac', 'lookup', 'live', 'x1', 'abc', 'overlay', 'tm', '42']

function randomProtocol (r) {
  let name = ''
  while (name.length < 5) name = Array.from({ length: 1 + r.int(4) }, () => r.pick(WORDS)).join(' ')
  // Case and surrounding whitespace are normalized by both wallets.
  if (r.int(4) === 0) name = name.toUpperCase()
  if (r.int(6) === 0) name = ' \t' + name + '\u00a0'
  return [r.int(3), name]
}

/** Key IDs as Peer makes them (base64 nonces, UTF-8 decodes of random bytes) and odd Unicode. */
function randomKeyID (r) {
  switch (r.int(5)) {
    case 0: return Buffer.from(r.bytes(32)).toString('base64') + ' ' + Buffer.from(r.bytes(32)).toString('base64')
    case 1: return Utils.toUTF8(r.bytes(16)) || 'x'
    case 2: return String.fromCharCode(...Array.from({ length: 1 + r.int(20) }, () => r.int(0x10000)))
    case 3: return '\ud83d\ude00'.repeat(1 + r.int(400))
    default: return String(r.int(1e9))
  }
}

function randomData (r) {
  const data = r.bytes(r.int(300))
  return r.int(3) === 0 ? Uint8Array.from(data) : data
}

function hex (a) { return Buffer.from(a).toString('hex') }

describe('NativeWallet agrees with ProtoWallet on random inputs', () => {
  // 4 x 60 cases (4 x 250 with OLL_TEST_SCALE=nightly), two random root keys each, every
  // counterparty kind. ProtoWallet's pure-JS curve arithmetic is most of the time.
  const cases = process.env.OLL_TEST_SCALE === 'nightly' ? 250 : 60
  for (const seed of [1, 2, 3, 4]) {
    test(`seed ${seed}`, async () => {
      const r = rng(seed)
      let leadingZeroKeys = 0
      for (let i = 0; i < cases; i++) {
        const aKey = randomKey(r)
        const bKey = randomKey(r)
        const aNative = NativeWallet.fromPrivateKey(aKey.toHex())
        const aProto = new ProtoWallet(aKey)
        const bProto = new ProtoWallet(bKey)
        const aPub = aKey.toPublicKey().toString()
        const bPub = bKey.toPublicKey().toString()
        const kind = r.pick(['key', 'self', 'anyone', 'key'])
        const counterparty = kind === 'key' ? bPub : kind
        const protocolID = randomProtocol(r)
        const keyID = randomKeyID(r)
        const data = randomData(r)
        const args = { protocolID, keyID, counterparty, data }
        const where = `seed ${seed} case ${i} (${kind})`

        expect({ where, id: (await aNative.getPublicKey({ identityKey: true })).publicKey }).toEqual({ where, id: aPub })
        const forSelf = r.int(2) === 0
        expect({ where, k: (await aNative.getPublicKey({ protocolID, keyID, counterparty, forSelf })).publicKey })
          .toEqual({ where, k: (await aProto.getPublicKey({ protocolID, keyID, counterparty, forSelf })).publicKey })

        // Signatures: same bytes (both RFC 6979), and they verify on the other side.
        const nativeSig = (await aNative.createSignature(args)).signature
        expect({ where, s: hex(nativeSig) }).toEqual({ where, s: hex((await aProto.createSignature(args)).signature) })
        if (kind === 'key') {
          // The counterparty verifies with the signer as its counterparty.
          await expect(bProto.verifySignature({ protocolID, keyID, counterparty: aPub, data, signature: nativeSig })).resolves.toEqual({ valid: true })
          const bNative = NativeWallet.fromPrivateKey(bKey.toHex())
          const protoSig = (await bProto.createSignature({ protocolID, keyID, counterparty: aPub, data })).signature
          await expect(aNative.verifySignature({ protocolID, keyID, counterparty: bPub, data, signature: protoSig })).resolves.toEqual({ valid: true })
          // Symmetric keys are shared between the two parties.
          const mac = (await bNative.createHmac({ protocolID, keyID, counterparty: aPub, data })).hmac
          await expect(aProto.verifyHmac({ protocolID, keyID, counterparty: bPub, data, hmac: mac })).resolves.toEqual({ valid: true })
        } else {
          await expect(aProto.verifySignature({ ...args, signature: nativeSig, forSelf: true })).resolves.toEqual({ valid: true })
        }
        // A flipped data byte is refused by both.
        const tampered = Array.from(data.length ? data : [0])
        tampered[0] ^= 1
        const vArgs = { ...args, data: tampered, signature: nativeSig, forSelf: kind !== 'key' }
        if (kind === 'key') vArgs.counterparty = bPub
        await expect(aNative.verifySignature(vArgs)).rejects.toThrow('Signature is not valid')

        // HMACs: byte-identical; each verifies the other's.
        const nativeMac = (await aNative.createHmac(args)).hmac
        const protoMac = (await aProto.createHmac(args)).hmac
        expect({ where, m: hex(nativeMac) }).toEqual({ where, m: hex(protoMac) })
        await expect(aNative.verifyHmac({ ...args, hmac: protoMac })).resolves.toEqual({ valid: true })
        const sym = aProto.keyDeriver.deriveSymmetricKey(protocolID, keyID, counterparty).toArray()
        if (sym.length < 32) leadingZeroKeys++
      }
      // Not asserted (chance), reported: symmetric keys with a leading zero byte met.
      if (leadingZeroKeys === 0) console.log(`seed ${seed}: no symmetric key with a leading zero byte`)
    })
  }

  test('a symmetric key with a leading zero byte gives the same HMAC (SymmetricKey.toArray drops it)', async () => {
    const key = PrivateKey.fromHex('7'.repeat(64))
    const proto = new ProtoWallet(key)
    const native = NativeWallet.fromPrivateKey(key.toHex())
    let found = 0
    for (let i = 0; found < 2 && i < 5000; i++) {
      const args = { protocolID: [2, 'server hmac'], keyID: 'k' + i, counterparty: 'self', data: [i & 255] }
      if (proto.keyDeriver.deriveSymmetricKey(args.protocolID, args.keyID, 'self').toArray().length === 32) continue
      found++
      expect(hex((await native.createHmac(args)).hmac)).toBe(hex((await proto.createHmac(args)).hmac))
    }
    expect(found).toBe(2)
  })
})

/** Runs the same call on both wallets; returns both outcomes. */
async function both (method, args, key = PrivateKey.fromHex('5'.repeat(64))) {
  const outcome = async (wallet) => {
    try {
      const v = await wallet[method](typeof args === 'function' ? args() : args)
      return { ok: JSON.stringify(v) }
    } catch (e) {
      // ProtoWallet's TypeErrors come from property accesses on wrong types;
      // their wording depends on the code path, so only the kind is compared.
      return e instanceof TypeError ? { error: 'TypeError' } : { error: e.message }
    }
  }
  // A fresh ProtoWallet per case: its derivation cache would otherwise
  // answer for inputs it would refuse (it keys ['2', name] like [2, name]).
  return { native: await outcome(NativeWallet.fromPrivateKey(key.toHex())), proto: await outcome(new ProtoWallet(key)) }
}

const P = [2, 'auth message signature']
const OTHER = PrivateKey.fromHex('6'.repeat(64)).toPublicKey()

describe('malformed and edge inputs get the same answer and message', () => {
  const uncompressed = OTHER.encode(false, 'hex')
  const y = OTHER.encode(false)
  const hybrid = (y[64] % 2 === 0 ? '06' : '07') + uncompressed.slice(2)
  const wrongHybrid = (y[64] % 2 === 0 ? '07' : '06') + uncompressed.slice(2)
  const counterparties = [
    'self', 'anyone', 'Self', 'ANYONE', '', 'zz', OTHER.toString(), OTHER.toString().toUpperCase(), OTHER.toString().slice(1),
    OTHER.toString().slice(0, 64), uncompressed, hybrid, wrongHybrid, '02' + '00'.repeat(32), '02' + '05'.padStart(64, '0'),
    '04' + '11'.repeat(64), undefined, null, OTHER, 123, {}
  ]
  const protocols = [
    [0, 'hello world'], [1, 'hello world'], [2, 'hello world'], [3, 'hello world'], [-1, 'hello world'], [1.5, 'hello world'],
    ['2', 'hello world'], [NaN, 'hello world'], [null, 'hello world'], [-0, 'hello world'],
    [2, 'four'], [2, 'a'.repeat(400)], [2, 'a'.repeat(401)], [2, 'specific linkage revelation ' + 'a'.repeat(402)],
    [2, 'specific linkage revelation ' + 'a'.repeat(403)], [2, 'two  spaces'], [2, 'Upper Case OK'], [2, 'dash-name'],
    [2, 'caf\u00e9 name'], [2, '\u212Aelvin sign'], [2, 'my own protocol'], [2, '  padded name  '], [2, '\ufeffbom name\u3000'],
    [2, '\u0085nel name'], [2, 'tab\tname'], [2, 12345], [2, null], [2], []
  ]
  const keyIDs = ['1', '', 'x'.repeat(800), 'x'.repeat(801), '\ud83d\ude00'.repeat(400), '\ud83d\ude00'.repeat(401),
    '\ud800 lone', 'lone \udfff', '\u0000nul', 5, 0, ['a', 'b'], [], null, undefined, { length: 3 }]

  test('counterparties', async () => {
    for (const counterparty of counterparties) {
      for (const method of ['getPublicKey', 'createHmac', 'createSignature']) {
        const r = await both(method, { protocolID: P, keyID: 'k', counterparty, data: [1] })
        expect({ counterparty: String(counterparty), method, ...r.native }).toEqual({ counterparty: String(counterparty), method, ...r.proto })
      }
    }
  })

  test('protocol IDs', async () => {
    for (const protocolID of protocols) {
      for (const method of ['getPublicKey', 'createHmac', 'createSignature']) {
        const r = await both(method, { protocolID, keyID: 'k', counterparty: 'self', data: [1] })
        expect({ protocolID, method, ...r.native }).toEqual({ protocolID, method, ...r.proto })
      }
    }
  })

  test('key IDs', async () => {
    for (const keyID of keyIDs) {
      for (const method of ['getPublicKey', 'createHmac', 'createSignature']) {
        const r = await both(method, { protocolID: P, keyID, counterparty: 'anyone', data: [1] })
        expect({ keyID, method, ...r.native }).toEqual({ keyID, method, ...r.proto })
      }
    }
  })

  test('getPublicKey argument shapes', async () => {
    for (const args of [{ identityKey: true }, { identityKey: 1 }, {}, { protocolID: P }, { keyID: 'k' },
      { protocolID: P, keyID: 'k' }, { protocolID: P, keyID: 'k', forSelf: true }, { protocolID: P, keyID: 'k', forSelf: 'yes' },
      { protocolID: P, keyID: 'k', counterparty: OTHER.toString(), forSelf: true }]) {
      const r = await both('getPublicKey', args)
      expect({ args, ...r.native }).toEqual({ args, ...r.proto })
    }
  })

  test('data shapes', async () => {
    const datas = [[], [0, 255], [256, -1, 1.5, '7', null], 'a string', '\ud800', Uint8Array.from([1, 2]), Buffer.from('buf'),
      new Uint16Array([513]), { 0: 1, length: 1 }, 42, undefined, null]
    for (const data of datas) {
      for (const method of ['createHmac', 'createSignature']) {
        const r = await both(method, { protocolID: P, keyID: 'k', counterparty: 'self', data })
        expect({ data: String(data), method, ...r.native }).toEqual({ data: String(data), method, ...r.proto })
      }
    }
  })

  test('hashes given directly', async () => {
    const hashes = [Array(32).fill(1), Array(32).fill(255), [1, 2, 3], [], Array(33).fill(1), [0, ...Array(32).fill(255)],
      [1, ...Array(32).fill(0)], Uint8Array.from(Array(32).fill(1))]
    for (const hashToDirectlySign of hashes) {
      const r = await both('createSignature', { protocolID: P, keyID: 'k', hashToDirectlySign })
      expect({ hashToDirectlySign, ...r.native }).toEqual({ hashToDirectlySign, ...r.proto })
      // And the signature made by each verifies (or fails) on the other.
      if (r.proto.ok) {
        const signature = JSON.parse(r.proto.ok).signature
        for (const hashToDirectlyVerify of hashes) {
          const v = await both('verifySignature', { protocolID: P, keyID: 'k', counterparty: 'anyone', forSelf: true, hashToDirectlyVerify, signature })
          expect({ hashToDirectlyVerify, ...v.native }).toEqual({ hashToDirectlyVerify, ...v.proto })
        }
      }
    }
    const r = await both('createSignature', { protocolID: P, keyID: 'k' })
    expect(r.native).toEqual(r.proto)
  })

  test('signatures: DER forms, ranges, high S, garbage', async () => {
    const key = PrivateKey.fromHex('5'.repeat(64))
    const proto = new ProtoWallet(key)
    const data = [9, 9, 9]
    const base = { protocolID: P, keyID: 'k', counterparty: 'self', data }
    const good = (await proto.createSignature({ ...base, counterparty: 'self' })).signature
    const { Signature, BigNumber } = require('@bsv/sdk')
    const sig = Signature.fromDER(good)
    const n = new BigNumber('fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141', 16)
    const highS = new Signature(sig.r, n.sub(sig.s)).toDER()
    const der = (r, s) => [0x30, r.length + s.length + 4, 0x02, r.length, ...r, 0x02, s.length, ...s]
    const rBytes = sig.r.toArray('be', 32)
    const sBytes = sig.s.toArray('be', 32)
    const r = rng(7)
    const signatures = [
      good, highS, good.slice(0, -1), [...good, 0], [], [0x30], [0x31, ...good.slice(1)], der([], []), der([0], sBytes),
      der([0, ...rBytes], sBytes), der([0, 0x80, ...rBytes.slice(1)], sBytes), der(rBytes, [0, ...sBytes]),
      der([1, ...rBytes], sBytes), der(Array(32).fill(0xff), sBytes), der(rBytes, Array(33).fill(0x01)),
      good.map((b, i) => (i === 10 ? b ^ 1 : b)), Uint8Array.from(good), hex(good), good.map(String),
      [...good.slice(0, 5), 300, ...good.slice(6)], [0x30, 0x81, ...good.slice(2)], null, undefined,
      ...Array.from({ length: 40 }, () => r.bytes(r.int(80))),
      ...Array.from({ length: 40 }, () => der(r.bytes(r.int(34)), r.bytes(r.int(34))))
    ]
    for (const signature of signatures) {
      for (const counterparty of ['self', 'anyone', 'nope']) {
        const v = await both('verifySignature', { ...base, counterparty, signature }, key)
        expect({ signature: String(signature), counterparty, ...v.native }).toEqual({ signature: String(signature), counterparty, ...v.proto })
      }
    }
  })

  test('HMACs to verify: lengths and element types', async () => {
    const key = PrivateKey.fromHex('5'.repeat(64))
    const base = { protocolID: P, keyID: 'k', counterparty: 'self', data: [1] }
    const good = (await new ProtoWallet(key).createHmac(base)).hmac
    const hmacs = [good, Uint8Array.from(good), good.slice(1), [...good, 0], good.map(String), good.map((b) => b + 256),
      good.map((b) => b + 0.5), good.map((b, i) => (i ? b : b ^ 1)), [], 'a string', undefined, null, Buffer.from(good).toString('hex')]
    for (const hmac of hmacs) {
      const v = await both('verifyHmac', { ...base, hmac }, key)
      expect({ hmac: String(hmac), ...v.native }).toEqual({ hmac: String(hmac), ...v.proto })
    }
  })

  test('the private key is not reachable from the object', async () => {
    const hexKey = '3'.repeat(64)
    const w = NativeWallet.fromPrivateKey(hexKey)
    const util = require('util')
    expect(util.inspect(w, { showHidden: true, depth: 5 })).not.toContain(hexKey)
    expect(JSON.stringify(w)).not.toContain(hexKey)
    expect(Object.getOwnPropertyNames(w)).toEqual([])
    expect(() => new NativeWallet()).toThrow(TypeError)
    expect(() => NativeWallet.fromPrivateKey('zz')).toThrow()
    expect(() => NativeWallet.fromPrivateKey('f'.repeat(64))).toThrow()
    expect((await NativeWallet.fromPrivateKey(PrivateKey.fromHex(hexKey)).getPublicKey({ identityKey: true })).publicKey)
      .toBe(PrivateKey.fromHex(hexKey).toPublicKey().toString())
    expect(PublicKey.fromString((await w.getPublicKey({ identityKey: true })).publicKey)).toBeTruthy()
  })
})
