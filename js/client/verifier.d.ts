import type { CheckpointStore, VerificationJob } from './client'

/** The @bsv/sdk ChainTracker interface. */
export interface ChainTrackerLike {
  isValidRootForHeight (root: string, height: number): Promise<boolean>
  currentHeight (): Promise<number>
}

/** Verification budget (docs/client.md "Verification"); over a bound gives `limited`. */
export interface VerificationSettings {
  /** Evidence bytes per job. Default 1 MiB. */
  maxBytes?: number
  /** Transactions in one BEEF. Default 256. */
  maxTransactions?: number
  /** Unconfirmed ancestry depth. Default 64. */
  maxDepth?: number
  /** Unlocking plus locking script bytes evaluated per job. Default 1 MiB. */
  maxScriptBytes?: number
  /** Passed to the @bsv/sdk interpreter as its memory limit. */
  memoryLimit?: number
  /** Concurrent workers. Default 4. */
  concurrency?: number
  /** Results accepted per store commit. Default 32. */
  acceptEvery?: number
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
  stats: { verified: number; invalid: number; limited: number; unresolved: number; deferred: number; runs: number }
  /** Identifies this verifier's budget; `limited` verdicts of another budget are verified again. */
  policy: string
  /** Stops waiting for the chain tracker to advance (pending jobs stay in the store). */
  close (): void
  /** Verifies every pending job once (another run follows if called meanwhile). */
  run (): Promise<void>
  /** Resolves when no run is active. */
  idle (): Promise<void>
}

export declare function checkEvidence (
  job: VerificationJob, evidence: Buffer | null, chainTracker: ChainTrackerLike,
  limits: { maxBytes: number; maxTransactions: number; maxDepth: number; maxScriptBytes: number; memoryLimit?: number }
): Promise<EvidenceCheck>
