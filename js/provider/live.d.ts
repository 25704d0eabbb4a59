// Types for js/provider/live.js: the operator-facing LiveLookup.
import type { LookupService, LiveCompanion, Change } from './ingest'
import type { RouterOptions, LiveRouter } from './router'
import type { LiveStats as NativeLiveStats, LiveConfig as NativeLiveConfig } from '../../index'

export interface Chain {
  network: string
  /** 64 lowercase hex characters. */
  genesisHash: string
}

export interface AuthorizeRequest {
  operation: 'open' | 'read'
  /** 'request' on arrival; 'serialize' right before a batch is handed out. */
  stage: 'request' | 'serialize'
  /** Identity key of a BRC-103 caller, or null for an unauthenticated caller. */
  principal: string | null
  service: string
  query: unknown
}

export type AuthorizeResult = { partition: string } | { access: string } | null | undefined | false

/** What `live.prohibit` did. */
export interface ProhibitResult {
  number: number
  /** Sequence of the group that withdrew the rows still present, or null. */
  sequence: string | null
  /** Present rows withdrawn. */
  rows: number
  /** Sessions ended with reset-required. */
  sessions: number
}

/**
 * The native store's settings (`LiveConfig`, generated from `src/node/live.rs`) with the chain
 * given as one object and the session and replay windows optional (defaults in live.js), plus
 * the options only the JS layer reads.
 */
export interface LiveLookupOptions
  extends Omit<NativeLiveConfig, 'network' | 'genesisHash' | 'sessionSeconds' | 'replaySeconds'>,
  Partial<Pick<NativeLiveConfig, 'sessionSeconds' | 'replaySeconds'>> {
  chain: Chain
  /**
   * The access policy: places the caller in an access partition (an opaque label, 1-1024
   * bytes, never a credential), or denies with a falsy value. Called on every request and
   * again right before a batch is handed out; a denial then ends the session with
   * unauthorized, another partition with reset-required. `access` is accepted as the older
   * name of `partition`. Default: every caller in partition 'public'.
   */
  authorize?: (request: AuthorizeRequest) => AuthorizeResult | Promise<AuthorizeResult>
  /** Names the access policy; part of every derived `scope.access`. Default 'default'. */
  accessPolicy?: string
  /** Background compaction period; 0 disables it. Default 60000. */
  compactionIntervalMs?: number
  /**
   * The restore anchor: a file OUTSIDE the data directory recording the store's epoch and
   * published highWater, compared at open to detect a data directory restored from an older
   * copy (docs/operators.md "Resets, restores and shutdown"). Default `<dataDir>.anchor`
   * beside the data directory; `null` turns detection off.
   */
  anchorPath?: string | null
  /** How often the anchor is brought up to date, ms. Default 1000. */
  anchorIntervalMs?: number
  /**
   * Declares that the data directory was restored: nothing is served until a new epoch
   * re-seeded from the Engine starts (at attach, or resetEpoch). A string is the reason logged.
   */
  restored?: boolean | string
  /**
   * Operational events: compaction errors, chain reorganizations (op 'chain-reorg'), resets
   * ('reset-epoch'), restores ('restore'), anchor write failures ('anchor'), groups refused
   * because the provider's limits can never serve them (op 'commit', action 'refused').
   */
  log?: (entry: { op: string; error?: string; action?: string; reason?: string; [k: string]: unknown }) => void
}

/** A reorganization as newer hosts report it (Engine.handleReorg). */
export interface ReorgEvent {
  /** 64-hex hashes of the blocks no longer on the selected chain (informational). */
  orphanedBlockHashes?: string[]
  /** Every proof at this height or above may cite an orphaned block. */
  rebuildFromHeight: number
  newTipHeight?: number | null
}

export interface ReorgResult {
  /** 'none': no member cites a height >= rebuildFromHeight; 'invalidated': one group committed; 'reset': a new epoch. */
  action: 'none' | 'invalidated' | 'reset'
  /** Members whose evidence has a proof at a height >= rebuildFromHeight. */
  affected: number
  /** Of those, members whose evidence the Engine had already reassessed (new output observations). */
  refreshed: number
  /** Sequence of the committed group (decimal), or null. */
  sequence: string | null
  /** Why a new epoch was started (action 'reset'). */
  reason?: string
}

/** The chain view the collection's evidence is assessed under (docs/chain-events.md). */
export interface ChainView {
  /** `chain-view/<since>`: the contextId a later assessment-invalidated will name. */
  id: string
  /** Sequence (decimal) of the group that began this view; '0' = the epoch's first view. */
  since: string
  /** Tip height reported with the reorganization that began this view, or null. */
  tipHeight: number | null
}

