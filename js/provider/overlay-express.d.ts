import type { LiveLookup } from './live'
import type { RouterOptions } from './router'

/**
 * Overlay Express 2.2 (and any host without a lookup slot): mounts the live router on
 * server.app and attaches its Engine. Call after configureEngine() and before start(); it
 * throws once start() has run (start() adds body parsers the router must come before).
 */
export declare function mountOnOverlayExpress<T extends { app: unknown; engine?: unknown }> (server: T, live: LiveLookup, routerOptions: RouterOptions): Promise<T>

/** The verified caller createOutputLookupRouter passes to a companion. */
export interface OutputLookupCaller {
  /** The BRC-103 identity key, or null in public mode. */
  principal: string | null
  /** The capability digest the request selected (x-bsv-overlay-capability). */
  capabilityDigest: string
}

/** A companion's success: the exact batch (or close) body and the selection it answers. */
export interface OutputLookupHTTPResponse {
  body: string
  headers: { 'x-bsv-overlay-capability': string; 'x-bsv-overlay-profile': string }
}

/**
 * The structural companion of @bsv/overlay-express/output-lookup (2.8). Each method rejects
 * with an OutputLookupError for a protocol error, or an AbortError once `signal` aborted.
 */
export interface OutputLookupCompanion {
  open (input: unknown, caller: OutputLookupCaller, signal?: AbortSignal): Promise<OutputLookupHTTPResponse>
  read (input: unknown, caller: OutputLookupCaller, signal?: AbortSignal): Promise<OutputLookupHTTPResponse>
  close (input: unknown, caller: OutputLookupCaller, signal?: AbortSignal): Promise<OutputLookupHTTPResponse>
}

export interface OutputLookupCompanionOptions {
  /** The wrapped lookup service this slot serves (the router binds one per base path). */
  service: string
  /** Provider identity private key, 64 hex: signs the one-service manifest. */
  privateKey: string
  /** The advertised base URL of this service. */
  baseURL: string
  authentication: 'brc103' | 'none'
  /** Permits an http: baseURL for local development. */
  allowLocalHttp?: boolean
  /** Manifest validity in seconds (default 86400). */
  manifestSeconds?: number
}

/**
 * The provider's part of createOutputLookupRouter's options (and of
 * OverlayExpress.configureOutputLookup's); add allowedOrigins, and for the plain router the
 * host's authenticate middleware.
 */
export interface OutputLookupSlot {
  companion: OutputLookupCompanion
  service: string
  /** The canonical base URL the manifest names. */
  baseURL: string
  /** The provider identity key (the manifest signer). */
  identity: string
  chain: { network: string; genesisHash: string }
  authentication: 'brc103' | 'none'
  allowLocalHTTP: boolean
  /** The current signed manifest ({body, signature}). */
  manifest (): { body: Record<string, unknown>; signature: string }
  /** Unix seconds, as a decimal string. */
  now (): string
}

export declare function createOutputLookupCompanion (live: LiveLookup, options: OutputLookupCompanionOptions): OutputLookupSlot

/** A protocol error as the router reads it: own code, retryable and (limited) limit. */
export declare class OutputLookupError extends Error {
  constructor (code: string, message: string, options?: { retryable?: boolean; retryAfterMs?: number; limit?: unknown; status?: number })
  code: string
  retryable: boolean
  retryAfterMs?: number
  limit?: { kind: 'envelope' | 'group' | 'permanent-group'; minimumBytes?: number; minimumObservations?: number }
  /** The HTTP status the code maps to (BRC-193 §6). */
  status?: number
}
