'use strict'
// The old names of ./node.js for test files written against them: an authenticated node
// (maxWaitMs 25000, as it always was here) and request bodies taking `waitMs` alone.
const node = require('./node')

exports.startAuthNode = (options = {}) => node.startNode({ maxWaitMs: 25000, ...options, authentication: 'brc103' })
exports.lookupClient = node.lookupClient
exports.openReq = (waitMs = 0) => node.openReq({}, { waitMs })
exports.readReq = (batch, waitMs = 0) => node.readReq(batch, { waitMs })
exports.openCaughtUp = node.openCaughtUp
exports.PROFILE = node.PROFILE
