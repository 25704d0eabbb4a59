// Types for js/check/index.js: the BRC-193 conformance checker's function API.

export interface CheckOptions {
  /** The provider's advertised base URL; routes are {base}/overlay/v1/... */
  baseURL: string
  /** The lookup service to check. */
  service: string
  /** The query to open (default {}). */
  query?: unknown
  /** 'none': plain HTTP (public mode); 'brc103': BRC-104 with a fresh random identity. Default 'none'. */
  auth?: 'none' | 'brc103'
  /** Permits a plain http base URL (local development only). */
  allowInsecureHttp?: boolean
  /**
   * Commits a change the query selects: a shell command (run with /bin/sh -c) or an async
   * function. It runs twice; without it the checks that need a mutation are skipped. A failed
   * command is reported with its error message (the first error line of its stderr).
   */
  mutate?: string | (() => unknown | Promise<unknown>)
  /** A browser origin the provider allows, to check its CORS preflight. */
  origin?: string
  /** The long-poll bound to test, 0-25000 ms (default 2000). */
  waitMs?: number
  /** Time allowed per request beyond its wait (default 30000). */
  timeoutMs?: number
  /** A query of the service that selects nothing, to check an empty collection's snapshot (snapshot.empty). */
  emptyQuery?: unknown
  /**
   * Keeps only these checks in the report, its counts and its verdict: names, or the start of
   * names (`'long-poll'`). Every check still runs. An entry that names no check is refused.
   */
  only?: string[]
  /** Runs the checks that wait for a session to expire (default false). */
  long?: boolean
  /** Longest those checks wait for the expiry, in ms (default 120000); a later expiry skips them. */
  longBudgetMs?: number
  /** The BRC-103 identity to use (default a fresh random one, its key held in the Rust core). */
  wallet?: import('../auth/wallet').NativeWallet
  /** Called with each result as it is decided. */
  onResult?: (result: CheckResult) => void
}

export interface CheckResult {
  /** The check's name, e.g. 'headers.cache-control'. */
  check: string
  status: 'ok' | 'fail' | 'skip'
  /** Where the rule it enforces is written, e.g. 'BRC-193 §8'. */
  section: string
  /** `ok <check>`, `FAIL <check>: <seen>; <rule>` or `skip <check>: <reason>`. */
  line: string
  /** For a failure: what the provider did. */
  seen?: string
  /** For a failure: what the rule requires and where it is written. */
  rule?: string
  /** For a skip: what the check needs. */
  reason?: string
}

export interface CheckReport {
  /** The canonical base URL that was checked. */
  baseURL: string
  service: string
  query: unknown
  auth: 'none' | 'brc103'
  startedAt: string
  durationMs: number
  passed: number
  failed: number
  skipped: number
  /** True when no check failed. */
  ok: boolean
  results: CheckResult[]
}

/** Runs every check; rejects only with a TypeError for unusable options. */
export declare function runChecks (options: CheckOptions): Promise<CheckReport>
/** The report as text: one line per check, then `N passed, M failed, K skipped`. */
export declare function formatReport (report: CheckReport): string
export declare function summaryLine (report: CheckReport): string
/** A base URL in the canonical form the manifest must carry; throws a TypeError for an unusable one. */
export declare function canonicalBase (input: string, allowInsecureHttp?: boolean): string
/** The names of every check, in the order of RULES. */
export declare const CHECKS: string[]
/** What a check needs beyond a plain run; without it the check is skipped. */
export type CheckNeed = 'mutate' | 'empty-query' | 'brc103' | 'second-principal' | 'origin' | 'long'
/** Per check: [section, what it requires, what it needs (absent: nothing)]. */
export declare const RULES: Record<string, [string, string] | [string, string, CheckNeed[]]>
/** The checks that need `what`. */
export declare function needing (what: CheckNeed): string[]
