#!/usr/bin/env node
'use strict'
// `npm run package [-- --profile ci]`: the release packages, ready for `npm publish`.
//
// 1. Checks that every target in package.json's napi.targets has its npm/<platform>/package.json
//    named `overlay-lookup-live-<platform>` (what the generated loader requires) at the main
//    package's version.
// 2. Builds the binary for this host (`napi build --platform`, release profile unless --profile
//    is given), copies it into npm/<platform>/ and strips the copy's symbol table with the host's
//    `strip` (the symbols are only for debuggers; the copy in the tree stays as built, so cargo's
//    cached builds are not invalidated by different flags). Binaries for other targets must
//    already be in their npm/<platform>/ folder (for example put there by `napi artifacts`
//    from other machines' builds); the script refuses to pack a platform package without one.
// 3. Writes every package's tarball (`npm pack`) into dist/, which it empties first. The main
//    package is packed from a staging copy (dist/stage/) whose package.json gains
//    optionalDependencies on every platform package at the same version, as napi-rs's own
//    pre-publish step does: the repository's package.json cannot name them, because a lock file
//    cannot hold packages that are not yet on the registry and `npm ci` then refuses to install.
//
// Publish with `npm publish dist/<tarball>` for each platform package first, then the main one.

const { spawnSync } = require('child_process')
const fs = require('fs')
const path = require('path')
const { parseTriple } = require('@napi-rs/cli')

const ROOT = path.resolve(__dirname, '..')
const DIST = path.join(ROOT, 'dist')

function fail (message) {
  console.error(`package: ${message}`)
  process.exit(1)
}

function run (cmd, args, cwd) {
  console.error(`package: ${path.relative(ROOT, cwd) || '.'}$ ${cmd} ${args.join(' ')}`)
  const r = spawnSync(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' })
  if (r.status !== 0) fail(`${cmd} ${args.join(' ')} failed`)
  return r.stdout
}

function profileArg (argv) {
  const i = argv.indexOf('--profile')
  if (i < 0) return 'release'
  if (!argv[i + 1]) fail('--profile needs a cargo profile name (release or ci)')
  return argv[i + 1]
}

function hostPlatform () {
  const out = run('rustc', ['-vV'], ROOT)
  const host = /^host: (\S+)$/m.exec(out)
  if (!host) fail('rustc -vV printed no host triple')
  return parseTriple(host[1]).platformArchABI
}

function main () {
  const profile = profileArg(process.argv.slice(2))
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
  const binaryName = pkg.napi.binaryName
  const platforms = pkg.napi.targets.map(t => parseTriple(t).platformArchABI)

  for (const platform of platforms) {
    const dir = path.join(ROOT, 'npm', platform)
    const file = path.join(dir, 'package.json')
    if (!fs.existsSync(file)) fail(`${path.relative(ROOT, file)} is missing (run \`napi create-npm-dirs\`)`)
    const sub = JSON.parse(fs.readFileSync(file, 'utf8'))
    const name = `${pkg.name}-${platform}`
    if (sub.name !== name || sub.version !== pkg.version) {
      fail(`${path.relative(ROOT, file)} is ${sub.name}@${sub.version}, expected ${name}@${pkg.version} (\`napi version\` syncs versions)`)
    }
  }

  const host = hostPlatform()
  if (!platforms.includes(host)) fail(`this host (${host}) is not in napi.targets: ${platforms.join(', ')}`)
  const buildArgs = ['build', '--platform', ...(profile === 'release' ? ['--release'] : ['--profile', profile])]
  run(process.execPath, [require.resolve('@napi-rs/cli/package.json').replace(/package\.json$/, 'dist/cli.js'), ...buildArgs], ROOT)
  const nodeFile = `${binaryName}.${host}.node`
  const shipped = path.join(ROOT, 'npm', host, nodeFile)
  fs.copyFileSync(path.join(ROOT, nodeFile), shipped)
  if (process.platform === 'linux' || process.platform === 'darwin') {
    run('strip', process.platform === 'darwin' ? ['-x', shipped] : [shipped], ROOT)
  }

  for (const platform of platforms) {
    const file = path.join(ROOT, 'npm', platform, `${binaryName}.${platform}.node`)
    if (!fs.existsSync(file)) fail(`${path.relative(ROOT, file)} is missing: build it on a ${platform} machine and copy it there`)
  }

  fs.rmSync(DIST, { recursive: true, force: true })
  fs.mkdirSync(DIST)
  for (const platform of platforms) pack(path.join(ROOT, 'npm', platform))
  pack(stageMain(pkg, platforms))
  fs.rmSync(path.join(DIST, 'stage'), { recursive: true, force: true })
}

/** Copies the main package's files (as `npm pack` selects them) into dist/stage/. */
function stageMain (pkg, platforms) {
  const stage = path.join(DIST, 'stage')
  const [listed] = JSON.parse(run('npm', ['pack', '--dry-run', '--json', '--silent'], ROOT))
  for (const { path: file } of listed.files) {
    fs.mkdirSync(path.dirname(path.join(stage, file)), { recursive: true })
    fs.copyFileSync(path.join(ROOT, file), path.join(stage, file))
  }
  const optionalDependencies = Object.fromEntries(platforms.map(p => [`${pkg.name}-${p}`, pkg.version]))
  const staged = {}
  for (const [key, value] of Object.entries(pkg)) {
    staged[key] = value
    if (key === 'dependencies') staged.optionalDependencies = optionalDependencies
  }
  fs.writeFileSync(path.join(stage, 'package.json'), JSON.stringify(staged, null, 2) + '\n')
  return stage
}

function pack (dir) {
  const [packed] = JSON.parse(run('npm', ['pack', '--json', '--silent', '--pack-destination', DIST], dir))
  console.log(`dist/${packed.filename}  ${packed.size} bytes packed, ${packed.unpackedSize} unpacked, ${packed.entryCount} files`)
}

main()
