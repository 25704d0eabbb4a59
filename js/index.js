'use strict'
// Package entry point: the hand-written JS layer over the native core.
const wire = require('./wire')
const { LiveLookup } = require('./live')
const { LiveLookupClient, CheckpointStore, LiveLookupError } = require('./client')
const { createRouter, PROFILE } = require('./router')
const { mountOnOverlayExpress, createOutputLookupCompanion, OutputLookupError } = require('./overlay-express')
const { runChecks, formatReport } = require('./check')
const { gaspRouter, scheduleGASPSync } = require('./gasp')
const { NativeWallet } = require('./wallet')
const { NativeAuthFetch } = require('./authfetch')

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
  EvidenceVerifier: require('./verifier').EvidenceVerifier,
  checkEvidence: require('./verifier').checkEvidence,
  // Native evidence verification (docs/native-verify.md).
  verifyBeef: require('./native').verifyBeef,
  verifyBeefAsync: require('./native').verifyBeefAsync,
  verifyBeefBatch: require('./native').verifyBeefBatch,
  digest: wire.digest,
  canonicalize: wire.canonicalize,
  parseOpen: wire.parseOpen,
  parseRead: wire.parseRead,
  parseClose: wire.parseClose,
  PROFILE
}
