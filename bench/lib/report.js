'use strict'
// Renders results.json as bench/RESULTS.md. Every number printed here comes from the results
// object; text that is not a measurement says so.

function num (v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—'
  const a = Math.abs(v)
  if (a >= 100) return Math.round(v).toLocaleString('en-US')
  if (a >= 10) return v.toFixed(1)
  if (a >= 1) return v.toFixed(2)
  return v.toPrecision(2)
}

function bytes (v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—'
  const a = Math.abs(v)
  if (a >= 1024 * 1024 * 1024) return (v / (1024 * 1024 * 1024)).toFixed(2) + ' GiB'
  if (a >= 1024 * 1024) return (v / (1024 * 1024)).toFixed(1) + ' MiB'
  if (a >= 10 * 1024) return (v / 1024).toFixed(1) + ' KiB'
  return Math.round(v).toLocaleString('en-US') + ' B'
}

/** "median (min–max)" of a summary; "—" when nothing was measured. */
function cell (s, fmt = num) {
  if (!s || s.n === 0) return '—'
  if (s.n === 1) return `${fmt(s.median)} (1 run)`
  return `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})`
}

function table (head, rows) {
  return [
    '| ' + head.join(' | ') + ' |',
    '|' + head.map(() => '---').join('|') + '|',
    ...rows.map(r => '| ' + r.join(' | ') + ' |')
  ].join('\n')
}

function machineSection (r) {
  const m = r.machine
  return `## Machine

${table(['', ''], [
    ['CPU', `${m.cpuModel}, ${m.cpuCount} logical CPUs (os.cpus())` + (m.cpuMHz ? `, ${m.cpuMHz} MHz reported` : ', clock not reported by the VM')],
    ['Memory', bytes(m.memoryBytes) + ` (free at start: ${bytes(m.freeMemoryBytesAtStart)})`],
    ['OS', m.os],
    ['Node', m.node],
    ['rustc', m.rustc || 'not found'],
    ['Git commit', (m.gitCommit || 'unknown') + (m.gitDirty ? ' (with uncommitted changes to tracked files)' : '')],
    ['Load average (1/5/15 min) at start', m.loadAverageAtStart.map(v => v.toFixed(2)).join(' / ')],
    ['Load average at end', m.loadAverageAtEnd ? m.loadAverageAtEnd.map(v => v.toFixed(2)).join(' / ') : '—']
  ])}

The machine is a shared 2-core VM: other work may have run at the same time (see the load
averages), which widens the min–max ranges. The native addon was built with
\`npx napi build --platform --profile ci\` (optimized, no LTO).
`
}

function catalogueSection (c) {
  const sizes = c.sizes
  const runsNote = sizes.map(s => `${s.size.toLocaleString('en-US')} rows: first batch ${s.plan.first}, Engine.lookup ${s.plan.engine}${s.plan.engineInRoute ? ' (timed inside the HTTP `/lookup` route, see below)' : ''}, drain ${s.plan.drain}, HTTP drain ${s.plan.http}`).join('; ')
  const inRoute = sizes.filter(s => s.plan.engineInRoute)
  const inRouteNote = inRoute.length === 0
    ? ''
    : `\nAt ${inRoute.map(s => s.size.toLocaleString('en-US')).join(', ')} rows the Engine.lookup figure is the \`engine.lookup\` call timed
inside the HTTP \`/lookup\` route of section 9a in the same round: the same call on the same Engine in
the same process, with the same body, so a second full answer (tens of seconds) is not paid for.\n`
  const missingEngine = sizes.filter(s => s.engineLookupMs.n === 0)
  let engineNote = ''
  if (missingEngine.length > 0) {
    const measured = sizes.filter(s => s.engineLookupMs.n > 0)
    const biggest = measured[measured.length - 1]
    const perRowUs = biggest ? biggest.engineLookupMs.median * 1000 / biggest.size : null
    engineNote = `
**Engine.lookup was not measured at ${missingEngine.map(s => s.size.toLocaleString('en-US')).join(', ')} rows.**
It answers with one SQLite query per outpoint and materializes every BEEF as a JS number array, so a
full answer does not fit this run's time budget.` + (biggest
      ? ` For scale only (an extrapolation, not a measurement): at the ${biggest.size.toLocaleString('en-US')}-row
median of ${num(perRowUs)} µs per output, ${missingEngine.map(s => `${s.size.toLocaleString('en-US')} rows would take about ${num(perRowUs * s.size / 1e6)} s`).join(', ')}
per answer. \`npm run bench -- --engine-at-1m\` measures it once.`
      : '') + '\n'
  }
  return `## 1. Catalogue size: live first batch against the full BRC-24 answer

What is compared, on the same rows in the same process and the same round:
- **live open: first batch**: \`LiveLookup.open\` of query \`{}\` (every note) with the profile's maximum
  page (1024 observations, 4 MiB), until its first batch is in hand (parsed);
- **Engine.lookup: full answer**: \`engine.lookup({service: 'ls_notes', query: {}})\` on a real
  \`@bsv/overlay\` Engine (knex + better-sqlite3) whose lookup service is the demo \`NotesLookupService\`
  wrapped by \`live.wrap\`: the complete BRC-24 output list with every BEEF;
- **live: full snapshot drain**: open plus reads until \`snapshotComplete\`, every page parsed, the
  same complete answer as Engine.lookup's (the count is checked on both sides).

Rows: ${c.authors} real signed note transactions (NoteFactory) serve as templates; row *n* has its own
txid, the template's locking script, and the template's ${c.beefBytes}-byte BEEF with *n* stamped into its
last 8 bytes (distinct evidence per row). The live store was loaded with \`live.commit\` in groups of
1,000 admits (the change a live companion would produce); the Engine's \`outputs\`, \`transactions\`,
\`applied_transactions\` and the notes table were filled with the same rows in bulk through prepared
statements on knex's own better-sqlite3 connection, one SQLite transaction per live group, overlapping
the native commits (\`synchronous=OFF\` during the load; a 256 MiB SQLite page cache kept for the
queries). The notes table's \`admittedAt\` is the live group of the row, so both sides order rows the
same way: by admission, then outpoint. Before measuring, the live first
page is checked to name the same outpoints, in the same order, as the notes service's query.
The catalogue grows in place (each size adds rows to the previous one).

Runs per figure: ${runsNote}. Each cell is median (min–max).

${table(['rows', 'live first batch, ms', 'Engine.lookup full answer, ms', 'Engine.lookup / first batch', 'live full drain, ms', 'Engine.lookup / full drain'], sizes.map(s => [
    s.size.toLocaleString('en-US'), cell(s.firstBatchMs), cell(s.engineLookupMs), cell(s.engineOverFirstBatch), cell(s.drainInProcessMs), cell(s.engineOverDrain)
  ]))}
${engineNote}${inRouteNote}
${smallPagesNote(sizes)}
![latency against catalogue size](latency-vs-catalogue.svg)

Loading both stores at once (one pass, for orientation only): ${sizes.map(s => `+${s.load.addedRows.toLocaleString('en-US')} rows at ${num(s.load.bothStoresRowsPerSec)} rows/s`).join('; ')}.
`
}

