// Types for js/provider/ingest.js: the layer between an @bsv/overlay Engine and the live change log.
// Hook payload types are declared structurally so that objects from either major version of
// @bsv/sdk fit (the Engine of @bsv/overlay 0.4.6 hands out @bsv/sdk 1.x objects).

/** Schema of a BRC-24 JSON context carried as UTF-8 bytes (BRC-192). */
export declare const LEGACY_CONTEXT_SCHEMA: 'https://bsv.brc.dev/apps/0192#legacy-lookup-context-json-v1'

/** Anything with the script methods the wrapper uses (LockingScript/UnlockingScript of any SDK). */
export interface ScriptLike {
  toHex(): string
}

export type AdmissionMode = 'locking-script' | 'whole-tx'
export type SpendNotificationMode = 'none' | 'txid' | 'script' | 'whole-tx'

export type OutputAdmittedByTopic =
  | { mode: 'locking-script', txid: string, outputIndex: number, topic: string, satoshis: number, lockingScript: ScriptLike, offChainValues?: number[] }
  | { mode: 'whole-tx', atomicBEEF: number[], outputIndex: number, topic: string, offChainValues?: number[] }

export type OutputSpent =
  | { mode: 'none', txid: string, outputIndex: number, topic: string }
  | { mode: 'txid', txid: string, outputIndex: number, topic: string, spendingTxid: string }
  | { mode: 'script', txid: string, outputIndex: number, topic: string, spendingTxid: string, inputIndex: number, unlockingScript: ScriptLike, sequenceNumber: number, offChainValues?: number[] }
  | { mode: 'whole-tx', txid: string, outputIndex: number, topic: string, spendingAtomicBEEF: number[], offChainValues?: number[] }

export interface LookupServiceMetaData {
  name: string
  shortDescription: string
  iconURL?: string
  version?: string
  informationURL?: string
}

/** The @bsv/overlay 0.4.6 LookupService interface, as the Engine calls it. */
export interface LookupService {
  readonly admissionMode: AdmissionMode
  readonly spendNotificationMode: SpendNotificationMode
  outputAdmittedByTopic(payload: OutputAdmittedByTopic): Promise<void> | void
  outputSpent?(payload: OutputSpent): Promise<void> | void
  outputNoLongerRetainedInHistory?(txid: string, outputIndex: number, topic: string): Promise<void> | void
  outputEvicted(txid: string, outputIndex: number): Promise<void> | void
  lookup(question: { service: string, query: unknown }): Promise<unknown>
  getDocumentation(): Promise<string>
  getMetaData(): Promise<LookupServiceMetaData>
}

/** What the companion is asked to index: one output admitted into one topic. */
export interface AdmittedOutput {
  txid: string
  outputIndex: number
  topic: string
  satoshis: number
  /** Locking script, lowercase hex. */
  lockingScript: string
  /** Atomic BEEF (BRC-95) of the admitting transaction; a copy the companion may keep. */
  beef: number[]
  offChainValues?: number[]
}

/** An explicitly typed context: passes through unchanged. */
export interface SchemaContext {
  schema: string
  bytes: Uint8Array
}

/** Attribute values the live selection language works over. */
export type AttributeValue = string | number | boolean | Array<string | number | boolean>

export interface IndexResult {
  attributes: Record<string, AttributeValue>
  /**
   * Either {schema, bytes} (bytes a Uint8Array), or any other JSON value, which is carried as
   * LEGACY_CONTEXT_SCHEMA with bytes = UTF-8 of JSON.stringify(value).
   */
  context?: SchemaContext | unknown
  /** Row expiry in whole Unix seconds (BRC-192 §2); the row is expired when now >= expiresAt. */
  expiresAt?: number | null
}

