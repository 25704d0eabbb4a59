'use strict'
// Engine storage on knex + better-sqlite3 for the demo host and the Jest helper
// (__test__/helpers/engine.js imports it): the package's own helpers (js/provider/sqlite.js).
module.exports = require('../js/provider/sqlite')
