import type { CheckpointStore, VerificationJob } from './client'
import type { NativeVerifyOptions } from '../../index'

/** The @bsv/sdk ChainTracker interface. */
export interface ChainTrackerLike {
  isValidRootForHeight (root: string, height: number): Promise<boolean>
  currentHeight (): Promise<number>
}

/**
 * Verification budget (docs/client.md "Verification"); over a bound gives `limited`, with
 * either engine. The bounds are the native verifier's own (`NativeVerifyOptions`: maxBytes,
 * maxTransactions, maxDepth, maxScriptBytes, memoryLimit, and the native-only budget).
 */
export interface VerificationSettings extends NativeVerifyOptions {
  /**
   * 'native' (default): the Rust verifier on the libuv pool (docs/native-verify.md);
   * 'sdk': @bsv/sdk's Transaction.verify on the JS thread. The verdicts are the same.
   */
  engine?: 'native' | 'sdk'
  /** Native engine only: jobs per pool task. Default 16. */
  batch?: number
  /** Concurrent workers (native: pool tasks in flight). Default 4. */
  concurrency?: number
  /** Jobs a run lists at a time from the store (its memory is one page, not the backlog). Default 4096. */
  page?: number
  /** Results accepted per store commit at most (a backlog commits this many at a time). Default 4096. */
  acceptEvery?: number
  /** A result waits at most about this long for its commit (ms; 0: each batch commits at once). Default 250. */
  acceptMs?: number
  /** While proofs wait for the chain tracker to reach their block, how often to look again. Default 10000. */
  heightPollMs?: number
}

export interface EvidenceCheck {
  status: 'verified' | 'invalid' | 'limited' | 'unresolved'
  reason: string
  raw?: Buffer
  /** Tried again later (a tracker failure, or a proof above the tracker's height). */
  retry?: boolean
  /** The height a proof is for, when the tracker has not reached it yet. */
  waitHeight?: number
}

export declare class EvidenceVerifier {
  constructor (o: { store: CheckpointStore; chainTracker: ChainTrackerLike } & VerificationSettings)
  /** Which engine verifies. */
  engine: 'native' | 'sdk'
  /** Counts of outcomes, and of the questions that reached the ChainTracker (after the per-run cache). */
  stats: { verified: number; invalid: number; limited: number; unresolved: number; deferred: number; runs: number; rootQuestions: number; heightQuestions: number }
  /** Identifies this verifier's budget; `limited` verdicts of another budget are verified again. */
  policy: string
  /** Stops waiting for the chain tracker to advance (pending jobs stay in the store). */
  close (): void
  /** Verifies every pending job once (another run follows if called meanwhile). */
  run (): Promise<void>
  /** Resolves when no run is active. */
  idle (): Promise<void>
}

export interface EvidenceLimits {
  engine?: 'native' | 'sdk'
  maxBytes: number
  maxTransactions: number
  maxDepth: number
  maxScriptBytes: number
  memoryLimit?: number
  budget?: number
}

/** Checks one job's evidence with `limits.engine` (native unless 'sdk'). */
export declare function checkEvidence (
  job: Pick<VerificationJob, 'txid'>, evidence: Buffer | null, chainTracker: ChainTrackerLike, limits: EvidenceLimits
): Promise<EvidenceCheck>

/** The 'sdk' engine's check (Beef.fromBinary, findAtomicTransaction, Transaction.verify). */
export declare function checkEvidenceSdk (
  job: Pick<VerificationJob, 'txid'>, evidence: Buffer | null, chainTracker: ChainTrackerLike, limits: EvidenceLimits
): Promise<EvidenceCheck>

/** A tracker answering each distinct (height, root) once, and `currentHeight` once; failures are asked again. */
export declare function cachedTracker (chainTracker: ChainTrackerLike): ChainTrackerLike & { questions: { roots: number; heights: number } }

/** The options the native engine (`verifyBeef`, `verifyBeefBatch`) is given for these limits. */
export declare function nativeOptions (limits: EvidenceLimits): NativeVerifyOptions

/** Applies a tracker's answers to a native verification (`verifyBeef`'s result). */
export declare function settle (v: import('../index').NativeVerification, chainTracker: ChainTrackerLike): Promise<EvidenceCheck>

export declare const VERIFIER_DEFAULTS: Required<Pick<VerificationSettings, 'engine' | 'maxBytes' | 'maxTransactions' | 'maxDepth' | 'maxScriptBytes' | 'concurrency' | 'acceptEvery' | 'acceptMs' | 'heightPollMs' | 'batch' | 'page'>>
