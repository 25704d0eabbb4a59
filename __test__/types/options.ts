// Compiled by `npm run test:types` (tsc --strict): the public option types accept what the
// docs show and refuse what the code refuses. A line marked @ts-expect-error fails the run
// when it stops being an error.
import type { LiveLookupOptions } from '../../js/index'

export const minimal: LiveLookupOptions = {
  dataDir: './data',
  create: true,
  chain: { network: 'main', genesisHash: '000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f' },
  provider: 'https://overlay.example',
  maxRows: 100000,
  authorize: () => ({ partition: 'public' })
}

// @ts-expect-error the chain is required
export const noChain: LiveLookupOptions = { dataDir: './data', provider: 'https://overlay.example' }

export const flatChain: LiveLookupOptions = {
  ...minimal,
  // @ts-expect-error the network is given inside `chain`, not beside it
  network: 'main'
}

// The conformance checker's options (js/check/index.d.ts), as docs/operators.md shows them.
import type { CheckOptions, CheckReport } from '../../js/index'
import { needing } from '../../js/check/index'

export const checkOptions: CheckOptions = {
  baseURL: 'https://overlay.example.com',
  service: 'ls_notes',
  auth: 'brc103',
  mutate: 'curl -sf -X POST https://admin.internal/publish-test-note',
  emptyQuery: { author: 'nobody' },
  long: true,
  longBudgetMs: 120000
}
export const mutateByFunction: CheckOptions = { ...checkOptions, mutate: async () => {} }
// @ts-expect-error auth is 'none' or 'brc103'
export const badAuth: CheckOptions = { ...checkOptions, auth: 'basic' }
export const longChecks: string[] = needing('long')
// @ts-expect-error what a check needs is one of the named needs
needing('coffee')
export const sectionOf = (r: CheckReport): string[] => r.results.map(x => x.section)

// The client-only entry point (package.json "./js/client") carries the BRC-103 transport too.
import { LiveLookupClient, CheckpointStore, NativeAuthFetch, NativeWallet } from '../../js/client/client'
export function clientOnly (store: CheckpointStore): LiveLookupClient {
  const authFetch = new NativeAuthFetch(NativeWallet.fromPrivateKey('11'.repeat(32)))
  return new LiveLookupClient({ baseURL: 'https://overlay.example', chain: minimal.chain, store, authFetch })
}

// Decoded observations narrow by kind; a legacy context's JSON is `json`.
import { decodeBatch, decodeContext, LEGACY_CONTEXT_SCHEMA, Member } from '../../js/client/client'
export function describe (batch: Buffer, member: Member): string[] {
  const out: string[] = []
  for (const g of decodeBatch(batch).groups) {
    for (const o of g.observations) {
      if (o.kind === 'output') out.push(`${o.txid}.${o.outputIndex} ${o.beef.length} bytes ${o.context?.schema ?? ''}`)
      else if (o.kind === 'spend') out.push(`${o.previous.txid}.${o.previous.outputIndex} spent by ${o.spendingTxid}`)
      else if (o.kind === 'withdraw') out.push(`${o.outpoint.txid}.${o.outpoint.outputIndex} withdrawn: ${o.reason}`)
    }
  }
  const c = member.context ? decodeContext(member.context) : null
  if (c && c.schema === LEGACY_CONTEXT_SCHEMA) out.push(JSON.stringify(c.json))
  return out
}

// Following whatever a provider speaks (docs/client.md "Providers that answer only BRC-24",
// "Hosts found through SLAP"): `finite` with its refresh interval, and `resolver` (a
// LookupResolver or tracker URLs).
import type { FiniteOptions, FollowOptions, LookupResolverLike, StateEvent } from '../../js/index'
export const byRefresh: FiniteOptions = { refreshMs: 60000, maxBytes: 16 << 20, maxOutputs: 1024 }
// @ts-expect-error the refresh interval is required
export const noInterval: FiniteOptions = { maxOutputs: 10 }
export function followAnything (store: CheckpointStore, resolver: LookupResolverLike): Array<() => void> {
  const client = new LiveLookupClient({ chain: minimal.chain, store, fetch })
  const opts: FollowOptions = {
    membership: 'claims',
    finite: byRefresh,
    resolveIntervalMs: 300000,
    onState (s: StateEvent) { if (s.mode === 'finite' && s.progress === 'refreshed') console.log(s.outputs, s.nextRefreshAt) },
    onRevision (e) { if (e.mode === 'finite') console.log(e.members.filter(m => m.phase === 'finite').length) }
  }
  const viaResolver = client.follow('ls_notes', {}, { ...opts, resolver })
  const viaTrackers = client.follow('ls_notes', {}, { ...opts, resolver: ['https://overlay-us-1.bsvb.tech'] })
  const byBase = new LiveLookupClient({ baseURL: 'https://overlay.example', chain: minimal.chain, store, fetch }).follow('ls_notes', {}, opts)
  return [
    () => { void viaResolver.done.then(r => r.sources.map(s => s.source)) },
    () => { void viaTrackers.done.then(r => r.sources.length) },
    () => { void byBase.done.then(r => r.sourceKey) }
  ]
}

// A source key is {provider, service, queryDigest}: access belongs to a generation (BRC-193 §5).
import type { SourceKey, Checkpoint } from '../../js/client/client'
export const sourceKey: SourceKey = { provider: '02aa', service: 'ls_notes', queryDigest: 'ab'.repeat(32) }
// @ts-expect-error access is not part of a source key
export const withAccess: SourceKey = { ...sourceKey, access: 'public' }
export const accessOf = (cp: Checkpoint): string | null => cp.access
export const startedOverForAccess = (e: StateEvent): boolean => e.progress === 'started-over' && e.reason === 'access-changed'

// Renewal of a followed generation on the application's schedule.
export const renewing: FollowOptions = { membership: 'claims', renew: { afterGroups: 100000, afterMs: 24 * 3600 * 1000 } }
// @ts-expect-error renew takes afterGroups and afterMs only
export const renewTypo: FollowOptions = { membership: 'claims', renew: { afterGroup: 10 } }
