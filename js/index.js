'use strict'
// Package entry point: the hand-written JS layer over the native core.
const wire = require('./wire')
const { LiveLookup } = require('./live')

module.exports = {
  LiveLookup,
  digest: wire.digest,
  canonicalize: wire.canonicalize,
  parseOpen: wire.parseOpen,
  parseRead: wire.parseRead,
  parseClose: wire.parseClose,
  PROFILE: 'https://bsv.brc.dev/overlays/0193#lookup-live-v1'
}
