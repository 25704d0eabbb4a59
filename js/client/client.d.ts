// Types for js/client/client.js (lookup-live-v1 client, BRC-193).

/**
 * A source, i.e. one session branch: the BRC-192 Scope minus chain, rules, access and epoch.
 * Those belong to a generation of the source: a provider that moves this client to another
 * access partition serves the same source under a new generation (BRC-193 §5). The store
 * refuses a key with any other field (`invalid`).
 */
export interface SourceKey {
  provider: string
  service: string
  queryDigest: string
}

/** Decimal string of a U64 (BRC-192 §1). */
export type U64 = string

export interface Checkpoint {
  generation: number
  /** null for a finite source: its generations are local refreshes, with no session. */
  session: string | null
  /** null for a finite source: nothing to resume, nothing replayed. */
  cursor: string | null
  /** 'finite' for a generation made of a BRC-24 answer (docs/client.md "Providers that answer only BRC-24"). */
  phase: 'snapshot' | 'live' | 'finite' | null
  through: U64
  highWater: U64
  snapshotComplete: boolean
  expiresAt: U64
  replayUntil: U64
  epoch: string | null
  /** The generation's `scope.access` (null before its first commit). */
  access: string | null
  /** Set (e.g. "equivocation") when this generation may no longer receive. */
  invalidated: string | null
}

export interface CommitOutcome {
  revision: number
  /** Groups newly received and committed. */
  applied: number
  /** Groups already held with identical content (replay). */
  duplicates: number
  /** Groups accepted into membership by this commit. */
  accepted: number
  /** The generation was retired or superseded: nothing was written. */
  ignored: boolean
  /** This commit swapped in a newly complete generation. */
  swapped: boolean
}

export interface Member {
  outpoint: { txid: string; outputIndex: number }
  present: boolean
  sequence: U64
  observationId: string
  /** The newest context of an `output` observation, if any; `bytes` is base64 (decodeContext decodes it). */
  context: OutputContext | null
  /** 'finite' for a row of a finite source (its sequence is then '0'). */
  phase: 'snapshot' | 'live' | 'finite'
  generation: number
  /** The source is being replaced or its continuity was invalidated. */
  stale: boolean
  /** A row of an incomplete replacement generation (from partialMembers). */
  partial: boolean
}

export interface PendingGroup {
  generation: number
  groupId: string
  sequence: U64
}

export interface SourceState {
  revision: number
  currentGeneration: number | null
  pendingGeneration: number | null
  stale: boolean
  invalidated: string | null
  /** Received but not yet accepted groups (at most 64 listed). */
  pendingGroups: PendingGroup[]
  pendingCount: number
  received: number
  accepted: number
  /** Equivocating batches and groups with an invalid member (BRC-192 §8), all generations. */
  quarantined: number
}

/**
 * When received groups enter source membership: `verified` (once the group's evidence has all
 * verified, in receipt order; BRC-193 §9), `manual` (when `markVerified` is called, in receipt
 * order) or `claims` (on receipt: what the source lists, an unverified claim).
 */
export type MembershipRule = 'claims' | 'verified' | 'manual'

export interface CommitBatchOptions {
  maxBytes?: number
  maxObservations?: number
  /** Default `claims` for a direct commit (follow has its own default, see FollowOptions). */
  membership?: MembershipRule
  /** For an open response: the label whose pending open request id this commit consumes. */
  openLabel?: string
}

export type ErrorCode =
  | 'invalid' | 'unsupported' | 'unauthorized' | 'conflict' | 'equivocation' | 'limited'
  | 'unavailable' | 'expired' | 'reset-required' | 'cancelled' | 'context-changed' | 'not-found'

export declare class LiveLookupError extends Error {
  code: ErrorCode | string
  status?: number
  retryable?: boolean
  retryAfterMs?: number
  limit?: unknown
  /** A failure below the protocol (refused, reset, 5xx without an error body): retried by follow. */
  transport?: boolean
  /** Set on a `reset-required` raised by the client: the open's scope had another chain or rules digest. */
  mismatch?: 'chain' | 'rulesDigest'
  sourceKey?: SourceKey
  /** Set on an `invalid` raised for an option key this version does not know: that key. */
  option?: string
  /**
   * false on the client's refusal of a service the provider's BRC-194 manifest offers no
   * lookup-live-v1 for (before any open), or of a provider that cannot be followed live.
   */
  offered?: false
}

