'use strict'
// A real nginx (Debian's package) on loopback in front of a node, configured with the file
// docs/operators.md tells operators to use (docs/nginx/overlay-lookup-live.conf). Each call
// starts its own nginx master in the foreground with a private prefix, pid file, logs and temp
// folders, so tests never touch a system nginx. Used by __test__/reverse-proxy.test.js; any
// test that wants a node behind a proxy (a conformance run, say) can use `startNginx` too.

const fs = require('fs')
const net = require('net')
const os = require('os')
const path = require('path')
const { spawn } = require('child_process')

const NGINX = '/usr/sbin/nginx'
const OPERATOR_CONF = path.join(__dirname, '..', '..', 'docs', 'nginx', 'overlay-lookup-live.conf')

function nginxAvailable () {
  return fs.existsSync(NGINX)
}

/** A TCP port that was free a moment ago on 127.0.0.1 (for a server that must know its URL first). */
function reservePort () {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.on('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

/** Resolves once something accepts connections on 127.0.0.1:port (or rejects after `ms`). */
async function waitForPort (port, ms, child) {
  const until = Date.now() + ms
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`nginx exited (${child.exitCode ?? child.signalCode})`)
    const up = await new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1')
      c.once('connect', () => { c.destroy(); resolve(true) })
      c.once('error', () => resolve(false))
    })
    if (up) return
    if (Date.now() > until) throw new Error(`nginx did not listen on ${port} within ${ms} ms`)
    await new Promise(resolve => setTimeout(resolve, 50))
  }
}

/**
 * Starts nginx listening on 127.0.0.1:`port` (a free one unless given) and forwarding to
 * `upstream` (`http://127.0.0.1:<port>` of the node) with the operators' configuration.
 * Resolves with `{ url, port, dir, log(), close() }`: `url` is the origin clients use, `log()`
 * the error log so far, `close()` stops nginx and removes its folder.
 */
async function startNginx ({ upstream, port }) {
  const target = new URL(upstream)
  if (target.protocol !== 'http:') throw new Error('startNginx forwards to an http:// upstream')
  port = port || await reservePort()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nginx-'))
  // Worker processes may run as another user (nobody) when the master runs as root.
  fs.chmodSync(dir, 0o777)
  const conf = path.join(dir, 'nginx.conf')
  fs.writeFileSync(conf, [
    'worker_processes 1;',
    'daemon off;',
    `pid ${dir}/nginx.pid;`,
    `error_log ${dir}/error.log warn;`,
    'events { worker_connections 512; }',
    'http {',
    '  access_log off;',
    `  client_body_temp_path ${dir}/client_body;`,
    `  proxy_temp_path ${dir}/proxy;`,
    `  fastcgi_temp_path ${dir}/fastcgi;`,
    `  uwsgi_temp_path ${dir}/uwsgi;`,
    `  scgi_temp_path ${dir}/scgi;`,
    `  upstream overlay_node { server ${target.host}; keepalive 16; }`,
    '  server {',
    `    listen 127.0.0.1:${port};`,
    `    include ${OPERATOR_CONF};`,
    '  }',
    '}',
    ''
  ].join('\n'))
  const child = spawn(NGINX, ['-p', dir, '-e', path.join(dir, 'error.log'), '-c', conf], { stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d) => { stderr += d })
  const exited = new Promise(resolve => child.once('exit', resolve))
  try {
    await waitForPort(port, 10_000, child)
  } catch (e) {
    child.kill('SIGKILL')
    await exited
    const log = readIf(path.join(dir, 'error.log'))
    fs.rmSync(dir, { recursive: true, force: true })
    throw new Error(`${e.message}\n${stderr}${log}`)
  }
  let closed = false
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    dir,
    log: () => readIf(path.join(dir, 'error.log')),
    async close () {
      if (closed) return
      closed = true
      child.kill('SIGQUIT') // graceful: workers finish their requests
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000)
      await exited
      clearTimeout(timer)
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

/**
 * A node (helpers/node.js startNode, with `options`) behind its own nginx: the node's baseURL
 * (and, in public mode, its provider origin) is the proxy's origin, as an operator configures
 * it. Resolves with `{ node, proxy, url, close() }`; `node.origin` is the proxy's URL too, so
 * the helpers' clients go through nginx, and `node.direct` is the node's own listener.
 */
async function startNodeBehindNginx (options = {}) {
  const { startNode } = require('./node')
  const port = await reservePort()
  const url = `http://127.0.0.1:${port}`
  const node = await startNode({ ...options, publicOrigin: url })
  let proxy
  try {
    proxy = await startNginx({ upstream: node.direct, port })
  } catch (e) {
    await node.close()
    throw e
  }
  return { node, proxy, url, async close () { await proxy.close(); await node.close() } }
}

function readIf (file) {
  try { return fs.readFileSync(file, 'utf8') } catch (_) { return '' }
}

module.exports = { NGINX, OPERATOR_CONF, nginxAvailable, reservePort, startNginx, startNodeBehindNginx }
