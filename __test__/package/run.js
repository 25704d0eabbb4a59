#!/usr/bin/env node
'use strict'
// The packaged install, as an operator does it (`npm run test:package [-- --profile ci]`;
// .ci/run runs it). It packs the release packages with `npm run package`, then in new temporary
// projects outside the repository:
//
// 1. prebuilt: with a PATH holding only node, npm and sh (no cargo, rustc or C compiler), installs
//    the packed tarballs and runs app.js (open a store, wrap a service, serve one open over
//    HTTP, check it). The binding must come from the platform package and nothing is compiled.
// 2. no binary, no toolchain: the same PATH, the main tarball alone (--omit=optional): the
//    install must fail and say that cargo is missing.
// 3. no binary, with a toolchain: the main tarball alone and the normal PATH: the install builds
//    from source (profile ci, with this repository's target/ as cargo's cache to save time) and
//    app.js runs on the binary it built.
// 4. the shipped example: the tarballs with @bsv/overlay, knex and better-sqlite3 (normal PATH:
//    better-sqlite3 compiles), example.js runs examples/host/server.js in public mode and with
//    BRC-103 (health, a publish followed live by examples/follower/follow.js, the checker,
//    metrics), tsc --strict compiles examples/host/server.ts, and the host runs on Express 4.
//
// npm dependencies of the package resolve from the npm cache (warm after the repository's own
// install) or the registry, as for any operator. --profile is passed on to `npm run package`
// (release by default; ci builds faster and is what a quick local run may use).

const assert = require('assert')
const { spawnSync } = require('child_process')
const fs = require('fs')
const os = require('os')
const path = require('path')

const ROOT = path.resolve(__dirname, '..', '..')
const DIST = path.join(ROOT, 'dist')
const PKG = require(path.join(ROOT, 'package.json'))

function run (cmd, args, options = {}) {
  const started = Date.now()
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...options })
  const seconds = ((Date.now() - started) / 1000).toFixed(1)
  return { status: r.status, out: `${r.stdout || ''}${r.stderr || ''}`, error: r.error, seconds }
}

function check (r, what) {
  if (r.status !== 0) {
    console.error(r.out)
    throw new Error(`${what} failed (exit ${r.status}${r.error ? ', ' + r.error.message : ''})`)
  }
  return r
}

/** Finds an executable on PATH (like `command -v`), or null. */
function which (cmd, PATH = process.env.PATH) {
  for (const dir of PATH.split(path.delimiter)) {
    const file = path.join(dir, cmd)
    try {
      fs.accessSync(file, fs.constants.X_OK)
      return file
    } catch {}
  }
  return null
}

function hostTriple () {
  return /^host: (\S+)$/m.exec(check(run('rustc', ['-vV']), 'rustc -vV').out)[1]
}

/** A PATH folder with symlinks to node, npm and sh (npm runs package scripts with sh) only. */
function toolFreePath (tmp) {
  const bin = path.join(tmp, 'bin')
  fs.mkdirSync(bin)
  fs.symlinkSync(process.execPath, path.join(bin, 'node'))
  const npm = which('npm')
  assert(npm, 'npm is not on PATH')
  fs.symlinkSync(fs.realpathSync(npm), path.join(bin, 'npm'))
  const sh = which('sh')
  assert(sh, 'sh is not on PATH')
  fs.symlinkSync(fs.realpathSync(sh), path.join(bin, 'sh'))
  for (const tool of ['cargo', 'rustc', 'cc', 'gcc', 'clang', 'c++', 'make']) {
    assert.strictEqual(which(tool, bin), null, `${tool} must not be on the test PATH`)
  }
  return bin
}

/** The environment of an operator's shell: no variables from the npm run that started us. */
function operatorEnv (PATH, extra = {}) {
  const env = { PATH, HOME: os.homedir(), TMPDIR: os.tmpdir(), LANG: process.env.LANG || 'C.UTF-8' }
  for (const key of ['npm_config_cache', 'npm_config_registry', 'npm_config_userconfig']) {
    if (process.env[key]) env[key] = process.env[key]
  }
  return { ...env, ...extra }
}

/** A new operator project with app.js in it. */
function newProject (tmp, name) {
  const dir = path.join(tmp, name)
  fs.mkdirSync(dir)
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: `operator-${name}`, version: '1.0.0', private: true }))
  fs.copyFileSync(path.join(__dirname, 'app.js'), path.join(dir, 'app.js'))
  return dir
}