export declare class CheckpointStore {
  /** `cacheBytes` bounds the store's page cache (default 64 MiB); memory beyond it is the store's working set (docs/client.md). */
  static open (path: string, options?: { cacheBytes?: number }): CheckpointStore
  close (): void
  beginGeneration (sourceKey: SourceKey, label?: string | null): number
  sourceForLabel (label: string): SourceKey | null
  /** Request id of an open sent but not yet committed under this label. */
  setPendingOpen (label: string, requestId: string): void
  pendingOpen (label: string): string | null
  checkpoint (sourceKey: SourceKey): Checkpoint | null
  /** How long the newest generation has been followed live (null before its snapshot completed): what `renew` counts. */
  renewal (sourceKey: SourceKey): { generation: number; liveGroups: number; liveSince: number | null } | null
  commitBatch (sourceKey: SourceKey, generation: number, expectedCursor: string | null, batch: Buffer, options?: CommitBatchOptions): CommitOutcome
  /** commitBatch on the libuv pool: the same outcome or error, once durable; the JS thread stays free meanwhile. */
  commitBatchAsync (sourceKey: SourceKey, generation: number, expectedCursor: string | null, batch: Buffer, options?: CommitBatchOptions): Promise<CommitOutcome>
  /** Resolves when no pool write (commitBatchAsync, acceptVerificationsAsync) is running (synchronous calls made meanwhile block until it is durable). */
  whenIdle (): Promise<void>
  markVerified (sourceKey: SourceKey, generation: number, groupId: string): CommitOutcome
  members (sourceKey: SourceKey): Member[]
  partialMembers (sourceKey: SourceKey): Member[]
  state (sourceKey: SourceKey): SourceState
  revision (): number
  /** Keys and bytes (key plus value) per key space; scans the whole store (a diagnostic). */
  spaceUsage (): Record<string, { keys: number; bytes: number }>

  // --- spend reconciliation (BRC-192 §10) ---
  configureReconciler (config: ReconcilerConfig): void
  addHeaders (headers: Buffer[]): number
  defineView (id: string, tipHash: string): void
  defineContext (id: string, finality: { tipHeight: U64; medianTimePast: U64 }): void
  addAnchor (raw: Buffer, placement?: Placement | null): StepOutcome
  receiveTransactions (source: string, items: Array<{ raw: Buffer; evidence?: Buffer }>): StepOutcome
  setContext (id: string): StepOutcome
  /**
   * Pending jobs of one transaction, or of all in job order; with `page` (and no txid), at most
   * `limit` of them after the job `after`, so a large backlog is walked a page at a time.
   */
  pendingVerifications (txid?: string | null, page?: { after?: VerificationJob | null; limit?: number } | null): VerificationJob[]
  acceptVerifications (results: VerificationResultInput[]): StepOutcome
  /** acceptVerifications on the libuv pool: the same outcome or error, once durable; the JS thread stays free meanwhile (the verifier uses it). */
  acceptVerificationsAsync (results: VerificationResultInput[]): Promise<StepOutcome>
  /** Clears `limited` verdicts recorded under another budget than `policy` (they are verified again); returns how many. */
  requeueLimited (policy: string): number
  /** The exact evidence bytes of a job (the BEEF it arrived in), or null. */
  verificationEvidence (txid: string, variantId: string): Buffer | null
  /** A transaction's evidence variants with the verifier's recorded verdicts, or null. */
  verdicts (txid: string): VariantVerdict[] | null
  addPlacement (txid: string, placement: Placement): StepOutcome
  reconciledView (): ReconciledView | null
  reconciledState (chain: { network: string; genesisHash: string }): ReconciledState | null
  /** With `atRevision`, a `conflict` error once the store has moved past that revision. */
  revisionSnapshot (sourceKey: SourceKey, atRevision?: number): RevisionSnapshot
}

export interface ReconcilerConfig {
  journalId: string
  /** The BRC-192 §10 `{nonFinal}` policy parameter. */
  nonFinal: boolean
  /** A context defined beforehand with defineView/defineContext, active at position 0. */
  initialContext: string
}

export interface Placement { block: string; height: number }

