'use strict'
// A benchmark process of bench/lib (live-server.js, live-client.js) driven over IPC: it is
// started with its configuration as JSON in argv[2], sends {ready: ...} once set up, and
// answers each command with a message carrying a known key.

const path = require('node:path')
const { fork } = require('node:child_process')

/**
 * Forks `script` (a file of bench/lib); resolves {child, ask(msg, key), stop(), ready} once it
 * sent {ready}. `ask` sends `msg` (none if null) and resolves the next message holding `key`,
 * including one that arrived before it was asked for.
 */
function start (script, arg) {
  return new Promise((resolve, reject) => {
    const child = fork(path.join(__dirname, script), [JSON.stringify(arg)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    const inbox = []
    const waiting = []
    child.on('message', (m) => {
      const i = waiting.findIndex((w) => w.key in m)
      if (i >= 0) waiting.splice(i, 1)[0].resolve(m)
      else inbox.push(m)
    })
    child.once('exit', (code) => { if (code) reject(new Error(`${script} exited ${code}`)) })
    const next = (key) => new Promise((resolve) => {
      const i = inbox.findIndex((m) => key in m)
      if (i >= 0) resolve(inbox.splice(i, 1)[0])
      else waiting.push({ key, resolve })
    })
    const ask = (msg, key) => { if (msg) child.send(msg); return next(key) }
    const stop = () => new Promise((resolve) => { child.once('exit', resolve); child.send({ cmd: 'close' }) })
    next('ready').then((m) => resolve({ child, ask, stop, ready: m.ready }))
  })
}

module.exports = { start }
