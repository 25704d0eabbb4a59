// Types for js/auth/wallet.js: the BRC-100 subset that BRC-103/104 authentication
// uses, with the argument and result shapes of @bsv/sdk's ProtoWallet.

/** `[securityLevel, protocolName]` (BRC-43). */
export type WalletProtocol = [0 | 1 | 2, string]
/** 'self', 'anyone' (the private key 1) or a public key in hex. */
export type WalletCounterparty = string | 'self' | 'anyone'
export type Bytes = number[] | Uint8Array

export interface KeyArgs {
  protocolID: WalletProtocol
  keyID: string
  counterparty?: WalletCounterparty
}

export interface GetPublicKeyArgs extends Partial<KeyArgs> {
  identityKey?: boolean
  forSelf?: boolean
}

export interface CreateSignatureArgs extends KeyArgs {
  data?: Bytes
  hashToDirectlySign?: number[]
}

export interface VerifySignatureArgs extends KeyArgs {
  data?: Bytes
  hashToDirectlyVerify?: number[]
  signature: Bytes
  forSelf?: boolean
}

export interface CreateHmacArgs extends KeyArgs {
  data: Bytes
}

export interface VerifyHmacArgs extends KeyArgs {
  data: Bytes
  hmac: Bytes
}

/**
 * A wallet whose key lives in the Rust core. Drop-in for ProtoWallet wherever
 * Peer, AuthFetch or createAuthMiddleware take a wallet.
 */
export declare class NativeWallet {
  private constructor ()
  /** 64 hex digits (shorter is left-padded), or an object with toHex() such as @bsv/sdk's PrivateKey. */
  static fromPrivateKey (privateKey: string | { toHex (): string }): NativeWallet
  getPublicKey (args: GetPublicKeyArgs, originator?: string): Promise<{ publicKey: string }>
  createSignature (args: CreateSignatureArgs, originator?: string): Promise<{ signature: number[] }>
  /** Resolves `{valid: true}`; rejects with code ERR_INVALID_SIGNATURE otherwise (like ProtoWallet). */
  verifySignature (args: VerifySignatureArgs, originator?: string): Promise<{ valid: true }>
  createHmac (args: CreateHmacArgs, originator?: string): Promise<{ hmac: number[] }>
  /** Resolves `{valid: true}`; rejects with code ERR_INVALID_HMAC otherwise (like ProtoWallet). */
  verifyHmac (args: VerifyHmacArgs, originator?: string): Promise<{ valid: true }>
}