/** What an operator types: the package (and here its local tarballs) plus the app's own deps. */
function installArgs (tarballs, extra = [], more = []) {
  return ['install', '--no-audit', '--no-fund', '--prefer-offline', '--foreground-scripts', ...extra,
    ...tarballs, `express@${PKG.devDependencies.express}`, `@bsv/sdk@${PKG.dependencies['@bsv/sdk']}`, ...more]
}

/**
 * 4. The shipped example host: the tarballs with what the example's README section lists
 * (@bsv/overlay, knex, better-sqlite3; TypeScript and the type packages for server.ts), then
 * example.js runs the host in public mode and with BRC-103 (health, publish, a live follower,
 * the checker, metrics), tsc --strict compiles the TypeScript host copied into the project, and
 * the JS host runs again on Express 4.
 */
function exampleProject (tmp, tarballs) {
  const dir = path.join(tmp, 'example')
  fs.mkdirSync(dir)
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'operator-example', version: '1.0.0', private: true }))
  fs.copyFileSync(path.join(__dirname, 'example.js'), path.join(dir, 'example.js'))
  // better-sqlite3 compiles at install where no prebuilt binary can be fetched (.ci/run's setting).
  const build = {}
  for (const key of ['npm_config_build_from_source', 'npm_config_nodedir']) if (process.env[key]) build[key] = process.env[key]
  const env = operatorEnv(process.env.PATH, build)
  const dev = PKG.devDependencies
  const more = ['@bsv/overlay', 'knex', 'better-sqlite3', 'typescript', '@types/express', '@types/node'].map(p => `${p}@${dev[p] || '*'}`)
  const inst = check(run('npm', installArgs(tarballs, [], more), { cwd: dir, env }), 'npm install for the example host')
  console.log(`example: npm install from the tarballs with the host's packages: ${inst.seconds} s`)
  const ran = check(run(process.execPath, ['example.js', 'none', 'brc103'], { cwd: dir, env }), 'example.js (Express 5)')
  assert.match(ran.out, /example: ok\n/)
  for (const line of ran.out.split('\n').filter(l => l.startsWith('example: AUTH='))) console.log(line + ' (Express 5)')
  // The TypeScript host, copied out of the package as an operator starts from it.
  const ex = path.join(dir, 'node_modules', PKG.name, 'examples', 'host')
  for (const f of ['server.ts', 'messages.js', 'messages.d.ts']) fs.copyFileSync(path.join(ex, f), path.join(dir, f))
  check(run(path.join(dir, 'node_modules', '.bin', 'tsc'), ['--noEmit', '--strict', '--skipLibCheck', '--module', 'preserve', '--moduleResolution', 'bundler', '--types', 'node', 'server.ts'], { cwd: dir, env }), 'tsc --strict on examples/host/server.ts')
  console.log('example: server.ts compiles with tsc --strict')
  check(run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', 'express@4'], { cwd: dir, env }), 'npm install express@4')
  const four = check(run(process.execPath, ['example.js', 'none'], { cwd: dir, env }), 'example.js (Express 4)')
  assert.match(four.out, /example: ok\n/)
  const version = require(path.join(dir, 'node_modules', 'express', 'package.json')).version
  assert.match(version, /^4\./)
  for (const line of four.out.split('\n').filter(l => l.startsWith('example: AUTH='))) console.log(`${line} (Express ${version})`)
}

function runApp (dir, env) {
  const r = check(run(process.execPath, ['app.js'], { cwd: dir, env }), 'app.js')
  assert.match(r.out, /operator-app: ok/)
  return r.out.split('\n').filter(l => l.startsWith('operator-app: binding ')).map(l => l.slice('operator-app: binding '.length))
}

