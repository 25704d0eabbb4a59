'use strict'
// Access partitions for the benchmarks of bench/access.js: BRC-103 principals spread over
// `partitions` access partitions by a digest of their identity, and a notes companion whose
// visibility is a filter of its own per partition (so every partition is a view of its own,
// with its own rendered live groups) that every benchmark row satisfies (so every poll still
// receives the committed group).

const crypto = require('node:crypto')
const { createNotesCompanion } = require('../../demo/notes/notesCompanion')

function partitionOf (principal, partitions) {
  const h = crypto.createHash('sha256').update(String(principal)).digest()
  return 'team-' + (h.readUInt32BE(0) % partitions)
}

/** LiveLookup.open options placing principals in `access.partitions` partitions (none without `access`). */
function accessOptions (access) {
  if (!access) return {}
  return {
    accessPolicy: 'urn:overlay-lookup-live:bench:teams:1',
    authorize: ({ principal }) => ({ partition: partitionOf(principal, access.partitions) })
  }
}

/** The notes companion, with a visibility filter per partition when `access` is given. */
function accessCompanion (access) {
  const base = createNotesCompanion()
  if (!access) return base
  return { ...base, visibility: ({ partition }) => ({ not: { eq: ['author', 'not-a-key/' + partition] } }) }
}

module.exports = { partitionOf, accessOptions, accessCompanion }
