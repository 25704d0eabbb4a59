//! The durable store: one sled database per data directory holding the live index (versioned
//! rows, attribute indexes, timers, evidence blobs), the retained change log, and the session
//! layer's own records (docs/design.md "Storage"; BRC-193 §3, §4, §8).
//!
//! Invariants (enforced in `commit.rs`):
//! - Every commit is one atomic sled batch, flushed before its sequence is published: `high_water`
//!   and `subscribe()` only ever report durable groups (BRC-193 §4 "Readers never see a sequence
//!   that is not durable").
//! - Sequences are consecutive from 1 within an epoch; a group with no effective change takes no
//!   sequence. Concurrent commits share one batch and one flush (group commit).
//! - A row version is visible in the snapshot at W iff `created <= W < removed` (removed = 0 means
//!   present); versions are never edited except to set `removed`, so a snapshot at W is immutable.
//! - Compaction never removes anything a reader positioned after the horizon could need.
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;

use sha2::{Digest, Sha256};

pub use crate::select::{AttrValue, Attributes};
use crate::select::Selection;

mod codec;
mod commit;
mod compact;
pub mod crash;
mod gate;
mod keys;
mod project;
mod scan;
mod timer;
mod versions;

pub use codec::{Invalidation, LogChange, LogGroup, NewVersion, OldVersion};
pub use gate::{Ticket, Turn};
pub use keys::VERSION_KEY_LEN;
pub use project::Projected;
pub use scan::{LogIter, SnapshotIter, SnapshotRow, StopCheck};
pub use versions::PresentVersion;

use commit::{Req, Stats};

pub type Txid = [u8; 32];

/// The schema version written into `meta`; a store with another version is refused.
/// 2: blob reference counts moved into the blob records (`keys` module docs).
/// 3: blob bytes keyed by the group that stored them, then the hash; rows and log records
///    carry that location ([`BlobRef`]).
pub const SCHEMA_VERSION: u32 = 3;
/// Bounds on names and payloads accepted by `commit` (nothing grows without bound).
pub const MAX_SERVICE_BYTES: usize = 256;
pub const MAX_TOPIC_BYTES: usize = 1024;
pub const MAX_CONTEXT_BYTES: usize = 64 * 1024;
pub const MAX_BEEF_BYTES: usize = 64 * 1024 * 1024;

/// Where a BEEF is stored: its sha256 and the sequence of the group that stored it first
/// (`keys` module docs). Two references to the same BEEF always carry the same `at`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct BlobRef {
    pub hash: [u8; 32],
    pub at: u64,
}

#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Outpoint {
    pub txid: Txid,
    pub output_index: u32,
}

/// BRC-192 output context: an application schema IRI and opaque bytes.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Context {
    pub schema: String,
    pub bytes: Vec<u8>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RemoveReason {
    /// The output was spent (Engine `outputSpent`); may carry spend evidence.
    Spent,
    /// The host evicted it (Engine `outputEvicted`).
    Evicted,
    /// The Engine no longer retains it (`outputNoLongerRetainedInHistory`).
    NotRetained,
    /// Its `expiresAt` passed (only produced by `apply_expiries`, but accepted from callers).
    Expired,
}

impl RemoveReason {
    /// The `withdraw` reason string for this removal (BRC-192 withdraw payload).
    pub fn as_withdraw_reason(self) -> &'static str {
        match self {
            RemoveReason::Spent => "spent",
            RemoveReason::Evicted => "evicted",
            RemoveReason::NotRetained => "removed",
            RemoveReason::Expired => "expired",
        }
    }
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SpendInput {
    pub spending_txid: Txid,
    /// BEEF of the spending transaction (spend evidence).
    pub beef: Vec<u8>,
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Change {
    /// Admit or replace the row (service, outpoint). Re-admitting an identical row is no change;
    /// any difference (topic, attributes, evidence, context, expiry) replaces the version.
    Admit {
        service: String,
        outpoint: Outpoint,
        topic: String,
        attributes: Attributes,
        beef: Vec<u8>,
        context: Option<Context>,
        expires_at: Option<u64>,
    },
    /// Remove the row if present (absent rows: no change). `spend` only with `Spent`.
    Remove { service: String, outpoint: Outpoint, reason: RemoveReason, spend: Option<SpendInput> },
    /// Replace only the evidence of a present row (a merkle proof arrived for it or an
    /// ancestor): same topic, attributes, context and expiry, new BEEF. An absent row or the
    /// same BEEF is no change, so a refresh can never admit a non-member.
    Refresh { service: String, outpoint: Outpoint, beef: Vec<u8> },
    /// A log-only record: every assessment made under the chain-view context `context_id` is
    /// invalid for every session of `service` (BRC-192 §2 `assessment-invalidated`, §3). Always
    /// an effective change. Invalidations must precede the row changes of their group, because
    /// a changed view is announced before anything reassessed under the new one (BRC-192 §3).
    Invalidate { service: String, context_id: String, reason: String },
}

/// One observation a log group can give a session, as a [`GroupBudget`] measures it: every
/// change at its widest (a row present after the change as its `output`, a removed row as its
/// `withdraw` and, for a spend with evidence, its `spend`), which is what a session whose
/// selection holds the row sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    Output { outpoint: Outpoint, beef_len: u64, context: Option<(String, u64)> },
    Withdraw { outpoint: Outpoint, reason: &'static str },
    Spend { previous: Outpoint, spending_txid: Txid, beef_len: u64 },
    Invalidated { context_id: String, reason: String },
}

/// The provider's own limits on the live groups it serves, installed by the layer that renders
/// them (src/session/budget.rs). With a budget installed, a group that no session could ever
/// be served is refused at commit ([`StoreError::TooLarge`]), and the groups the store makes
/// itself (expiries, [`Store::commit_divisible`]) are split to fit (BRC-193 §8: groups are
/// bounded at mutation admission).
pub trait GroupBudget: Send + Sync {
    /// Bytes one observation of `service` adds to its group, its id excluded.
    fn observation_bytes(&self, service: &str, obs: &Shape) -> u64;
    /// Whether a group at `seq` whose part for `service` has `observations` observations of
    /// `bytes` bytes (sums of `observation_bytes`) can be served to a session of that service.
    fn fits(&self, service: &str, seq: u64, observations: u64, bytes: u64) -> bool;
    /// The limits, for error messages.
    fn describe(&self) -> String;
}

/// What an admission ([`Store::admit`]) did besides committing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    /// The (last) sequence, `None` when nothing changed.
    pub sequence: Option<u64>,
    /// Groups committed although no session can ever be served them (`permanent-group`).
    pub unservable: u64,
    /// The store went (or stays) beyond `max_rows` or `max_retained_bytes` with it.
    pub over_cap: bool,
}

