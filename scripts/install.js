#!/usr/bin/env node
'use strict'
// The package's `install` script. Three cases:
//
// 1. A development tree (a clone, not inside node_modules): build the addon from the current
//    sources with `npm run build` (ci profile, incremental), so a binary left over from older
//    sources is never kept. This needs the devDependencies (@napi-rs/cli) and a Rust toolchain.
// 2. Installed as a dependency, and a prebuilt binary loads (the platform package that npm picked
//    from optionalDependencies, or a .node next to index.js): nothing to do, no compiler runs.
// 3. Installed as a dependency, and no binary fits this platform: build from source with cargo
//    (src/, Cargo.toml, Cargo.lock and build.rs ship in the package) and put the .node next to
//    index.js, which the generated loader tries first.
//
// npm shows an install script's output only when it fails, or with --foreground-scripts.

const { spawnSync } = require('child_process')
const fs = require('fs')
const path = require('path')

const ROOT = path.resolve(__dirname, '..')
const PKG = require(path.join(ROOT, 'package.json'))
const NAME = PKG.name
const BINARY = PKG.napi.binaryName

function log (message) {
  console.error(`${NAME}: ${message}`)
}

function fail (message) {
  log(message)
  process.exit(1)
}

/** A development tree is one not installed by a package manager, i.e. not under node_modules. */
function isDevelopmentTree () {
  return !ROOT.split(path.sep).includes('node_modules')
}

/**
 * Loads the binding in a child process, through js/common/native.js (the package's one loader of
 * the generated index.js); returns null when it loads, else its error.
 */
function bindingLoadError () {
  const probe = `require(${JSON.stringify(path.join(ROOT, 'js', 'common', 'native.js'))})`
  const r = spawnSync(process.execPath, ['-e', probe], { encoding: 'utf8' })
  if (r.status === 0) return null
  return (r.stderr || r.error?.message || 'unknown error').trim().split('\n').slice(0, 6).join('\n')
}

function isMusl () {
  try {
    return fs.readFileSync('/usr/bin/ldd', 'utf8').includes('musl')
  } catch {
    const header = process.report?.getReport?.()?.header
    return !(header && header.glibcVersionRuntime)
  }
}

/** The platform part of the .node name the generated loader looks for (e.g. linux-x64-gnu). */
function platformSuffix () {
  const { platform, arch } = process
  if (platform === 'linux') {
    const musl = isMusl()
    if (arch === 'arm') return musl ? 'linux-arm-musleabihf' : 'linux-arm-gnueabihf'
    return `linux-${arch}-${musl ? 'musl' : 'gnu'}`
  }
  if (platform === 'win32') return `win32-${arch}-msvc`
  if (platform === 'android' && arch === 'arm') return 'android-arm-eabi'
  return `${platform}-${arch}`
}

function hasCommand (cmd, args = ['--version']) {
  const r = spawnSync(cmd, args, { stdio: 'ignore', shell: process.platform === 'win32' })
  return !r.error && r.status === 0
}

/** What a source build needs and is missing, as sentences. */
function missingTools () {
  const missing = []
  if (!hasCommand('cargo')) {
    missing.push('cargo (a Rust toolchain, 1.80 or newer: https://rustup.rs) is not on PATH')
  }
  // The secp256k1 crate compiles C code; the cc crate honours $CC.
  if (process.platform !== 'win32') {
    const cc = process.env.CC || 'cc'
    if (!hasCommand(cc) && !hasCommand('gcc') && !hasCommand('clang')) {
      missing.push(`a C compiler (${cc}, gcc or clang) is not on PATH`)
    }
  }
  return missing
}

function developmentBuild () {
  log('development tree: building the native addon from the current sources (npm run build)')
  const missing = missingTools()
  try {
    require.resolve('@napi-rs/cli/package.json', { paths: [ROOT] })
  } catch {
    missing.push('the devDependency @napi-rs/cli is not installed (a development tree needs `npm install` with dev dependencies)')
  }
  if (missing.length > 0) fail(`cannot build the native addon: ${missing.join('; ')}.`)
  const npm = process.env.npm_execpath
  const r = npm
    ? spawnSync(process.execPath, [npm, 'run', 'build'], { cwd: ROOT, stdio: 'inherit' })
    : spawnSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'inherit', shell: process.platform === 'win32' })
  if (r.status !== 0) fail('`npm run build` failed (see above).')
}

/** Whether two paths name the same file (cargo reports paths with symlinks resolved). */
function sameFile (a, b) {
  try {
    return fs.realpathSync(a) === fs.realpathSync(b)
  } catch {
    return false
  }
}

/** cargo build of the cdylib; returns the path of the built library. */
function cargoBuild (profile) {
  const args = ['build', '--lib', '--locked', '--profile', profile, '--message-format=json-render-diagnostics']
  const r = spawnSync('cargo', args, {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    shell: process.platform === 'win32'
  })
  if (r.status !== 0) fail(`\`cargo ${args.join(' ')}\` failed (see above).`)
  for (const line of r.stdout.split('\n')) {
    if (!line.startsWith('{')) continue
    const msg = JSON.parse(line)
    // This package's own cdylib: a dependency can be a cdylib too (redb is), and cargo
    // reports it first.
    if (msg.reason === 'compiler-artifact' && msg.target.kind.includes('cdylib') && sameFile(msg.manifest_path, path.join(ROOT, 'Cargo.toml'))) {
      const lib = msg.filenames.find(f => /\.(so|dylib|dll)$/.test(f))
      if (lib) return lib
    }
  }
  fail('cargo built no cdylib (unexpected: Cargo.toml declares crate-type cdylib).')
}

function sourceBuild (loadError) {
  const suffix = platformSuffix()
  const profile = process.env.OVERLAY_LOOKUP_LIVE_BUILD_PROFILE || 'release'
  log(`no prebuilt binary loads on ${suffix} (Node ${process.versions.node}):\n${loadError}`)
  const missing = missingTools()
  if (missing.length > 0) {
    fail(`no prebuilt binary fits this platform and it cannot be built from source: ${missing.join('; ')}. ` +
      `Prebuilt platforms: ${Object.keys(PKG.optionalDependencies || {}).join(', ') || 'none'}.`)
  }
  log(`building the native addon from source with cargo (profile ${profile}); this takes several minutes`)
  const lib = cargoBuild(profile)
  const dest = path.join(ROOT, `${BINARY}.${suffix}.node`)
  fs.copyFileSync(lib, dest)
  const after = bindingLoadError()
  if (after !== null) fail(`built ${dest}, but the loader still cannot load it:\n${after}`)
  // Cargo's own target folder (hundreds of MB) is not needed at run time: drop it unless the
  // operator chose where it lives.
  if (!process.env.CARGO_TARGET_DIR) fs.rmSync(path.join(ROOT, 'target'), { recursive: true, force: true })
  log(`built ${path.basename(dest)}`)
}

function main () {
  if (isDevelopmentTree()) return developmentBuild()
  const loadError = bindingLoadError()
  if (loadError === null) return // a prebuilt binary fits: nothing to build
  sourceBuild(loadError)
}

main()