export interface StepOutcome {
  revision: number
  /** Journal position taken by a receive or context change. */
  position: U64 | null
  accepted: number
  /** Results for another context than the current one (not recorded). */
  stale: number
  ignored: number
  components: number
}

export interface VerificationJob {
  txid: string
  variantId: string
  contextId: string
  firstRaw: { position: U64; index: number }
}

export interface VariantVerdict {
  variantId: string
  verdict: { status: 'verified' | 'invalid' | 'limited'; contextId: string; reason: string; policy?: string } | null
  /** The evidence was refused when it was received (it never became a job). */
  atReceipt?: true
}

export interface VerificationResultInput {
  txid: string
  variantId: string
  contextId: string
  status: 'verified' | 'invalid' | 'unresolved' | 'limited' | 'cancelled' | 'context-changed'
  /** The transaction's raw bytes; required for `verified`. */
  raw?: Buffer
  placement?: Placement
  reason: string
  /** For `limited`: the verification budget it was measured against (see requeueLimited). */
  policy?: string
}

export interface OutpointRef { txid: string; outputIndex: number }

/** What an application shows for an output (docs/client.md). */
export type Currentness = 'current' | 'spent' | 'pending' | 'stale' | 'conflicting' | 'unknown'

export type TransactionStatus =
  | 'unresolved' | 'invalid' | 'limited' | 'unsupported' | 'conflicting'
  | 'dependent-conflict' | 'selected-non-final' | 'selected-final' | 'included'

export interface ReconciledView {
  revision: number
  /** The active chain view / finality context. */
  context: string
  /** The current journal frontier. */
  through: U64
  current: OutpointRef[]
  spent: Array<{ outpoint: OutpointRef; by: string }>
  /** Transactions whose component waits for verification (or a consistent view). */
  pending: string[]
  conflicting: string[]
  /** Previous accepted status of pending transactions, shown until they settle. */
  stale: Array<{ txid: string; status: TransactionStatus }>
}

export interface IngressPosition { journalId: string; position: U64; index: number }

export interface ReconciledTransaction {
  txid: string
  evidenceIds: string[]
  firstRaw: IngressPosition
  order?: { firstRaw: IngressPosition; readyAt: U64; depth: number; readyContextId: string }
  eligible?: { at: U64; contextId: string }
  status: TransactionStatus
  reason: string
  dependencies: Array<{ chain: { network: string; genesisHash: string }; txid: string; outputIndex: number }>
  replaces?: string
  conflictsWith: string[]
}

/** BRC-192 §10.5 ReconciledState. */
export interface ReconciledState {
  profile: 'https://bsv.brc.dev/apps/0192#bitcoin-spend-reconciliation-v1'
  nonFinal: boolean
  journalId: string
  through: U64
  contextId: string
  transactions: ReconciledTransaction[]
  memberships: Array<{
    scope: unknown; generation: U64
    outpoint: { chain: { network: string; genesisHash: string }; txid: string; outputIndex: number }
    present: boolean; phase: 'snapshot' | 'live' | 'finite'; sequence: U64; observationId: string
  }>
  replacements: Array<{ previous: string; replacement: string; at: U64; contextId: string }>
  pendingComponents: Array<{ txids: string[]; reason: string }>
}

export interface MemberWithCurrentness extends Member {
  /** From the reconciled graph, never from membership; null for absent rows or before configureReconciler. */
  currentness: Currentness | null
}

export interface RevisionSnapshot {
  members: MemberWithCurrentness[]
  partialMembers: Member[]
  state: SourceState
  reconciled: ReconciledView | null
}

export interface Limits {
  maxBytes?: number
  maxObservations?: number
  waitMs?: number
}

/**
 * One committed revision of a followed source. `members`, `partialMembers` and `reconciled`
 * are read from the store on first use, together, as of `revision`. During the callback's
 * synchronous part no other source's commit applies, so they are readable there; after its
 * first await a later commit makes an unread list throw `conflict` (call
 * `store.revisionSnapshot(sourceKey)` for the newest revision).
 */