/// How [`Store::admit`] treats changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Admission {
    /// Changes that promise no atomicity between them (a starting state, evidence refreshes):
    /// split into consecutive groups that each fit the installed [`GroupBudget`].
    pub divisible: bool,
    /// Changes that already happened where the collection comes from (an Engine with no
    /// rollback): never refused for the budget or a cap, see [`Store::admit`].
    pub recorded: bool,
}

/// What the gate does to changes before they are committed: the provider installs its
/// prohibitions here ([`Store::set_change_filter`]), so that no entrance can admit a
/// prohibited row (BRC-193 §8).
pub trait ChangeFilter: Send + Sync {
    fn filter(&self, changes: Vec<Change>) -> Vec<Change>;
}

/// Wall-clock milliseconds as the provider counts them (`None`: no clock any more). With a clock
/// installed, due expiries are committed by the store itself (see [`Store::set_clock`]).
pub type Clock = Arc<dyn Fn() -> Option<u64> + Send + Sync>;

/// Meta record: the sequence of the latest group carrying an invalidation in this epoch.
pub(crate) const VIEW_SINCE: &str = "view-since";

/// Bound on `Invalidate` strings (BRC-192 §1: strings are at most 1024 encoded bytes).
pub const MAX_INVALIDATION_TEXT_BYTES: usize = 1024;

#[derive(Clone, Debug)]
pub struct StoreConfig {
    pub path: PathBuf,
    pub create: bool,
    /// Maximum present rows (all services); commits that would exceed it fail with `Limit`.
    pub max_rows: Option<u64>,
    /// Maximum retained bytes (log + row versions + index entries + blobs, as encoded).
    pub max_retained_bytes: Option<u64>,
}

impl StoreConfig {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        StoreConfig { path: path.into(), create: false, max_rows: None, max_retained_bytes: None }
    }
}

