// Types for js/provider/router.js.
/** An Express middleware (kept structural so no Express type package is needed). */
export type RequestHandler = (req: any, res: any, next: (err?: unknown) => void) => void

export interface RouterOptions {
  /** The advertised base URL; routes live at {path}/overlay/v1/... */
  baseURL: string
  authentication: 'brc103' | 'none'
  /**
   * Provider identity private key, 64 hex or a @bsv/sdk PrivateKey: signs the manifest (in
   * public mode too), and BRC-104 through a NativeWallet unless wallet.
   */
  privateKey: string | { toHex (): string }
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
  /** Serves `GET {health}` (e.g. '/health'): 200 with a HealthReport when ready, else 503. Off unless given. */
  health?: string
  /** Serves `GET {metrics}` (e.g. '/metrics') in the Prometheus text format. Off unless given. */
  metrics?: string
  /** Per request; never receives cursors or bodies. */
  log?: (entry: { op: string; status: number; principal: string | null; bytes?: number; error?: string }) => void
}

/** What the health route answers (and `router.health()` returns). */
export interface HealthReport {
  /** 'ok' once the store is open, not waiting for a re-seed, a service is wrapped and an Engine attached. */
  status: 'ok' | 'unavailable'
  /** Names of the wrapped services. */
  services: string[]
  storeOpen: boolean
  engineAttached: boolean
  restoredPending: boolean
  /** What keeps the status from 'ok', each saying what to do. */
  problems: string[]
  mode?: 'public' | 'brc103'
  baseURL?: string
  epoch?: string
  highWater?: string
  sessions?: number
  waitingPolls?: number
  gateWaiting?: number
  /** Milliseconds since a commit last became visible (null before the first). */
  publishedAgoMs?: number | null
  overRetentionBudget?: boolean
  /** The last submit's publication lag in ms (metrics route served only), or null. */
  lastPublicationLagMs?: number | null
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
  /** The health report (whether or not the health route is served). */
  health (): HealthReport
  /** The metrics in the Prometheus text format (starts the commit counters on first use). */
  metrics (): string
}

export declare const PROFILE: 'https://bsv.brc.dev/overlays/0193#lookup-live-v1'
export declare const VARY: string
export declare const MAX_BODY: number
export declare function createRouter (live: import('./live').LiveLookup, options: RouterOptions): LiveRouter
