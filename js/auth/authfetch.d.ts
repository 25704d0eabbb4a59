// Types for js/auth/authfetch.js: a BRC-104 client for Node, wire-compatible with
// @bsv/sdk's AuthFetch and @bsv/auth-express-middleware servers.

export interface NativeAuthFetchOptions {
  /** Bound on a response's header block, in bytes (node:http maxHeaderSize). Default 16384. */
  maxHeaderBytes?: number
  /** Bound on a response body, in bytes; a larger one rejects. Default 8 MiB. */
  maxBodyBytes?: number
  /** Deadline of one handshake (POST /.well-known/auth). Default 30000. */
  handshakeTimeoutMs?: number
  /** Options for the keep-alive node:http / node:https Agents (e.g. maxSockets, ca). */
  agentOptions?: import('node:https').AgentOptions
}

export interface NativeAuthFetchRequest {
  /** Default 'GET'. */
  method?: string
  /** Only content-type, authorization and x-bsv-* (not x-bsv-auth-*) headers, as with AuthFetch. */
  headers?: Record<string, string>
  /** A string (UTF-8), bytes, or an object sent as JSON. */
  body?: string | Uint8Array | ArrayBuffer | object
  /** Aborts the request (and a wait for its handshake). */
  signal?: AbortSignal
}

/** The per-origin state, as AuthFetch's `peers` entries expose it. */
export interface NativeAuthPeer {
  /** The server's identity key, once the handshake verified. */
  identityKey?: string
  supportsMutualAuth?: boolean
}

/** Anything with the BRC-100 methods BRC-103 uses (ProtoWallet, a wallet client). */
export interface AuthWallet {
  getPublicKey (args: { identityKey: true }): Promise<{ publicKey: string }>
  createSignature (args: any): Promise<{ signature: number[] }>
  verifySignature (args: any): Promise<{ valid: boolean }>
  createHmac (args: any): Promise<{ hmac: number[] }>
  verifyHmac (args: any): Promise<{ valid: boolean }>
}

export declare class NativeAuthFetch {
  /** A NativeWallet is used through its Rust core; any other wallet through its async methods. */
  constructor (wallet: import('./wallet').NativeWallet | AuthWallet, options?: NativeAuthFetchOptions)
  /** One entry per origin; deleting one forgets that session (the next request handshakes again). */
  peers: Record<string, NativeAuthPeer>
  /**
   * A mutually authenticated request. Resolves the response (status, the signed
   * x-bsv-* / authorization headers plus x-bsv-auth-identity-key, the body) once its
   * signature verified; rejects otherwise. A 402 is returned as it is. The Response
   * is a subclass holding the verified body as bytes: its body members behave as
   * Response's (read once), and its `body` stream is made only when asked for.
   */
  fetch (url: string, config?: NativeAuthFetchRequest): Promise<Response>
  /** Returns `response`: this client never pays (an override point, as on AuthFetch). */
  handlePaymentAndRetry (url: string, config: NativeAuthFetchRequest, response: Response): Promise<Response>
  /** Destroys the keep-alive sockets so that the process can exit. */
  close (): void
}