#[derive(Debug)]
pub enum StoreError {
    /// No store at the path and `create` was not set.
    Missing { path: PathBuf },
    /// The data directory exists but is not a readable store of this schema.
    Corrupt { path: PathBuf, detail: String },
    /// sled or file-system failure.
    Io { context: String, source: sled::Error },
    /// A configured cap would be exceeded; nothing was written.
    Limit { what: &'static str, limit: u64 },
    /// A change or argument is malformed; nothing was written.
    Invalid(String),
    /// Something a reader asked for was compacted (session layer: reset-required).
    Gone(String),
    /// The caller's stop check ended a scan (its request was cancelled).
    Cancelled,
    /// The store was closed.
    Closed,
    /// An earlier write failed; the store must be reopened before writing again.
    Failed(String),
    /// The group can never be served under the installed [`GroupBudget`]; nothing was written.
    TooLarge(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Missing { path } => write!(
                f,
                "no store at {}: open it with `create: true` to create a new one",
                path.display()
            ),
            StoreError::Corrupt { path, detail } => {
                write!(f, "store at {} is unreadable: {detail}", path.display())
            }
            StoreError::Io { context, source } => write!(f, "{context}: {source}"),
            StoreError::Limit { what, limit } => write!(f, "store limit reached: {what} (limit {limit})"),
            StoreError::Invalid(m) => write!(f, "invalid change: {m}"),
            StoreError::Gone(m) => write!(f, "no longer retained: {m}"),
            StoreError::Cancelled => write!(f, "the scan was cancelled"),
            StoreError::Closed => write!(f, "store is closed"),
            StoreError::Failed(m) => write!(f, "store failed earlier and must be reopened: {m}"),
            // The prefix names the BRC-193 §8 limit kind; js/provider/live.js reads it.
            StoreError::TooLarge(m) => write!(f, "permanent-group: {m}"),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl StoreError {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(sled::Error) -> StoreError {
        let context = context.into();
        move |source| StoreError::Io { context, source }
    }
}

/// Counters reported by [`Store::stats`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreStats {
    pub high_water: u64,
    pub compacted_through: u64,
    pub epoch: String,
    /// Present rows, all services.
    pub rows: u64,
    /// Retained log groups and their encoded bytes.
    pub log_groups: u64,
    pub log_bytes: u64,
    /// Retained row versions and index entries, encoded bytes.
    pub row_bytes: u64,
    /// Retained evidence blobs, bytes.
    pub blob_bytes: u64,
    /// What sled reports on disk.
    pub disk_bytes: u64,
    /// `log_bytes + row_bytes + blob_bytes`, what `max_retained_bytes` bounds.
    pub retained_bytes: u64,
    /// Since this process opened the store: groups recorded although no session can be
    /// served them ([`Store::admit`]).
    pub unservable_groups: u64,
    /// Changes holding a place in the admission gate's order, not yet through it.
    pub gate_waiting: u64,
}

/// State shared with the committer thread.
pub(crate) struct Shared {
    pub path: PathBuf,
    pub high_water: AtomicU64,
    pub compacted: AtomicU64,
    pub epoch: RwLock<String>,
    pub watch: tokio::sync::watch::Sender<u64>,
    pub failed: Mutex<Option<String>>,
    pub max_rows: Option<u64>,
    pub max_retained_bytes: Option<u64>,
    /// At or before the earliest expiry timer that is in the tree or whose removal is not yet
    /// published (Unix seconds; `u64::MAX`: none). The committer lowers it right after applying
    /// a batch that adds timers, before that batch is published, and raises it only after an
    /// expiry pass is published (`commit.rs`, `Committer::expire`).
    pub next_timer: AtomicU64,
    /// See [`GroupBudget`]; `None`: groups are not bounded.
    pub budget: RwLock<Option<Arc<dyn GroupBudget>>>,
    /// See [`Clock`]; `None`: expiries are applied only when asked (`apply_expiries`).
    pub clock: RwLock<Option<Clock>>,
    /// Wakes the expiry timer thread (`timer.rs`): a generation count and its condition.
    pub timer_kick: (Mutex<u64>, Condvar),
    pub timer_stop: AtomicBool,
    /// When the latest sequence was published (made visible to readers) in this process.
    pub published_at: Mutex<Option<std::time::Instant>>,
    /// Entries snapshot scans read ([`Store::scan_examined`]).
    pub scan_examined: Arc<AtomicU64>,
    /// See [`StoreStats`].
    pub unservable_groups: AtomicU64,
    /// Retained bytes of the applied state (`Stats::retained`), kept by the committer.
    pub retained: AtomicU64,
}

pub struct Store {
    shared: Arc<Shared>,
    secret: [u8; 32],
    db: RwLock<Option<sled::Db>>,
    tx: Mutex<Option<mpsc::Sender<Req>>>,
    committer: Mutex<Option<JoinHandle<()>>>,
    timer: Mutex<Option<JoinHandle<()>>>,
    /// The admission gate's order (`gate.rs`) and its filter: every change passes both.
    gate: gate::Gate,
    filter: RwLock<Option<Arc<dyn ChangeFilter>>>,
}

pub(crate) fn sha256(b: &[u8]) -> [u8; 32] {
    Sha256::digest(b).into()
}

fn corrupt(path: &Path, detail: impl Into<String>) -> StoreError {
    StoreError::Corrupt { path: path.to_path_buf(), detail: detail.into() }
}

/// sled leaves `conf` and `db` files in a directory it manages.
fn looks_like_sled(path: &Path) -> bool {
    path.join("conf").exists() || path.join("db").exists()
}

fn random<const N: usize>() -> Result<[u8; N], StoreError> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).map_err(|e| StoreError::Invalid(format!("no system randomness: {e}")))?;
    Ok(b)
}

fn new_epoch() -> Result<String, StoreError> {
    Ok(hex::encode(random::<16>()?))
}

struct Meta {
    epoch: String,
    secret: [u8; 32],
    high_water: u64,
    compacted: u64,
    stats: Stats,
}

fn read_u64(db: &sled::Db, path: &Path, name: &str) -> Result<u64, StoreError> {
    let v = db.get(keys::meta(name)).map_err(StoreError::io("reading store metadata"))?;
    let v = v.ok_or_else(|| corrupt(path, format!("metadata `{name}` is missing")))?;
    Ok(u64::from_be_bytes(
        v.as_ref().try_into().map_err(|_| corrupt(path, format!("metadata `{name}` is malformed")))?,
    ))
}

fn read_meta(db: &sled::Db, path: &Path) -> Result<Meta, StoreError> {
    let get = |n: &str| {
        db.get(keys::meta(n))
            .map_err(StoreError::io("reading store metadata"))?
            .ok_or_else(|| corrupt(path, format!("metadata `{n}` is missing")))
    };
    let schema = get("schema")?;
    if schema.as_ref() != SCHEMA_VERSION.to_be_bytes() {
        let detail = match <[u8; 4]>::try_from(schema.as_ref()) {
            Ok(b) => format!(
                "store schema {} is not supported (this version reads schema {SCHEMA_VERSION}); it was written by another version of overlay-lookup-live",
                u32::from_be_bytes(b)
            ),
            Err(_) => format!("malformed schema record (this version reads schema {SCHEMA_VERSION})"),
        };
        return Err(corrupt(path, detail));
    }
    let epoch = String::from_utf8(get("epoch")?.to_vec()).map_err(|_| corrupt(path, "epoch is not text"))?;
    if epoch.len() != 32 || !epoch.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)) {
        return Err(corrupt(path, "epoch is malformed"));
    }
    let secret: [u8; 32] = get("secret")?.as_ref().try_into().map_err(|_| corrupt(path, "secret is malformed"))?;
    let (high_water, stats) = commit::parse_state(&get("state")?).ok_or_else(|| corrupt(path, "state is malformed"))?;
    let compacted = read_u64(db, path, "compacted")?;
    if compacted > high_water {
        return Err(corrupt(path, "compactedThrough is above highWater"));
    }
    // The newest group must be present unless compacted: a cheap check against a torn store.
    if high_water > compacted
        && !db.contains_key(keys::log(high_water)).map_err(StoreError::io("reading the log"))?
    {
        return Err(corrupt(path, format!("log group {high_water} is missing")));
    }
    Ok(Meta { epoch, secret, high_water, compacted, stats })
}

