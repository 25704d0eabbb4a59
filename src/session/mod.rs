//! Sessions: open, read and close (BRC-193 §2–§5, §8).
//!
//! The [`Provider`] owns the session table on top of a [`Store`]. Open captures an
//! immutable snapshot (the versioned index as of watermark W) and stores the opening
//! fence, the session and the exact first batch in one atomic, flushed write before
//! answering. Reads continue the snapshot from the cursor's row key, then replay the
//! log after `through`, projecting each group onto the session's selection. Reads
//! never write to disk. An empty live read long-polls: it subscribes to the store's
//! publication channel *before* building its batch and parks in the table of
//! [`park`], so a commit between the build and the park is never lost.
//!
//! Host callbacks (the companion's `select` and `visibility`, the host's `authorize`) run
//! in JS before a call reaches this module; their results arrive as the selection (the
//! query's filter narrowed by the partition's visibility) and the access partition, from
//! which [`access`] derives `scope.access`. Prohibited rows ([`prohibit`]) are checked
//! wherever a row is serialized.

pub mod access;
pub mod batch;
mod budget;
pub mod cursor;
pub mod handover;
mod park;
mod prohibit;
pub mod record;
mod table;
pub mod wait;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};

use crate::select::Selection;
use crate::store::{BlobRef, Projected, SnapshotRow, StopCheck, Store, Ticket, Turn};
use crate::wire::{self, ErrorCode, Limits, WireError};

use batch::{Frame, Offer, Packer, Phase, Tail};
pub use batch::Ready;
use cursor::{Cursor, CursorKey, Position};
use record::{FenceRecord, FirstBatch, SessionRecord};
pub use park::{Answer, Reply};
pub use prohibit::ProhibitOutcome;
pub use wait::{CancelToken, Caps, WaitGuard, Waiters, WorkSlots};

/// Schema of a legacy BRC-24 context carried as JSON bytes (BRC-192 §2).
pub const LEGACY_CONTEXT_SCHEMA: &str = "https://bsv.brc.dev/apps/0192#legacy-lookup-context-json-v1";

/// At most this many log groups are examined by one read, so a long run of
/// irrelevant groups cannot make one request unbounded; `through` still advances.
const MAX_GROUPS_EXAMINED_PER_READ: usize = 20_000;
/// `retryAfterMs` of an open refused while the store is over its retention budget.
const RETENTION_RETRY_MS: u32 = 5_000;

/// Provider-wide settings frozen for every session it opens.
#[derive(Clone, Debug)]
pub struct ProviderConfig {
    /// `scope.provider`: the identity key, or the exact HTTPS origin in public mode.
    pub provider: String,
    pub network: String,
    pub genesis_hash: String,
    pub session_seconds: u64,
    pub replay_seconds: u64,
    /// Provider maxima (already validated against the profile).
    pub limits: Limits,
    pub caps: Caps,
}

#[cfg(test)]
impl ProviderConfig {
    /// The configuration the unit tests use: profile limits, default caps, 60 s sessions and
    /// replay, on a test chain.
    pub(crate) fn for_tests(provider: impl Into<String>) -> ProviderConfig {
        ProviderConfig {
            provider: provider.into(),
            network: "test".into(),
            genesis_hash: "00".repeat(32),
            session_seconds: 60,
            replay_seconds: 60,
            limits: Limits::PROFILE_MAX,
            caps: Caps::default(),
        }
    }
}

/// Who is calling, as established by the transport.
#[derive(Clone, Debug)]
pub struct Caller {
    /// Identity key for BRC-103 callers; empty for anonymous callers.
    pub principal: String,
    pub authenticated: bool,
}

/// A complete HTTP answer: status and exact body bytes.
#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Response {
    pub fn ok(body: Vec<u8>) -> Response {
        Response { status: 200, body }
    }
    pub fn error(e: &WireError) -> Response {
        Response { status: e.http_status(), body: e.to_body() }
    }
}

impl From<WireError> for Response {
    fn from(e: WireError) -> Response {
        Response::error(&e)
    }
}

fn err(code: ErrorCode, msg: impl Into<String>) -> WireError {
    WireError::new(code, msg)
}

fn store_err(e: crate::store::StoreError) -> WireError {
    // History that compaction removed cannot be served again: the client must
    // start over, never receive an empty success (BRC-193 §4, §5).
    if let crate::store::StoreError::Gone(_) = e {
        return err(ErrorCode::ResetRequired, "the history this request needs is no longer retained");
    }
    if let crate::store::StoreError::Cancelled = e {
        return err(ErrorCode::Cancelled, "the request was cancelled");
    }
    let mut w = err(ErrorCode::Unavailable, format!("storage failure: {e}"));
    w.retryable = true;
    w
}

struct ServiceEntry {
    rules_digest: String,
}

/// One session known to this process.
pub struct LiveSession {
    /// Shared, so a read takes the record without copying its query and selection; a
    /// change (close, revocation) replaces it.
    rec: Mutex<Arc<SessionRecord>>,
    id: [u8; 16],
    view: std::sync::OnceLock<Arc<SessionView>>,
}

/// What a session's batches share with every session of the same view.
struct SessionView {
    scope_json: Arc<[u8]>,
    /// See `Provider::view_key`.
    key: [u8; 32],
    /// The session's selection, compiled once (`None`: the stored selection no longer
    /// compiles, and every read is answered with reset-required).
    selection: Option<Selection>,
    /// The selection as the companion returned it; the records of the view's sessions
    /// opened in this process share it.
    selection_json: Arc<Value>,
}

impl SessionView {
    fn selection(&self) -> Result<&Selection, WireError> {
        self.selection.as_ref().ok_or_else(|| err(ErrorCode::ResetRequired, "the stored selection no longer compiles"))
    }
}

impl LiveSession {
    fn record(&self) -> Arc<SessionRecord> {
        self.rec.lock().unwrap().clone()
    }

    /// Closed, revoked or reset: a waiting poll of it ends (through the gate).
    fn has_ended(&self) -> bool {
        self.rec.lock().unwrap().ended()
    }
}

/// What a batch is built for: the session record, its view and compiled selection, the
/// session id the cursor names, and the read's limits.
#[derive(Clone, Copy)]
struct BatchOf<'a> {
    rec: &'a SessionRecord,
    view: &'a SessionView,
    id: &'a [u8; 16],
    sel: &'a Selection,
    limits: Limits,
}

/// A rendered snapshot batch and a digest of the row keys it holds, in order.
struct SnapshotPage {
    body: Vec<u8>,
    rows_digest: [u8; 32],
}

/// A rendered live group and its observation count; `None` when the group is
/// irrelevant to the view.
type CachedGroup = Option<Arc<batch::RenderedGroup>>;

/// The views in use, by key, so that sessions of one scope and selection share one: a
/// catalogue watched by many clients costs its compiled selection and scope once, not
/// once per session. A view lives as long as a session holds it.
#[derive(Default)]
struct ViewTable {
    inner: Mutex<ViewTableInner>,
}

#[derive(Default)]
struct ViewTableInner {
    by_key: HashMap<[u8; 32], std::sync::Weak<SessionView>>,
    /// Entries whose sessions are all gone are swept when the map reaches this size.
    sweep_at: usize,
}

impl ViewTable {
    fn get_or_insert(&self, key: [u8; 32], make: impl FnOnce() -> SessionView) -> Arc<SessionView> {
        let mut t = self.inner.lock().unwrap();
        if let Some(v) = t.by_key.get(&key).and_then(std::sync::Weak::upgrade) {
            return v;
        }
        let view = Arc::new(make());
        if t.by_key.len() >= t.sweep_at {
            // Amortized: the map at least doubles between two sweeps.
            t.by_key.retain(|_, v| v.strong_count() > 0);
            t.sweep_at = (t.by_key.len() * 2).max(64);
        }
        t.by_key.insert(key, Arc::downgrade(&view));
        view
    }
}