/** In-process first batches of small pages at each size, and how flat they are. */
function smallPagesNote (sizes) {
  const withSmall = sizes.filter(s => s.firstBatchSmallMs && Object.keys(s.firstBatchSmallMs).length > 0)
  if (withSmall.length === 0) return ''
  const pages = Object.keys(withSmall[0].firstBatchSmallMs)
  const first = withSmall[0]; const last = withSmall[withSmall.length - 1]
  const withBody = withSmall.every(s => s.firstBatchSmallBodyMs)
  const ratio = (key, p) => num(last[key][p].median / first[key][p].median)
  const flat = pages.map(p => `${p} observations: ${ratio('firstBatchSmallMs', p)}` + (withBody ? ` parsed, ${ratio('firstBatchSmallBodyMs', p)} body` : '')).join('; ')
  const columns = pages.flatMap(p => withBody ? [`first batch of ${p}, body in hand, ms`, `first batch of ${p}, parsed, ms`] : [`first batch of ${p}, ms`])
  const cells = (s) => pages.flatMap(p => withBody ? [cell(s.firstBatchSmallBodyMs[p]), cell(s.firstBatchSmallMs[p])] : [cell(s.firstBatchSmallMs[p])])
  return `
First batches of smaller pages, in process (\`LiveLookup.open\` until its body is in hand, and until the
batch is also parsed with \`JSON.parse\`, the same query; each page holds exactly that many observations,
checked). ${first.firstBatchSmallMs[pages[0]].n} opens per cell, opened and closed one after another, before the rounds above.
Median (min–max), ms:

${table(['rows', ...columns], withSmall.map(s => [s.size.toLocaleString('en-US'), ...cells(s)]))}
Median at ${last.size.toLocaleString('en-US')} rows over the median at ${first.size.toLocaleString('en-US')} rows: ${flat}.
`
}

function drainSection (c, h) {
  const http = c.sizes.some(s => s.drainHttpObsPerSec.n > 0)
  return `## 2. Snapshot drain, observations per second

The full drain of section 1, counted in observations per second: in process (\`live.open\`/\`live.read\`)
and over HTTP (\`createRouter(live, {authentication: 'none', baseURL, privateKey})\` on Express over
loopback, with the profile and capability selection headers; Node's \`fetch\` as the client). Every page is parsed in both cases. HTTP here is the unauthenticated public mode;
${h && h.authReads ? 'BRC-103 authentication adds its own per-request cost (section 9c measures it for small reads).' : 'BRC-103 authentication would add its own per-request cost, not measured here.'}

${table(['rows', 'in process, obs/s', 'over HTTP, obs/s', 'HTTP / in process'], c.sizes.map(s => [
    s.size.toLocaleString('en-US'), cell(s.drainInProcessObsPerSec), cell(s.drainHttpObsPerSec), cell(s.httpOverInProcess)
  ]))}
${http ? '' : '\nTODO: the HTTP drain was not measured in this run.\n'}`
}

function commitsSection (c) {
  return `## 3. Durable commit groups per second

\`live.commit\` of one-output groups (one admitted note each); a commit resolves only once its group is
flushed to disk and published. 1 writer: ${c.groups1} sequential commits; 8 writers: 8 concurrent loops,
${c.groups8} commits in all (concurrent commits share a flush). A fresh store per run; the ratio pairs
the two figures of one run.

${table(['', 'groups/s', 'median commit latency, ms'], [
    ['1 writer', cell(c.oneWriterGroupsPerSec), cell(c.oneWriterCommitP50Ms)],
    ['8 writers', cell(c.eightWritersGroupsPerSec), cell(c.eightWritersCommitP50Ms)],
    ['8 writers / 1 writer', cell(c.eightOverOne), '']
  ])}
`
}

function nativeVerifySection (v) {
  const row = (label, k) => [label, cell(k.sdkJobsPerSec), cell(k.nativeOneThreadJobsPerSec), cell(k.nativePoolJobsPerSec), cell(k.oneThreadOverSdk), cell(k.poolOverSdk)]
  return `## 14. Evidence verification jobs per second: native engine against the SDK

One job is the verifier's per-job work short of the store (\`bench/sections/nativeverify.js\`): bound
and decode the BEEF, find the job's transaction, verify it, and settle its Merkle root claims with a
ChainTracker (a \`LocalChainTracker\` behind the verifier's per-run cache). \`sdk\`: \`checkEvidence\` with
\`engine: 'sdk'\` (\`Transaction.verify\` on the JS thread, ${v.sdkJobs} jobs per run); native, one thread:
\`verifyBeef\` on the JS thread, then the settlement; native, pool: \`verifyBeefBatch\` on the libuv pool
(${v.batch} jobs per task, ${v.workers} tasks in flight, UV_THREADPOOL_SIZE ${v.uvThreadpool}, ${v.cpus} CPUs), then
the settlement, as \`EvidenceVerifier\` runs it; ${v.jobs.toLocaleString('en-US')} distinct jobs per kind, every
verdict checked. The ratios pair figures of one run. Goals (issue 33): mined subject >= 20,000 jobs/s,
1-input P2PKH >= 5,000 jobs/s.

${table(['evidence', 'sdk, jobs/s', 'native one thread, jobs/s', 'native pool, jobs/s', 'one thread / sdk', 'pool / sdk'], [
    row('mined subject (Merkle path only)', v.kinds.mined),
    row('1-input P2PKH, mined parent', v.kinds.p2pkh)
  ])}
`
}

function receiptSection (v) {
  const secs = ms => `${num(ms / 1000)} s`
  const rows = v.runs.map(r => [
    r.snapshot.toLocaleString('en-US'),
    r.engine || 'none',
    `${secs(r.receiptMs)} (${num(r.obsPerSec)} obs/s)`,
    r.doneMs === null ? '—' : `${secs(r.doneMs)} (${num(r.doneOverReceipt)}x receipt)`,
    `${num(r.commitMs / r.commitCalls)} ms`,
    `${num(r.restMs / r.commitCalls)} ms`,
    r.loopDelayMaxMs === undefined ? '—' : `${num(r.loopDelayP99Ms)} / ${num(r.loopDelayMaxMs)} ms`
  ])
  return `## 15. Client receipt of a snapshot over HTTP, and time until all current

\`bench/sections/receipt.js\` (one configuration: \`node bench/receipt.js --snapshot N --verify 0|1 --engine
native|sdk\`): a \`LiveLookupClient\` (public mode, loopback HTTP, the provider in the same process)
drains an N-output snapshot into a real sled store with the reconciler configured, with an
\`onRevision\` callback that reads none of the event's lists; with a verifier (native engine, or
\`sdk\`) verification runs beside receipt and the row ends when every output is current. Outputs are
1-input spends of an OP_TRUE output of a proven funding transaction, so script work is small for
both engines (section 14 has P2PKH). One run per row, in this order. Goals (issue 33): 100,000
outputs received in 5 s or less; all current within 2x of the receipt time.

${table(['outputs', 'verifier', 'received', 'all current', 'commit per batch (until durable)', 'rest per batch (HTTP, provider, client loop)', 'event-loop delay p99 / max'], rows)}

The commit runs on the libuv pool (\`commitBatchAsync\`), and while a snapshot page commits the
follow loop already reads the next one (it uses it once the commit is durable): receipt is the
commits plus what does not overlap them (the rest). The event-loop delay (\`perf_hooks.monitorEventLoopDelay\`
over the receipt) is how long the JS thread went without turning: what an application's timers
and I/O waited at worst. Per batch of 1,024 observations the commit writes 12 sled keys per observation (group record,
member row, identity keys, transaction record, evidence bytes, journal indices); \`sled::Tree::apply_batch\`
is the largest part of its CPU, and its cost grows with the tree. Memory at 1,000,000 tracked outputs is
measured on its own (\`node --expose-gc bench/client-memory.js --outputs 1000000 --cache-mb 64\`, about
16 minutes; bench/client-memory-results.md).
`
}