fn is_lock_error(e: &sled::Error) -> bool {
    matches!(e, sled::Error::Io(io) if io.kind() == std::io::ErrorKind::WouldBlock
        || io.to_string().contains("could not acquire lock"))
}

/// How long `open` waits for the file lock. sled finishes background I/O of a dropped database
/// on its thread pool, so a path closed a moment ago in this process can stay locked briefly.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

fn open_sled(path: &Path) -> Result<sled::Db, StoreError> {
    let started = std::time::Instant::now();
    loop {
        // HighThroughput: fewer segment-cleaning rewrites (more disk for faster commits).
        match sled::Config::new().path(path).mode(sled::Mode::HighThroughput).open() {
            Ok(db) => return Ok(db),
            Err(e) if is_lock_error(&e) && started.elapsed() < LOCK_WAIT => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) if is_lock_error(&e) => {
                return Err(StoreError::Io {
                    context: format!("store at {} is open in another process or handle", path.display()),
                    source: e,
                })
            }
            Err(e @ (sled::Error::Corruption { .. } | sled::Error::Unsupported(_))) => {
                return Err(corrupt(path, e.to_string()))
            }
            Err(e) => {
                return Err(StoreError::Io { context: format!("opening store at {}", path.display()), source: e })
            }
        }
    }
}

fn init_meta(db: &sled::Db) -> Result<(), StoreError> {
    let mut b = sled::Batch::default();
    b.insert(keys::meta("schema"), SCHEMA_VERSION.to_be_bytes().to_vec());
    b.insert(keys::meta("epoch"), new_epoch()?.into_bytes());
    b.insert(keys::meta("secret"), random::<32>()?.to_vec());
    b.insert(keys::meta("state"), commit::state_record(0, &Stats::default()));
    b.insert(keys::meta("compacted"), 0u64.to_be_bytes().to_vec());
    db.apply_batch(b).map_err(StoreError::io("initializing the store"))?;
    db.flush().map_err(StoreError::io("flushing the new store"))?;
    Ok(())
}

impl Store {
    /// Open (or with `create`, create) the store at `cfg.path`. A missing store without
    /// `create` is `Missing`; an unreadable one is `Corrupt` and is never replaced.
    pub fn open(cfg: StoreConfig) -> Result<Arc<Store>, StoreError> {
        let path = cfg.path.clone();
        let existed = looks_like_sled(&path);
        if !existed && !cfg.create {
            return Err(StoreError::Missing { path });
        }
        if path.exists() && !path.is_dir() {
            return Err(corrupt(&path, "path is not a directory"));
        }
        // Never scatter a new store into a directory that holds something else.
        if !existed && path.is_dir() && std::fs::read_dir(&path).map(|mut d| d.next().is_some()).unwrap_or(true) {
            return Err(corrupt(&path, "directory is not empty and holds no store"));
        }
        let db = open_sled(&path)?;
        let has_schema = db.contains_key(keys::meta("schema")).map_err(StoreError::io("reading store metadata"))?;
        if !has_schema {
            // sled files without our metadata: a creation that never completed, or foreign data.
            let empty = db.iter().next().is_none();
            if !empty {
                return Err(corrupt(&path, "not an overlay-lookup-live store (no schema record)"));
            }
            if !cfg.create {
                return Err(StoreError::Missing { path });
            }
            init_meta(&db)?;
        }
        crash::crash_point("open");
        let meta = read_meta(&db, &path)?;
        let (watch, _) = tokio::sync::watch::channel(meta.high_water);
        let shared = Arc::new(Shared {
            path: path.clone(),
            high_water: AtomicU64::new(meta.high_water),
            compacted: AtomicU64::new(meta.compacted),
            epoch: RwLock::new(meta.epoch),
            watch,
            published_at: Mutex::new(None),
            failed: Mutex::new(None),
            max_rows: cfg.max_rows,
            max_retained_bytes: cfg.max_retained_bytes,
            next_timer: AtomicU64::new(commit::first_timer(&db)?),
            budget: RwLock::new(None),
            clock: RwLock::new(None),
            timer_kick: (Mutex::new(0), Condvar::new()),
            timer_stop: AtomicBool::new(false),
            scan_examined: Arc::new(AtomicU64::new(0)),
            unservable_groups: AtomicU64::new(0),
            retained: AtomicU64::new(meta.stats.retained()),
        });
        let (tx, rx) = mpsc::channel();
        let committer = commit::spawn(db.clone(), shared.clone(), meta.stats, rx)
            .map_err(|e| StoreError::Invalid(format!("cannot start the committer thread: {e}")))?;
        let store = Arc::new(Store {
            shared,
            secret: meta.secret,
            db: RwLock::new(Some(db)),
            tx: Mutex::new(Some(tx)),
            committer: Mutex::new(Some(committer)),
            timer: Mutex::new(None),
            gate: gate::Gate::default(),
            filter: RwLock::new(None),
        });
        let handle = timer::spawn(Arc::downgrade(&store), store.shared.clone())
            .map_err(|e| StoreError::Invalid(format!("cannot start the expiry timer thread: {e}")))?;
        *store.timer.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
        Ok(store)
    }

    /// Installs the provider's group limits (see [`GroupBudget`]).
    pub fn set_group_budget(&self, budget: Option<Arc<dyn GroupBudget>>) {
        *self.shared.budget.write().unwrap_or_else(|p| p.into_inner()) = budget;
    }

