// The demo page: a BRC-193 live lookup client over BRC-103 (AuthFetch from the @bsv/sdk UMD
// bundle), with no build step. See docs/demo.md for the behaviour described here.
//
// Invariants kept by this file:
// - One localStorage write holds a batch's effect on the memberships AND its cursor; the cursor
//   is used for the next read only after that write (a reload resumes exactly there).
// - A reset (reset-required, expired, unauthorized, a batch failing the client's checks) starts a
//   new generation; what the old generation showed stays visible, marked stale, and unseen
//   entries are dropped only when the new snapshot is complete, in one write.
// - Every AuthFetch call has its own deadline: AuthFetch never settles on a bad signature.
/* global bsv, createNotesTx */
(function () {
  'use strict'

  const params = new URLSearchParams(location.search)
  const intParam = (name, dflt) => {
    const v = Number(params.get(name))
    return params.has(name) && Number.isSafeInteger(v) && v >= 0 ? v : dflt
  }
  const CONFIG = {
    snapshotPage: Math.max(1, intParam('page', 2)), // maxObservations of a snapshot page: small, so the fill shows
    snapshotPauseMs: intParam('pause', 300), // cosmetic pause between snapshot pages
    waitMs: intParam('waitMs', 20000), // long-poll wait of live reads
    requestMs: 15000, // deadline of a call beyond its own waitMs
    backoffMaxMs: 10000
  }
  const PREFIX = 'overlay-live-demo:'
  const { Utils } = bsv

  // ---------------------------------------------------------------- errors

  class TransportError extends Error {} // no answer: network, timeout, interruption
  class ProtocolError extends Error {} // an answer this client must not trust or use
  class ServerError extends Error { // a well-formed error envelope the client retries later
    constructor (message, retryAfterMs) { super(message); this.retryAfterMs = retryAfterMs }
  }

  // ---------------------------------------------------------------- identity

  function loadKey () {
    let hex = localStorage.getItem(PREFIX + 'key')
    if (!/^[0-9a-f]{64}$/.test(hex || '')) {
      hex = bsv.PrivateKey.fromRandom().toHex().padStart(64, '0')
      localStorage.setItem(PREFIX + 'key', hex)
    }
    return bsv.PrivateKey.fromHex(hex)
  }
  const key = loadKey()
  const myIdentity = key.toPublicKey().toString()

  // ---------------------------------------------------------------- canonical JSON and digests

  /**
   * RFC 8785 canonical JSON for the values a manifest body holds (strings, safe integers,
   * booleans, null, arrays, objects). JSON.stringify already writes strings and integers the
   * JCS way; object keys sort by UTF-16 code units, which is JavaScript's default sort.
   */
  function jcs (v) {
    if (v === null || typeof v === 'string' || typeof v === 'boolean') return JSON.stringify(v)
    if (typeof v === 'number') {
      if (!Number.isSafeInteger(v)) throw new ProtocolError('manifest holds a non-integer number')
      return JSON.stringify(v)
    }
    if (Array.isArray(v)) return '[' + v.map(jcs).join(',') + ']'
    if (typeof v === 'object') return '{' + Object.keys(v).sort().map(k => JSON.stringify(k) + ':' + jcs(v[k])).join(',') + '}'
    throw new ProtocolError('manifest holds a value JSON cannot carry')
  }

  /** BRC-192 preimage("capabilities", body): the bytes both the digest and the signature cover. */
  function preimage (type, body) {
    return [...Utils.toArray('BRC-OUTPUT/1/' + type, 'utf8'), 0, ...Utils.toArray(jcs(body), 'utf8')]
  }

  // ---------------------------------------------------------------- calls with deadlines

  let pending = 0
  let interrupt = makeInterrupt()

  /** A promise that rejects when the connection state changes, to abandon waits and calls. */
  function makeInterrupt () {
    let fire
    const promise = new Promise((resolve, reject) => { fire = () => reject(new TransportError('interrupted')) })
    promise.catch(() => {})
    return { promise, fire }
  }

  function interruptAll () {
    const old = interrupt
    interrupt = makeInterrupt()
    old.fire()
  }

  /** Runs fn() under a deadline of ms; an abandoned call's late answer is ignored. */
  async function withDeadline (what, ms, fn) {
    pending++
    render()
    let timer
    try {
      return await Promise.race([
        fn(),
        new Promise((resolve, reject) => { timer = setTimeout(() => reject(new TransportError(what + ': no answer within ' + ms + ' ms')), ms) }),
        interrupt.promise
      ])
    } finally {
      clearTimeout(timer)
      pending--
      render()
    }
  }

  function sleep (ms) {
    return Promise.race([new Promise(resolve => setTimeout(resolve, ms)), interrupt.promise]).catch(() => {})
  }

  async function plainJSON (path, init = {}) {
    let res
    try {
      res = await withDeadline(path, CONFIG.requestMs, () => fetch(path, { cache: 'no-store', ...init }))
    } catch (e) {
      throw e instanceof TransportError ? e : new TransportError(path + ': ' + e.message)
    }
    const body = await res.json().catch(() => null)
    if (!res.ok) throw new ServerError(path + ': ' + res.status + ' ' + ((body && body.message) || ''))
    return body
  }


  // ---------------------------------------------------------------- sources
  //
  // A source is one provider this page follows: its own manifest, BRC-103 peer, stored session,
  // memberships and connection state. The page's own node is always the first source; with
  // `?sources=all` (or `both`) the page also follows every peer node its host names in
  // /demo/info (docs/scaling.md). Sources share nothing but the key: each keeps its own
  // membership, generation and cursor, and the list shows the union of what they hold.

  const PAGE_ORIGIN = location.origin
  const MULTI = params.get('sources') === 'all' || params.get('sources') === 'both'
  const sources = []
  let notesTx = null
  const EMPTY = {
    generation: 1,
    openRequestId: null,
    session: null,
    cursor: null,
    phase: null,
    snapshotComplete: false,
    through: null,
    highWater: null,
    epoch: null,
    members: {}, // outpoint -> {txid, outputIndex, text, author, beef?, n}
    previous: null, // the last generation's members, shown stale until the new snapshot completes
    counter: 0, // display order
    resetReason: null
  }
  const DOWN = new Set(['offline', 'reconnecting'])

  function createSource (origin) {
    const own = origin === PAGE_ORIGIN
    // The page's own node keeps the storage key of the single-source page (a reload of an
    // existing page resumes its session); other sources are keyed by their origin.
    const storageKey = PREFIX + (own ? 'live' : 'live@' + origin)
    const src = { origin, own, manifest: null, info: null, capability: null, connection: { state: 'starting', detail: '' } }
    let authFetch = null
    let contextChanges = 0 // context-changed answers since the last applied batch
    let recovering = false // set when the connection went down, cleared by the next answered call
    const label = () => MULTI ? '[' + origin.replace(/^https?:\/\//, '') + '] ' : ''
    const note = (line) => event(label() + line)

    // -------------------------------------------------------------- manifest

    async function loadManifest () {
      const [signed, hostInfo] = await Promise.all([plainJSON(origin + '/overlay/v1/capabilities'), plainJSON(origin + '/demo/info')])
      const body = signed && signed.body
      if (!body || typeof signed.signature !== 'string') throw new ProtocolError('the manifest is not a signed manifest')
      const bytes = preimage('capabilities', body)
      let verified = false
      try {
        verified = bsv.SignedMessage.verify(bytes, Utils.toArray(signed.signature, 'base64')) === true
      } catch (_) {}
      if (!verified) throw new ProtocolError('the manifest signature does not verify')
      if (body.identity !== hostInfo.identity) throw new ProtocolError('the manifest names another provider')
      const digest = Utils.toHex(bsv.Hash.sha256(bytes))
      // The host tells which digest it computes; a mismatch means our canonicalizer is wrong, and
      // the page stops there (retrying) rather than select a manifest by a digest of its own.
      const agrees = digest === hostInfo.capabilityDigest
      if (own) {
        text('manifest', 'signature verified; digest ' + (agrees ? 'matches the host\'s' : 'DIFFERS from the host\'s ' + hostInfo.capabilityDigest))
        text('capability', digest)
        text('provider', body.identity)
      }
      if (!agrees) throw new ServerError('capability digest mismatch: this page computes ' + digest)
      src.capability = digest
      src.info = hostInfo
      if (own) notesTx = createNotesTx(bsv, hostInfo)
      src.manifest = body // last: a set manifest means every check above passed
      if (own && MULTI) addPeers(hostInfo.peers || [])
    }

    // -------------------------------------------------------------- authenticated lookup calls

    function client () {
      if (!authFetch) authFetch = new bsv.AuthFetch(new bsv.ProtoWallet(key))
      return authFetch
    }

    async function post (op, body, ms) {
      let res
      try {
        res = await withDeadline(op, ms, () => client().fetch(origin + '/overlay/v1/lookup/' + op, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-bsv-overlay-capability': src.capability, 'x-bsv-overlay-profile': src.info.profile },
          body: JSON.stringify(body)
        }))
      } catch (e) {
        // A fresh AuthFetch (new handshake) after any failure: the server may have restarted.
        authFetch = null
        throw e instanceof TransportError ? e : new TransportError(op + ': ' + e.message)
      }
      if (res.headers.get('x-bsv-auth-identity-key') !== src.manifest.identity) throw new ProtocolError('the answer is not signed by the provider')
      let json
      try {
        json = JSON.parse(await res.text())
      } catch (_) {
        throw new ProtocolError(op + ': unreadable answer')
      }
      return { status: res.status, body: json }
    }

    // -------------------------------------------------------------- persistent session state

    function loadState () {
      try {
        const s = JSON.parse(localStorage.getItem(storageKey))
        if (s && typeof s === 'object' && s.members) return { ...EMPTY, ...s }
      } catch (_) {}
      return { ...EMPTY }
    }

    src.state = loadState()

    function saveState (next) {
      localStorage.setItem(storageKey, JSON.stringify(next))
      src.state = next
      render()
    }

    function startNewGeneration (reason) {
      const state = src.state
      const previous = { ...(state.previous || {}), ...state.members }
      saveState({ ...EMPTY, generation: state.generation + 1, previous, counter: state.counter, resetReason: reason })
      note('reset (' + reason + '): opening generation ' + src.state.generation)
    }

    // -------------------------------------------------------------- batches

    function decodeNote (evidence) {
      let tx
      try {
        tx = bsv.Transaction.fromBEEF(Utils.toArray(evidence.beef, 'base64'), evidence.txid)
      } catch (e) {
        throw new ProtocolError('unreadable evidence: ' + e.message)
      }
      const out = tx.outputs[evidence.outputIndex]
      if (!out) throw new ProtocolError('evidence lacks the output')
      let fields
      try {
        fields = bsv.PushDrop.decode(out.lockingScript).fields
      } catch (e) {
        throw new ProtocolError('evidence is not a PushDrop output')
      }
      // An addressed note carries its recipient before the signature (demo/notes/notesProtocol.js).
      if ((fields.length !== 4 && fields.length !== 5) || Utils.toUTF8(fields[0]) !== src.info.marker) throw new ProtocolError('evidence is not a note')
      return { text: Utils.toUTF8(fields[1]), author: Utils.toHex(fields[2]), to: fields.length === 5 ? Utils.toHex(fields[3]) : null }
    }

    /** The client's checks of the ordering rules (BRC-193 §8); a failure means: do not use this batch. */
    function checkBatch (b) {
      if (!b.scope || b.scope.provider !== src.manifest.identity || b.scope.service !== src.info.service) throw new ProtocolError('batch of another provider or service')
      const through = BigInt(b.through)
      if (through > BigInt(b.highWater)) throw new ProtocolError('through above highWater')
      if (b.phase !== 'live') return
      if (src.state.session !== b.session) throw new ProtocolError('live batch of another session')
      let last = BigInt(src.state.through)
      if (through < last) throw new ProtocolError('through went back')
      for (const g of b.groups) {
        const seq = BigInt(g.sequence)
        if (seq <= last || seq > through) throw new ProtocolError('live group out of order')
        last = seq
      }
    }

    function applyBatch (b) {
      checkBatch(b)
      const state = src.state
      const members = { ...state.members }
      let counter = state.counter
      const live = b.phase === 'live'
      for (const g of b.groups) {
        for (const o of g.observations) {
          if (o.kind === 'output') {
            const ev = o.payload.evidence
            const id = ev.txid + '.' + ev.outputIndex
            const decoded = decodeNote(ev)
            const known = members[id] || (state.previous && state.previous[id])
            members[id] = {
              txid: ev.txid,
              outputIndex: ev.outputIndex,
              text: decoded.text,
              author: decoded.author,
              to: decoded.to,
              // Only the author can spend a note, so only our own notes keep their evidence.
              beef: decoded.author === myIdentity ? ev.beef : undefined,
              n: known ? known.n : ++counter
            }
            if (live) { fresh.add(id); note('#' + g.sequence + ' + "' + decoded.text + '"') }
          } else if (o.kind === 'withdraw') {
            const id = o.payload.outpoint.txid + '.' + o.payload.outpoint.outputIndex
            const gone = members[id]
            delete members[id]
            if (live) note('#' + g.sequence + ' − ' + (gone ? '"' + gone.text + '"' : id.slice(0, 12)) + ' (' + o.payload.reason + ')')
          } else if (o.kind === 'spend' && live) {
            note('#' + g.sequence + ' spent by ' + o.payload.spendingTxid.slice(0, 12) + '…')
          }
        }
      }
      const completes = b.snapshotComplete && !state.snapshotComplete
      // One write: memberships, cursor and watermarks together; the cursor is used only after it.
      saveState({
        ...state,
        openRequestId: null,
        session: b.session,
        cursor: b.cursor,
        phase: b.phase,
        snapshotComplete: b.snapshotComplete,
        through: b.through,
        highWater: b.highWater,
        epoch: b.scope.epoch,
        members,
        counter,
        previous: completes ? null : state.previous,
        resetReason: completes ? null : state.resetReason
      })
      if (completes) note('snapshot of generation ' + src.state.generation + ' complete: ' + Object.keys(members).length + ' notes')
    }

    /** Handles an error envelope (BRC-193 §6); returns (nothing) when the loop should go on at once. */
    function handleError (op, r) {
      const err = (r.body && r.body.error) || {}
      const code = err.code || 'unknown'
      switch (code) {
        case 'reset-required':
        case 'expired':
        case 'unauthorized':
          // A read whose session ended: open the next generation. A refused open backs off instead.
          if (op === 'read') { startNewGeneration(code); return }
          break
        case 'context-changed':
          // The provider issued a new manifest (e.g. after a restart): fetch it again and repeat,
          // once; a second one in a row backs off.
          src.manifest = null
          if (++contextChanges === 1) return
          break
        case 'conflict':
          if (op === 'open') { saveState({ ...src.state, openRequestId: null }); return }
          break
        case 'unavailable':
        case 'limited':
          throw new ServerError(op + ': ' + code + ' ' + (err.message || ''), err.retryAfterMs)
      }
      throw new ServerError(op + ': ' + r.status + ' ' + code + ' ' + (err.message || ''))
    }

    async function openSession () {
      // The requestId is stored before sending: a retry after a lost answer is the same open.
      if (!src.state.openRequestId) saveState({ ...src.state, openRequestId: randomHex(16) })
      announce('opening', 'opening generation ' + src.state.generation)
      const r = await post('open', {
        version: 1,
        requestId: src.state.openRequestId,
        service: src.info.service,
        query: {},
        limits: { maxBytes: 65536, maxObservations: CONFIG.snapshotPage, waitMs: 0 }
      }, CONFIG.requestMs)
      if (r.status !== 200) return handleError('open', r)
      applyBatch(r.body)
      return true
    }

    async function readOnce () {
      const live = src.state.snapshotComplete
      // While the connection is down, a live read does not wait: its answer is what proves
      // the provider is back, and a long poll would keep the page saying so for up to waitMs.
      const down = DOWN.has(src.connection.state)
      const limits = live
        ? { maxBytes: 262144, maxObservations: 64, waitMs: down ? 0 : CONFIG.waitMs }
        : { maxBytes: 65536, maxObservations: CONFIG.snapshotPage, waitMs: 0 }
      announce(live ? 'live' : 'snapshot', live ? 'waiting for changes (long poll up to ' + CONFIG.waitMs + ' ms)' : 'filling the snapshot')
      const r = await post('read', { version: 1, session: src.state.session, cursor: src.state.cursor, limits }, limits.waitMs + CONFIG.requestMs)
      if (r.status !== 200) return handleError('read', r)
      applyBatch(r.body)
      if (!src.state.snapshotComplete && CONFIG.snapshotPauseMs > 0) await sleep(CONFIG.snapshotPauseMs)
      return true
    }

    /**
     * The state a request is about to be in. While the connection is down (offline,
     * reconnecting) nothing is announced before an answer arrives: a retry against a provider
     * that is still down must not show "live" or "not stale" for the time the attempt takes.
     */
    function announce (s, detail) {
      if (!DOWN.has(src.connection.state)) setConnection(s, detail)
    }

    function setConnection (s, detail) {
      const was = src.connection.state
      src.connection = { state: s, detail: detail || '' }
      if (DOWN.has(s) && !DOWN.has(was)) {
        recovering = true
        note('connection ' + s + ': ' + src.connection.detail)
      }
      render()
    }
    src.setConnection = setConnection

    src.staleReason = function staleReason () {
      const state = src.state
      if (state.previous) return 'yes: replacing after ' + (state.resetReason || 'a reset') + ' (generation ' + state.generation + ')'
      if (DOWN.has(src.connection.state)) return 'yes: not connected, showing the last committed state'
      return 'no'
    }

    src.run = async function run () {
      let failures = 0
      for (;;) {
        try {
          if (!navigator.onLine) {
            setConnection('offline', 'the browser is offline; resuming from the stored cursor when it is back')
            await waitOnline()
          }
          if (!src.manifest) await loadManifest()
          const resumed = src.state.session !== null
          const applied = resumed ? await readOnce() : await openSession()
          failures = 0
          if (applied) contextChanges = 0
          if (applied && recovering) {
            recovering = false
            // An answered and applied call: the provider is back.
            setConnection(src.state.snapshotComplete ? 'live' : 'snapshot', 'reconnected')
            note('reconnected: generation ' + src.state.generation + (resumed ? ' resumed from its stored cursor' : ' opened'))
          }
        } catch (e) {
          if (e instanceof ProtocolError && src.manifest) {
            // An answer we must not use: start over from a new snapshot.
            startNewGeneration('client check: ' + e.message)
          }
          if (e instanceof TransportError && e.message === 'interrupted') continue
          failures++
          const delay = Math.min(CONFIG.backoffMaxMs, (e.retryAfterMs || 500 * 2 ** Math.min(failures, 5)))
          setConnection(navigator.onLine ? 'reconnecting' : 'offline', e.message + ' — retrying in ' + Math.round(delay / 100) / 10 + ' s')
          await sleep(delay)
        }
      }
    }
    return src
  }

  function randomHex (bytes) {
    return Utils.toHex(Array.from(crypto.getRandomValues(new Uint8Array(bytes))))
  }

  function waitOnline () {
    return new Promise(resolve => {
      if (navigator.onLine) return resolve()
      window.addEventListener('online', () => resolve(), { once: true })
    })
  }

  /** Follows every peer the host names (once): each is one more source with its own session. */
  function addPeers (peers) {
    for (const url of peers) {
      let origin
      try { origin = new URL(url).origin } catch (_) { continue }
      if (sources.some(s => s.origin === origin)) continue
      const src = createSource(origin)
      sources.push(src)
      src.run()
    }
  }

  // ---------------------------------------------------------------- publishing and withdrawing

  async function submitBeef (beef) {
    const info = primary.info
    return plainJSON('/submit', {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream', 'x-topics': JSON.stringify([info.topic]) },
      body: new Uint8Array(beef)
    })
  }

  async function publish (noteText, to) {
    const info = primary.info
    if (!info) throw new Error('not connected yet')
    const funding = await plainJSON('/demo/fund', {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ address: key.toAddress() })
    })
    const built = await notesTx.buildPublish(key, funding, noteText, to)
    const steak = await submitBeef(built.beef)
    const admitted = steak[info.topic] && steak[info.topic].outputsToAdmit
    if (!admitted || admitted.length !== 1) throw new Error('the overlay did not admit the note')
    return built.txid
  }

  async function withdraw (id) {
    const info = primary.info
    if (!info) throw new Error('not connected yet')
    // The spend goes to this page's own node, whichever source delivered the note.
    const holder = sources.find(s => s.state.members[id])
    const m = holder && holder.state.members[id]
    if (!m || !m.beef) throw new Error('only your own notes can be withdrawn')
    const built = await notesTx.buildWithdraw(key, Utils.toArray(m.beef, 'base64'), m.txid, m.outputIndex)
    const steak = await submitBeef(built.beef)
    const removed = steak[info.topic] && steak[info.topic].coinsRemoved
    if (!removed || removed.length !== 1) throw new Error('the overlay did not accept the spend')
    return built.txid
  }

  document.getElementById('publish-form').addEventListener('submit', async (ev) => {
    ev.preventDefault()
    const input = document.getElementById('note-text')
    const button = document.getElementById('publish-button')
    const toInput = document.getElementById('note-to')
    const noteText = input.value.trim()
    const to = toInput.value.trim()
    if (!noteText) return
    button.disabled = true
    text('publish-status', 'building and submitting…')
    try {
      const txid = await publish(noteText, to || undefined)
      input.value = ''
      toInput.value = ''
      text('publish-status', 'submitted ' + txid.slice(0, 16) + '…; it shows below once the live session delivers it')
    } catch (e) {
      text('publish-status', 'publish failed: ' + e.message)
    } finally {
      button.disabled = false
    }
  })

  document.getElementById('notes').addEventListener('click', async (ev) => {
    const button = ev.target.closest('button[data-withdraw]')
    if (!button) return
    button.disabled = true
    try {
      const txid = await withdraw(button.dataset.withdraw)
      text('publish-status', 'withdrawn by ' + txid.slice(0, 16) + '…')
    } catch (e) {
      text('publish-status', 'withdraw failed: ' + e.message)
      button.disabled = false
    }
  })

  // ---------------------------------------------------------------- rendering

  const fresh = new Set()
  const events = []

  function text (id, value) {
    const el = document.getElementById(id)
    if (el) el.textContent = value
  }

  function event (line) {
    events.unshift(new Date().toLocaleTimeString() + '  ' + line)
    events.length = Math.min(events.length, 30)
    const ol = document.getElementById('events')
    ol.replaceChildren(...events.map(e => { const li = document.createElement('li'); li.textContent = e; return li }))
  }

  function phaseText (state) {
    return state.phase ? state.phase + (state.snapshotComplete && state.phase === 'snapshot' ? ' (complete)' : '') : '-'
  }

  function render () {
    if (sources.length === 0) return
    // The session panel describes the page's own node; with several sources, one line each below.
    const { state, connection } = primary
    const conn = document.getElementById('state-connection')
    conn.textContent = connection.state
    conn.dataset.state = connection.state
    text('state-detail', connection.detail)
    text('state-phase', phaseText(state))
    text('state-generation', String(state.generation))
    text('state-through', state.through ?? '-')
    text('state-highwater', state.highWater ?? '-')
    text('state-pending', String(pending))
    const stale = primary.staleReason()
    const staleEl = document.getElementById('state-stale')
    staleEl.textContent = stale
    staleEl.dataset.stale = String(stale !== 'no')
    text('me', myIdentity)
    renderSources()
    renderNotes()
  }

  function renderSources () {
    const section = document.getElementById('sources-section')
    if (!MULTI) return
    section.hidden = false
    const ul = document.getElementById('sources')
    ul.replaceChildren(...sources.map(s => {
      const li = document.createElement('li')
      const stale = s.staleReason()
      li.dataset.origin = s.origin
      li.dataset.state = s.connection.state
      li.dataset.stale = String(stale !== 'no')
      li.textContent = s.origin + (s.own ? ' (this page\'s node)' : '') + ': ' + s.connection.state +
        ', phase ' + phaseText(s.state) + ', generation ' + s.state.generation +
        ', through ' + (s.state.through ?? '-') + ' / highWater ' + (s.state.highWater ?? '-') +
        ', ' + Object.keys(s.state.members).length + ' notes, ' + (stale === 'no' ? 'current' : 'stale: ' + stale.replace(/^yes: /, ''))
      return li
    }))
  }

  /**
   * The union over sources: a note is current when any source holds it as a member; it is shown
   * stale (greyed) when only a replaced generation of some source still holds it.
   */
  function unionNotes () {
    const current = new Map()
    const stale = new Map()
    for (const s of sources) {
      for (const [id, m] of Object.entries(s.state.members)) if (!current.has(id)) current.set(id, m)
      if (s.state.previous) for (const [id, m] of Object.entries(s.state.previous)) if (!stale.has(id)) stale.set(id, m)
    }
    for (const id of current.keys()) stale.delete(id)
    return { current, stale }
  }

  function renderNotes () {
    const { current, stale: old } = unionNotes()
    const shown = [...current].map(([id, m]) => ({ id, m, stale: false }))
    for (const [id, m] of old) shown.push({ id, m, stale: true })
    shown.sort((a, b) => b.m.n - a.m.n)
    text('state-count', String(current.size))
    const ul = document.getElementById('notes')
    ul.replaceChildren(...shown.map(({ id, m, stale }) => {
      const li = document.createElement('li')
      li.dataset.outpoint = id
      li.className = [m.author === myIdentity ? 'mine' : '', stale ? 'stale' : '', fresh.has(id) ? 'fresh' : ''].join(' ').trim()
      const t = document.createElement('span'); t.className = 'text'; t.textContent = m.text
      const meta = document.createElement('span'); meta.className = 'meta'
      meta.textContent = 'by ' + m.author.slice(0, 10) + '…' + (m.to ? ' to ' + (m.to === myIdentity ? 'you' : m.to.slice(0, 10) + '…') : '') +
        ' at ' + m.txid.slice(0, 8) + '….' + m.outputIndex
      if (m.to) li.classList.add('addressed')
      li.append(t, meta)
      if (m.beef && !stale) {
        const b = document.createElement('button'); b.type = 'button'; b.dataset.withdraw = id; b.textContent = 'withdraw'
        li.append(b)
      }
      return li
    }))
    fresh.clear()
  }

  // For the browser test and the curious: a read-only view of the client state. The top-level
  // fields describe the page's own node; `notes` is the union over sources; `sources` has each.
  window.demoState = () => ({
    connection: primary.connection.state,
    phase: primary.state.phase,
    generation: primary.state.generation,
    snapshotComplete: primary.state.snapshotComplete,
    through: primary.state.through,
    highWater: primary.state.highWater,
    stale: primary.staleReason() !== 'no',
    notes: [...unionNotes().current.values()].map(m => m.text),
    identity: myIdentity,
    sources: sources.map(s => ({
      origin: s.origin,
      provider: s.manifest ? s.manifest.identity : null,
      connection: s.connection.state,
      phase: s.state.phase,
      generation: s.state.generation,
      snapshotComplete: s.state.snapshotComplete,
      through: s.state.through,
      highWater: s.state.highWater,
      epoch: s.state.epoch,
      stale: s.staleReason() !== 'no',
      notes: Object.values(s.state.members).map(m => m.text)
    }))
  })

  const primary = createSource(PAGE_ORIGIN)
  sources.push(primary)
  window.addEventListener('offline', () => { for (const s of sources) s.setConnection('offline', 'the browser went offline'); interruptAll() })
  window.addEventListener('online', () => { for (const s of sources) s.setConnection('reconnecting', 'back online'); interruptAll() })
  render()
  primary.run()
})()