const CLIENT_SCALE_ROWS = {
  raw: 'raw drain: fetch + JSON.parse, nothing stored',
  verify: 'raw drain + native verification of every bundle, nothing stored',
  sqlite: 'plain SQLite client: better-sqlite3, WAL, synchronous=FULL, one transaction per page',
  client: 'LiveLookupClient + CheckpointStore, default options, no reconciler',
  verifying: 'LiveLookupClient with the reconciler, a chainTracker and the native verifier'
}

/** How often the verifying row's receipt waited for verification (its pending budget was full). */
function pausedNote (v) {
  const r = v.rows.find(x => x.paused && x.paused.median > 0)
  if (!r) return ''
  return `The ${r.row} row's receipt was \`paused\` ${r.paused.n === 1 ? r.paused.median : cell(r.paused)} times: each time the groups awaiting
verification plus one page exceeded the pending budget (the default, 65,536 groups), so the next read waited one
\`pollIntervalMs\` (the default, 1 s) for verification to drain them.

`
}

function clientScaleSection (v, command) {
  // One run is the usual case here: its figure alone, without a range.
  const one = (s, fmt = num) => !s ? '—' : s.n === 1 ? fmt(s.median) : cell(s, fmt)
  const rows = v.rows.map(r => [
    CLIENT_SCALE_ROWS[r.row] || r.row,
    one(r.receiptS),
    one(r.obsPerSec),
    r.allCurrentS ? `${one(r.allCurrentS)} (${num(r.allCurrentOverReceipt.median)}x receipt)` : '—',
    one(r.diskBytesPerOutput, bytes),
    one(r.peakRssMiB),
    one(r.writtenMiB),
    one(r.loopDelayMaxMs, x => x.toFixed(0)),
    one(r.receiptOverSqlite),
    one(r.receiptOverRaw),
    one(r.diskOverSqlite),
    one(r.peakRssOverSqlite)
  ])
  const c = v.catalogue
  const runs = v.runs === 1
    ? 'One run: each cell is that run\'s figure'
    : `${v.runs} runs, each row once per run in the order of the table: each cell is median (min–max) over the runs`
  return `## 16. Client receipt at catalogue scale, beside a plain SQLite client and a raw drain

Produced by \`${command}\` (\`bench/sections/clientscale.js\`; on its own:
\`node bench/client-scale.js --outputs N [--rows raw,verify,sqlite,client,verifying] [--runs R] [--out DIR]\`).
Issue 47's side-by-side measurement, made as a new user would make it: a provider in its own process
(\`bench/lib/catalogue-provider.js\`: the real router in public mode, \`authentication: 'none'\`, over loopback
HTTP, one wrapped notes service) serves a snapshot of ${v.outputs.toLocaleString('en-US')} outputs, each a real signed P2PKH
transaction (\`@bsv/sdk\`'s P2PKH template) spending the output of a proven parent, as Atomic BEEF of
${num(c.beefBytes.mean)} bytes on average (${c.beefBytes.min}–${c.beefBytes.max}). The parents sit in synthetic blocks of 2^${c.blockLevels} transactions
that a \`LocalChainTracker\` knows, so each Merkle path has ${c.blockLevels} levels. On the wire that is
${v.wireBytesPerObservation ? bytes(v.wireBytesPerObservation.median) : '—'} per observation (page body bytes over observations), in pages of ${v.pageObservations.toLocaleString('en-US')} observations (the
client's default), \`waitMs: 0\`. Each row receives the whole snapshot in a fresh process of its own (Node's
default flags) with a fresh data directory, all rows against the same provider process, each after a
\`sync\`; each checks that it holds exactly ${v.outputs.toLocaleString('en-US')} outputs (the client rows count groups received and
members present, the verifying row also current outputs) and fails otherwise.

- **raw**: open, then reads following each page's cursor until \`snapshotComplete\`, every page read with
  \`fetch\` and parsed with \`JSON.parse\`; nothing stored.
- **verify**: the raw drain, with every output's bundle verified as the client's verifier verifies it (its
  default batches of \`verifyBeefBatch\` on the libuv pool, its concurrency, the chain tracker's answers through
  \`settle\`) while the next page is read, at most two pages behind; nothing stored. *All current* is when every
  bundle has verified: what verification alone costs this machine, the floor under the verifying row's.
- **sqlite**: the same loop; each page in one better-sqlite3 transaction (WAL, \`synchronous=FULL\`) writing one
  row per observation (id, group, sequence, kind, txid, output index, context, the evidence bytes as a
  BLOB) and the page's session, cursor and scope in a checkpoint row, committed before the cursor is used.
- **client**: \`LiveLookupClient\` + \`CheckpointStore\` with default options (no reconciler, no read-ahead) and
  \`membership: 'claims'\` (without a chainTracker the rule must be chosen).
- **verifying**: as a verifying application runs it: \`configureReconciler\`, a \`chainTracker\` and
  \`verification: { engine: 'native' }\`, default membership (\`verified\`: receipt pauses while the pending
  budget is full). *All current* is when the verifier is idle with no job pending; every output is then
  current (checked).

Receipt runs from the row's first request (the capabilities fetch) until its snapshot is committed
(\`snapshot-complete\` for the client rows). Disk is the size of the row's data directory after it closed,
over the outputs; peak RSS is the row process's VmHWM at its end; written is what the row process caused
to be written to storage (\`write_bytes\` of /proc/self/io): a count of the store's page writes that, unlike
the times, the machine's load does not change. The longest JS stall is the event loop's longest delay
(\`monitorEventLoopDelay\`, 10 ms resolution) from the row's start until its receipt (for the verifying
row, until all current): how long the application's thread could not run.
${runs}. The figures of one run are compared to each other: the ratios pair rows of the same run, and
the machine is shared, so figures of different runs are best compared through their ratios.

${table(['row', 'receipt, s', 'obs/s', 'all current, s', 'disk per output', 'peak RSS, MiB', 'written, MiB', 'longest JS stall, ms', 'receipt / SQLite', 'receipt / raw', 'disk / SQLite', 'peak RSS / SQLite'], rows)}

${pausedNote(v)}Catalogue: built in ${num(c.buildS)} s ${c.cached ? '(by an earlier run; this one reused the cache)' : 'by this run'}, cached under the bench tmp dir
(\`oll-bench-cache-${v.outputs}-${c.version}\`); the provider loaded it in ${num(v.providerLoadS)} s. Neither is in any row's time.

Where the client's time and disk go, and what the targets of issue 47 leave for the store once
verification and the provider are paid: \`bench/client-layout-results.md\` ("CPU budget"). Each transaction record decoded and encoded once per
commit (a memo behind \`journal::load_tx\`/\`save_tx\`, and FNV for the codec's name table) against the build
before (7875b4e), alternated, \`--rows sqlite,verifying\`, two rounds on 6 December 2026: the verifying row
received in 23.1 and 22.4 s against 26.3 and 25.6, all current 33.8 and 33.4 s against 38.3 and 38.3 (the SQLite
client 4.19 and 3.81 s against 4.08 and 4.39; bench/client-layout-results.md, "A commit's record memo").
The verifier's result commits on the libuv pool and
the follow loop waiting for them before its own store calls, against the build before (8f68cb3), alternated,
\`--rows sqlite,verifying\`, two rounds on 6 December 2026: the verifying row's longest JS stall 36 and 58 ms
against 933 and 888 (the SQLite client's 41 to 56), all current 32.3 and 30.5 s against 33.8 and 32.1,
received in 21.0 and 21.3 s against 22.1 and 21.3 (bench/client-layout-results.md, "Verification results
committed on the pool"). Format 4 (the small keys placed by a hash
appended with each commit and merged into their places in bulk, \`src/client/db.rs\`) against the build
before it (55c7c8e), alternated, \`--rows sqlite,client,verifying\`, two rounds on 6 December 2026: the
no-reconciler row wrote 263 and 262 MiB against 784 and 784, received in 7.01 and 7.22 s against 8.63
and 8.50 s, peaked at 280 and 282 MiB against 214 and 225; the verifying row wrote 945 and 933 MiB against
1,918 and 1,910, received in 21.0 and 21.8 s against 20.7 and 22.4 s, all current 32.2 and 32.6 s against
31.0 and 33.6 s, peaked at 391 and 371 MiB against 355 and 347 (bench/client-layout-results.md, "Format
4"). Format 3 (transaction records and member rows
keyed in the order they are written, one identity key space) against the build before it (89541f0),
alternated, \`--rows sqlite,client,verifying\`, two rounds on 6 December 2026: the verifying row wrote
1,994 and 2,002 MiB against 2,782 and 2,848, received in 22.1 and 26.5 s against 25.9 and 24.4 s, all
current 34.4 and 39.3 s against 37.4 and 39.4 s; the no-reconciler row wrote 784 MiB against 1,060 and
received in 9.2 and 10.1 s against 9.9 s (bench/client-layout-results.md, "Format 3"). Evidence appended under its receipt's journal
position and verification results committed in groups (commit 15cd6c1), against the build before them
(4a8279d), alternated on the same machine, \`--rows verifying\`, three runs each on 6 December 2026:
received 29.1, 30.6, 28.5 s against 32.4, 32.7, 29.9 s; all current 44.0, 46.0, 40.2 s against 50.2,
51.3, 47.4 s (that machine ran the no-reconciler row at 10.1 to 12.6 s, where 5 December's ran it at
9.5 s). The same bench on earlier builds: the store on redb before those two changes (commit 4a8279d,
5 December 2026): verifying 27.4 s received, 42.5 s all current, 5,395 B per output, 389 MiB peak; without
the reconciler 9.48 s, 2,700 B, 223 MiB. The store on
sled with the record codec and a 256 MiB cache (commit 57711ea, 5 December 2026): verifying 32.6 s
received, 50.7 s all current, 12.5 KiB per output, 833 MiB peak; without the reconciler 10.7 s, 3,303 B,
402 MiB. Before the record codec (commit 4ed020c): verifying 32.3 s, 48.0 s, 14.9 KiB, 1,098 MiB.
\`cacheBytes\` against these figures: docs/client.md "Memory, disk and speed at catalogue scale".
`
}