    /// Installs the provider's clock. From then on due expiries are committed promptly by a
    /// timer thread of the store (within about a second of their due time, with no request
    /// needed), and the committer applies every expiry due before it stages a later group,
    /// so an expiry's withdraw is numbered before any group committed after its due time
    /// (BRC-193 §8).
    pub fn set_clock(&self, clock: Option<Clock>) {
        *self.shared.clock.write().unwrap_or_else(|p| p.into_inner()) = clock;
        self.kick_timer();
    }

    /// Tells the timer thread to look at the clock and the earliest timer again (the
    /// clock moved, e.g. a test's offset).
    pub fn kick_timer(&self) {
        timer::kick(&self.shared);
    }

    /// Stop the committer (pending commits finish first), flush, and release the database so
    /// the path can be reopened in this process. Idempotent. Iterators still alive keep sled
    /// open until they are dropped.
    pub fn close(&self) -> Result<(), StoreError> {
        // Changes still waiting for their turn are refused (`Closed`), so none waits forever
        // for a ticket ahead of it that will never be used.
        self.gate.close();
        // The timer first: it commits through the committer, which is still running.
        self.shared.timer_stop.store(true, Ordering::SeqCst);
        timer::kick(&self.shared);
        let timer = self.timer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = timer {
            // The timer thread may itself drop the last handle of the store (and run this).
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(tx) = tx {
            let _ = tx.send(Req::Shutdown);
        }
        let handle = self.committer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
        let db = self.db.write().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(db) = db {
            db.flush().map_err(StoreError::io("flushing on close"))?;
        }
        Ok(())
    }

    pub(crate) fn db(&self) -> Result<sled::Db, StoreError> {
        self.db.read().unwrap_or_else(|p| p.into_inner()).clone().ok_or(StoreError::Closed)
    }

    fn request<T>(&self, make: impl FnOnce(mpsc::SyncSender<Result<T, StoreError>>) -> Req) -> Result<T, StoreError> {
        self.send(make)?.recv().map_err(|_| StoreError::Closed)?
    }

    /// Hands a request to the committer (which takes them in the order they are sent); the
    /// receiver gets its answer.
    fn send<T>(&self, make: impl FnOnce(mpsc::SyncSender<Result<T, StoreError>>) -> Req) -> Result<mpsc::Receiver<Result<T, StoreError>>, StoreError> {
        if let Some(f) = self.shared.failed.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return Err(StoreError::Failed(f));
        }
        let (reply, wait) = mpsc::sync_channel(1);
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        let tx = tx.as_ref().ok_or(StoreError::Closed)?;
        tx.send(make(reply)).map_err(|_| StoreError::Closed)?;
        Ok(wait)
    }

    /// The store's epoch: 32 lowercase hex digits, kept across restarts.
    pub fn epoch(&self) -> String {
        self.shared.epoch.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The epoch's first 16 bytes (an epoch is 32 hex digits; shorter ones are zero-padded),
    /// without copying the string: cursors carry it and every read checks it.
    pub fn epoch_bytes(&self) -> [u8; 16] {
        let epoch = self.shared.epoch.read().unwrap_or_else(|p| p.into_inner());
        let mut b = [0u8; 16];
        let digits = epoch.len().min(32) & !1;
        if hex::decode_to_slice(&epoch.as_bytes()[..digits], &mut b[..digits / 2]).is_err() {
            b = [0u8; 16];
        }
        b
    }

    /// A random 32-byte secret created with the store (for cursor MACs).
    pub fn secret(&self) -> [u8; 32] {
        self.secret
    }

    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The highest durable, published sequence (0 = empty log).
    pub fn high_water(&self) -> u64 {
        self.shared.high_water.load(Ordering::Acquire)
    }

    /// A receiver that changes after each publish (its value is the new highWater). Subscribe
    /// first, then re-read, then wait: no lost wakeups (BRC-193 §4).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.watch.subscribe()
    }

    /// Installs what the gate does to every change before it is committed (see
    /// [`ChangeFilter`]).
    pub fn set_change_filter(&self, filter: Option<Arc<dyn ChangeFilter>>) {
        *self.filter.write().unwrap_or_else(|p| p.into_inner()) = filter;
    }

    fn clock_seconds(&self) -> Option<u64> {
        let clock = self.shared.clock.read().unwrap_or_else(|p| p.into_inner()).clone()?;
        clock().map(|ms| ms / 1000)
    }

    /// A place in the admission order, taken when the host makes a change whose content is
    /// known only later (docs/design.md "Admission gate"). It must be used ([`Store::admit`],
    /// [`Store::turn`]) or given up ([`Store::cancel`]): every later change waits for it.
    pub fn reserve(&self) -> Ticket {
        self.gate.reserve(self.clock_seconds())
    }

    /// Puts `first` (or a new ticket) right before `then` in the admission order: a submit
    /// that removes an output another submit admits lands after that admission.
    pub fn order_before(&self, first: Option<Ticket>, then: Ticket) -> Ticket {
        self.gate.order_before(first, then, self.clock_seconds())
    }

    /// Resolves once `ticket` is first in the admission order, without holding a thread
    /// meanwhile: async callers await this before taking the turn on a blocking thread.
    pub async fn until_turn(&self, ticket: Ticket) -> Result<(), StoreError> {
        let r = self.gate.until_head(ticket).await;
        if r.is_err() {
            self.gate.leave(ticket);
        }
        r
    }

    /// Gives up a ticket: the changes behind it go on.
    pub fn cancel(&self, ticket: Ticket) {
        self.gate.leave(ticket);
    }