export interface RevisionEvent {
  /** The provider's base URL this revision came from. */
  source: string
  sourceKey: SourceKey
  /** The store's revision this event describes (CheckpointStore.revision()). */
  readonly revision: number
  readonly members: MemberWithCurrentness[]
  readonly partialMembers: Member[]
  state: SourceState
  /**
   * The reconciled state of the same commit (null before configureReconciler): `current` and
   * `spent` among this source's present members; `pending`, `stale`, `conflicting` store-wide.
   */
  readonly reconciled: ReconciledView | null
  /**
   * True for the event a follow delivers at its start from a stored checkpoint, before any
   * request: the state an earlier run committed. Its `outcome` and `batch` are null.
   */
  restored: boolean
  outcome: CommitOutcome | null
  /**
   * The exact response bytes that were committed (null when `restored`). For a finite source,
   * the lookup-live-v1 batch the client made of the BRC-24 answer (decodeBatch reads it).
   */
  batch: Buffer | null
  /** In a follow with `finite` or `resolver`: whether this source is followed live or by refresh. */
  mode?: 'live' | 'finite'
}

/** Connection state of one followed provider (docs/client.md). */
export type ConnectionState = 'connected' | 'retrying' | 'reset-required' | 'paused' | 'failed' | 'closed'

export interface StateEvent {
  /** The provider's base URL; null for a state of discovery itself (`discovery: true`). */
  source: string | null
  sourceKey: SourceKey | null
  connection: ConnectionState
  /** retrying / reset-required: the failed attempt's number, from 1. */
  attempt?: number
  /** retrying / reset-required: when the next attempt is made (ms since the epoch). */
  nextRetryAt?: number
  error?: LiveLookupError
  /** paused: groups awaiting verification, and the budget. */
  pendingCount?: number
  pendingBudget?: number
  /**
   * With `connected`, what the answer just did (reported each time): `resumed` (a read from the
   * stored `cursor` of an earlier run), `opened` (the source's first generation), `started-over`
   * (a new generation replacing the old one, for `reason`), `snapshot-complete` (the generation's
   * snapshot is committed whole; after a start-over, that commit swaps it in).
   */
  progress?: 'resumed' | 'opened' | 'started-over' | 'snapshot-complete' | 'refreshed'
  /** The generation `progress` is about. */
  generation?: number
  /** resumed: the stored cursor the follow continued from. */
  cursor?: string
  /**
   * started-over: `renewal` (the follow's `renew` schedule replaced the generation with a fresh
   * snapshot), `access-changed` (the new generation is served under another `scope.access`:
   * the provider's policy moved this client's partition; it replaces `reset-required` or
   * `expired`), `reset-required` or `expired` (the provider's answer to a read), `equivocation`
   * (this source contradicted itself), `chain` or `rulesDigest` (the provider now serves another),
   * or the stored generation's invalidation reason. closed: `not-advertised` when discovery
   * stopped following a host its resolver no longer lists.
   */
  reason?: 'access-changed' | 'renewal' | 'reset-required' | 'expired' | 'equivocation' | 'chain' | 'rulesDigest' | 'not-advertised' | (string & {})
  /**
   * In a follow with `finite` or `resolver`: `live` or `finite`; null while the provider's
   * manifest is being read (negotiation).
   */
  mode?: 'live' | 'finite' | null
  /** refreshed: outputs in the answer, and outputs skipped (a BEEF that cannot be read, an output it lacks). */
  outputs?: number
  skipped?: number
  /** refreshed: when the next refresh is due (ms since the epoch). */
  nextRefreshAt?: number
  /** A state of discovery itself (the resolver found no host, or failed): `source` is null. */
  discovery?: true
}

/**
 * Following a provider that does not serve lookup-live-v1 by periodic BRC-24 `/lookup`
 * answers (docs/client.md "Providers that answer only BRC-24"). Each answer is one local
 * generation of the source; nothing is claimed live.
 */
export interface FiniteOptions {
  /** Interval between two answers, in ms. */
  refreshMs: number
  /** Bound on one answer's body bytes. Default 16 MiB, at most 256 MiB. */
  maxBytes?: number
  /** Bound on one answer's outputs. Default and maximum 1024 (one refresh is one batch). */
  maxOutputs?: number
}

/**
 * @bsv/sdk's LookupResolver (its SLAP discovery, overrides and additional hosts are used as
 * LookupResolver.query uses them). Typed by its public method only.
 */
export interface LookupResolverLike {
  query (question: { service: string; query: unknown }, timeout?: number): Promise<unknown>
}