function waitersSection (w) {
  return `## 4. Commit-to-delivery latency with waiting sessions

For N sessions (one principal each) on a 10-row collection: drain each snapshot, park one long poll
per session (\`waitMs\` 25 s; parked 32 at a time, since each poll's first scan is store work bounded by
\`maxConcurrentWork\`), commit one group, and time each poll's resolution in JS. Every poll is
checked to have received exactly that group. "From publication" starts when the commit became
durable and visible to readers, the earliest a poll may be woken (dated with
\`live.stats().publishedAgoMs\` right after the last answer); this is the commit-to-wake latency.
"From the commit call" starts just before \`live.commit\`, so it adds the durable flush, whose time
depends on the disk; "from the ack" starts when \`live.commit\` resolved, and can be negative because
a poll may be delivered before the commit's own promise resolves. "Process CPU" is the CPU time of
every thread of the process from the commit call to the last answer (\`process.cpuUsage\`); on two
cores, a wake of N polls cannot end sooner than half of it.
Percentiles are over the N polls of one run; cells are median (min–max) over runs (a warm-up run
is discarded). These runs force no GC: memory (section 5) is measured in rounds of its own, after
them, because a forced full GC discards V8's optimized code for the delivery path and the next
wake would pay for its recompilation.

${table(['waiting sessions', 'p50 from publication, ms', 'p99 from publication, ms', 'p50 from commit call, ms', 'p99 from commit call, ms', 'max, ms', 'p99 from ack, ms', 'commit ack, ms', 'process CPU per wake, ms', 'polls refused instead of delivered', 'opening N sessions, s'], w.sizes.map(s => [
    s.waiters.toLocaleString('en-US'), cell(s.deliveryFromPublicationP50Ms), cell(s.deliveryFromPublicationP99Ms), cell(s.deliveryFromCommitCallP50Ms), cell(s.deliveryFromCommitCallP99Ms), cell(s.deliveryFromCommitCallMaxMs),
    cell(s.deliveryFromCommitAckP99Ms), cell(s.commitAckMs), cell(s.processCpuPerWakeMs), s.refusedPolls ? cell(s.refusedPolls) : '—', num(s.openSessionsMs / 1000)
  ]))}
${w.sizes.some(s => s.refusal) ? '\n**Some woken polls were answered with an error instead of the committed group.** First such answer: ' + w.sizes.filter(s => s.refusal).map(s => `N = ${s.waiters}: \`${s.refusal}\``).join('; ') + '. Latencies above cover the delivered polls only; refused sessions were brought up to date with plain reads before the next run.\n' : ''}
![latency against waiting sessions](latency-vs-waiters.svg)
`
}

/**
 * Growth per additional waiting session between consecutive N (from the medians): a
 * per-session figure divided by N also carries costs paid once whatever N is (spare
 * delivery chunks, caches warming up, allocator arenas), which dominate at small N.
 */
function marginalMemory (sizes) {
  const steps = []
  for (let i = 1; i < sizes.length; i++) {
    const a = sizes[i - 1]; const b = sizes[i]
    const per = (k) => (b[k].median * b.waiters - a[k].median * a.waiters) / (b.waiters - a.waiters)
    const native = per('waitingSessionNativeEstimateBytes')
    const once = (a.waitingSessionNativeEstimateBytes.median - native) * a.waiters
    steps.push(`from ${a.waiters.toLocaleString('en-US')} to ${b.waiters.toLocaleString('en-US')}: native ${bytes(native)}, RSS ${bytes(per('waitingSessionRssBytes'))} per additional waiting session (native paid once: ${bytes(once)})`)
  }
  return steps.length === 0
    ? ''
    : `\nPer additional waiting session, from the medians above (total growth at the larger N less that at the smaller, over the
difference in N), which leaves out what is paid once whatever N is: ${steps.join('; ')}.\n`
}

function memorySection (w, c) {
  const rows = w
    ? w.sizes.map(s => [
      s.waiters.toLocaleString('en-US'),
      cell(s.waitingSessionRssBytes, bytes), cell(s.waitingSessionNativeEstimateBytes, bytes), cell(s.waitingSessionHeapUsedBytes, bytes),
      cell(s.parkedPollRssBytes, bytes), cell(s.parkedPollNativeEstimateBytes, bytes), cell(s.processRssParkedBytes, bytes)
    ])
    : []
  return `## 5. Memory per waiting session, and process RSS

