// Types for js/provider/router.js.
/** An Express middleware (kept structural so no Express type package is needed). */
export type RequestHandler = (req: any, res: any, next: (err?: unknown) => void) => void

export interface RouterOptions {
  /** The advertised base URL; routes live at {path}/overlay/v1/... */
  baseURL: string
  authentication: 'brc103' | 'none'
  /** Provider identity private key, 64 hex: signs the manifest, and BRC-104 through a NativeWallet unless wallet. */
  privateKey: string
  /** A BRC-100 wallet holding privateKey's identity for BRC-104 (default: NativeWallet.fromPrivateKey(privateKey)). */
  wallet?: unknown
  /** Bounds of the BRC-103 session table (defaults 50,000 sessions, 16 per client identity). */
  authSessions?: { maxSessions?: number; sessionsPerIdentity?: number }
  /** Exact origins allowed with credentials; '*' is refused. */
  allowedOrigins?: string[]
  /** Permits an http: baseURL for local development. */
  allowLocalHttp?: boolean
  /** Manifest validity in seconds (default 86400). */
  manifestSeconds?: number
  /** Per request; never receives cursors or bodies. */
  log?: (entry: { op: string; status: number; principal: string | null; bytes?: number; error?: string }) => void
}

/** An Express router: mount it with app.use(). */
export interface LiveRouter extends RequestHandler {
  manifest: {
    digest (): string
    bytes (): Buffer
  }
  /** The BRC-104 wallet in use (a NativeWallet by default); null in public mode. */
  wallet: import('../auth/wallet').NativeWallet | unknown | null
  /** The BRC-103 provider side (null in public mode): `sessions.size` is the number of live sessions. */
  auth: { identityKey: string; sessions: { readonly size: number } } | null
}

export declare const PROFILE: 'https://bsv.brc.dev/overlays/0193#lookup-live-v1'
export declare const VARY: string
export declare const MAX_BODY: number
export declare function createRouter (live: import('./live').LiveLookup, options: RouterOptions): LiveRouter
