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

// The client-only entry point (package.json "./js/client") carries the BRC-103 transport too.
import { LiveLookupClient, CheckpointStore, NativeAuthFetch, NativeWallet } from '../../js/client/client'
export function clientOnly (store: CheckpointStore): LiveLookupClient {
  const authFetch = new NativeAuthFetch(NativeWallet.fromPrivateKey('11'.repeat(32)))
  return new LiveLookupClient({ baseURL: 'https://overlay.example', chain: minimal.chain, store, authFetch })
}