RSS-delta estimates (read after a full GC, \`--expose-gc\`), divided by N. A **waiting session** is an open
session with a parked long poll: growth from before the N sessions were opened to when all N polls are
parked (it includes the session records that sled keeps in its page cache). The **parked poll** alone is
the growth from parking the N polls on already open sessions. **Native** is RSS growth less JS heap
growth (heapUsed). Allocator reuse makes small-N values noisy (even negative); the largest N is the
meaningful one. Median (min–max) over up to three rounds that follow the timed runs of section 4
(same procedure, memory read after a full GC before and after parking). All N sessions watch the same
query, so they share one view (\`ViewTable\` in src/session/mod.rs): its compiled selection, scope and
selection JSON, about 1.5 KB per session in an allocation profile (heaptrack), are held once here;
sessions with distinct queries each hold a view of their own.

${w ? table(['N', 'RSS per waiting session', 'native per waiting session', 'JS heap per waiting session', 'RSS per parked poll', 'native per parked poll', 'process RSS with N parked'], rows) : 'Not run.'}
${w ? marginalMemory(w.sizes) : ''}${c ? `
Process RSS of the catalogue process (live store, SQLite Engine storage and HTTP server in one process):
${c.sizes.map(s => `${s.size.toLocaleString('en-US')} rows: ${bytes(s.rssBytes)}`).join('; ')}; peak ${bytes(c.peakRssBytes)}.
` : ''}`
}

function diskSection (d, c) {
  let out = `## 6. Bytes on disk per row

`
  if (c) {
    out += `Same rows in both stores (section 1), right after loading, no churn. Live: \`live.stats().diskBytes\`
(sled's own size on disk; the directory size is within a few bytes); SQLite: the Engine's database file
(Engine tables and the notes table).

${table(['rows', 'live store, bytes/row', 'SQLite (Engine + notes), bytes/row', 'live / SQLite'], c.sizes.map(s => [
      s.size.toLocaleString('en-US'), num(s.disk.liveBytesPerRow), num(s.disk.sqliteBytesPerRow), num(s.disk.liveBytesPerRow / s.disk.sqliteBytesPerRow)
    ]))}

`
  }
  if (d) {
    out += `Compaction: a fresh store of ${d.rows.toLocaleString('en-US')} rows (${d.beefBytes}-byte BEEFs); churn spends half of
them (each spend carries its spending transaction's BEEF as evidence) and admits as many new rows, so
the present row count stays ${d.rows.toLocaleString('en-US')}; compaction runs \`live.compact(20000)\` until it reports
no more work (no session open, so every superseded version and log group is collectable), then the store is
closed and reopened. A second churn of the same size follows. Bytes per present row, median (min–max):

${table(['', 'disk bytes/row', 'log bytes/row (live.stats().logBytes)'], [
      ['after load', cell(d.afterLoadBytesPerRow), cell(d.logBytesPerRowAfterLoad)],
      ['after churn', cell(d.afterChurnBytesPerRow), cell(d.logBytesPerRowAfterChurn)],
      ['after compaction and reopen', cell(d.afterCompactionBytesPerRow), cell(d.logBytesPerRowAfterCompaction)],
      ['after a second churn', cell(d.afterSecondChurnBytesPerRow), '']
    ])}

Growth of the first churn (before any compaction): ${cell(d.firstChurnGrowthBytesPerRow)} bytes/row; growth of
the second churn (after compaction): ${cell(d.secondChurnGrowthBytesPerRow)} bytes/row. Compaction took
${cell(d.compactionMs)} ms. Compaction empties the log and drops superseded row versions and unreferenced
BEEFs; ${d.afterCompactionBytesPerRow.median < d.afterChurnBytesPerRow.median
    ? `the size on disk fell by ${num(100 * (1 - d.afterCompactionBytesPerRow.median / d.afterChurnBytesPerRow.median))}% (medians)`
    : 'sled did not return the freed file space: the size on disk did not fall (medians)'}; the second churn grew the
store by ${num(100 * d.secondChurnGrowthBytesPerRow.median / d.firstChurnGrowthBytesPerRow.median)}% of what the first one did (100% would mean no reuse of the freed space).
`
  }
  return out
}

function capsSection (k) {
  return `## 7. Behaviour past each cap

Each case drives a small real store (or the real router over loopback) past one cap, records what came
back, then checks that the same process still serves normal requests ("still serving"). Store caps
(\`maxRows\`, \`maxRetainedBytes\`) refuse the commit: \`live.commit\` rejects with \`err.code\` and \`err.status\`
and nothing of the group is written.

${table(['cap', 'setting', 'action', 'status', 'code', 'details', 'still serving'], k.cases.map(c => [
    c.cap, c.setting, c.action, String(c.status), c.code === null ? '(none)' : '`' + c.code + '`',
    [c.retryAfterMs !== null && c.retryAfterMs !== undefined ? `retryAfterMs ${c.retryAfterMs}` : null, c.limit ? '`' + JSON.stringify(c.limit) + '`' : null, c.message ? '"' + c.message + '"' : null, c.note || null].filter(Boolean).join('; ') || '',
    c.alive ? 'yes' : '**no**'
  ]))}

A 431 with no body comes from Node's HTTP parser, before the router runs (allowed by the design notes).
`
}

function cargoSection (cargo) {
  if (!cargo) {
    return `## 8. Native benchmarks (\`cargo bench\`)

Not run in this invocation. The native-only figures (store commit rate with 1/8 writers and 1/10-output
groups, raw snapshot scan rows/s at 100k and 1M rows, bytes/row before and after compaction, first row of a
selective indexed query; JSON parse and digest rates; the provider's open-to-first-batch latency and
commit-to-wake latency without Node) come from \`cargo bench --profile ci --bench store\`,
\`cargo bench --profile ci --bench wire\` and \`cargo bench --profile ci --bench session\`, or
\`npm run bench -- --cargo\`, which includes their output here.
`
  }
  return `## 8. Native benchmarks (\`cargo bench\`)

Output of the native-only benchmarks, run by this invocation after the JS sections (min/median/max over
their own repeated runs):

` + cargo.map(c => `\`cargo bench --profile ci --bench ${c.target}\` (${c.ok ? 'ok' : 'FAILED'}, ${num(c.seconds)} s including any build):

\`\`\`
${c.output.trim()}
\`\`\`
`).join('\n')
}