export interface FollowOptions {
  onRevision?: (event: RevisionEvent) => void | Promise<void>
  onState?: (event: StateEvent) => void | Promise<void>
  signal?: AbortSignal
  /** Follow the same query on each of these providers' base URLs, into the same store. */
  sources?: string[]
  /** Unless membership is `claims`, reads pause while pending groups + maxObservations would exceed this. Default 65536. */
  pendingBudget?: number
  waitMs?: number
  /** Pause between empty polls when waitMs is 0. Default 1000. */
  pollIntervalMs?: number
  /**
   * When groups enter `members`. With a chainTracker the default is `verified`; without one there
   * is no default: follow rejects with `invalid` unless `claims` or `manual` is given.
   */
  membership?: MembershipRule
  /**
   * Read the next snapshot page while the previous one commits (default false). Outside the letter
   * of BRC-193 §4 (a cursor used before its commit returned); safe because reads are non-destructive.
   */
  readAhead?: boolean
  /**
   * Renewal: once the followed generation received `afterGroups` live groups, or was followed
   * live for `afterMs` (counted in the store, across restarts: `CheckpointStore.renewal`), a fresh snapshot replaces it (`started-over`, reason `renewal`) and the
   * old generation's rows, receipt keys and group records are retired. Off by default.
   */
  renew?: { afterGroups?: number; afterMs?: number }
  /** Not with `finite`: a finite source states no rules. */
  requiredRulesDigest?: string
  /**
   * Allows following a provider that does not offer lookup-live-v1 for the service by periodic
   * BRC-24 refresh; without it such a provider is refused (`unsupported`, or the 404/422 it
   * answered, with a message that says so).
   */
  finite?: FiniteOptions
  /**
   * Follow the hosts this resolver finds for the service (SLAP), each as a source, live when it
   * offers lookup-live-v1 and by refresh when `finite` allows it. A list of SLAP tracker URLs
   * makes a LookupResolver over them.
   */
  resolver?: LookupResolverLike | string[]
  /** With `resolver`: how often the hosts are resolved again. Default 300000 (5 minutes). */
  resolveIntervalMs?: number
}

/** @bsv/sdk's AuthFetch or this package's NativeAuthFetch (js/auth/authfetch.d.ts). */
export interface AuthFetchLike {
  fetch (url: string, config: { method: string; headers: Record<string, string>; body?: string; signal?: AbortSignal }): Promise<Response>
}

export interface FollowResult { sourceKey: SourceKey | null }

export interface FollowManyResult {
  sources: Array<{ source: string; sourceKey: SourceKey | null; error: LiveLookupError | null }>
}

/** A running follow. Awaiting the handle awaits `done`. */
export interface FollowHandle<R> extends PromiseLike<R> {
  done: Promise<R>
  /** Stops the follow; resolves when it has ended. */
  close (): Promise<void>
  catch (onRejected: (reason: unknown) => unknown): Promise<unknown>
}

export interface AcceptedManifest {
  digest: string
  identity: string
  expiresAt: string
  live: Array<{ service: string; rulesDigest: string; authentication: string; maxRequestBytes: number; maxResponseBytes: number; sessionSeconds: string; replaySeconds: string; maxObservations: number; maxWaitMs: number }>
}

