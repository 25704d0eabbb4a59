'use strict'
// Package entry point: the hand-written JS layer over the native core.
const wire = require('./common/wire')
const { LiveLookup } = require('./provider/live')
const { LiveLookupClient, CheckpointStore, LiveLookupError } = require('./client/client')
const { createRouter, PROFILE } = require('./provider/router')
const { mountOnOverlayExpress, createOutputLookupCompanion, OutputLookupError } = require('./provider/overlay-express')
const { runChecks, formatReport } = require('./check')
const { gaspRouter, scheduleGASPSync } = require('./provider/gasp')
const { NativeWallet } = require('./auth/wallet')
const { NativeAuthFetch } = require('./auth/authfetch')
const { runOverlayMigrations, openSqlite } = require('./provider/sqlite')
const { LocalChainTracker, mintFunding } = require('./dev/chain')

module.exports = {
  LiveLookup,
  LiveLookupClient,
  CheckpointStore,
  LiveLookupError,
  createRouter,
  mountOnOverlayExpress,
  createOutputLookupCompanion,
  OutputLookupError,
  runChecks,
  formatReport,
  gaspRouter,
  scheduleGASPSync,
  NativeWallet,
  NativeAuthFetch,
  // Hosting helpers: @bsv/overlay's migrations on SQLite, a local development chain tracker.
  runOverlayMigrations,
  openSqlite,
  LocalChainTracker,
  mintFunding,
  EvidenceVerifier: require('./client/verifier').EvidenceVerifier,
  checkEvidence: require('./client/verifier').checkEvidence,
  // Native evidence verification (docs/native-verify.md).
  verifyBeef: require('./common/native').verifyBeef,
  verifyBeefAsync: require('./common/native').verifyBeefAsync,
  verifyBeefBatch: require('./common/native').verifyBeefBatch,
  digest: wire.digest,
  canonicalize: wire.canonicalize,
  parseOpen: wire.parseOpen,
  parseRead: wire.parseRead,
  parseClose: wire.parseClose,
  PROFILE
}