/** 9a: the live first batch over HTTP against the BRC-24 answer over HTTP (catalogue section). */
function lookupHttpPart (c) {
  const sizes = c.sizes.filter(s => s.firstBatchHttpMs && s.firstBatchHttpMs.n > 0)
  if (sizes.length === 0) return ''
  const pages = sizes[0].httpPages
  const missing = sizes.filter(s => s.lookupHttpMs.n === 0)
  return `### 9a. Live first batch over HTTP against the BRC-24 \`/lookup\` answer over HTTP

The catalogue of section 1, in the same process and the same rounds, now through one Express server
on loopback that carries both routes:
- **live open over HTTP**: \`POST /overlay/v1/lookup/open\` (the real router, public mode) of query \`{}\`,
  from sending the request until the client has parsed the first batch (Node's \`fetch\`, then
  \`JSON.parse\`); the session is closed afterwards, outside the timing. Two page sizes: the client's
  default, which is the profile maximum (${pages.default.maxObservations} observations, ${bytes(pages.default.maxBytes)}), and a small page of
  ${pages.small.maxObservations} observations;
- **\`POST /lookup\` over HTTP**: the route Overlay Express composes (a JSON body parser, then
  \`engine.lookup(req.body)\` answered with \`res.status(200).json(result)\`; \`@bsv/overlay-express\` itself
  is not installed here), mounted on the same app in front of the same \`@bsv/overlay\` Engine as
  section 1, with body \`{service: 'ls_notes', query: {}}\`, until the client has parsed the whole
  BRC-24 answer (Node's \`fetch\`, then \`JSON.parse\`). The answer's output count is checked. The server
  side also records how long \`engine.lookup\` took inside the route and how long the synchronous
  \`res.json\` call took (\`JSON.stringify\` of the answer, whose BEEFs are JSON number arrays, and its
  hand-off to the socket); the rest is transfer and the client's parse.

Ratios divide the \`/lookup\` time by the first-batch time of the same round. Runs per figure:
${sizes.map(s => `${s.size.toLocaleString('en-US')} rows: first batches ${s.firstBatchHttpMs.n}, \`/lookup\` ${s.lookupHttpMs.n}`).join('; ')}.

${table(['rows', `live first batch, ${pages.default.maxObservations}-obs page, ms`, `live first batch, ${pages.small.maxObservations}-obs page, ms`, '`/lookup` full answer, ms', 'of which `engine.lookup`, ms', 'of which `res.json`, ms', `\`/lookup\` / first batch (${pages.default.maxObservations})`, `\`/lookup\` / first batch (${pages.small.maxObservations})`, 'response bytes: first page / `/lookup`'], sizes.map(s => [
    s.size.toLocaleString('en-US'), cell(s.firstBatchHttpMs), cell(s.firstBatchHttpSmallMs), cell(s.lookupHttpMs), cell(s.lookupHttpEngineMs), cell(s.lookupHttpRespondMs),
    cell(s.lookupHttpOverFirstBatchHttp), cell(s.lookupHttpOverFirstBatchHttpSmall), `${bytes(s.firstBatchHttpBytes)} / ${s.lookupHttpBytes === null ? '—' : bytes(s.lookupHttpBytes)}`
  ]))}
${missing.length > 0 ? `\n\`/lookup\` over HTTP was not measured at ${missing.map(s => s.size.toLocaleString('en-US')).join(', ')} rows (the same time budget as Engine.lookup in section 1).\n` : ''}`
}

/** 9b: commit-to-delivery with N parked HTTP long polls (http section). */
function pollsPart (h) {
  if (!h.polls || h.polls.length === 0) return ''
  const p0 = h.polls[0]
  return `### 9b. Long-poll delivery latency over HTTP

For N sessions on a ${p0.seedRows}-row collection, each opened over HTTP and drained: one parked long poll per session
(\`POST /overlay/v1/lookup/read\`, \`waitMs\` 25 s, parked 32 at a time as in section 4, each chunk once
the store counts it as waiting), then one \`live.commit\` of one group, timed until each poll's HTTP
answer is received and parsed (\`JSON.parse\`) by the client. Every answer is checked to hold exactly
the committed group (one group, one output observation, the committed txid); a refused poll is counted
and its session brought up to date before the next run. Public mode: every caller has the same empty
principal and sessions are told apart by their request ids, so the per-principal caps cover the whole
store: \`maxSessionsPerPrincipal\`, \`maxWaiters\` and \`maxWaitersPerPrincipal\` were set to N + 64
(defaults: 64, 20,000, 256); \`maxConcurrentWork\` stayed at its default (64). Client: a node:http
keep-alive \`Agent\` with \`maxSockets\` N + 64 (one connection per parked poll); server keep-alive timeout
${num(p0.serverKeepAliveTimeoutMs / 1000)} s. Client and server share one process and event loop, so the
figures include the client's receiving and parsing of all N answers. "From the commit call" starts just
before \`live.commit\`; "from the ack" when it resolved; "from publication" when the commit became durable
and visible (as in section 4). Percentiles over the N polls of one run; cells
are median (min–max) over runs (a warm-up run is discarded).

${table(['HTTP pollers', 'p50 from publication, ms', 'p99 from publication, ms', 'p50 from commit call, ms', 'p99 from commit call, ms', 'max, ms', 'p99 from ack, ms', 'commit ack, ms', 'polls refused', 'open file descriptors parked (limit)', 'opening N sessions over HTTP, s'], h.polls.map(p => [
    p.pollers.toLocaleString('en-US'), cell(p.deliveryFromPublicationP50Ms), cell(p.deliveryFromPublicationP99Ms), cell(p.deliveryFromCommitCallP50Ms), cell(p.deliveryFromCommitCallP99Ms), cell(p.deliveryFromCommitCallMaxMs),
    cell(p.deliveryFromCommitAckP99Ms), cell(p.commitAckMs), cell(p.refusedPolls, v => String(Math.round(v))),
    p.fdParked ? `${p.fdParked.open === null ? '—' : p.fdParked.open.toLocaleString('en-US')} (${p.fdParked.limit === null ? '—' : p.fdParked.limit.toLocaleString('en-US')})` : '—',
    num(p.openSessionsMs / 1000)
  ]))}
${h.polls.some(p => p.refusal) ? '\n**Some woken polls were refused instead of delivered.** First such answer: ' + h.polls.filter(p => p.refusal).map(p => `N = ${p.pollers}: \`${p.refusal}\``).join('; ') + '.\n' : ''}`
}

/** 9c: immediate reads per second (http section). */
function readsPart (h) {
  if (!h.reads) return ''
  const r = h.reads
  const rowsOf = (label, list) => list.map(x => [label, String(x.clients), cell(x.readsPerSec)])
  const all = [
    ...rowsOf(`public: snapshot pages of ${r.snapshotPage.maxObservations} observations`, r.snapshot),
    ...rowsOf('public: caught-up live reads, `waitMs` 0', r.caughtUp),
    ...(h.authReads ? rowsOf('BRC-103: caught-up live reads, `waitMs` 0', h.authReads.caughtUp) : [])
  ]
  return `### 9c. Immediate reads per second over HTTP

Reads that answer without waiting, from C concurrent clients, each a loop of back-to-back requests on
its own session, counted over ${num(h.windowMs / 1000)}-second windows (a short warm-up window first; cells are
median (min–max) over windows). Every answer is parsed. **Snapshot pages**: \`read\` of the next
${r.snapshotPage.maxObservations}-observation page of a ${r.rows.toLocaleString('en-US')}-row snapshot (a client whose snapshot ends closes it and opens
a new one, not counted as a read). **Caught-up live reads**: \`read\` with \`waitMs\` 0 on a session whose
snapshot is complete and with nothing new (an empty batch). Public mode: node:http keep-alive
\`Agent\` clients. BRC-103: one \`NativeAuthFetch\` (own \`NativeWallet\` identity) per client, the router's own BRC-104
provider on its default native wallet (section 10 has the server alone); every request and answer is signed and verified,
and the handshake happens before the timing (collection of ${h.authReads ? h.authReads.rows : '—'} rows). Clients and server share one process (and the 2 cores
with it).

${table(['reads', 'clients', 'reads/s'], all)}
${h.authReads ? '' : '\nBRC-103 reads were not measured in this run.\n'}`
}