/// Bounded cache of rendered live groups per (view, sequence). Committed groups are
/// immutable, so entries never go stale; the whole map is dropped when it fills.
#[derive(Default)]
struct GroupCache {
    entries: RwLock<(HashMap<([u8; 32], u64), CachedGroup>, usize)>,
}

const GROUP_CACHE_ENTRIES: usize = 4096;
const GROUP_CACHE_BYTES: usize = 64 * 1024 * 1024;

impl GroupCache {
    fn get(&self, view: &[u8; 32], seq: u64) -> Option<CachedGroup> {
        self.entries.read().unwrap().0.get(&(*view, seq)).cloned()
    }

    /// Drops every rendering (a prohibition: groups rendered before it may hold a row that
    /// may no longer be disclosed).
    fn clear(&self) {
        let mut m = self.entries.write().unwrap();
        m.0.clear();
        m.1 = 0;
    }

    fn put(&self, view: [u8; 32], seq: u64, group: CachedGroup) {
        let size = group.as_ref().map_or(0, |g| g.bytes.len());
        let mut m = self.entries.write().unwrap();
        if m.0.len() >= GROUP_CACHE_ENTRIES || m.1 + size > GROUP_CACHE_BYTES {
            m.0.clear();
            m.1 = 0;
        }
        if size <= GROUP_CACHE_BYTES {
            m.0.insert((view, seq), group);
            m.1 += size;
        }
    }
}

/// Test-only injection points (BRC-193 §7 requires exercising a commit between
/// registering a waiter and sleeping). A pending injection is a real group that the
/// provider commits through the ordinary store path at that exact point.
#[derive(Default)]
pub struct TestHooks {
    pub after_waiter_registered: Mutex<Vec<Vec<crate::store::Change>>>,
}

pub struct Provider {
    store: Arc<Store>,
    cfg: ProviderConfig,
    services: RwLock<HashMap<String, ServiceEntry>>,
    sessions: Mutex<table::SessionTable>,
    /// Serializes opens that share a fence slot, so two identical concurrent opens
    /// produce one snapshot.
    open_locks: Vec<Mutex<()>>,
    pub waiters: Waiters,
    work: WorkSlots,
    /// Long polls waiting for a commit or their deadline.
    parked: park::Parked,
    /// Live groups already projected and rendered, shared by sessions of one view.
    groups: GroupCache,
    views: ViewTable,
    clock_offset_ms: AtomicI64,
    pub hooks: TestHooks,
    /// Keyed by the store secret, which a reset keeps.
    cursor_key: CursorKey,
    /// The access policy's identity, version and partition generations.
    policy: access::AccessTable,
    /// Installed in the store's admission gate as its change filter.
    prohibited: Arc<prohibit::Prohibitions>,
    /// Opens hold it shared while they derive the access and capture W; a prohibition or a
    /// policy change holds it exclusively (inside its gate turn, which keeps commits out), so
    /// no watermark is captured in the middle of one.
    admission: RwLock<()>,
    /// See [`Provider::retention_refusals`].
    retention_refusals: AtomicU64,
}

/// How a session ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum End {
    /// `close`: later reads are `expired`.
    Closed,
    /// Revocation: later reads are `unauthorized`.
    Revoked,
    /// A policy change or a prohibition: later reads are `reset-required`.
    Reset,
}

/// Appends lowercase hex.
fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    let start = out.len();
    out.resize(start + bytes.len() * 2, 0);
    hex::encode_to_slice(bytes, &mut out[start..]).expect("the buffer was sized for hex");
}

/// Appends standard padded base64.
fn push_base64(out: &mut Vec<u8>, bytes: &[u8]) {
    use base64::Engine as _;
    let start = out.len();
    out.resize(start + bytes.len().div_ceil(3) * 4, 0);
    let n = base64::engine::general_purpose::STANDARD
        .encode_slice(bytes, &mut out[start..])
        .expect("the buffer was sized for padded base64");
    out.truncate(start + n);
}

/// A session's scope as rendered in every batch and observation (BRC-192 Scope).
fn scope_json(cfg: &ProviderConfig, service: &str, query_digest: &str, rules_digest: &str, access: &str, epoch: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "chain": {"network": cfg.network, "genesisHash": cfg.genesis_hash},
        "provider": cfg.provider,
        "service": service,
        "queryDigest": query_digest,
        "rulesDigest": rules_digest,
        "access": access,
        "epoch": epoch,
    }))
    .expect("scope serializes")
}

/// An outpoint as `withdraw` and `spend` payloads carry it.
fn outpoint_json(cfg: &ProviderConfig, o: &crate::store::Outpoint) -> Value {
    json!({"chain": {"network": cfg.network, "genesisHash": cfg.genesis_hash}, "txid": hex::encode(o.txid), "outputIndex": o.output_index})
}

/// A scan's stop check backed by a request's cancellation token.
fn stop_check(cancel: &Arc<CancelToken>) -> StopCheck {
    let token = cancel.clone();
    Arc::new(move || token.is_cancelled())
}

/// The answer to a read of an ended session.
fn ended_error(r: &SessionRecord) -> Option<WireError> {
    if r.closed {
        Some(err(ErrorCode::Expired, "the session was closed"))
    } else if r.revoked {
        Some(err(ErrorCode::Unauthorized, "access to this session was revoked"))
    } else if r.reset {
        Some(err(ErrorCode::ResetRequired, "the access policy changed or a row may no longer be disclosed; open a new session"))
    } else {
        None
    }
}

fn random_16() -> [u8; 16] {
    let mut b = [0u8; 16];
    secp256k1::rand::fill(&mut b);
    b
}

fn parse_session_id(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32 {
        return None;
    }
    let v = hex::decode(s).ok()?;
    if hex::encode(&v) != s {
        return None;
    }
    v.try_into().ok()
}

impl Provider {
    pub fn new(store: Arc<Store>, cfg: ProviderConfig) -> Result<Arc<Provider>, WireError> {
        if cfg.session_seconds == 0 || cfg.replay_seconds == 0 {
            return Err(err(ErrorCode::Invalid, "sessionSeconds and replaySeconds must be positive"));
        }
        let p = Arc::new(Provider {
            waiters: Waiters::new(cfg.caps.clone()),
            work: WorkSlots::new(cfg.caps.max_concurrent_work),
            parked: park::Parked::default(),
            groups: GroupCache::default(),
            views: ViewTable::default(),
            cursor_key: CursorKey::new(&store.secret()),
            store,
            cfg,
            services: RwLock::new(HashMap::new()),
            sessions: Mutex::new(table::SessionTable::default()),
            open_locks: (0..64).map(|_| Mutex::new(())).collect(),
            clock_offset_ms: AtomicI64::new(0),
            hooks: TestHooks::default(),
            policy: access::AccessTable::default(),
            prohibited: Arc::new(prohibit::Prohibitions::default()),
            admission: RwLock::new(()),
            retention_refusals: AtomicU64::new(0),
        });
        // Every change the store commits passes the prohibitions first, whatever its entrance.
        p.store.set_change_filter(Some(p.prohibited.clone()));
        p.load_policy()?;
        // Sessions retained from before a restart count against the per-principal cap
        // and hold the compaction horizon from the start.
        p.load_all_sessions()?;
        // Groups are bounded by this provider's limits, and expiries follow its clock.
        p.store.set_group_budget(Some(Arc::new(budget::ProviderBudget::new(&p.cfg))));
        let clock = Arc::downgrade(&p);
        p.store.set_clock(Some(Arc::new(move || clock.upgrade().map(|p| p.now_ms()))));
        p.load_prohibitions()?;
        Ok(p)
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    pub fn config(&self) -> &ProviderConfig {
        &self.cfg
    }

    /// Wall-clock milliseconds (plus a test offset).
    pub fn now_ms(&self) -> u64 {
        let real = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
        (real + self.clock_offset_ms.load(Ordering::Relaxed)).max(0) as u64
    }

    pub fn now(&self) -> u64 {
        self.now_ms() / 1000
    }

    /// Moves this provider's clock (tests of expiry use it instead of sleeping).
    pub fn advance_clock_ms(&self, ms: i64) {
        self.clock_offset_ms.fetch_add(ms, Ordering::Relaxed);
        self.store.kick_timer();
    }

    /// Commits one indivisible group through the store's admission gate ([`Store::admit`]),
    /// where the prohibitions are applied: an admission of a prohibited row is its removal by
    /// then ([`prohibit`]).
    pub fn commit(&self, changes: Vec<crate::store::Change>) -> Result<Option<u64>, crate::store::StoreError> {
        self.store.commit(changes)
    }

    /// [`Store::commit_divisible`], through the same gate.
    pub fn commit_divisible(&self, changes: Vec<crate::store::Change>) -> Result<Option<u64>, crate::store::StoreError> {
        self.store.commit_divisible(changes)
    }

    /// Holds the store's admission turn for `ticket` (one taken now when `None`) once every
    /// change admitted before it is published: a prohibition or a policy change then happens
    /// at its place in the order the host made its changes (docs/design.md "Admission gate").
    fn exclusive_turn(&self, ticket: Option<Ticket>) -> Result<Turn<'_>, WireError> {
        let turn = self.store.turn(ticket.unwrap_or_else(|| self.store.reserve())).map_err(store_err)?;
        self.store.sync(&turn).map_err(store_err)?;
        Ok(turn)
    }

