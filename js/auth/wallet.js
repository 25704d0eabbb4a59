'use strict'
// NativeWallet: the BRC-100 wallet methods that BRC-103/104 mutual
// authentication uses (@bsv/sdk's Peer and AuthFetch, and
// @bsv/auth-express-middleware), computed by the Rust core (src/wallet/) with
// the same arguments, results and errors as @bsv/sdk's ProtoWallet. This file
// only reshapes arguments: data to bytes exactly as the SDK reads them, and
// the two rarely used inputs whose parsing is the SDK's own (a DER signature
// to verify, a hash given directly) through the SDK's own parsers, so that
// accept/reject answers cannot drift. The private key goes into Rust once and
// is never stored, logged or returned on the JS side.

const { BigNumber, Hash, Signature, Utils } = require('@bsv/sdk')
const { NativeWalletCore } = require('../common/native')

/**
 * Bytes of `data` as the SDK hashes it: `Hash.sha256` and `sha256hmac` read
 * anything but a Uint8Array with Hash's own `toArray` (which, unlike
 * `Utils.toArray`, encodes a lone surrogate as three bytes and reads a falsy
 * value as no data).
 */
function bytesOf (data) {
  if (data instanceof Uint8Array) return data
  if (Array.isArray(data)) return Buffer.from(data)
  return Uint8Array.from(Hash.toArray(data))
}

/** `value` as bytes if it is a Uint8Array or an array of integers 0-255; else null. */
function byteArray (value) {
  if (value instanceof Uint8Array) return value
  if (!Array.isArray(value)) return null
  for (let i = 0; i < value.length; i++) {
    const v = value[i]
    if (typeof v !== 'number' || (v & 0xff) !== v) return null
  }
  return Buffer.from(value)
}

/** A 32-byte hash given directly, read the way ECDSA.sign/verify read it; null if over 256 bits. */
function directHash (hash) {
  const value = new BigNumber(hash)
  if (value.bitLength() > 256) return null
  return Buffer.from(value.toArray('be', 32))
}

/** The counterparty as a string for the core: 'self', 'anyone' or public key hex. */
function counterpartyOf (counterparty) {
  if (typeof counterparty === 'string') return counterparty
  // A PublicKey instance (ProtoWallet's KeyDeriver accepts those as well).
  if (counterparty && typeof counterparty.toDER === 'function' && typeof counterparty.encode === 'function') {
    return counterparty.toString()
  }
  throw new TypeError('counterparty must be self, anyone or a public key!')
}

/**
 * The core's `KeyArgs` `{level, protocol, keyId, counterparty, forSelf}` for a BRC-100
 * call. The SDK reads `protocolID[1]` with `.toLowerCase()` and template-formats a
 * non-string key ID; the core checks everything else (BRC-43 rules, in the SDK's
 * order and with its messages).
 */
function keyArgs (protocolID, keyID, counterparty, forSelf = false) {
  const cp = counterpartyOf(counterparty)
  const level = protocolID[0]
  const name = protocolID[1]
  if (typeof name !== 'string') {
    // The SDK checks the level before it lower-cases the name.
    if (!Number.isInteger(level) || level < 0 || level > 2) throw new Error('Protocol security level must be 0, 1, or 2')
    throw new TypeError('protocolID[1].toLowerCase is not a function')
  }
  let key = keyID
  if (typeof key !== 'string') {
    const length = key.length // a TypeError for null/undefined, as in the SDK
    if (length > 800) throw new Error('Key IDs must be 800 characters or less')
    if (length < 1) throw new Error('Key IDs must be 1 character or more')
    key = `${key}`
  }
  return { level: typeof level === 'number' ? level : NaN, protocol: name, keyId: key, counterparty: cp, forSelf }
}

/** Runs a core call; its errors become plain Errors with ProtoWallet's messages. */
function call (fn) {
  try {
    return fn()
  } catch (e) {
    if (e instanceof TypeError) throw e
    throw new Error(e && e.message)
  }
}

function invalid (message, code) {
  return Object.assign(new Error(message), { code })
}

const CONSTRUCTING = Symbol('NativeWallet')

/** The Rust core of a NativeWallet, or null for any other object (see coreOf below). */
let coreOfWallet

class NativeWallet {
  #core
  #identityKey

