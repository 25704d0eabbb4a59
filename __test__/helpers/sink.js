'use strict'
// The one place tests get a sink for js/provider/ingest.js. For now it records committed groups in memory;
// swapping in the native store is a change to createSink only (keep `groups` for assertions).
function createSink () {
  const groups = []
  return {
    groups,
    async commit (changes) {
      if (!Array.isArray(changes) || changes.length === 0) throw new Error('a group must hold at least one change')
      groups.push(changes)
    }
  }
}

module.exports = { createSink }