function httpSection (c, h) {
  const parts = [c ? lookupHttpPart(c) : '', h ? pollsPart(h) : '', h ? readsPart(h) : ''].filter(Boolean)
  if (parts.length === 0) return null
  return `## 9. HTTP transport: first batch against \`/lookup\`, long-poll delivery, reads per second

Everything here goes through Express on loopback with the real router (\`js/provider/router.js\`), and the
client parses every answer.

` + parts.join('\n')
}

function authSection (a) {
  const row = (mode, x) => [mode, String(x.clients), String(x.processes), cell(x.readsPerSec), cell(x.serverCpuMsPerRead), cell(x.clientCpuMsPerRead)]
  return `## 10. BRC-103 authenticated serving, server in its own process

The server (\`bench/lib/live-server.js\`: a 10-row collection behind the real router) runs in its own
process and reports its own CPU time (\`process.cpuUsage\`, user + system); clients run in other
processes (\`bench/lib/live-client.js\`), each client its own identity, session and connection, and
each process reports its own CPU time. BRC-103 clients are the package's \`NativeAuthFetch\` with its
\`NativeWallet\` (\`@bsv/sdk\`'s \`AuthFetch\` with \`transport: 'authfetch'\`); the router uses its default
native wallet. Public-mode clients are node:http keep-alive requests. Reads are caught-up live reads
(\`waitMs\` 0, an empty batch) back to back over ${num(a.windowMs / 1000)}-second windows after ${num(a.warmupMs / 1000)} s of warm-up; cells are
median (min–max) over windows. The 2 cores are shared by the server, every client process and
whatever else ran on the machine: client CPU counts against the server's throughput here.

Clients on at most ${a.clientHosts} client processes:

${table(['mode', 'clients', 'client processes', 'reads/s', 'server CPU per read, ms', 'client CPU per read, ms'], [
    ...(a.publicReadsOne ? [row('public', a.publicReadsOne)] : []),
    row('public', a.publicReads),
    ...a.authReads.map(x => row('BRC-103', x))
  ])}
Server CPU per authenticated read over per public read (medians, ${a.publicReads.clients} clients): **${a.cpuRatio === null ? '—' : num(a.cpuRatio)}**.

One process per client (each process makes a few reads a second, so its JavaScript never gets
optimized: the clients' cold code, not the server, is most of the machine's work):

${table(['mode', 'clients', 'client processes', 'reads/s', 'server CPU per read, ms', 'client CPU per read, ms'], [
    row('public', a.publicReadsProcessEach),
    ...a.authReadsProcessEach.map(x => row('BRC-103', x))
  ])}

**Commit-to-delivery to authenticated long polls**: one session per poll (16 sessions per client
identity), polls spread over ${a.polls.length ? a.polls[0].clientProcesses : '—'} client processes; once the server counts every poll as waiting it
calls \`live.commit\` of one group; each latency runs from just before that call (server wall clock)
to the answer received and verified by its client (client wall clock, same machine); *server done*
is until the server handed the last signed answer to the OS. A warm-up round first; cells over the
measured rounds.

${table(['authenticated polls', 'p50, ms', 'p99, ms', 'max, ms', 'server done, ms', 'server CPU per signed answer, ms'], a.polls.map(p => [
    p.pollers.toLocaleString('en-US'), cell(p.p50Ms), cell(p.p99Ms), cell(p.maxMs), cell(p.lastWrittenMs), cell(p.serverCpuMsPerAnswer)
  ]))}
**First contact**: ${a.firstContact.contacts} new client identities in turn, each sending one \`open\` (the client first
runs the BRC-103 handshake): server CPU per new client ${cell(a.firstContact.serverCpuMsPerContact)} ms (handshake and the open),
client latency p50 ${cell(a.firstContact.clientLatencyP50Ms)} ms.
`
}

function submitSection (s) {
  return `## 11. The live layer's cost to \`Engine.submit\`

Two real \`@bsv/overlay\` Engines (SQLite) in one process: the notes lookup service plain, and the
same service wrapped (\`live.wrap\`) with the Engine attached (\`live.attach\`). Each round submits
${s.batch} fresh signed note transactions (built before timing) to each Engine with W concurrent
submitters, the order of the two alternating per round; ${s.rounds} rounds after a warm-up round. A
wrapped round ends once its last group is published. The ratio pairs the two throughputs of one
round; CPU is the process's CPU time (every thread) per submit, and its ratio (plain over
wrapped) is the throughput ratio a CPU-bound machine with nothing else to do would show. The
publication lag runs from the moment a wrapped submit resolved until its group was published
(durable and visible to readers; the admission gate keeps every later change behind it); each
round gives its p50 and p99 over its submits. The test Engine's SQLite answers without I/O, so
a loop of back-to-back submits would never yield a macrotask, and a submit's group is assembled
only after one (docs/engine-notes.md "Publication"); a wrapped submit that resolves while an
earlier one is still settling therefore yields one turn of the event loop before it returns.

${table(['submitters', 'plain, submits/s', 'wrapped, submits/s', 'wrapped / plain', 'CPU ms per submit, plain', 'wrapped', 'plain CPU / wrapped CPU', 'publication lag p50, ms', 'p99, ms'], s.widths.map(w => [
    String(w.submitters), cell(w.plainPerSec), cell(w.wrappedPerSec), cell(w.wrappedOverPlain),
    w.plainCpuMsPerSubmit ? cell(w.plainCpuMsPerSubmit) : '-', w.wrappedCpuMsPerSubmit ? cell(w.wrappedCpuMsPerSubmit) : '-',
    w.plainOverWrappedCpu ? cell(w.plainOverWrappedCpu) : '-',
    w.publicationLagP50Ms ? cell(w.publicationLagP50Ms) : '-', w.publicationLagP99Ms ? cell(w.publicationLagP99Ms) : '-'
  ]))}
`
}

function gaspSection (s) {
  return `## 12. Propagation between GASP-synchronized nodes

Two real nodes on loopback (Express, \`@bsv/overlay\` Engine on SQLite, the native store, public
mode), one synthetic chain; node B pulls from node A with \`scheduleGASPSync\` every interval
(docs/scaling.md). Per run, an HTTP long poll waits on B; after a random pause within one interval a
fresh signed note is submitted on A; the lag runs from the call to A's \`engine.submit\` until B has
answered the waiting poll with the group carrying that note. ${s.runs} runs per interval. A sync
that finds a new note runs B's own \`Engine.submit\` for it, so the lag is at most about one
interval plus one sync and one submit.

${table(['sync interval', 'lag, ms', 'lag / interval', 'submit on A, ms'], s.intervals.map(i => [
    i.intervalMs + ' ms', cell(i.lagMs), cell(i.lagOverInterval), cell(i.submitOnAMs)
  ]))}
`
}

