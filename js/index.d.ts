// Types of the package root (js/index.js).
export { LiveLookup, LiveLookupOptions, Caller, LiveResponse, LiveStats, AuthorizeRequest, Chain } from './live'
export { LiveLookupClient, CheckpointStore, LiveLookupError, SourceKey, Member, Checkpoint } from './client'
export { createRouter, RouterOptions, LiveRouter, PROFILE } from './router'
export { mountOnOverlayExpress } from './overlay-express'
export { gaspRouter, scheduleGASPSync, GASPSchedule, GASPSyncOptions } from './gasp'
export { NativeWallet, WalletProtocol, WalletCounterparty } from './wallet'
export { digest, canonicalize, parseOpen, parseRead, parseClose, Open, Read, Close, WireError, WireErrorCode } from './wire'
export { LiveCompanion, LookupService, Change } from './ingest'
