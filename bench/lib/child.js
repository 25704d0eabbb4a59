'use strict'
// Child-process entry of one benchmark section: `node bench/lib/child.js <section> <config JSON>`.
// Each section runs in its own process so its memory readings and peak RSS are its own.
// The result goes back over the IPC channel (or to stdout when started without one).

const path = require('node:path')

async function main () {
  const [section, configJson] = process.argv.slice(2)
  if (!/^[a-z]+$/.test(section || '')) throw new Error('usage: child.js <section> <config JSON>')
  const mod = require(path.join(__dirname, '..', 'sections', section + '.js'))
  const result = await mod.run(JSON.parse(configJson || '{}'))
  if (process.send) await new Promise(resolve => process.send({ ok: true, result }, resolve))
  else process.stdout.write(JSON.stringify(result, null, 2) + '\n')
}

main().then(() => process.exit(0), (err) => {
  const message = err && err.stack ? err.stack : String(err)
  if (process.send) process.send({ ok: false, error: message }, () => process.exit(1))
  else { process.stderr.write(message + '\n'); process.exit(1) }
})