function accessSection (a) {
  const f = a.firstBatch
  const polls = a.polls.map(p => [p.partitions ? `${p.partitions} partitions` : 'none', p.pollers.toLocaleString('en-US'), cell(p.p50Ms), cell(p.p99Ms), cell(p.maxMs), cell(p.serverCpuMsPerAnswer)])
  const mem = a.memory.map(m => [m.partitions ? `${m.partitions} partitions` : 'none', m.sessions.toLocaleString('en-US'), cell(m.waitingSessionRssBytes, bytes), cell(m.waitingSessionNativeEstimateBytes, bytes), cell(m.waitingSessionHeapUsedBytes, bytes), cell(m.deliveryFromPublicationP99Ms)])
  return `## 13. Access-controlled catalogues

**First batch when the caller may see 1%** (\`bench/sections/access.js\`): ${f.rows.toLocaleString('en-US')} rows in one store, each
with an \`owner\` attribute of ${Math.round(f.rows / f.visibleRows)} values; the companion's visibility gives a partition
\`{eq: ['owner', partition]}\` (so ${f.visibleRows.toLocaleString('en-US')} rows) and the partition \`everyone\` \`{all: true}\`.
In each round both open query \`{}\` with the profile's maximum page (${f.pageObservations} observations, 4 MiB), in
alternating order, each run another owner's 1%; the time runs from \`live.open\` to its first batch parsed.
*Entries examined* is the store's count of index entries and row versions the scan read.

${table(['caller sees', 'first batch, ms', 'entries examined'], [
    ['everything', cell(f.everythingMs), cell(f.everythingExamined)],
    ['1%', cell(f.onePercentMs), cell(f.onePercentExamined)]
  ])}
1% over everything (per round): **${cell(f.onePercentOverEverything)}** (goal: at most 2).

**One commit waking authenticated long polls of as many principals**: as section 10's polls, with one
session per client identity, so every poll is another principal; with partitions the server's \`authorize\`
places each principal in one of them (by a digest of its identity) and the companion gives each partition
a visibility filter of its own that every row meets (\`bench/lib/access.js\`): every partition is a view
of its own, whose live group is projected and rendered once. The goal is a p99 under 1 s.

${table(['partitions', 'authenticated polls (principals)', 'p50, ms', 'p99, ms', 'max, ms', 'server CPU per signed answer, ms'], polls)}

**Memory per waiting session**, by section 5's procedure (RSS after a full GC, from before the sessions
were opened to all polls parked, over N), the same principals with and without partitions:

${table(['partitions', 'waiting sessions', 'RSS per waiting session', 'native per waiting session', 'JS heap per waiting session', 'p99 wake from publication, ms'], mem)}
`
}

function caveats (r) {
  const c = r.sections.catalogue
  const items = [
    'The catalogue rows reuse the scripts and BEEFs of a few real note transactions (row number stamped into the BEEF), loaded directly into both stores rather than submitted through `Engine.submit`; neither side parses BEEF when answering, so this affects loading realism, not the answers compared.',
    'Both live figures include the client-side work a client must do (parsing every page); the Engine figure is the `Engine.lookup` call alone, without serializing its answer for HTTP.',
    r.sections.http && r.sections.http.authReads
      ? 'HTTP figures use the unauthenticated public mode, except the BRC-103 rows of section 9c.'
      : 'HTTP figures use the unauthenticated public mode; BRC-103/104 authentication adds per-request signing and verification that is not measured.',
    'Memory figures are RSS-delta estimates, not allocator accounting.',
    'The machine was shared with other work; compare figures within one run (the ratios) rather than across runs.'
  ]
  if (c && c.sizes.some(s => s.engineLookupMs.n === 0)) items.push('Engine.lookup is missing at the largest size(s), as section 1 explains; no figure there is estimated except the clearly marked extrapolation.')
  if (c && c.sizes.some(s => s.plan.drain < 5 || s.plan.http < 5 || s.plan.engine < 5)) items.push('Slow points have fewer than 5 runs; the runs per figure are listed in section 1.')
  return `## Caveats

${items.map(x => '- ' + x).join('\n')}
`
}

/** Whether the measuring part (everything but cargo) met the 10-minute target, and why not. */
function budgetNote (r) {
  if (r.quick) return ''
  const js = Object.entries(r.sectionSeconds).filter(([k]) => k !== 'cargo').reduce((a, [, v]) => a + v, 0)
  if (js <= 600) return `\nThe JS sections took ${num(js)} s, within the 10-minute target.\n`
  const cat = r.sections.catalogue
  const big = cat && cat.sizes[cat.sizes.length - 1]
  return `\n**The JS sections took ${num(js)} s, over the 10-minute target.**` + (big
    ? ` Loading the ${big.size.toLocaleString('en-US')}-row catalogue into both stores ran at ${num(big.load.bothStoresRowsPerSec)} rows/s (mostly the live store's commits; section 8's native store bench prints its own load time for comparison), and one full in-process drain at that size took ${num(big.drainInProcessMs.median / 1000)} s (median).`
    : '') + '\n'
}

function renderReport (r) {
  const s = r.sections
  const parts = [`# Benchmark results

Produced by \`${r.command}\` (started ${r.startedAt}, ${num(r.durationSeconds)} s in all; per section: ${Object.entries(r.sectionSeconds).map(([k, v]) => `${k} ${num(v)} s`).join(', ')}).
The raw numbers, every run included, are in [results.json](results.json).${r.reRenderedAt ? ` This text was re-rendered from that file at ${r.reRenderedAt} (\`node bench/run.js --render bench/results.json\`), which changes no number.` : ''}${(r.reruns || []).map(x => ` Section ${x.section} was measured again by \`${x.command}\` (started ${x.startedAt}) because ${x.why}; its numbers here are from that run.`).join('')}
${budgetNote(r)}${r.quick ? '\n**Quick mode**: tiny sizes and 2 runs per figure. This checks the harness; the numbers mean nothing.\n' : ''}
Every figure is the median of repeated runs with the minimum and maximum in brackets; every ratio is
computed per run from two values measured in the same run, then summarized the same way. Background
compaction (\`compactionIntervalMs\`) is off in every store so that it cannot land inside a timed figure;
section 6 runs compaction explicitly. Each section (and the native benchmarks) starts after a \`sync\`, so
that the gigabytes the catalogue section writes are not still being written back under a later section's
flushes.
`, machineSection(r)]
  if (s.catalogue) parts.push(catalogueSection(s.catalogue), drainSection(s.catalogue, s.http))
  if (s.commits) parts.push(commitsSection(s.commits))
  if (s.waiters) parts.push(waitersSection(s.waiters))
  if (s.waiters || s.catalogue) parts.push(memorySection(s.waiters, s.catalogue))
  if (s.disk || s.catalogue) parts.push(diskSection(s.disk, s.catalogue))
  if (s.caps) parts.push(capsSection(s.caps))
  parts.push(cargoSection(r.cargo))
  const http = httpSection(s.catalogue, s.http)
  if (http) parts.push(http)
  if (s.auth) parts.push(authSection(s.auth))
  if (s.submit) parts.push(submitSection(s.submit))
  if (s.gasp) parts.push(gaspSection(s.gasp))
  if (s.access) parts.push(accessSection(s.access))
  if (s.nativeverify) parts.push(nativeVerifySection(s.nativeverify))
  if (s.receipt) parts.push(receiptSection(s.receipt))
  // A section measured again on its own names the command that measured it (without its --out).
  const rerun = (r.reruns || []).find(x => x.section === 'clientscale')
  if (s.clientscale) parts.push(clientScaleSection(s.clientscale, rerun ? rerun.command.replace(/ --out DIR$/, '') : r.command))
  parts.push(caveats(r))
  return parts.join('\n') + '\n'
}

module.exports = { renderReport, nativeVerifySection, clientScaleSection }
