'use strict'
// The client's error: `code` is a BRC-192 §6 code; other fields as js/client/client.d.ts lists.

class LiveLookupError extends Error {
  constructor (code, message, extra = {}) {
    super(message)
    this.name = 'LiveLookupError'
    this.code = code
    Object.assign(this, extra)
  }
}

module.exports = { LiveLookupError }