    /// Registers (or re-registers with new rules) a wrapped service and returns its
    /// `rulesDigest = digest("service-rules", rules)`.
    pub fn register_service(&self, name: &str, rules: &Value) -> Result<String, WireError> {
        let rules_digest = wire::try_digest("service-rules", rules)?;
        self.services
            .write()
            .unwrap()
            .insert(name.to_string(), ServiceEntry { rules_digest: rules_digest.clone() });
        Ok(rules_digest)
    }

    pub fn rules_digest(&self, service: &str) -> Option<String> {
        self.services.read().unwrap().get(service).map(|s| s.rules_digest.clone())
    }

    fn secret(&self) -> [u8; 32] {
        self.store.secret()
    }

    fn epoch_bytes(&self) -> [u8; 16] {
        self.store.epoch_bytes()
    }

    fn fence_digest(&self, service: &str, caller: &Caller, request_id: &str) -> [u8; 32] {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.secret()).expect("any key length");
        mac.update(b"overlay-lookup-live/fence/1\0");
        mac.update(service.as_bytes());
        mac.update(b"\0");
        mac.update(if caller.authenticated { b"brc103\0" as &[u8] } else { b"anonymous\0" });
        mac.update(caller.principal.as_bytes());
        mac.update(b"\0");
        mac.update(request_id.as_bytes());
        mac.finalize().into_bytes().into()
    }

    fn scope_json(&self, rec: &SessionRecord) -> Vec<u8> {
        scope_json(&self.cfg, &rec.service, &rec.query_digest, &rec.rules_digest, &rec.access, &rec.epoch)
    }

    fn frame<'a>(&self, rec: &'a SessionRecord, limits: Limits, scope_json: Arc<[u8]>) -> Frame<'a> {
        Frame { session: &rec.id, scope_json, expires_at: rec.expires_at, replay_until: rec.replay_until, limits }
    }

    /// The session's scope and view key, computed once per session: the scope of a
    /// session never changes (a changed access scope ends it).
    fn session_view(&self, session: &LiveSession, rec: &SessionRecord) -> Arc<SessionView> {
        session.view.get_or_init(|| self.new_view(rec, None)).clone()
    }

    /// The view of a session's scope and selection: the one already in use by another
    /// session, or a new one, which takes `compiled` (an open has compiled the selection
    /// already, to validate it) or compiles the record's.
    fn new_view(&self, rec: &SessionRecord, compiled: Option<Selection>) -> Arc<SessionView> {
        let scope_json = self.scope_json(rec);
        let key = self.view_key(&scope_json, &rec.selection);
        self.views.get_or_insert(key, || SessionView {
            scope_json: scope_json.into(),
            key,
            selection: compiled.or_else(|| Selection::from_json(&rec.selection).ok()),
            selection_json: rec.selection.clone(),
        })
    }

    fn blob_b64(&self, blob: &BlobRef) -> Result<String, WireError> {
        use base64::Engine as _;
        let mut out = String::new();
        base64::engine::general_purpose::STANDARD.encode_string(self.blob(blob)?, &mut out);
        Ok(out)
    }

    fn blob(&self, blob: &BlobRef) -> Result<sled::IVec, WireError> {
        self.store
            .blob_at(blob)
            .map_err(store_err)?
            .ok_or_else(|| err(ErrorCode::Unavailable, "evidence missing from the store"))
    }

    /// Appends the payload of an `output` observation (BRC-192 §2) as JSON:
    /// `{"evidence":{"txid","outputIndex","beef"},"context"?:{"schema","bytes"}}`.
    /// Written directly rather than through `serde_json::Value`: this runs once per
    /// snapshot row, and base64 and hex never need JSON escaping.
    fn push_output_payload(
        &self,
        out: &mut Vec<u8>,
        outpoint: &crate::store::Outpoint,
        beef: &BlobRef,
        ctx: &Option<crate::store::Context>,
    ) -> Result<(), WireError> {
        let beef = self.blob(beef)?;
        out.reserve(beef.len() * 4 / 3 + 160);
        out.extend_from_slice(b"{\"evidence\":{\"txid\":\"");
        push_hex(out, &outpoint.txid);
        out.extend_from_slice(b"\",\"outputIndex\":");
        batch::push_u64(out, outpoint.output_index as u64);
        out.extend_from_slice(b",\"beef\":\"");
        push_base64(out, &beef);
        out.extend_from_slice(b"\"}");
        if let Some(c) = ctx {
            out.extend_from_slice(b",\"context\":{\"schema\":");
            serde_json::to_writer(&mut *out, &c.schema).expect("writing JSON to a Vec cannot fail");
            out.extend_from_slice(b",\"bytes\":\"");
            push_base64(out, &c.bytes);
            out.extend_from_slice(b"\"}");
        }
        out.push(b'}');
        Ok(())
    }

    fn outpoint_json(&self, o: &crate::store::Outpoint) -> Value {
        outpoint_json(&self.cfg, o)
    }

    // ---------------------------------------------------------------- open

    /// Handles `POST .../lookup/open`. `selection` is what the companion's
    /// `select(query)` returned (narrowed by its visibility for the partition) and
    /// `partition` the access partition the host's `authorize` placed the caller in.
    pub fn open(&self, body: &[u8], caller: &Caller, partition: &str, selection: &Value) -> Response {
        self.open_until(body, caller, partition, selection, None)
    }

    /// [`Provider::open`] that stops its snapshot scan, and stores nothing, once `cancel`
    /// is tripped (the client went away: BRC-193 §5, cancellation reaches the scan).
    pub fn open_until(&self, body: &[u8], caller: &Caller, partition: &str, selection: &Value, cancel: Option<&Arc<CancelToken>>) -> Response {
        match wire::parse_open(body) {
            Ok(open) => self.open_parsed(open, caller, partition, selection, cancel),
            Err(e) => Response::error(&e),
        }
    }

    /// [`Provider::open_until`] of an open the caller has already parsed (the Node binding
    /// parses once, for the host's `select` and `authorize`, and hands the result here).
    pub fn open_parsed(&self, open: wire::Open, caller: &Caller, partition: &str, selection: &Value, cancel: Option<&Arc<CancelToken>>) -> Response {
        match self.open_inner(open, caller, partition, selection, cancel.map(stop_check)) {
            Ok(bytes) => Response::ok(bytes),
            Err(e) => Response::error(&e),
        }
    }

    fn open_inner(&self, open: wire::Open, caller: &Caller, partition: &str, selection_json: &Value, stop: Option<StopCheck>) -> Result<Vec<u8>, WireError> {
        self.refuse_if_closing()?;
        let _slot = self.work.enter()?;
        let rules_digest = self
            .rules_digest(&open.service)
            .ok_or_else(|| err(ErrorCode::NotFound, "no such lookup service"))?;
        if let Some(required) = &open.required_rules_digest {
            if required.to_hex() != rules_digest {
                return Err(err(ErrorCode::Conflict, "requiredRulesDigest does not match the service's rules"));
            }
        }
        let selection = Selection::from_json(selection_json)
            .map_err(|e| err(ErrorCode::Invalid, format!("the service rejected the query: {e}")))?;
        if !access::valid_partition(partition) {
            return Err(err(ErrorCode::Unauthorized, "the host returned no usable access partition"));
        }
        // Expiries due at T are applied before W is captured (BRC-193 §8). Before the
        // admission lock: the expiry waits for its turn in the store's gate, and a prohibition
        // holds its turn while it takes that lock.
        let t = self.now();
        self.store.apply_expiries(t).map_err(store_err)?;
        // No prohibition or policy change falls between deriving the access, capturing W
        // and storing the session (prohibit.rs).
        let _admission = self.admission.read().unwrap();
        let access = self.policy.access_of(partition);
        let limits = Limits::effective(open.limits, self.cfg.limits);
        // The retry identity is the normalized Open (limits already clamped to the
        // profile, BRC-193 §2) together with the evaluated access scope.
        let mut h = Sha256::new();
        h.update(open.normalized_bytes());
        h.update(b"\0");
        h.update(access.as_bytes());
        let open_digest = hex::encode(h.finalize());
        let fence_digest = self.fence_digest(&open.service, caller, &open.request_id);
        let _slot = self.open_locks[fence_digest[0] as usize % self.open_locks.len()].lock().unwrap();

        if let Some(raw) = self.store.aux_get(&record::fence_key(&fence_digest)).map_err(store_err)? {
            let fence: FenceRecord = serde_json::from_slice(&raw)
                .map_err(|_| err(ErrorCode::Unavailable, "unreadable opening fence"))?;
            if fence.open_digest != open_digest {
                return Err(err(ErrorCode::Conflict, "this requestId was already used with other parameters"));
            }
            return self.replay_first_batch(&fence);
        }

        self.check_session_cap(caller)?;
        self.check_retention()?;
        let w = self.store.high_water();
        let expires_at = t
            .checked_add(self.cfg.session_seconds)
            .ok_or_else(|| err(ErrorCode::Unavailable, "session expiry overflows"))?;
        let replay_until = expires_at
            .checked_add(self.cfg.replay_seconds)
            .ok_or_else(|| err(ErrorCode::Unavailable, "replay deadline overflows"))?;
        let id = random_16();
        let mut rec = SessionRecord {
            id: hex::encode(id),
            service: open.service.clone(),
            principal: caller.principal.clone(),
            authenticated: caller.authenticated,
            access: access.clone(),
            partition: partition.to_string(),
            query: open.query.clone(),
            selection: Arc::new(selection_json.clone()),
            query_digest: open.query_digest().to_hex(),
            rules_digest,
            epoch: self.store.epoch(),
            t,
            w,
            expires_at,
            replay_until,
            limits,
            closed: false,
            revoked: false,
            reset: false,
            first: None,
        };
        let first_high_water = self.store.high_water();
        let view = self.new_view(&rec, Some(selection));
        // The key covers the selection's serialization, so the view's copy is equal, and
        // so is its compiled selection (this one, or an equal one's).
        rec.selection = view.selection_json.clone();
        let selection = view.selection.as_ref().ok_or_else(|| err(ErrorCode::Unavailable, "the selection no longer compiles"))?;
        let page = self.snapshot_batch(BatchOf { rec: &rec, view: &view, id: &id, sel: selection, limits }, None, first_high_water, stop)?;
        let first = page.body;
        rec.first = Some(FirstBatch { high_water: first_high_water, rows_sha256: hex::encode(page.rows_digest) });
        let fence = FenceRecord { open_digest, session: rec.id.clone() };
        // One atomic, flushed write: fence, session and (through `rec.first`) the first batch.
        self.store
            .aux_write(vec![
                (record::fence_key(&fence_digest), Some(serde_json::to_vec(&fence).expect("fence serializes"))),
                (record::session_key(&id), Some(serde_json::to_vec(&rec).expect("session serializes"))),
            ])
            .map_err(store_err)?;
        self.sessions.lock().unwrap().insert(Arc::new(LiveSession { rec: Mutex::new(Arc::new(rec)), id, view: view.into() }));
        Ok(first)
    }

    /// An identical retry: the first batch again, byte for byte, unless the session ended.
    fn replay_first_batch(&self, fence: &FenceRecord) -> Result<Vec<u8>, WireError> {
        let expired = || err(ErrorCode::Expired, "this open was closed or has expired; use a new requestId");
        let id = parse_session_id(&fence.session).ok_or_else(expired)?;
        let Some(session) = self.session(&id)? else { return Err(expired()) };
        let rec = session.record();
        if rec.ended() || self.now() >= rec.expires_at || rec.epoch != self.store.epoch() {
            return Err(expired());
        }
        let Some(first) = &rec.first else {
            // A record written before `FirstBatch`: its bytes were stored beside it.
            return match self.store.aux_get(&record::first_batch_key(&id)).map_err(store_err)? {
                Some(b) => Ok(b.to_vec()),
                None => Err(expired()),
            };
        };
        // The session is open and unexpired, so it holds the compaction horizon at or
        // below W and every row version of its first page is still retained.
        // The view holds the selection compiled; an open retry does not compile it again.
        let view = self.session_view(&session, &rec);
        let sel = view.selection.as_ref().ok_or_else(|| err(ErrorCode::Unavailable, "the stored selection no longer compiles"))?;
        let page = self.snapshot_batch(BatchOf { rec: &rec, view: &view, id: &id, sel, limits: rec.limits }, None, first.high_water, None)?;
        if hex::encode(page.rows_digest) != first.rows_sha256 {
            return Err(err(ErrorCode::Unavailable, "the first batch could not be reproduced"));
        }
        Ok(page.body)
    }

    /// While the store retains more than `maxRetainedBytes` (recorded Engine changes took it
    /// there), a new session would add promises the provider could keep only by retaining
    /// even more: it is refused as a capacity condition (BRC-193 §4: no deadline beyond what
    /// the provider can retain), never by discarding history earlier sessions were promised.
    /// Compaction brings the store back under once those promises pass.
    fn check_retention(&self) -> Result<(), WireError> {
        let Some((retained, limit)) = self.store.over_retained() else { return Ok(()) };
        self.retention_refusals.fetch_add(1, Ordering::Relaxed);
        let mut e = err(
            ErrorCode::Unavailable,
            format!("the provider retains {retained} bytes of history, over its budget of {limit}; new sessions wait until promised history can be compacted"),
        );
        e.retryable = true;
        e.retry_after_ms = Some(RETENTION_RETRY_MS);
        Err(e)
    }

    /// Opens refused by [`Provider::check_retention`] since this provider started.
    pub fn retention_refusals(&self) -> u64 {
        self.retention_refusals.load(Ordering::Relaxed)
    }

    fn check_session_cap(&self, caller: &Caller) -> Result<(), WireError> {
        let now = self.now();
        let active = self.sessions.lock().unwrap().active_count(&caller.principal, caller.authenticated, now);
        if active >= self.cfg.caps.max_sessions_per_principal {
            let mut e = err(ErrorCode::Unavailable, "too many open sessions for this principal");
            e.retryable = true;
            e.retry_after_ms = Some(5_000);
            return Err(e);
        }
        Ok(())
    }

    /// Hands `f` the sessions known to this process whose record satisfies `pred`, under
    /// the table lock, so a caller that only counts them or takes a few ids copies nothing
    /// else.
    fn sessions_where<R>(
        &self,
        pred: impl Fn(&SessionRecord) -> bool,
        f: impl FnOnce(&mut dyn Iterator<Item = &Arc<LiveSession>>) -> R,
    ) -> R {
        let table = self.sessions.lock().unwrap();
        let mut found = table.all().filter(|s| pred(&s.rec.lock().unwrap()));
        f(&mut found)
    }

    /// Finds a session in memory or loads it from the store.
    fn session(&self, id: &[u8; 16]) -> Result<Option<Arc<LiveSession>>, WireError> {
        if let Some(s) = self.sessions.lock().unwrap().get(id) {
            return Ok(Some(s));
        }
        let Some(raw) = self.store.aux_get(&record::session_key(id)).map_err(store_err)? else { return Ok(None) };
        let rec: SessionRecord = serde_json::from_slice(&raw).map_err(|_| err(ErrorCode::Unavailable, "unreadable session record"))?;
        let s = Arc::new(LiveSession { rec: Mutex::new(Arc::new(rec)), id: *id, view: Default::default() });
        Ok(Some(self.sessions.lock().unwrap().insert(s)))
    }

    // ---------------------------------------------------------------- batches

    fn snapshot_group(&self, rec: &SessionRecord, id: &[u8; 16], scope: &[u8], row: &SnapshotRow) -> Result<batch::RenderedGroup, WireError> {
        let mut h = Sha256::new();
        h.update(b"overlay-lookup-live/snapshot-group/1\0");
        h.update(id);
        h.update(&row.key);
        let mut gid = Vec::with_capacity(42);
        gid.extend_from_slice(b"s-");
        push_hex(&mut gid, &h.finalize()[..20]);
        let gid = String::from_utf8(gid).expect("hex is ASCII");
        let hint = row.context.as_ref().map_or(0, |c| c.bytes.len() * 4 / 3) + 1024;
        batch::single_group(&gid, rec.w, scope, "output", hint, |out| {
            self.push_output_payload(out, &row.outpoint, &row.beef, &row.context)
        })
    }

    /// Builds a snapshot batch continuing after `after` (BRC-193 §3). `high_water` is
    /// the watermark the envelope echoes (the current one, except when a first batch
    /// is reproduced).
    fn snapshot_batch(&self, of: BatchOf<'_>, after: Option<&[u8]>, high_water: u64, stop: Option<StopCheck>) -> Result<SnapshotPage, WireError> {
        let BatchOf { rec, view, id, sel, limits } = of;
        let frame = self.frame(rec, limits, view.scope_json.clone());
        let epoch = self.epoch_bytes();
        let boundary = Cursor { session: *id, epoch, position: Position::Live { through: rec.w } }
            .encode(&self.cursor_key)
            .expect("a live cursor always fits");
        let boundary_env = frame.envelope_len(&Tail {
            phase: Phase::Snapshot,
            cursor: &boundary,
            snapshot_complete: true,
            through: rec.w,
            high_water,
        });
        // A cursor is base64url, so it adds exactly its length to the envelope; the
        // tag of a row's cursor is computed only for the row the page ends on.
        let bare_env = frame.envelope_len(&Tail { phase: Phase::Snapshot, cursor: "", snapshot_complete: false, through: rec.w, high_water });
        let mut packer = Packer::new(&limits, &self.cfg.limits);
        let mut rows = self.store.snapshot_until(&rec.service, sel, rec.w, after, stop).map_err(store_err)?;
        let mut last_key: Option<Vec<u8>> = None;
        let mut taken = Sha256::new();
        let mut next = rows.next();
        let complete = loop {
            let Some(row) = next.take() else { break true };
            let row = row.map_err(store_err)?;
            if self.prohibited.is_prohibited(&rec.service, &row.outpoint) {
                return Err(self.prohibited_row(id));
            }
            let cursor_len = cursor::snapshot_cursor_len(row.key.len());
            if cursor_len > cursor::MAX_CURSOR_BYTES {
                return Err(err(ErrorCode::Unavailable, "a snapshot row key is too long for a cursor"));
            }
            let env = (bare_env + cursor_len).max(boundary_env);
            match packer.offer(env, self.snapshot_group(rec, id, &frame.scope_json, &row)?) {
                Offer::Taken => {
                    taken.update((row.key.len() as u32).to_be_bytes());
                    taken.update(&row.key);
                    last_key = Some(row.key);
                    next = rows.next();
                }
                Offer::Full => break false,
                Offer::Limited(e) => return Err(e),
            }
        };
        let cursor = if complete {
            boundary
        } else {
            Cursor { session: *id, epoch, position: Position::Snapshot { after: last_key } }
                .encode(&self.cursor_key)
                .expect("checked above")
        };
        let tail = Tail { phase: Phase::Snapshot, cursor: &cursor, snapshot_complete: complete, through: rec.w, high_water };
        let body = packer.finish(&frame, &tail)?;
        Ok(SnapshotPage { body, rows_digest: taken.finalize().into() })
    }

    /// Whether an observation would disclose a prohibited row (its output or its spend
    /// evidence; a withdraw discloses nothing new).
    fn discloses_prohibited(&self, service: &str, p: &Projected) -> bool {
        match p {
            Projected::Output { outpoint, .. } => self.prohibited.is_prohibited(service, outpoint),
            Projected::Spend { previous, .. } => self.prohibited.is_prohibited(service, previous),
            _ => false,
        }
    }

    fn live_group(&self, scope: &[u8], seq: u64, projected: &[Projected]) -> Result<batch::RenderedGroup, WireError> {
        let gid = format!("l-{seq}");
        let mut obs = Vec::with_capacity(projected.len());
        for (i, p) in projected.iter().enumerate() {
            let oid = format!("{gid}.{i}");
            let (kind, payload) = match p {
                Projected::Output { outpoint, beef, context, .. } => {
                    let mut payload = Vec::new();
                    self.push_output_payload(&mut payload, outpoint, beef, context)?;
                    obs.push(batch::observation_raw(&oid, scope, "output", &payload));
                    continue;
                }
                Projected::Spend { previous, spending_txid, beef } => (
                    "spend",
                    json!({"previous": self.outpoint_json(previous), "spendingTxid": hex::encode(spending_txid), "beef": self.blob_b64(beef)?}),
                ),
                Projected::Withdraw { outpoint, reason } => ("withdraw", json!({"outpoint": self.outpoint_json(outpoint), "reason": reason})),
                // BRC-192 §2; both strings are bounded at commit (MAX_INVALIDATION_TEXT_BYTES).
                Projected::Invalidated { context_id, reason } => {
                    ("assessment-invalidated", json!({"contextId": context_id, "reason": reason}))
                }
            };
            obs.push(batch::observation(&oid, scope, kind, &payload));
        }
        Ok(batch::group(&gid, seq, &obs))
    }

    /// Identifies what a live group renders to: sessions with the same scope and
    /// selection receive byte-identical live groups (their ids depend only on epoch
    /// and sequence, BRC-193 §8), so one rendering serves them all.
    fn view_key(&self, scope_json: &[u8], selection: &Value) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(scope_json);
        h.update(b"\0");
        h.update(serde_json::to_vec(selection).expect("a selection serializes"));
        h.finalize().into()
    }

    /// Builds a live batch after `through`. Returns the body and whether it holds
    /// no groups (a long poll then waits).
    fn live_batch(&self, of: BatchOf<'_>, through: u64) -> Result<(Ready, bool), WireError> {
        let BatchOf { rec, view, id, sel, limits } = of;
        if through < self.store.compacted_through() {
            return Err(err(ErrorCode::ResetRequired, "the log interval after this cursor is no longer retained"));
        }
        // Timers due by now are applied before completeness is claimed through the
        // current watermark (BRC-193 §8).
        self.store.apply_expiries(self.now()).map_err(store_err)?;
        let high_water = self.store.high_water();
        if through > high_water {
            return Err(err(ErrorCode::ResetRequired, "the cursor is ahead of this provider's log"));
        }
        // The session id rendered from the cursor's copy of it (the record's `id` is its
        // hex): a woken poll then never reads the record's id string, one cold cache
        // line fewer per poll in a wake pass.
        let mut hex_id = [0u8; 32];
        hex::encode_to_slice(id, &mut hex_id).expect("16 bytes are 32 hex digits");
        let session = std::str::from_utf8(&hex_id).expect("hex is ASCII");
        debug_assert_eq!(session, rec.id);
        let frame = Frame { session, ..self.frame(rec, limits, view.scope_json.clone()) };
        let epoch = self.epoch_bytes();
        // Cursor length does not depend on the sequence; `through` is bounded by
        // highWater, so rendering with highWater is an upper bound of the envelope.
        let bound_cursor = Cursor { session: *id, epoch, position: Position::Live { through: high_water } };
        let env = frame.envelope_len(&Tail { phase: Phase::Live, cursor: "", snapshot_complete: true, through: high_water, high_water })
            + bound_cursor.encoded_len();
        let mut packer = Packer::new(&limits, &self.cfg.limits);
        let mut examined = through;
        let mut count = 0usize;
        // Offers one examined group (None: irrelevant to the view); false once the batch is full.
        let mut offer = |rendered: CachedGroup, seq: u64, examined: &mut u64| -> Result<bool, WireError> {
            if let Some(g) = rendered {
                match packer.offer(env, g) {
                    Offer::Taken => {}
                    Offer::Full => return Ok(false),
                    Offer::Limited(e) => return Err(e),
                }
            }
            *examined = seq;
            Ok(true)
        };
        // Groups this view has rendered already (a woken poll's usual case when several
        // sessions share a view) need no log read.
        let mut full = false;
        while examined < high_water && count < MAX_GROUPS_EXAMINED_PER_READ {
            let Some(hit) = self.groups.get(&view.key, examined + 1) else { break };
            count += 1;
            if !offer(hit, examined + 1, &mut examined)? {
                full = true;
                break;
            }
        }
        if !full && examined < high_water && count < MAX_GROUPS_EXAMINED_PER_READ {
            for item in self.store.log_after(examined, high_water) {
                let (seq, group) = item.map_err(store_err)?;
                count += 1;
                let rendered = match self.groups.get(&view.key, seq) {
                    Some(hit) => hit,
                    None => {
                        let projected = self.store.project(&group, &rec.service, sel);
                        if projected.iter().any(|p| self.discloses_prohibited(&rec.service, p)) {
                            return Err(self.prohibited_row(id));
                        }
                        let r = if projected.is_empty() {
                            None
                        } else {
                            Some(Arc::new(self.live_group(&frame.scope_json, seq, &projected)?))
                        };
                        self.groups.put(view.key, seq, r.clone());
                        r
                    }
                };
                if !offer(rendered, seq, &mut examined)? || count >= MAX_GROUPS_EXAMINED_PER_READ {
                    break;
                }
            }
        }
        let cursor = Cursor { session: *id, epoch, position: Position::Live { through: examined } }
            .encode(&self.cursor_key)
            .expect("a live cursor always fits");
        let tail = Tail { phase: Phase::Live, cursor: &cursor, snapshot_complete: true, through: examined, high_water };
        let empty = packer.is_empty();
        Ok((packer.ready(&frame, &tail)?, empty))
    }

    // ---------------------------------------------------------------- read

    /// Looks up the session named by a read or close body, for the host's
    /// authorization callback: `(service, query)` when the caller owns it.
    pub fn describe(&self, session: &str, caller: &Caller) -> Option<(String, Value)> {
        let id = parse_session_id(session)?;
        let s = self.session(&id).ok()??;
        let r = s.record();
        (r.principal == caller.principal && r.authenticated == caller.authenticated).then(|| (r.service.clone(), r.query.clone()))
    }

    /// Checks everything a read needs before touching the log.
    fn read_context(&self, read: &wire::Read, caller: &Caller, partition: &str) -> Result<(Arc<LiveSession>, Arc<SessionRecord>, Cursor, Arc<SessionView>), WireError> {
        let (session, rec, cursor) = self.read_target(read, caller)?;
        if !self.access_unchanged(&rec, partition) {
            // Widened or narrowed access changes what the session may see: a new snapshot
            // under the current policy, never silently different rows (BRC-193 §5).
            let _ = self.end_sessions(&[session], End::Reset, Vec::new());
            return Err(err(ErrorCode::ResetRequired, "the access partition or its policy changed; open a new session"));
        }
        let view = self.session_view(&session, &rec);
        Ok((session, rec, cursor, view))
    }

    /// Whether a session opened with `rec` may still be served to a caller the host now
    /// places in `partition`: same partition, and the access derived for it unchanged.
    fn access_unchanged(&self, rec: &SessionRecord, partition: &str) -> bool {
        rec.partition == partition && self.policy.access_of(partition) == rec.access
    }

    /// The session and cursor a read names, with every check of [`Provider::read_context`]
    /// except the access scope's (whose failure ends the session, a write).
    fn read_target(&self, read: &wire::Read, caller: &Caller) -> Result<(Arc<LiveSession>, Arc<SessionRecord>, Cursor), WireError> {
        let reset = || err(ErrorCode::ResetRequired, "unknown session or cursor; open a new session");
        let cursor = Cursor::decode(&read.cursor, &self.cursor_key).ok_or_else(reset)?;
        let id = parse_session_id(&read.session).ok_or_else(reset)?;
        if cursor.session != id {
            return Err(reset());
        }
        let session = self.session(&id)?.ok_or_else(reset)?;
        let rec = session.record();
        // Another principal's session is indistinguishable from an unknown one.
        if rec.principal != caller.principal || rec.authenticated != caller.authenticated {
            return Err(reset());
        }
        if let Some(e) = ended_error(&rec) {
            return Err(e);
        }
        if cursor.epoch != self.epoch_bytes() || rec.epoch != self.store.epoch() {
            return Err(err(ErrorCode::ResetRequired, "the provider started a new epoch"));
        }
        let now = self.now();
        if now >= rec.expires_at || now >= rec.replay_until {
            return Err(err(ErrorCode::ResetRequired, "the session has expired"));
        }
        if self.rules_digest(&rec.service).as_deref() != Some(rec.rules_digest.as_str()) {
            return Err(err(ErrorCode::ResetRequired, "the service's rules changed"));
        }
        Ok((session, rec, cursor))
    }

    /// Builds the batch for a cursor. Callers hold a work slot.
    fn build(&self, rec: &SessionRecord, view: &SessionView, cursor: &Cursor, limits: Limits) -> Result<(Ready, bool), WireError> {
        self.build_until(rec, view, cursor, limits, None)
    }

    /// [`Provider::build`] whose snapshot scan ends once `stop` says so.
    fn build_until(&self, rec: &SessionRecord, view: &SessionView, cursor: &Cursor, limits: Limits, stop: Option<StopCheck>) -> Result<(Ready, bool), WireError> {
        let sel = view.selection()?;
        match &cursor.position {
            Position::Snapshot { after } => {
                let page = self.snapshot_batch(BatchOf { rec, view, id: &cursor.session, sel, limits }, after.as_deref(), self.store.high_water(), stop)?;
                Ok((page.body.into(), false))
            }
            Position::Live { through } => self.live_batch(BatchOf { rec, view, id: &cursor.session, sel, limits }, *through),
        }
    }

    /// The gate right before a batch is handed out: a session closed, revoked or
    /// expired in the meantime does not get a successful batch (BRC-193 §8).
    fn gate(&self, session: &LiveSession) -> Result<(), WireError> {
        let r = session.rec.lock().unwrap();
        if let Some(e) = ended_error(&r) {
            return Err(e);
        }
        if self.now() >= r.expires_at {
            return Err(err(ErrorCode::ResetRequired, "the session expired"));
        }
        Ok(())
    }

    /// Handles `POST .../lookup/read`, long-polling when the live log has nothing
    /// eligible (see `read_into`).
    pub async fn read(self: &Arc<Self>, body: Vec<u8>, caller: Caller, partition: String, cancel: Arc<CancelToken>) -> Response {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.read_into(body, caller, partition, cancel, Box::new(move |r| {
            let _ = tx.send(r);
        }))
        .await;
        rx.await.unwrap_or_else(|_| Response::error(&err(ErrorCode::Unavailable, "the provider closed")))
    }

    /// A caught-up read answered on the calling thread, or `None` when the read must
    /// take [`Provider::read_into`]. Taken only when the answer is cheap and writes
    /// nothing: the cursor is live at highWater (no group to examine, so the batch is
    /// an empty envelope), no timer is due (applying one is a flushed commit), the
    /// access scope is unchanged (a change ends the session, a write), and the read
    /// does not wait (waitMs 0). Everything else, errors included, goes the async way,
    /// so this path never blocks its caller on storage or a long build. It exists for
    /// the Node binding: a read that takes it is answered without two thread hops and
    /// a delivery callback, which is most of a caught-up read's latency.
    pub fn read_now(&self, body: &[u8], caller: &Caller, partition: &str) -> Option<Response> {
        self.read_now_parsed(&wire::parse_read(body).ok()?, caller, partition)
    }

    /// [`Provider::read_now`] of a read the caller has already parsed.
    pub fn read_now_parsed(&self, read: &wire::Read, caller: &Caller, partition: &str) -> Option<Response> {
        if self.refuse_if_closing().is_err() || self.store.expiry_due(self.now()) {
            return None;
        }
        let limits = Limits::effective(read.limits, self.cfg.limits);
        if limits.wait_ms != 0 {
            return None;
        }
        let (session, rec, cursor) = self.read_target(read, caller).ok()?;
        if !self.access_unchanged(&rec, partition) || !matches!(cursor.position, Position::Live { through } if through == self.store.high_water()) {
            return None;
        }
        let _slot = self.work.enter().ok()?;
        let view = self.session_view(&session, &rec);
        let (bytes, _) = self.build(&rec, &view, &cursor, limits).ok()?;
        Some(match self.gate(&session) {
            Ok(()) => Response::ok(bytes.into_vec()),
            Err(e) => Response::error(&e),
        })
    }

    /// A read whose response goes to `answer`. Returns once the read is answered or
    /// parked: a waiting poll is an entry in the parked table (src/session/park.rs),
    /// not a task. Store work runs on blocking threads.
    pub async fn read_into(self: &Arc<Self>, body: Vec<u8>, caller: Caller, partition: String, cancel: Arc<CancelToken>, answer: Answer) {
        match wire::parse_read(&body) {
            Ok(read) => self.read_parsed_into(read, caller, partition, cancel, answer).await,
            Err(e) => answer.reply(Response::error(&e)),
        }
    }

    /// [`Provider::read_into`] of a read the caller has already parsed.
    pub async fn read_parsed_into(self: &Arc<Self>, read: wire::Read, caller: Caller, partition: String, cancel: Arc<CancelToken>, answer: Answer) {
        let arrival = self.now_ms();
        if let Err(e) = self.refuse_if_closing() {
            return answer.reply(Response::error(&e));
        }
        let slot = match self.work.enter() {
            Ok(s) => s,
            Err(e) => return answer.reply(Response::error(&e)),
        };
        // Subscribed before the batch is built: a commit published after the build sends a
        // poll that was about to park back to be rebuilt (no lost wakeup).
        let mut rx = self.store.subscribe();
        rx.borrow_and_update();
        let this = self.clone();
        let stop = stop_check(&cancel);
        let first = tokio::task::spawn_blocking(move || -> Result<_, WireError> {
            let _slot = slot;
            let (session, rec, cursor, view) = this.read_context(&read, &caller, &partition)?;
            let limits = Limits::effective(read.limits, this.cfg.limits);
            let (bytes, empty) = this.build_until(&rec, &view, &cursor, limits, Some(stop))?;
            Ok((session, rec, view, cursor, limits, bytes, empty, caller))
        })
        .await;
        let (session, rec, view, cursor, limits, bytes, empty, caller) = match first {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => return answer.reply(Response::error(&e)),
            Err(_) => return answer.reply(Response::error(&err(ErrorCode::Unavailable, "internal failure"))),
        };
        if !empty || limits.wait_ms == 0 || !matches!(cursor.position, Position::Live { .. }) {
            return self.deliver(&session, bytes, answer);
        }
        let deadline_ms = (arrival + limits.wait_ms as u64).min(rec.expires_at.saturating_mul(1000));
        let guard = match self.waiters.enter(&caller.principal) {
            Ok(g) => g,
            Err(e) => return answer.reply(Response::error(&e)),
        };
        let mut entry = park::Entry {
            id: self.parked.new_id(),
            session,
            rec,
            view,
            cursor,
            limits,
            deadline_ms,
            cancel,
            answer,
            _guard: guard,
        };
        while let Some(back) = self.park(entry, &rx) {
            // Something was published since the build: rebuild before parking again.
            rx.borrow_and_update();
            let built = self.rebuild(&back.rec, &back.view, &back.cursor, back.limits).await;
            match self.answer_or_keep(back, built) {
                Some(still_empty) => entry = still_empty,
                None => return,
            }
        }
        self.run_injection_hook();
    }

    async fn rebuild(
        self: &Arc<Self>,
        rec: &Arc<SessionRecord>,
        view: &Arc<SessionView>,
        cursor: &Cursor,
        limits: Limits,
    ) -> Result<(Ready, bool), WireError> {
        let (this, rec, view, cursor) = (self.clone(), rec.clone(), view.clone(), cursor.clone());
        // This poll was admitted already: wait for a work slot rather than refuse it.
        let slot = self.work.wait().await;
        tokio::task::spawn_blocking(move || {
            let _slot = slot;
            this.build(&rec, &view, &cursor, limits)
        })
            .await
            .unwrap_or_else(|_| Err(err(ErrorCode::Unavailable, "internal failure")))
    }

    /// Hands a built batch to its receiver through the gate: a session that ended or
    /// expired since the batch was built gets the gate's refusal instead.
    fn deliver(&self, session: &LiveSession, body: Ready, answer: Answer) {
        match self.gate(session) {
            Ok(()) => answer.reply_ready(body),
            Err(e) => answer.reply(Response::error(&e)),
        }
    }

    fn run_injection_hook(&self) {
        let pending: Vec<_> = std::mem::take(&mut *self.hooks.after_waiter_registered.lock().unwrap());
        for changes in pending {
            let _ = self.store.commit(changes);
        }
    }

    // ---------------------------------------------------------------- close, revoke

    /// Handles `POST .../lookup/close`: always `closed: true` for a valid body,
    /// whether or not the session exists or belongs to the caller.
    pub fn close(&self, body: &[u8], caller: &Caller) -> Response {
        let close = match wire::parse_close(body) {
            Ok(c) => c,
            Err(e) => return Response::error(&e),
        };
        if let Some(id) = parse_session_id(&close.session) {
            if let Ok(Some(s)) = self.session(&id) {
                let r = s.record();
                if r.principal == caller.principal && r.authenticated == caller.authenticated && !r.closed {
                    if let Err(e) = self.end_sessions(&[s], End::Closed, Vec::new()) {
                        return Response::error(&e);
                    }
                }
            }
        }
        Response::ok(br#"{"version":1,"closed":true}"#.to_vec())
    }

    /// Ends `sessions` as `how` says, in one flushed write together with `extra` records:
    /// marked in memory first (the gate refuses them from then on), then written, then
    /// their waiting polls answered.
    fn end_sessions(&self, sessions: &[Arc<LiveSession>], how: End, extra: Vec<(Vec<u8>, Option<Vec<u8>>)>) -> Result<(), WireError> {
        let mut writes = extra;
        for s in sessions {
            let rec = {
                let mut r = s.rec.lock().unwrap();
                let changed = Arc::make_mut(&mut r);
                match how {
                    End::Closed => changed.closed = true,
                    End::Revoked => changed.revoked = true,
                    End::Reset => changed.reset = true,
                }
                r.clone()
            };
            self.sessions.lock().unwrap().deactivate(&rec.principal, rec.authenticated, rec.expires_at, &s.id);
            writes.push((record::session_key(&s.id), Some(serde_json::to_vec(&*rec).expect("serializes"))));
        }
        let res = if writes.is_empty() { Ok(()) } else { self.store.aux_write(writes).map_err(store_err) };
        for s in sessions {
            self.end_parked(&s.id);
        }
        res
    }

    /// Ends every session of `principal` with `unauthorized`, including polls that
    /// are already waiting. Returns how many sessions were ended.
    pub fn revoke(&self, principal: &str) -> Result<usize, WireError> {
        self.load_all_sessions()?;
        let mine = self.sessions.lock().unwrap().of_principal(principal);
        let targets: Vec<_> = mine.into_iter().filter(|s| !s.rec.lock().unwrap().revoked).collect();
        self.end_sessions(&targets, End::Revoked, Vec::new())?;
        Ok(targets.len())
    }

    /// Ends one session with `unauthorized` (the host's second authorization, right
    /// before serialization, denied it).
    pub fn revoke_session(&self, session: &str) -> Result<bool, WireError> {
        self.end_one(session, End::Revoked)
    }

    /// Ends one session with `reset-required` (the host's second authorization placed the
    /// caller in another partition).
    pub fn reset_session(&self, session: &str) -> Result<bool, WireError> {
        self.end_one(session, End::Reset)
    }

    fn end_one(&self, session: &str, how: End) -> Result<bool, WireError> {
        let Some(id) = parse_session_id(session) else { return Ok(false) };
        match self.session(&id)? {
            Some(s) => {
                self.end_sessions(&[s], how, Vec::new())?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// A change of the access policy (BRC-193 §5: widening or narrowing that changes results
    /// needs a new snapshot). With `partitions`, those partitions get a new generation; with
    /// `principals`, those principals' sessions end (the host may place them elsewhere now);
    /// with neither, the whole policy gets a new version. Every session whose access is no
    /// longer current ends with `reset-required` (waiting polls included), in the same
    /// flushed write as the new version or generations. Returns the sessions ended.
    ///
    /// It takes its place in the store's admission order (`ticket`, or one taken now): groups
    /// of changes made before it are published first, later ones after.
    pub fn change_policy(&self, ticket: Option<Ticket>, partitions: Option<Vec<String>>, principals: Option<Vec<String>>) -> Result<usize, WireError> {
        let _turn = self.exclusive_turn(ticket)?;
        for p in partitions.iter().flatten() {
            if !access::valid_partition(p) {
                return Err(err(ErrorCode::Invalid, "a partition is 1..=1024 bytes"));
            }
        }
        let _admission = self.admission.write().unwrap();
        self.load_all_sessions()?;
        let change = match (&partitions, &principals) {
            (None, Some(_)) => None,
            (p, _) => Some(self.policy.change(p.as_deref())),
        };
        let whole = partitions.is_none() && principals.is_none();
        let named = |r: &SessionRecord| {
            whole
                || partitions.as_ref().is_some_and(|ps| ps.contains(&r.partition))
                || principals.as_ref().is_some_and(|ps| ps.contains(&r.principal))
        };
        let targets: Vec<Arc<LiveSession>> = self.sessions_where(|r| !r.ended() && named(r), |found| found.cloned().collect());
        // One flushed write: the new version or generations and the ended sessions. The
        // sessions are refused from before it (end_sessions marks them first); opens wait
        // for the admission lock, so none derives the old access meanwhile.
        let writes = change.as_ref().map(|c| c.writes.clone()).unwrap_or_default();
        self.end_sessions(&targets, End::Reset, writes)?;
        if let Some(c) = change {
            self.policy.apply(c);
        }
        Ok(targets.len())
    }

    /// Names the access policy (part of every derived `scope.access`).
    pub fn set_access_policy(&self, policy: &str) {
        self.policy.set_policy(policy);
    }

    /// The `scope.access` a session of `partition` gets now.
    pub fn access_of(&self, partition: &str) -> String {
        self.policy.access_of(partition)
    }

    fn load_policy(&self) -> Result<(), WireError> {
        let mut records = Vec::new();
        for item in self.store.aux_scan_prefix(record::POLICY_PREFIX) {
            let (k, v) = item.map_err(store_err)?;
            records.push((k, v.to_vec()));
        }
        self.policy.load(records.into_iter());
        Ok(())
    }

    fn load_all_sessions(&self) -> Result<(), WireError> {
        for item in self.store.aux_scan_prefix(record::SESSION_PREFIX) {
            let (k, _) = item.map_err(store_err)?;
            if let Ok(id) = <[u8; 16]>::try_from(&k[record::SESSION_PREFIX.len()..]) {
                self.session(&id)?;
            }
        }
        Ok(())
    }

    // ---------------------------------------------------------------- upkeep

    /// The lowest sequence any retained session may still need: log groups and row
    /// versions at or below it can be compacted.
    pub fn compaction_horizon(&self) -> u64 {
        let now = self.now();
        let hw = self.store.high_water();
        let sessions = self.sessions.lock().unwrap();
        sessions
            .all()
            .filter_map(|s| {
                let r = s.rec.lock().unwrap();
                (!r.ended() && now < r.replay_until && r.epoch == self.store.epoch()).then_some(r.w)
            })
            .min()
            .unwrap_or(hw)
            .min(hw)
    }

    /// One bounded compaction pass. Sessions are all loaded first so the horizon
    /// respects sessions opened before a restart.
    pub fn compact(&self, max_items: usize) -> Result<bool, WireError> {
        self.load_all_sessions()?;
        let forgotten = self.forget_finished_sessions(max_items)?;
        let horizon = self.compaction_horizon();
        let more = self.store.compact_step(horizon, max_items).map_err(store_err)?;
        Ok(more || forgotten == max_items)
    }

    /// Deletes the records of sessions whose replay promise has passed (or that
    /// belong to an old epoch), at most `max` of them. Their opening fences stay:
    /// a repeated open still answers `expired` (BRC-193 §8).
    fn forget_finished_sessions(&self, max: usize) -> Result<usize, WireError> {
        let now = self.now();
        let epoch = self.store.epoch();
        let done: Vec<[u8; 16]> =
            self.sessions_where(|r| now >= r.replay_until || r.epoch != epoch, |found| found.map(|s| s.id).take(max).collect());
        if done.is_empty() {
            return Ok(0);
        }
        let mut deletes = Vec::with_capacity(done.len() * 2);
        for id in &done {
            deletes.push((record::session_key(id), None));
            deletes.push((record::first_batch_key(id), None));
        }
        self.store.aux_write(deletes).map_err(store_err)?;
        let mut sessions = self.sessions.lock().unwrap();
        for id in &done {
            sessions.remove(id);
        }
        Ok(done.len())
    }

    /// Distinct views (scope and selection) of the sessions held in memory: sessions of
    /// one view share its compiled selection and its rendered live groups.
    /// Counted from the sessions themselves (sessions loaded after a restart and not
    /// read since have no view yet).
    pub fn view_count(&self) -> usize {
        let table = self.sessions.lock().unwrap();
        let views: std::collections::HashSet<*const SessionView> =
            table.all().filter_map(|s| s.view.get().map(Arc::as_ptr)).collect();
        views.len()
    }

    pub fn session_count(&self) -> usize {
        let now = self.now();
        self.sessions_where(|r| !r.ended() && now < r.expires_at, |found| found.count())
    }
}