/** Caller identity as established by the transport. */
export interface Caller {
  /** Identity key (66 hex) for BRC-103 callers; '' for unauthenticated callers. */
  principal: string
  authenticated: boolean
}

/** A complete answer: HTTP status and the exact body bytes. */
export interface LiveResponse {
  status: number
  /**
   * For `read`, possibly a view into a buffer shared with other answers delivered at the
   * same time; copy it (`Buffer.from(body)`) to keep it for long.
   */
  body: Buffer
}

/** What `live.stats()` returns: the native counters plus the current chain view. */
export type LiveStats = NativeLiveStats & { chainView: ChainView }

export declare class LiveLookup {
  static open (options: LiveLookupOptions): Promise<LiveLookup>
  readonly options: LiveLookupOptions
  readonly epoch: string
  readonly highWater: string
  /**
   * Wraps a LookupService; register the result in place of the original. The result has the
   * type of the service given (an @bsv/overlay LookupService stays one, so
   * `engine.lookupServices[name] = live.wrap(name, service, companion)` type-checks).
   */
  wrap<S extends LookupService> (name: string, lookupService: S, companion: LiveCompanion): S
  /**
   * Brackets engine.submit (one group per transaction) and brings every wrapped service in
   * line with Engine storage (a backfill for a new service, otherwise only what differs); a
   * service whose rules digest changed gets a new epoch re-seeded from the Engine.
   */
  attach (engine: unknown): Promise<LiveLookup>
  /**
   * Resolves once the groups of the attached Engine's submits made so far are published (a
   * bracketed submit resolves before its group's flush).
   */
  published (): Promise<void>
  /**
   * Commits one indivisible group of the host's own; resolves with its sequence (decimal) or
   * null. It lands after every change made before the call (the groups of submits that
   * resolved earlier included) and before every change made after it; admissions of
   * prohibited rows become removals (docs/design.md "Admission gate"). A group no session
   * could ever be served under the provider's limits rejects with code 'limited' and
   * `limit: { kind: 'permanent-group' }`, one beyond `maxRows` or `maxRetainedBytes` with code
   * 'limited'; nothing of it is written.
   */
  commit (changes: Change[]): Promise<string | null>
  /**
   * Commits changes with no atomicity between them as consecutive groups that each fit the
   * provider's limits, written and published together; resolves with the last sequence or null.
   */
  commitDivisible (changes: Change[]): Promise<string | null>
  /** `signal` cancels the open: its snapshot scan stops and nothing is stored. */
  open (body: Buffer | string, caller: Caller, options?: { signal?: AbortSignal }): Promise<LiveResponse>
  read (body: Buffer | string, caller: Caller, options?: { signal?: AbortSignal }): Promise<LiveResponse>
  closeSession (body: Buffer | string, caller: Caller): Promise<LiveResponse>
  /** `close()` releases the store; `close(body, caller)` is closeSession. */
  close (): Promise<void>
  close (body: Buffer | string, caller: Caller): Promise<LiveResponse>
  router (options: RouterOptions): LiveRouter
  revoke (principal: string): Promise<number>
  /**
   * Prohibits serving rows of `service` from now on: those at `outpoints` ('txid.index' or
   * {txid, outputIndex}) and/or those matching `where` (a filter of the selection language).
   * Durable; in force when it resolves, whatever path later admits such a row, and across
   * restarts; it lands after the groups of submits that resolved before the call
   * (docs/operators.md "Access control").
   */
  prohibit (p: { service: string, outpoints?: Array<string | { txid: string, outputIndex: number }>, where?: unknown, reason?: string }): Promise<ProhibitResult>
  /**
   * A policy change: the sessions of `partitions` (their visibility changed), of `principals`
   * (their partition may change), or with neither every session, end with reset-required.
   * Resolves with the sessions ended.
   */
  changePolicy (change?: { partitions?: string[], principals?: string[] }): Promise<number>
  /** The `scope.access` sessions of `partition` get now. */
  accessOf (partition: string): string
  /**
   * A new epoch that starts from the collection as it is: read from the attached Engine, or
   * `changes` (the starting admissions) when no Engine is attached. Resolves with the epoch.
   */
  resetEpoch (options?: { reason?: string, changes?: Change[] }): Promise<string>
  compact (maxItems?: number): Promise<boolean>
  stats (): LiveStats
  /** The current chain view. */
  readonly chainView: ChainView
  /**
   * Handles a chain reorganization (also installed as engine.handleReorg by attach when the
   * Engine has one; the Engine's own handling runs first). See docs/chain-events.md.
   */
  handleReorg (event: ReorgEvent): Promise<ReorgResult>
}

export declare function toNativeChange (change: Change): unknown
