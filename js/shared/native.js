'use strict'
// The one place that loads the generated napi loader (index.js at the package root).
module.exports = require('../../index.js')
