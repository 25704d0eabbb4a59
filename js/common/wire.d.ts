/** Error codes of BRC-192 §6 plus `not-found` (BRC-193 §6). */
export type WireErrorCode =
  | 'invalid' | 'unsupported' | 'unauthorized' | 'conflict' | 'equivocation' | 'limited'
  | 'unavailable' | 'expired' | 'reset-required' | 'cancelled' | 'context-changed' | 'not-found'

/** Error thrown by every function of this module. */
export interface WireError extends Error {
  code: WireErrorCode
  /** HTTP status of `code` (BRC-193 §6; `cancelled` is 503). */
  status: number
}

/** Effective request limits (already clamped to the profile maxima). */
export interface Limits {
  maxBytes: number
  maxObservations: number
  waitMs: number
}

/** A normalized Open request (BRC-193 §2). */
export interface Open {
  version: 1
  requestId: string
  service: string
  query: unknown
  /** 64 lowercase hex characters. */
  requiredRulesDigest?: string
  limits: Limits
  extensions?: Record<string, unknown>
  /** Always absent or empty: a critical extension is rejected as `unsupported`. */
  critical?: string[]
}

/** A normalized Read request (BRC-193 §2). */
export interface Read {
  version: 1
  session: string
  cursor: string
  limits: Limits
}

/** A Close request (BRC-193 §2). */
export interface Close {
  version: 1
  session: string
}

export interface ErrorLimit {
  kind: 'envelope' | 'group' | 'permanent-group'
  minimumBytes?: number
  minimumObservations?: number
}

export interface ErrorBodyOptions {
  retryable?: boolean
  retryAfterMs?: number
  limit?: ErrorLimit
}

/** Error code -> HTTP status. */
export declare const STATUS: Readonly<Record<WireErrorCode, number>>
export declare function statusOf(code: string): number | undefined
/** Builds an Error with `.code` and `.status`. */
export declare function wireError(code: WireErrorCode, message: string): WireError

/** Strictly parses and validates a request body (at most 1 MiB). Throws a WireError. */
export declare function parseOpen(body: string | Buffer | Uint8Array): Open
export declare function parseRead(body: string | Buffer | Uint8Array): Read
export declare function parseClose(body: string | Buffer | Uint8Array): Close

/** RFC 8785 canonical JSON of a JSON-serializable value. */
export declare function canonicalize(value: unknown): string
/** BRC-192 §1 digest: lowercase hex SHA-256 of `"BRC-OUTPUT/1/" + type`, 0x00, JCS(body). */
export declare function digest(type: string, body: unknown): string
/** Complete error response body, at most 4096 bytes. */
export declare function errorBody(code: WireErrorCode, message: string, options?: ErrorBodyOptions): Buffer