export declare class LiveLookupClient {
  /** The provider's verified manifest (after the first request). */
  manifest: AcceptedManifest | null
  constructor (options: {
    /** https: (http: only with allowInsecureHttp). May be left out by a client that follows only with `resolver` or `sources`. */
    baseURL?: string
    /** The chain the application follows; the manifest and every scope must name it. */
    chain: { network: string; genesisHash: string }
    /** Accept an http: baseURL, for local development. */
    allowInsecureHttp?: boolean
    /** The provider identity key the manifest must be signed by (with AuthFetch also the authenticated one). */
    providerIdentity?: string
    /** Bound on a response's header bytes (names + values). Default and maximum 16384. */
    maxHeaderBytes?: number
    /** Backoff of transport retries: the n-th waits a jittered [1/2, 1] x min(maxMs, initialMs x 2^(n-1)). */
    retry?: { initialMs?: number; maxMs?: number }
    authFetch?: AuthFetchLike
    fetch?: typeof fetch
    store: CheckpointStore
    limits?: Limits
    /** Added to the long-poll wait for each request's deadline. Default 30000. */
    requestTimeoutMs?: number
    /** With a ChainTracker, evidence is verified after each receipt commit (js/client/verifier.js). */
    chainTracker?: import('./verifier').ChainTrackerLike
    verification?: import('./verifier').VerificationSettings
  })
  /** The evidence verifier, or null without a chainTracker. */
  verifier: import('./verifier').EvidenceVerifier | null
  /** The last error a background verification run ended with (e.g. the store was closed). */
  verificationError?: Error
  capabilityDigest (signal?: AbortSignal): Promise<string>
  /** The source key a follow of `query` on `service` at `baseURL` (default this client's) committed under, or null before its first commit. */
  sourceKey (service: string, query: unknown, baseURL?: string): SourceKey | null
  follow (service: string, query: unknown, options: FollowOptions & { sources: string[] }): FollowHandle<FollowManyResult>
  follow (service: string, query: unknown, options: FollowOptions & { resolver: LookupResolverLike | string[] }): FollowHandle<FollowManyResult>
  follow (service: string, query: unknown, options?: FollowOptions): FollowHandle<FollowResult>
  close (sourceKey: SourceKey, signal?: AbortSignal): Promise<{ version: 1; closed: true }>
}

export declare function digest (type: string, body: unknown): string
export declare function canonicalJson (value: unknown): string
export declare const PROFILE: string

/** BRC-103/104 transport and Rust-backed wallet (also exported from the package root). */
export { NativeAuthFetch, NativeAuthFetchOptions } from '../auth/authfetch'
export { NativeWallet } from '../auth/wallet'

// --- decoders (js/client/decode.js; docs/client.md "Decoding what a follow delivers") ---

/** A context as the wire and the store carry it: `bytes` is canonical base64 (BRC-192 §1). */
export interface OutputContext { schema: string; bytes: string }

/** BRC-192 §2's adapter schema: UTF-8 JSON of a BRC-24 context value. */
export declare const LEGACY_CONTEXT_SCHEMA: 'https://bsv.brc.dev/apps/0192#legacy-lookup-context-json-v1'

/** A decoded context: its bytes, and under the legacy schema the parsed JSON value (`json`). */
export type DecodedContext =
  | { schema: typeof LEGACY_CONTEXT_SCHEMA; bytes: Buffer; json: unknown }
  | { schema: string; bytes: Buffer; json?: undefined }

/** BRC-192 Outpoint: the chain is part of its identity. */
export interface WireOutpoint { chain: { network: string; genesisHash: string }; txid: string; outputIndex: number }

/** `output`: the source lists this output; `beef` is its evidence (BEEF bytes). */
export interface OutputObservation { id: string; kind: 'output'; txid: string; outputIndex: number; beef: Buffer; context: DecodedContext | null }
/** `spend`: `spendingTxid` consumes `previous`; `beef` holds the spending transaction. */
export interface SpendObservation { id: string; kind: 'spend'; previous: WireOutpoint; spendingTxid: string; beef: Buffer }
/** `withdraw`: the source no longer lists `outpoint` (not a spend). */
export interface WithdrawObservation { id: string; kind: 'withdraw'; outpoint: WireOutpoint; reason: string }
export interface AssessmentInvalidatedObservation { id: string; kind: 'assessment-invalidated'; contextId: string; reason: string }
export type DecodedObservation = OutputObservation | SpendObservation | WithdrawObservation | AssessmentInvalidatedObservation

export interface DecodedBatch {
  phase: 'snapshot' | 'live'
  snapshotComplete: boolean
  through: U64
  groups: Array<{ id: string; sequence: U64; observations: DecodedObservation[] }>
}

/** Decodes a Member's (or an output payload's) context; null stays null. Throws `invalid` on non-canonical base64, or non-JSON under the legacy schema. */
export declare function decodeContext (context: OutputContext): DecodedContext
export declare function decodeContext (context: OutputContext | null | undefined): DecodedContext | null
/** One wire observation as its kind's shape, Bytes fields as Buffers. */
export declare function decodeObservation (observation: unknown): DecodedObservation
/** A committed batch (RevisionEvent.batch) with its observations decoded, in order. */
export declare function decodeBatch (batch: Buffer | string): DecodedBatch