    /// Waits until `ticket` is first in the admission order and holds that place: nothing
    /// made later is committed until the turn is dropped. `Closed` when the store closes.
    pub fn turn(&self, ticket: Ticket) -> Result<Turn<'_>, StoreError> {
        self.gate.turn(ticket)
    }

    /// The admission gate: the one entrance through which changes reach the log
    /// (docs/design.md "Admission gate"). In the order of their tickets (`None`: a ticket
    /// taken now), it applies the installed [`ChangeFilter`] (prohibitions), validates, and
    /// hands the changes to the committer, which bounds groups, accounts retention, assigns
    /// sequences and publishes after the flush. Blocks until the changes are durable and
    /// published; on any error the ticket is given up and nothing of the changes is written.
    ///
    /// `how.recorded`: the changes already happened in an Engine that has no rollback, so
    /// they are never refused for the budget or a cap (a group no session can be served is
    /// committed as `permanent-group`, BRC-193 §8; the store may go beyond `max_rows` and
    /// `max_retained_bytes`, noted in [`Recorded::over_cap`]), and no retained history is
    /// discarded for them. Otherwise a group beyond the budget (`TooLarge`) or a cap
    /// (`Limit`) is refused.
    pub fn admit(&self, ticket: Option<Ticket>, changes: Vec<Change>, how: Admission) -> Result<Recorded, StoreError> {
        let ticket = ticket.unwrap_or_else(|| self.reserve());
        let turn = self.turn(ticket)?;
        let (wait, notes) = self.send_admission(&turn, changes, how)?;
        // The committer takes requests in the order they are sent: the next ticket may go.
        drop(turn);
        Self::answer(wait, notes)
    }

    /// [`Store::admit`] by the holder of the current turn, which it keeps (a prohibition
    /// commits its withdrawals inside its own turn).
    pub fn admit_in_turn(&self, turn: &Turn<'_>, changes: Vec<Change>, how: Admission) -> Result<Recorded, StoreError> {
        let (wait, notes) = self.send_admission(turn, changes, how)?;
        Self::answer(wait, notes)
    }

    /// Waits, holding `turn`, until everything admitted before it is durable and published.
    pub fn sync(&self, _turn: &Turn<'_>) -> Result<(), StoreError> {
        self.request(|reply| Req::Sync { reply })
    }

    fn filtered(&self, changes: Vec<Change>) -> Vec<Change> {
        match self.filter.read().unwrap_or_else(|p| p.into_inner()).clone() {
            Some(f) => f.filter(changes),
            None => changes,
        }
    }

    #[allow(clippy::type_complexity)]
    fn send_admission(
        &self,
        turn: &Turn<'_>,
        changes: Vec<Change>,
        how: Admission,
    ) -> Result<(mpsc::Receiver<Result<Option<u64>, StoreError>>, Arc<Mutex<Recorded>>), StoreError> {
        let changes = self.filtered(changes);
        commit::validate(&changes)?;
        let notes = Arc::new(Mutex::new(Recorded::default()));
        let mode = if how.recorded { commit::Mode::Record(notes.clone()) } else { commit::Mode::Refuse };
        let due_by = turn.at();
        let wait = self.send(|reply| {
            if how.divisible {
                Req::CommitDivisible { changes, mode, due_by, reply }
            } else {
                Req::Commit { changes, mode, due_by, reply }
            }
        })?;
        Ok((wait, notes))
    }

    fn answer(wait: mpsc::Receiver<Result<Option<u64>, StoreError>>, notes: Arc<Mutex<Recorded>>) -> Result<Recorded, StoreError> {
        let sequence = wait.recv().map_err(|_| StoreError::Closed)??;
        let mut r = notes.lock().unwrap_or_else(|p| p.into_inner()).clone();
        r.sequence = sequence;
        Ok(r)
    }

    /// One indivisible group through the gate ([`Store::admit`]), refused beyond the budget or
    /// a cap. Returns its sequence, or `None` when nothing changed.
    pub fn commit(&self, changes: Vec<Change>) -> Result<Option<u64>, StoreError> {
        self.admit(None, changes, Admission::default()).map(|r| r.sequence)
    }

    /// One recorded group through the gate ([`Store::admit`] with `recorded`).
    pub fn commit_recorded(&self, changes: Vec<Change>) -> Result<Recorded, StoreError> {
        self.admit(None, changes, Admission { divisible: false, recorded: true })
    }

    /// Divisible changes through the gate ([`Store::admit`] with `divisible`): all of them are
    /// written in one atomic batch and published together. A single change that cannot fit
    /// fails the whole call with [`StoreError::TooLarge`], and nothing is written.
    pub fn commit_divisible(&self, changes: Vec<Change>) -> Result<Option<u64>, StoreError> {
        self.admit(None, changes, Admission { divisible: true, recorded: false }).map(|r| r.sequence)
    }

    /// Recorded divisible changes ([`Store::admit`]): a single change no group can carry is
    /// committed as its own unservable group instead of failing the call.
    pub fn commit_divisible_recorded(&self, changes: Vec<Change>) -> Result<Recorded, StoreError> {
        self.admit(None, changes, Admission { divisible: true, recorded: true })
    }

    /// `max_retained_bytes`: only recorded changes take the store beyond it; while it is,
    /// the session layer refuses new opens (503) instead of discarding history it promised
    /// (BRC-193 §4), until compaction removes what no promise covers.
    pub fn max_retained_bytes(&self) -> Option<u64> {
        self.shared.max_retained_bytes
    }

    /// Retained bytes of the applied state (log, row versions, evidence).
    pub fn retained_bytes(&self) -> u64 {
        self.shared.retained.load(Ordering::Acquire)
    }

    /// `(retained, limit)` when over the budget (see [`Store::max_retained_bytes`]).
    pub fn over_retained(&self) -> Option<(u64, u64)> {
        let limit = self.shared.max_retained_bytes?;
        let retained = self.retained_bytes();
        (retained > limit).then_some((retained, limit))
    }

    /// Whether a row's timer is due by `now`, so that [`Store::apply_expiries`] would commit.
    /// `next_timer` covers every published group.
    pub fn expiry_due(&self, now: u64) -> bool {
        self.shared.next_timer.load(Ordering::Acquire) <= now
    }

    /// Withdraw every row with `expires_at <= now`, ordered by (expiresAt, service, outpoint),
    /// reason `expired` (BRC-193 §8): one group, or consecutive groups that each fit the
    /// installed [`GroupBudget`]. Returns the last sequence; `None` if none were due.
    pub fn apply_expiries(&self, now: u64) -> Result<Option<u64>, StoreError> {
        // Fast path, taken by nearly every read: when the earliest timer is not due, there is
        // nothing to commit, so the committer is not asked (a round trip to it would also end
        // its current group-commit batch early).
        if !self.expiry_due(now) {
            return Ok(None);
        }
        // Through the gate's order: an expiry due after a change was made lands after it.
        let turn = self.turn(self.gate.reserve(Some(now)))?;
        let wait = self.send(|reply| Req::Expire { now, reply })?;
        drop(turn);
        wait.recv().map_err(|_| StoreError::Closed)?
    }

    /// Whether the service ever had a row in this epoch (backfill decision).
    pub fn service_has_rows(&self, service: &str) -> Result<bool, StoreError> {
        let k = keys::service_prefix(keys::SERVICE, service);
        self.db()?.contains_key(k).map_err(StoreError::io("reading service marker"))
    }

    /// Rows of `service` selected by `sel` in the immutable snapshot at `w`, in the selection's
    /// order, strictly after `after_key` (a [`SnapshotRow::key`] from an earlier scan with the
    /// same service, selection and `w`).
    pub fn snapshot<'a>(
        &'a self,
        service: &str,
        sel: &Selection,
        w: u64,
        after_key: Option<&[u8]>,
    ) -> Result<scan::SnapshotIter<'a>, StoreError> {
        self.snapshot_until(service, sel, w, after_key, None)
    }

    /// [`Store::snapshot`] that ends with [`StoreError::Cancelled`] as soon as `stop` returns
    /// true (it is asked before every entry the scan reads).
    pub fn snapshot_until<'a>(
        &'a self,
        service: &str,
        sel: &Selection,
        w: u64,
        after_key: Option<&[u8]>,
        stop: Option<scan::StopCheck>,
    ) -> Result<scan::SnapshotIter<'a>, StoreError> {
        if w > self.high_water() {
            return Err(StoreError::Invalid(format!("snapshot at {w} is above highWater")));
        }
        // Versions removed at or below compactedThrough are gone: older snapshots are incomplete.
        if w < self.compacted_through() {
            return Err(StoreError::Gone(format!("snapshot at {w} is below compactedThrough")));
        }
        let watch = scan::Watch { stop, examined: self.shared.scan_examined.clone() };
        scan::SnapshotIter::new(self.db()?, service, sel, w, after_key, watch)
    }

    /// Entries snapshot scans of this process have read (index entries and row versions):
    /// a count of work, for tests and benchmarks.
    pub fn scan_examined(&self) -> u64 {
        self.shared.scan_examined.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Log groups with `after < seq <= upto`, ascending. `Gone` if part of that range was
    /// compacted.
    pub fn log_after(&self, after: u64, upto: u64) -> scan::LogIter {
        let upto = upto.min(self.high_water());
        if after < self.compacted_through() {
            return scan::LogIter::failed(StoreError::Gone(format!(
                "log through {} was compacted (asked from {after})",
                self.compacted_through()
            )));
        }
        match self.db() {
            Ok(db) => scan::LogIter::new(db, after, upto),
            Err(e) => scan::LogIter::failed(e),
        }
    }

    /// The observations `group` produces for a session on (service, selection).
    pub fn project(&self, group: &LogGroup, service: &str, sel: &Selection) -> Vec<Projected> {
        project::project(group, service, sel)
    }

    /// Evidence bytes where a row version or log record says they are.
    pub fn blob_at(&self, blob: &BlobRef) -> Result<Option<sled::IVec>, StoreError> {
        self.db()?.get(keys::blob(blob)).map_err(StoreError::io("reading a blob"))
    }

    /// Evidence bytes by sha256 alone: one more read than [`Store::blob_at`], to find them.
    pub fn blob(&self, hash: &[u8; 32]) -> Result<Option<sled::IVec>, StoreError> {
        let db = self.db()?;
        let Some(rec) = db.get(keys::blob_ref(hash)).map_err(StoreError::io("reading a blob"))? else { return Ok(None) };
        let at = commit::blob_record_at(&rec).ok_or_else(|| corrupt(self.path(), "malformed blob record"))?;
        match self.blob_at(&BlobRef { hash: *hash, at })? {
            Some(b) => Ok(Some(b)),
            None => Err(corrupt(self.path(), "a blob's bytes are missing")),
        }
    }

    /// The sequence of the latest committed group carrying an invalidation in this epoch, 0 if
    /// none: the chain view current now began with that group (docs/chain-events.md).
    pub fn view_since(&self) -> Result<u64, StoreError> {
        match self.db()?.get(keys::meta(VIEW_SINCE)).map_err(StoreError::io("reading store metadata"))? {
            None => Ok(0),
            Some(v) => Ok(u64::from_be_bytes(
                v.as_ref().try_into().map_err(|_| corrupt(self.path(), "view-since is malformed"))?,
            )),
        }
    }

    pub fn compacted_through(&self) -> u64 {
        self.shared.compacted.load(Ordering::Acquire)
    }

    /// Delete log groups with seq <= horizon, the row versions they removed, and blobs nobody
    /// references any more; at most about `max_items` deletions per call. Returns whether more
    /// remains below the horizon. The horizon is clamped to highWater. The session layer picks
    /// `horizon <= min(W of every session still reading its snapshot, through of every session
    /// whose replayUntil has not passed)`; afterwards snapshots below the horizon and log reads
    /// from below it fail with `Gone` (reset-required), never with missing data.
    pub fn compact_step(&self, horizon: u64, max_items: usize) -> Result<bool, StoreError> {
        self.request(|reply| Req::Compact { horizon, max_items: max_items.max(1), reply })
    }

    /// The session layer's records; keys are namespaced internally (any bytes are fine).
    pub fn aux_get(&self, key: &[u8]) -> Result<Option<sled::IVec>, StoreError> {
        self.db()?.get(keys::aux(key)).map_err(StoreError::io("reading a session record"))
    }

    /// Atomically put (Some) or delete (None) session records; durable before returning.
    pub fn aux_write(&self, puts: Vec<(Vec<u8>, Option<Vec<u8>>)>) -> Result<(), StoreError> {
        let db = self.db()?;
        let mut b = sled::Batch::default();
        for (k, v) in puts {
            match v {
                Some(v) => b.insert(keys::aux(&k), v),
                None => b.remove(keys::aux(&k)),
            }
        }
        db.apply_batch(b).map_err(StoreError::io("writing session records"))?;
        db.flush().map_err(StoreError::io("flushing session records"))?;
        Ok(())
    }

    /// Session records whose key starts with `prefix`, ascending; keys without the namespace.
    pub fn aux_scan_prefix(
        &self,
        prefix: &[u8],
    ) -> impl Iterator<Item = Result<(Vec<u8>, sled::IVec), StoreError>> + 'static {
        let it = match self.db() {
            Ok(db) => Ok(db.scan_prefix(keys::aux(prefix))),
            Err(e) => Err(e),
        };
        let (ok, err) = match it {
            Ok(i) => (Some(i), None),
            Err(e) => (None, Some(e)),
        };
        err.map(Err).into_iter().chain(ok.into_iter().flatten().map(|r| {
            r.map(|(k, v)| (k[1..].to_vec(), v)).map_err(StoreError::io("scanning session records"))
        }))
    }

    /// Deliberate reset: a new epoch with an empty log and no rows (session records are kept;
    /// the secret is kept). Returns the new epoch.
    pub fn reset_epoch(&self) -> Result<String, StoreError> {
        self.reset_epoch_with(None, Vec::new()).map(|(epoch, _)| epoch)
    }

    /// A new epoch whose first group is `first`, committed in the same atomic write as the
    /// reset: readers see either the old epoch or the new one with that group, never the new
    /// epoch empty. Returns the new epoch and the group's sequence (`None` if it changed
    /// nothing). On error nothing was reset.
    /// It passes the gate like any change: in its ticket's order (`None`: taken now) and
    /// filtered, so a re-seeded epoch brings no prohibited row back.
    pub fn reset_epoch_with(&self, ticket: Option<Ticket>, first: Vec<Change>) -> Result<(String, Option<u64>), StoreError> {
        let turn = self.turn(ticket.unwrap_or_else(|| self.reserve()))?;
        let first = self.filtered(first);
        commit::validate(&first)?;
        let wait = self.send(|reply| Req::Reset { first, reply })?;
        drop(turn);
        wait.recv().map_err(|_| StoreError::Closed)?
    }

    /// Time since a commit of this process last became durable and visible to readers
    /// (`None` before the first). Together with the caller's own clock it dates the
    /// publication, from which wake latency is measured (bench/sections/waiters.js).
    pub fn published_ago(&self) -> Option<std::time::Duration> {
        self.shared.published_at.lock().unwrap_or_else(|p| p.into_inner()).map(|t| t.elapsed())
    }

    pub fn stats(&self) -> Result<StoreStats, StoreError> {
        let db = self.db()?;
        let (_, s) = commit::parse_state(
            &db.get(keys::meta("state"))
                .map_err(StoreError::io("reading stats"))?
                .ok_or_else(|| corrupt(self.path(), "state missing"))?,
        )
        .ok_or_else(|| corrupt(self.path(), "state malformed"))?;
        Ok(StoreStats {
            high_water: self.high_water(),
            compacted_through: self.compacted_through(),
            epoch: self.epoch(),
            rows: s.live_rows,
            log_groups: s.log_groups,
            log_bytes: s.log_bytes,
            row_bytes: s.row_bytes,
            blob_bytes: s.blob_bytes,
            disk_bytes: db.size_on_disk().map_err(StoreError::io("measuring disk use"))?,
            retained_bytes: s.retained(),
            unservable_groups: self.shared.unservable_groups.load(Ordering::Relaxed),
            gate_waiting: self.gate.waiting() as u64,
        })
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[cfg(test)]
mod tests {
    /// The session layer shares the store across threads and moves iterators into blocking tasks.
    #[test]
    fn store_and_iterators_are_thread_safe() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<super::Store>();
        send::<super::SnapshotIter<'static>>();
        send::<super::LogIter>();
        send_sync::<super::StoreError>();
    }
}