/** The live companion a LookupService author writes next to the service. */
export interface LiveCompanion {
  /**
   * Hashed into the service's rulesDigest by the live layer, with `parameters.codeDigest` (a
   * digest of this object's functions and the provider's authorize hook) added unless
   * `parameters.version` names the code (docs/companions.md "The rules digest").
   */
  rules?: { id: string, parameters: { version?: string | number, [k: string]: unknown } }
  /**
   * Topics the collection draws from. When given, outputs of other topics are not indexed and
   * their spends/non-retention produce no removal (they still reach the inner service).
   */
  topics?: string[]
  /** Called once per admitted output and topic; null means "not in this collection". Throwing fails the admission. */
  index(output: AdmittedOutput): IndexResult | null | undefined | Promise<IndexResult | null | undefined>
  /** Compiles a client query into a declarative selection; throw to reject the query. */
  select?(query: unknown): unknown
  /**
   * What a caller of access partition `partition` may see: a filter in the selection
   * language (`{all: true}` for everything), ANDed with the query's. A function of the
   * partition (and query) only; null, undefined or throwing denies the open.
   */
  visibility?(scope: { partition: string, service: string, query: unknown }): unknown
}

export interface AdmitChange {
  op: 'admit'
  service: string
  txid: string
  outputIndex: number
  topic: string
  satoshis: number
  /** Lowercase hex. */
  lockingScript: string
  /** Atomic BEEF of the admitting transaction. */
  beef: Buffer
  attributes: Record<string, AttributeValue>
  context: { schema: string, bytes: Buffer } | null
  expiresAt: number | null
}

export interface RemoveChange {
  op: 'remove'
  service: string
  txid: string
  outputIndex: number
  reason: 'spent' | 'evicted' | 'not-retained'
  /** Present for reason 'spent' when the spending transaction is known (always, from the Engine). */
  spend: { spendingTxid: string, beef: Buffer } | null
}

/**
 * New evidence for a present member (a merkle proof arrived for its transaction or an ancestor):
 * topic, attributes, context and expiry stay; a non-member is left alone (no change).
 */
export interface RefreshChange {
  op: 'refresh'
  service: string
  txid: string
  outputIndex: number
  /** Atomic BEEF with the new proofs. */
  beef: Buffer
}

/**
 * A chain-view change: every session of `service` receives `assessment-invalidated`
 * {contextId, reason} (BRC-192 §2). Must precede the row changes of its group.
 */
export interface InvalidateChange {
  op: 'invalidate'
  service: string
  /** 1..1024 bytes; the chain view that ended, e.g. 'chain-view/0'. */
  contextId: string
  /** 1..1024 bytes. */
  reason: string
}

export type Change = AdmitChange | RemoveChange | RefreshChange | InvalidateChange

/**
 * Where change groups go. One call = one indivisible group; resolve only once it is durable.
 * A removal may name an outpoint that is not (or no longer) a member: the sink ignores it.
 */
export interface ChangeSink {
  commit(changes: Change[]): Promise<unknown>
  /**
   * Optional: changes that promise no atomicity between them (a backfill's starting state, the
   * refreshes of one proof update), which the sink may split into several consecutive groups.
   * Without it they go to `commit` as one group.
   */
  commitDivisible?(changes: Change[]): Promise<unknown>
  /**
   * Optional: told of an eviction the inner service accepted, before its removal is committed
   * (Engine storage keeps the output; a reconciliation must not bring it back).
   */
  evicted?(service: string, txid: string, outputIndex: number): void | Promise<void>
  /**
   * Optional operational events: a proof update that refreshes nothing because its proof or a
   * BEEF is bad (`op: 'merkle-proof'`), a submit's group that failed to commit after the submit
   * resolved (`op: 'commit', action: 'failed'`), a row a reconciliation's store refused.
   */
  log?(entry: { op: string, action?: string, [k: string]: unknown }): void
}

/**
 * A LookupService to register in place of `inner`. It asks the Engine for whole-tx admission and
 * spend notifications, forwards every hook to `inner` in inner's own modes, and stages changes.
 */
export declare function wrapLookupService(name: string, inner: LookupService, companion: LiveCompanion, sink: ChangeSink): LookupService

/** {name, inner, companion, sink} behind a service made by wrapLookupService, else null. */
export declare function liveServiceInfo(service: unknown): { name: string, inner: LookupService, companion: LiveCompanion, sink: ChangeSink } | null

export interface AttachHandle {
  /** Restores engine.submit, engine.handleNewMerkleProof and the instrumented storage and service methods. */
  detach(): void
}

