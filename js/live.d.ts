// Types for js/live.js: the operator-facing LiveLookup.
import type { LookupService, LiveCompanion, Change } from './ingest'
import type { RouterOptions, LiveRouter } from './router'
import type { LiveStats } from '../index'

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

export interface LiveLookupOptions {
  dataDir: string
  /** Create the store when missing. Without it a missing store is an error. */
  create?: boolean
  chain: Chain
  /** scope.provider: identity key (BRC-103) or exact HTTPS origin (public mode). */
  provider: string
  sessionSeconds?: number
  replaySeconds?: number
  maxBytes?: number
  maxObservations?: number
  maxWaitMs?: number
  maxRows?: number
  maxRetainedBytes?: number
  maxSessionsPerPrincipal?: number
  maxWaiters?: number
  maxWaitersPerPrincipal?: number
  maxConcurrentWork?: number
  /** Default: every caller gets access 'public'. Return a falsy value to deny. */
  authorize?: (request: AuthorizeRequest) => { access: string } | null | undefined | Promise<{ access: string } | null | undefined>
  /** Background compaction period; 0 disables it. Default 60000. */
  compactionIntervalMs?: number
  log?: (entry: { op: string; error?: string }) => void
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
  body: Buffer
}

/** What `live.stats()` returns (generated native type). */
export type { LiveStats } from '../index'

export declare class LiveLookup {
  static open (options: LiveLookupOptions): Promise<LiveLookup>
  readonly options: LiveLookupOptions
  readonly epoch: string
  readonly highWater: string
  /** Wraps a LookupService; register the result in place of the original. */
  wrap (name: string, lookupService: LookupService, companion: LiveCompanion): LookupService
  /** Brackets engine.submit (one group per transaction) and backfills new services. */
  attach (engine: unknown): Promise<LiveLookup>
  /** Commits one indivisible group; resolves with its sequence (decimal) or null. */
  commit (changes: Change[]): Promise<string | null>
  open (body: Buffer | string, caller: Caller): Promise<LiveResponse>
  read (body: Buffer | string, caller: Caller, options?: { signal?: AbortSignal }): Promise<LiveResponse>
  closeSession (body: Buffer | string, caller: Caller): Promise<LiveResponse>
  /** `close()` releases the store; `close(body, caller)` is closeSession. */
  close (): Promise<void>
  close (body: Buffer | string, caller: Caller): Promise<LiveResponse>
  router (options: RouterOptions): LiveRouter
  revoke (principal: string): Promise<number>
  resetEpoch (): Promise<string>
  compact (maxItems?: number): Promise<boolean>
  stats (): LiveStats
}

export declare function toNativeChange (change: Change): unknown
