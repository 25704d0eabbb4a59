// Types of js/provider/gasp.js: GASP between overlay nodes (docs/scaling.md).
import type { RequestHandler } from './router'

/**
 * The two routes a GASP peer calls, `POST /requestSyncResponse` and
 * `POST /requestForeignGASPNode`, answered from Engine storage (never from the live store).
 * Mount it on the node's Express app: `app.use(gaspRouter(engine))`.
 */
export declare function gaspRouter (engine: unknown, options?: { topics?: string[], log?: (entry: { op: string, [k: string]: unknown }) => void }): RequestHandler

export interface GASPSyncOptions {
  /** Base URLs of the other nodes (each serving gaspRouter). */
  peers: string[]
  /** Period of `engine.startGASPSync()`, ms; 0 runs only on `syncNow()`. Default 30000. */
  intervalMs?: number
  /** Topics to synchronize; default every topic the Engine manages. */
  topics?: string[]
  log?: (entry: { op: string, error?: string, [k: string]: unknown }) => void
}

export interface GASPSchedule {
  /** Runs one sync now, or joins the one running. */
  syncNow (): Promise<void>
  /** Ends the schedule; waits for a running sync. */
  stop (): Promise<void>
}

/** Synchronizes the Engine with its peers every `intervalMs` (never two runs at once). */
export declare function scheduleGASPSync (engine: unknown, options: GASPSyncOptions): GASPSchedule
