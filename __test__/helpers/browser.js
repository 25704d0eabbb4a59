'use strict'
// Debian's chromium for the browser tests, driven by playwright-core. A test file uses
// `describeInChromium(__filename, name, fn)`: without /usr/bin/chromium (CI installs it with
// `apt-get install chromium`) the suite is skipped with a warning naming the file.
const fs = require('node:fs')
const path = require('node:path')

const CHROMIUM = '/usr/bin/chromium'
const haveChromium = fs.existsSync(CHROMIUM)

function describeInChromium (file, name, fn) {
  if (!haveChromium) {
    console.warn(`${path.basename(file)} SKIPPED: ${CHROMIUM} is missing (CI installs it with apt-get install chromium)`)
    return describe.skip(name, fn)
  }
  return describe(name, fn)
}

// launch() always gives chromium a fresh temporary --user-data-dir of its own and refuses one
// in args (that is launchPersistentContext, which allows a single context only).
async function launchChromium () {
  const { chromium } = require('playwright-core')
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync']
  })
}

module.exports = { describeInChromium, launchChromium }