/** Any @bsv/overlay Engine (structurally: the members the ingest layer uses). */
export interface EngineLike {
  submit(taggedBEEF: { beef: number[], topics: string[] }, onSteakReady?: (steak: unknown) => void, mode?: 'historical-tx' | 'current-tx', offChainValues?: number[]): Promise<unknown>
  lookupServices: Record<string, LookupService>
  /** Bracketed when present: each proof update commits one group refreshing the members it changed. */
  handleNewMerkleProof?(txid: string, proof: unknown, blockHeight?: number): Promise<void>
  storage: {
    findOutputsForTransaction?(txid: string, includeBEEF?: boolean): Promise<Array<{ txid: string, outputIndex: number, topic: string, beef?: number[], consumedBy?: Array<{ txid: string, outputIndex: number }> }>>
    findUTXOsForTopic(topic: string, since?: number, limit?: number, includeBEEF?: boolean): Promise<Array<{ txid: string, outputIndex: number, outputScript: number[], satoshis: number, score?: number, beef?: number[] }>>
    findOutput(txid: string, outputIndex: number, topic?: string, spent?: boolean, includeBEEF?: boolean): Promise<{ beef?: number[] } | null>
  }
}

/**
 * Brackets engine.submit: everything one submit causes commits as one group (per sink) after the
 * Engine and every hook it started, awaited or not, are done. A successful submit resolves when
 * the Engine's call does, before that commit (see whenPublished). A rejected submit commits
 * nothing.
 * Also brackets engine.handleNewMerkleProof: after the Engine rewrote the stored BEEF of the
 * proven transaction and its consumedBy descendants, one group (per sink) refreshes the evidence
 * of every member whose stored BEEF changed, through `sink.commitDivisible` when the sink has it
 * (which splits it into groups that fit the provider's limits); submits wait meanwhile. No member
 * changed: no group.
 * `sink`, when given, must be the sink of every wrapped service already registered on the engine.
 */
export declare function attachEngine(engine: EngineLike, sink?: ChangeSink): AttachHandle

/**
 * Indexes the unspent outputs already in Engine storage for `topics` and commits them as the
 * starting state (Engine admission order), through `sink.commitDivisible` when the sink has it.
 * Submits on an attached engine wait meanwhile.
 */
export declare function backfill(engine: EngineLike, name: string, topics: string[], companion: LiveCompanion, sink: ChangeSink): Promise<{ examined: number, admitted: number }>

/**
 * The changes `backfill` would commit for one service, without committing (submits must be
 * paused): outputs named by `skip` ('txid.outputIndex') and outputs expired at `nowSeconds` are
 * left out.
 */
export declare function collectBackfill(engine: EngineLike, name: string, topics: string[], companion: LiveCompanion, options?: { skip?: (key: string) => boolean, nowSeconds?: number | null }): Promise<{ examined: number, changes: AdmitChange[] }>

/**
 * Brings one service's live collection in line with Engine storage, committing only what
 * differs (admissions of unspent outputs `members()` lacks, removals of members the Engine no
 * longer holds unspent), with submits paused. `skip` and `nowSeconds` as for collectBackfill.
 * Rows the sink refuses as invalid are left out and logged; `refused` counts them.
 */
export declare function reconcile(engine: EngineLike, name: string, topics: string[], companion: LiveCompanion, sink: ChangeSink, options: {
  members: () => Promise<Array<{ txid: string, outputIndex: number, topic: string }>>
  skip?: (key: string) => boolean
  nowSeconds?: number | null
}): Promise<{ examined: number, admitted: number, removed: number, refused: number }>

/**
 * Resolves once every submit of `engine` that has started has settled and its group is
 * committed (or its failure logged).
 */
export declare function whenPublished(engine: EngineLike): Promise<void>

/**
 * Runs `fn` while submits of the attached engine wait; proof updates the Engine makes inside
 * `fn` do not commit their own groups (the chain event reassesses members itself).
 */
export declare function withSubmitsPaused<T>(engine: EngineLike, fn: () => Promise<T>): Promise<T>

/** Atomic BEEF (BRC-95) of `txid` from a BEEF as Engine storage keeps it. */
export declare function atomicFromStored(beef: number[] | Uint8Array, txid: string): Buffer

/** The context mapping used for admits (exported for the native glue and tests). */
export declare function normalizeContext(context: unknown): { schema: string, bytes: Buffer } | null