  static {
    coreOfWallet = (wallet) => (wallet !== null && typeof wallet === 'object' && #core in wallet) ? wallet.#core : null
  }

  /** Use `NativeWallet.fromPrivateKey`. */
  constructor (token, core) {
    if (token !== CONSTRUCTING) throw new TypeError('use NativeWallet.fromPrivateKey(hex)')
    this.#core = core
    this.#identityKey = core.identityKey()
  }

  /**
   * @param {string | { toHex(): string }} privateKey 64 hex digits, or an @bsv/sdk PrivateKey
   */
  static fromPrivateKey (privateKey) {
    const hex = typeof privateKey === 'string' ? privateKey : privateKey && typeof privateKey.toHex === 'function' ? privateKey.toHex() : null
    if (typeof hex !== 'string') throw new TypeError('NativeWallet.fromPrivateKey needs a hex string or a PrivateKey')
    return new NativeWallet(CONSTRUCTING, call(() => NativeWalletCore.fromPrivateKey(hex)))
  }

  async getPublicKey (args) {
    if (args.identityKey) return { publicKey: this.#identityKey }
    if (args.protocolID == null || args.keyID == null || args.keyID === '') {
      throw new Error('protocolID and keyID are required if identityKey is false or undefined.')
    }
    const key = keyArgs(args.protocolID, args.keyID, args.counterparty ?? 'self', !!args.forSelf)
    return { publicKey: call(() => this.#core.derivePublicKey(key)) }
  }

  async createSignature (args) {
    if (args.hashToDirectlySign == null && args.data == null) {
      throw new Error('args.data or args.hashToDirectlySign must be valid')
    }
    let hash = null
    if (args.hashToDirectlySign != null) {
      hash = directHash(args.hashToDirectlySign)
      if (hash === null) throw new Error('ECDSA message is too large: expected <= 256 bits. Callers must hash messages before signing.')
    }
    const data = hash === null ? bytesOf(args.data) : null
    const key = keyArgs(args.protocolID, args.keyID, args.counterparty ?? 'anyone')
    const der = call(() => this.#core.createSignature(key, data, hash))
    return { signature: Array.from(der) }
  }

  async verifySignature (args) {
    if (args.hashToDirectlyVerify == null && args.data == null) {
      throw new Error('args.data or args.hashToDirectlyVerify must be valid')
    }
    let hash = null
    let tooLarge = false
    if (args.hashToDirectlyVerify != null) {
      hash = directHash(args.hashToDirectlyVerify)
      // Over 256 bits never verifies, but key and DER errors still come first.
      tooLarge = hash === null
      if (tooLarge) hash = Buffer.alloc(32)
    }
    const data = args.hashToDirectlyVerify == null ? bytesOf(args.data) : null
    const key = keyArgs(args.protocolID, args.keyID, args.counterparty ?? 'self', !!args.forSelf)
    let valid = false
    const der = byteArray(args.signature)
    if (der !== null) {
      // The usual case: bytes, parsed in the core exactly like Signature.fromDER.
      valid = call(() => this.#core.verifySignatureDer(key, der, data, hash)) && !tooLarge
    } else {
      // Anything else (strings, arrays holding non-bytes) goes through the SDK's parser.
      let sig
      try {
        sig = Signature.fromDER(args.signature)
      } catch (e) {
        // The SDK derives the key before it parses the signature: a bad key
        // argument is the error to report.
        call(() => this.#core.derivePublicKey(key))
        throw e
      }
      if (sig.r.byteLength() <= 32 && sig.s.byteLength() <= 32) {
        const compact = Buffer.concat([Buffer.from(sig.r.toArray('be', 32)), Buffer.from(sig.s.toArray('be', 32))])
        valid = call(() => this.#core.verifySignature(key, compact, data, hash)) && !tooLarge
      } else {
        call(() => this.#core.derivePublicKey(key))
      }
    }
    if (!valid) throw invalid('Signature is not valid', 'ERR_INVALID_SIGNATURE')
    return { valid }
  }

  async createHmac (args) {
    const key = keyArgs(args.protocolID, args.keyID, args.counterparty ?? 'self')
    const hmac = call(() => this.#core.createHmac(key, bytesOf(args.data)))
    return { hmac: Array.from(hmac) }
  }

  async verifyHmac (args) {
    const key = keyArgs(args.protocolID, args.keyID, args.counterparty ?? 'self')
    const data = bytesOf(args.data)
    // The SDK compares `a[i] ^ b[i]` over `toArray(hmac)`: an element matches
    // only if its Int32 value is that byte.
    const provided = Utils.toArray(args.hmac)
    let bytes = Buffer.alloc(0)
    if (provided.length === 32) {
      bytes = Buffer.alloc(32)
      for (let i = 0; i < 32; i++) {
        const v = 0 ^ provided[i]
        if (v < 0 || v > 255) { bytes = Buffer.alloc(0); break }
        bytes[i] = v
      }
    }
    const valid = call(() => this.#core.verifyHmac(key, data, bytes))
    if (!valid) throw invalid('HMAC is not valid', 'ERR_INVALID_HMAC')
    return { valid }
  }
}

/**
 * The core behind a NativeWallet, for the package's own hot paths
 * (js/auth/brc104.js) that call it with Buffers and flat arguments instead of
 * the BRC-100 shapes; null if `wallet` is not a NativeWallet. Not exported
 * from the package root. The core only signs and verifies what the wallet's
 * own methods already would; the key still never leaves Rust.
 */
function coreOf (wallet) {
  return coreOfWallet(wallet)
}

module.exports = { NativeWallet, coreOf }
