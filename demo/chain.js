'use strict'
// The demo's development chain tracker: the package's own (js/dev/chain.js).
module.exports = require('../js/dev/chain')