function main () {
  const profileAt = process.argv.indexOf('--profile')
  const packageArgs = ['run', 'package', ...(profileAt >= 0 ? ['--', '--profile', process.argv[profileAt + 1]] : [])]
  const packed = check(run('npm', packageArgs, { cwd: ROOT }), 'npm run package')
  console.log(`npm ${packageArgs.join(' ')}: ${packed.seconds} s`)

  const tarballs = fs.readdirSync(DIST).filter(f => f.endsWith('.tgz')).map(f => path.join(DIST, f))
  const main = tarballs.find(f => path.basename(f) === `${PKG.name}-${PKG.version}.tgz`)
  assert(main, `dist/ has no ${PKG.name}-${PKG.version}.tgz`)
  for (const f of tarballs) console.log(`${path.basename(f)}: ${fs.statSync(f).size} bytes`)
  const platformPackages = fs.readdirSync(path.join(ROOT, 'npm')).map(d => require(path.join(ROOT, 'npm', d, 'package.json')).name)
  assert.strictEqual(tarballs.length, 1 + platformPackages.length)

  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'overlay-lookup-live-package-'))
  try {
    const bare = toolFreePath(tmp)

    // 1. prebuilt binary, no toolchain
    const prebuilt = newProject(tmp, 'prebuilt')
    const env = operatorEnv(bare)
    const inst = check(run('npm', installArgs(tarballs), { cwd: prebuilt, env }), 'npm install of the tarballs (no toolchain)')
    console.log(`prebuilt: npm install from the tarballs: ${inst.seconds} s`)
    const installed = path.join(prebuilt, 'node_modules', PKG.name)
    assert.deepStrictEqual(fs.readdirSync(installed).filter(f => f.endsWith('.node') || f === 'target'), [],
      'a prebuilt install must not build anything')
    // The installed package carries its docs and examples: every relative link of the README
    // and of docs/*.md resolves inside node_modules.
    for (const doc of ['README.md', ...fs.readdirSync(path.join(installed, 'docs')).filter(f => f.endsWith('.md')).map(f => path.join('docs', f))]) {
      const text = fs.readFileSync(path.join(installed, doc), 'utf8')
      for (const [, target] of text.matchAll(/\]\(((?:docs|examples)\/[^)#\s]+|[a-z-]+\.(?:md|conf|png))(?:#[^)]*)?\)/g)) {
        assert(fs.existsSync(path.join(installed, path.dirname(doc), target)), `${doc} links ${target}, which the package lacks`)
      }
    }
    for (const f of ['examples/host/server.js', 'examples/host/server.ts', 'examples/host/publish.js', 'examples/follower/follow.js']) {
      assert(fs.existsSync(path.join(installed, f)), `the package lacks ${f}`)
    }
    const bindings = runApp(prebuilt, env)
    const host = platformPackages.find(p => bindings.some(b => b.includes(`${path.sep}node_modules${path.sep}${p}${path.sep}`)))
    assert(host, `the binding must come from a platform package, got ${bindings.join(', ')}`)
    console.log(`prebuilt: app.js ok with ${path.relative(prebuilt, bindings[0])}`)

    // 2. no binary fits and no toolchain: a clear error
    const missing = newProject(tmp, 'no-toolchain')
    const failed = run('npm', installArgs([main], ['--omit=optional']), { cwd: missing, env })
    assert.notStrictEqual(failed.status, 0, 'installing without a binary or cargo must fail')
    assert.match(failed.out, /no prebuilt binary fits this platform and it cannot be built from source: cargo .* is not on PATH/)
    console.log('no-toolchain: install fails naming cargo')

    // 3. no binary fits, toolchain present: builds from source
    const source = newProject(tmp, 'source')
    const buildEnv = operatorEnv(process.env.PATH, {
      OVERLAY_LOOKUP_LIVE_BUILD_PROFILE: 'ci',
      // The dev build's cache (napi build passes --target): only this crate is compiled again.
      CARGO_TARGET_DIR: path.join(ROOT, 'target'),
      CARGO_BUILD_TARGET: hostTriple(),
      ...(process.env.CARGO_HOME ? { CARGO_HOME: process.env.CARGO_HOME } : {}),
      ...(process.env.RUSTUP_HOME ? { RUSTUP_HOME: process.env.RUSTUP_HOME } : {})
    })
    const built = check(run('npm', installArgs([main], ['--omit=optional']), { cwd: source, env: buildEnv }), 'npm install building from source')
    assert.match(built.out, /building the native addon from source with cargo/)
    console.log(`source: npm install building from source (profile ci, warm cargo cache): ${built.seconds} s`)
    const local = runApp(source, operatorEnv(bare))
    assert(local.some(b => b.startsWith(path.join(source, 'node_modules', PKG.name) + path.sep)), `expected the built binary, got ${local.join(', ')}`)
    console.log('source: app.js ok with the binary built at install')

    // 4. the shipped example host, JS (Express 5 and 4) and TypeScript
    exampleProject(tmp, tarballs)
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
  console.log('test:package: ok')
}

try {
  main()
} catch (err) {
  console.error(err)
  process.exit(1)
}
