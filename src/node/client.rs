//! napi glue for the client checkpoint store (`src/client`). Converts types and
//! errors only: every rule lives in `crate::client`.
//!
//! Errors carry the BRC-192 §6 code (`invalid`, `conflict`,
//! `equivocation`, `limited`, `reset-required`, `unsupported`, `unavailable`).
//! U64 protocol values (through, highWater, expiresAt, replayUntil, sequence) are
//! decimal strings, as on the wire; generations and revisions are numbers.

use std::sync::{Arc, Condvar, Mutex, RwLock};

use napi::bindgen_prelude::{AsyncTask, Buffer};
use napi::{Env, Task};
use napi_derive::napi;
use serde_json::{json, Value};

use crate::client::{self, ClientError, CommitOptions, SourceKey};
use crate::client::chain::Finality;
use crate::client::journal::{Anchor, Placement};
use crate::client::reconcile::{Received, ReconcilerConfig, StepOutcome, VerificationResult, VerificationStatus};
use crate::bitcoin::tx::Hash32;

/// Client errors keep their code (src/node/error.rs; napi 3 class methods only throw
/// `Status`-coded errors, so the fields travel in the message).
fn err(e: ClientError) -> napi::Error {
    super::error::status_error(e)
}

fn invalid(m: impl Into<String>) -> napi::Error {
    err(ClientError::invalid(m))
}

/// A source (session branch): BRC-192 Scope minus chain, rules, access and epoch, which
/// belong to a generation of it (BRC-193 §5).
#[napi(object, js_name = "SourceKey")]
pub struct JsSourceKey {
    pub provider: String,
    pub service: String,
    pub query_digest: String,
}

fn key(v: JsSourceKey) -> napi::Result<SourceKey> {
    let k = SourceKey { provider: v.provider, service: v.service, query_digest: v.query_digest };
    k.validate().map_err(err)?;
    Ok(k)
}

fn membership(m: &str) -> napi::Result<client::Membership> {
    match m {
        "claims" => Ok(client::Membership::Claims),
        "verified" => Ok(client::Membership::Verified),
        "manual" => Ok(client::Membership::Manual),
        other => Err(invalid(format!("membership must be claims, verified or manual, not {other:?}"))),
    }
}

fn generation(g: i64) -> napi::Result<u64> {
    u64::try_from(g).map_err(|_| invalid("generation must be a non-negative integer"))
}

#[napi(object)]
pub struct CommitBatchOptions {
    /// The maxBytes the read requested (the profile maximum, 4 MiB, applies too).
    pub max_bytes: Option<u32>,
    pub max_observations: Option<u32>,
    /// When the groups enter source membership: `claims` (on receipt, the default),
    /// `verified` (when their evidence has verified) or `manual` (at `markVerified`).
    pub membership: Option<String>,
    /// For an open response: the label whose pending open request id is consumed.
    pub open_label: Option<String>,
}

/// Durable checkpoint store of the lookup-live client (BRC-193 §4, §9).
#[napi(js_name = "CheckpointStore")]
pub struct JsCheckpointStore {
    inner: Arc<Slot>,
}

/// The open store, shared with the writes running on the libuv pool (`WriteTask`).
///
/// Invariant: a JS call never sees a commit applied but not yet flushed. Every call
/// holds `visible` for reading while it runs; a pool commit holds it for writing from
/// before it applies until after its flush, so a call made meanwhile waits for the
/// durable result (or ran entirely before the commit began).
///
/// `held` (set by `holdCommits`, cleared by `releaseCommits` or `close`) keeps pool commits
/// from starting to apply, so a revision the JS thread is reading stays the newest while it
/// is held: the client holds it for the synchronous part of an `onRevision` callback. A pool
/// commit takes `visible` for writing while it holds the `held` mutex, so once `holdCommits`
/// returns no commit is between that check and its write.
struct Slot {
    db: Mutex<Option<Arc<client::ClientDb>>>,
    visible: RwLock<()>,
    held: Mutex<bool>,
    released: Condvar,
}

impl Slot {
    fn new(store: client::ClientDb) -> Self {
        Slot { db: Mutex::new(Some(Arc::new(store))), visible: RwLock::new(()), held: Mutex::new(false), released: Condvar::new() }
    }

    fn set_held(&self, value: bool) {
        *self.held.lock().unwrap_or_else(|e| e.into_inner()) = value;
        if !value {
            self.released.notify_all();
        }
    }
}

impl Slot {
    fn db(&self) -> napi::Result<Arc<client::ClientDb>> {
        let guard = self.db.lock().unwrap_or_else(|e| e.into_inner());
        guard.as_ref().cloned().ok_or_else(|| invalid("checkpoint store is closed"))
    }
}

impl JsCheckpointStore {
    fn with<T>(&self, f: impl FnOnce(&client::ClientDb) -> Result<T, ClientError>) -> napi::Result<T> {
        let store = self.inner.db()?;
        let _visible = self.inner.visible.read().unwrap_or_else(|e| e.into_inner());
        f(&store).map_err(err)
    }
}

/// What a pool write does with the open store: its outcome as JSON.
type Write = Box<dyn FnOnce(&client::ClientDb) -> Result<Value, ClientError> + Send>;

/// A write of the store on the libuv pool (`commitBatchAsync`, `acceptVerificationsAsync`):
/// the JS thread stays free while it is checked, written and flushed. Every pool write
/// waits here for `held` and `visible` (the `Slot` invariant), so each one is serialized
/// with the JS calls and with each other exactly as a synchronous call would be.
pub struct WriteTask {
    slot: Arc<Slot>,
    /// The store, taken when the write was asked for (so `close` waits for it), and the
    /// write; both given up as soon as it has run, on the pool (the task itself is dropped
    /// on the JS thread).
    job: Option<(Arc<client::ClientDb>, Write)>,
}

impl WriteTask {
    fn new(slot: &Arc<Slot>, work: Write) -> napi::Result<AsyncTask<WriteTask>> {
        Ok(AsyncTask::new(WriteTask { slot: slot.clone(), job: Some((slot.db()?, work)) }))
    }
}

impl Task for WriteTask {
    type Output = Value;
    /// JSON text of the outcome (the JS side parses it), as the synchronous call returns it.
    type JsValue = String;
    fn compute(&mut self) -> napi::Result<Self::Output> {
        // `_visible` is taken first and so released last: by the time a waiting `close`
        // gets it, this task no longer holds the store.
        let _visible = {
            let mut held = self.slot.held.lock().unwrap_or_else(|e| e.into_inner());
            while *held {
                held = self.slot.released.wait(held).unwrap_or_else(|e| e.into_inner());
            }
            self.slot.visible.write().unwrap_or_else(|e| e.into_inner())
        };
        let (store, work) = self.job.take().ok_or_else(|| invalid("write already ran"))?;
        work(&store).map_err(err)
    }
    fn resolve(&mut self, _env: Env, out: Self::Output) -> napi::Result<Self::JsValue> {
        Ok(out.to_string())
    }
}

fn commit_options(options: Option<CommitBatchOptions>) -> napi::Result<CommitOptions> {
    let mut opts = CommitOptions::default();
    if let Some(o) = options {
        if let Some(b) = o.max_bytes {
            opts.max_bytes = b as usize;
        }
        if let Some(n) = o.max_observations {
            opts.max_observations = n as usize;
        }
        if let Some(m) = o.membership.as_deref() {
            opts.membership = membership(m)?;
        }
        opts.open_label = o.open_label;
    }
    Ok(opts)
}

fn u64s(v: u64) -> Value {
    Value::String(v.to_string())
}

#[napi(object)]
pub struct JsStoreOptions {
    /// Bound of the store's page cache in bytes (default 64 MiB).
    pub cache_bytes: Option<f64>,
}

#[napi]
impl JsCheckpointStore {
    /// Opens (or creates) the store directory. One open store per path. `cacheBytes`
    /// bounds its page cache (default 64 MiB).
    #[napi(factory)]
    pub fn open(path: String, options: Option<JsStoreOptions>) -> napi::Result<Self> {
        let cache = match options.and_then(|o| o.cache_bytes) {
            None => client::db::DEFAULT_CACHE_BYTES,
            Some(b) if b.is_finite() && b >= 1.0 && b <= 2f64.powi(53) => b as u64,
            Some(_) => return Err(invalid("cacheBytes must be a positive safe integer")),
        };
        let store = client::ClientDb::open_with(&path, cache).map_err(err)?;
        Ok(JsCheckpointStore { inner: Arc::new(Slot::new(store)) })
    }

    /// Waits for the pool writes already asked for (`commitBatchAsync`,
    /// `acceptVerificationsAsync`), flushes and releases the path. Further calls throw.
    #[napi]
    pub fn close(&self) -> napi::Result<()> {
        let taken = self.inner.db.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(mut store) = taken else { return Ok(()) };
        // A held revision would keep the commits below waiting for this thread.
        self.inner.set_held(false);
        // Pool writes already asked for finish, durably, first: each holds the store until
        // it has run on the pool, which never waits for this thread.
        loop {
            let visible = self.inner.visible.write().unwrap_or_else(|e| e.into_inner());
            match Arc::try_unwrap(store) {
                Ok(s) => return s.close().map_err(err),
                Err(still_held) => store = still_held,
            }
            drop(visible);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Keeps pool writes (`commitBatchAsync`, `acceptVerificationsAsync`) from applying
    /// until `releaseCommits` (or `close`): the current revision stays the newest. Waits for a commit already applying, as any
    /// call does. Synchronous commits made meanwhile are not held.
    #[napi]
    pub fn hold_commits(&self) -> napi::Result<()> {
        self.inner.db()?;
        self.inner.set_held(true);
        drop(self.inner.visible.read().unwrap_or_else(|e| e.into_inner()));
        Ok(())
    }

    /// Lets held pool writes apply.
    #[napi]
    pub fn release_commits(&self) {
        self.inner.set_held(false);
    }

    /// Starts a new generation of the source `{provider, service, queryDigest}`;
    /// `label` (optional) lets `sourceForLabel` find the source before an open.
    #[napi]
    pub fn begin_generation(&self, source_key: JsSourceKey, label: Option<String>) -> napi::Result<i64> {
        let k = key(source_key)?;
        self.with(|s| s.begin_generation(&k, label.as_deref())).map(|g| g as i64)
    }

    /// Records the request id of an open about to be sent (crash-safe open retry).
    #[napi]
    pub fn set_pending_open(&self, label: String, request_id: String) -> napi::Result<()> {
        self.with(|s| s.set_pending_open(&label, &request_id))
    }

    #[napi]
    pub fn pending_open(&self, label: String) -> napi::Result<Option<String>> {
        self.with(|s| s.pending_open(&label))
    }

    #[napi(ts_return_type = "SourceKey | null")]
    pub fn source_for_label(&self, label: String) -> napi::Result<Value> {
        let k = self.with(|s| s.source_for_label(&label))?;
        Ok(k.map(|k| serde_json::to_value(k).expect("key serializes")).unwrap_or(Value::Null))
    }

    /// How long the newest generation has been followed live: `{generation, liveGroups,
    /// liveSince}` (liveSince: ms since the Unix epoch, or null for a generation completed by
    /// an earlier version), or null before its snapshot completed.
    #[napi(ts_return_type = "{ generation: number; liveGroups: number; liveSince: number | null } | null")]
    pub fn renewal(&self, source_key: JsSourceKey) -> napi::Result<Value> {
        let k = key(source_key)?;
        Ok(serde_json::to_value(self.with(|s| s.renewal(&k))?).expect("renewal serializes"))
    }

    /// The newest generation's committed position, or null.
    #[napi(ts_return_type = "any /* see js/client/client.d.ts: Checkpoint | null */")]
    pub fn checkpoint(&self, source_key: JsSourceKey) -> napi::Result<Value> {
        let k = key(source_key)?;
        let cp = self.with(|s| s.checkpoint(&k))?;
        Ok(match cp {
            None => Value::Null,
            Some(c) => json!({
                "generation": c.generation, "session": c.session, "cursor": c.cursor,
                "phase": c.phase.map(|p| p.as_str()), "through": u64s(c.through),
                "highWater": u64s(c.high_water), "snapshotComplete": c.snapshot_complete,
                "expiresAt": u64s(c.expires_at), "replayUntil": u64s(c.replay_until),
                "epoch": c.epoch, "access": c.access, "invalidated": c.invalidated,
            }),
        })
    }

    /// Checks and commits one batch from its exact response bytes, durably, against
    /// the committed cursor (`null` for the open response).
    #[napi(
        ts_return_type = "any /* see js/client/client.d.ts: CommitOutcome */"
    )]
    pub fn commit_batch(
        &self,
        source_key: JsSourceKey,
        generation_: i64,
        expected_cursor: Option<String>,
        batch: Buffer,
        options: Option<CommitBatchOptions>,
    ) -> napi::Result<Value> {
        let k = key(source_key)?;
        let g = generation(generation_)?;
        let opts = commit_options(options)?;
        let out = self.with(|s| s.commit_batch(&k, g, expected_cursor.as_deref(), &batch, &opts))?;
        Ok(serde_json::to_value(out).expect("outcome serializes"))
    }

    /// `commitBatch` on the libuv pool, so the JS thread stays free while the batch is
    /// checked, written and flushed; resolves with the same outcome once it is durable,
    /// or rejects with the same error. Store calls made meanwhile wait for it.
    #[napi(ts_return_type = "Promise<string /* JSON: js/client/client.d.ts CommitOutcome */>")]
    pub fn commit_batch_async(
        &self,
        source_key: JsSourceKey,
        generation_: i64,
        expected_cursor: Option<String>,
        batch: Buffer,
        options: Option<CommitBatchOptions>,
    ) -> napi::Result<AsyncTask<WriteTask>> {
        let (source, generation, opts) = (key(source_key)?, generation(generation_)?, commit_options(options)?);
        let body = batch.to_vec();
        WriteTask::new(
            &self.inner,
            Box::new(move |s| {
                let out = s.commit_batch(&source, generation, expected_cursor.as_deref(), &body, &opts)?;
                Ok(serde_json::to_value(out).expect("outcome serializes"))
            }),
        )
    }

    /// Marks a received group verified; accepts what that unblocks, in order.
    #[napi(ts_return_type = "any /* see js/client/client.d.ts: CommitOutcome */")]
    pub fn mark_verified(&self, source_key: JsSourceKey, generation_: i64, group_id: String) -> napi::Result<Value> {
        let k = key(source_key)?;
        let g = generation(generation_)?;
        let out = self.with(|s| s.mark_verified(&k, g, &group_id))?;
        Ok(serde_json::to_value(out).expect("outcome serializes"))
    }

    /// Published membership (current generation), present and absent rows, as JSON text
    /// (see `json_text`).
    #[napi(ts_return_type = "string /* JSON: js/client/client.d.ts Member[] */")]
    pub fn members(&self, source_key: JsSourceKey) -> napi::Result<String> {
        let k = key(source_key)?;
        json_text(&members_json(self.with(|s| s.members(&k))?)?)
    }

    /// The replacement generation's accepted rows while it is incomplete.
    #[napi(ts_return_type = "string /* JSON: js/client/client.d.ts Member[] */")]
    pub fn partial_members(&self, source_key: JsSourceKey) -> napi::Result<String> {
        let k = key(source_key)?;
        json_text(&members_json(self.with(|s| s.partial_members(&k))?)?)
    }

    #[napi(ts_return_type = "any /* see js/client/client.d.ts: SourceState */")]
    pub fn state(&self, source_key: JsSourceKey) -> napi::Result<Value> {
        let k = key(source_key)?;
        let st = self.with(|s| s.state(&k))?;
        let mut v = serde_json::to_value(st).expect("state serializes");
        for p in v["pendingGroups"].as_array_mut().into_iter().flatten() {
            p["sequence"] = u64s(p["sequence"].as_u64().unwrap_or(0));
        }
        Ok(v)
    }

    /// `{space: {keys, bytes}}`: keys and bytes (key plus value) per key space of the
    /// store (docs/design.md "Storage" lists them). Scans the whole store.
    #[napi]
    pub fn space_usage(&self) -> napi::Result<Value> {
        let usage = self.with(|s| s.space_usage())?;
        Ok(Value::Object(
            usage.into_iter().map(|(k, (n, b))| (k, serde_json::json!({ "keys": n, "bytes": b }))).collect(),
        ))
    }

    #[napi]
    pub fn revision(&self) -> napi::Result<i64> {
        self.with(|s| s.revision()).map(|r| r as i64)
    }
}

/// Lists that grow with the catalogue (members, the reconciled view) cross as JSON text
/// that JS parses: napi's value conversion stops at a million JSON values (about
/// 80,000 members), and `JSON.parse` of one string is faster than building the
/// objects one property at a time.
fn json_text(v: &Value) -> napi::Result<String> {
    serde_json::to_string(v).map_err(|e| invalid(format!("serializing a result: {e}")))
}

fn members_json(rows: Vec<client::MemberView>) -> napi::Result<Value> {
    Ok(Value::Array(
        rows.into_iter()
            .map(|m| {
                let r = m.row;
                json!({
                    "outpoint": {"txid": r.outpoint.txid, "outputIndex": r.outpoint.output_index},
                    "present": r.present, "sequence": u64s(r.sequence),
                    "observationId": r.observation_id, "context": r.context,
                    "phase": r.phase.as_str(), "generation": m.generation,
                    "stale": m.stale, "partial": m.partial,
                })
            })
            .collect(),
    ))
}

// --- reconciliation (BRC-192 §10): conversions only --------------------------

#[napi(object)]
pub struct JsReconcilerConfig {
    pub journal_id: String,
    /// The `{nonFinal}` policy parameter.
    pub non_final: bool,
    /// A context defined beforehand (defineView / defineContext), active at position 0.
    pub initial_context: String,
}

#[napi(object)]
pub struct JsReceived {
    pub raw: Buffer,
    /// The exact evidence bytes (e.g. the BEEF); the variant id is their SHA-256.
    pub evidence: Option<Buffer>,
}

#[napi(object)]
pub struct JsPlacement {
    /// Block hash, display hex.
    pub block: String,
    pub height: i64,
}

#[napi(object)]
pub struct JsFirstRaw {
    /// U64 as a decimal string.
    pub position: String,
    pub index: u32,
}

/// A job as pendingVerifications lists it (the fields a page position needs).
#[napi(object)]
pub struct JsJobRef {
    pub txid: String,
    pub variant_id: String,
    pub first_raw: JsFirstRaw,
}

#[napi(object)]
pub struct JsJobPage {
    /// List the jobs after this one (exclusive), in job order.
    pub after: Option<JsJobRef>,
    /// At most this many (default: all).
    pub limit: Option<u32>,
}

fn job_of(j: JsJobRef) -> napi::Result<client::reconcile::Job> {
    let position = j.first_raw.position.parse::<u64>().map_err(|_| invalid("firstRaw.position must be a U64 decimal string"))?;
    Ok(client::reconcile::Job {
        txid: hash("txid", &j.txid)?,
        variant: hash("variantId", &j.variant_id)?,
        context_id: String::new(),
        first: client::journal::IngressPosition { position, index: j.first_raw.index },
    })
}

#[napi(object)]
pub struct JsVerificationResult {
    pub txid: String,
    pub variant_id: String,
    pub context_id: String,
    /// verified | invalid | unresolved | limited | cancelled | context-changed
    pub status: String,
    /// The verified transaction's raw bytes (required for `verified`).
    pub raw: Option<Buffer>,
    pub placement: Option<JsPlacement>,
    pub reason: String,
    /// For `limited`: an identifier of the verification budget it was measured against.
    pub policy: Option<String>,
}

/// Results as the port takes them; a bad status or hash is `invalid` before anything runs.
fn verification_results(results: Vec<JsVerificationResult>) -> napi::Result<Vec<VerificationResult>> {
    let mut out = Vec::with_capacity(results.len());
    for r in results {
        let status = match r.status.as_str() {
            "verified" => VerificationStatus::Verified,
            "invalid" => VerificationStatus::Invalid,
            "unresolved" => VerificationStatus::Unresolved,
            "limited" => VerificationStatus::Limited,
            "cancelled" => VerificationStatus::Cancelled,
            "context-changed" => VerificationStatus::ContextChanged,
            other => return Err(invalid(format!("unknown verification status {other}"))),
        };
        out.push(VerificationResult {
            txid: hash("txid", &r.txid)?,
            variant: hash("variantId", &r.variant_id)?,
            context_id: r.context_id,
            status,
            raw: r.raw.map(|b| b.to_vec()),
            placement: r.placement.map(placement).transpose()?,
            reason: r.reason,
            policy: r.policy,
        });
    }
    Ok(out)
}

fn hash(name: &str, s: &str) -> napi::Result<Hash32> {
    Hash32::from_hex(s).map_err(|_| invalid(format!("{name} must be 64 lowercase hex characters")))
}

fn placement(p: JsPlacement) -> napi::Result<Placement> {
    let height = u64::try_from(p.height).map_err(|_| invalid("height must be a non-negative integer"))?;
    Ok(Placement { block: hash("block", &p.block)?, height })
}

fn step(o: StepOutcome) -> Value {
    json!({"revision": o.revision, "position": o.position.map(u64s), "accepted": o.accepted,
           "stale": o.stale, "ignored": o.ignored, "components": o.components})
}

fn u64_of(name: &str, s: &str) -> napi::Result<u64> {
    client::parse::parse_u64(name, s).map_err(err)
}

#[napi]
impl JsCheckpointStore {
    /// Creates the reconciliation journal (or checks an existing one's configuration).
    #[napi]
    pub fn configure_reconciler(&self, config: JsReconcilerConfig) -> napi::Result<()> {
        let cfg = ReconcilerConfig { journal_id: config.journal_id, non_final: config.non_final, initial_context: config.initial_context };
        self.with(|s| s.configure_reconciler(&cfg))
    }

    /// Adds 80-byte block headers (linked, proof of work checked). Returns how many were new.
    #[napi]
    pub fn add_headers(&self, headers: Vec<Buffer>) -> napi::Result<u32> {
        let raws: Vec<Vec<u8>> = headers.iter().map(|b| b.to_vec()).collect();
        self.with(|s| s.add_headers(&raws)).map(|n| n as u32)
    }

    /// Names a chain view by its tip header (display hex).
    #[napi]
    pub fn define_view(&self, id: String, tip_hash: String) -> napi::Result<()> {
        let tip = hash("tipHash", &tip_hash)?;
        self.with(|s| s.define_view(&id, tip))
    }

    /// Names a finality context without headers: tip height and median time past (U64 strings).
    #[napi]
    pub fn define_context(&self, id: String, tip_height: String, median_time_past: String) -> napi::Result<()> {
        let f = Finality { tip_height: u64_of("tipHeight", &tip_height)?, mtp: u64_of("medianTimePast", &median_time_past)? };
        self.with(|s| s.define_context(&id, f))
    }

    /// A confirmed transaction outside the journal: preverified, or placed in a block.
    #[napi(ts_return_type = "any /* see js/client/client.d.ts: StepOutcome */")]
    pub fn add_anchor(&self, raw: Buffer, placement_: Option<JsPlacement>) -> napi::Result<Value> {
        let anchor = match placement_ {
            Some(p) => Anchor::Placed { placement: placement(p)? },
            None => Anchor::Preverified,
        };
        self.with(|s| s.add_anchor(&raw, anchor)).map(step)
    }

    /// One receive of raw transactions: the next journal position.
    #[napi(ts_return_type = "any /* see js/client/client.d.ts: StepOutcome */")]
    pub fn receive_transactions(&self, source: String, items: Vec<JsReceived>) -> napi::Result<Value> {
        let items: Vec<Received> =
            items.into_iter().map(|i| Received { raw: i.raw.to_vec(), evidence: i.evidence.map(|e| e.to_vec()).unwrap_or_default() }).collect();
        self.with(|s| s.receive_transactions(&source, &items)).map(step)
    }

    /// Makes a defined context active (takes a journal position; reassesses affected components).
    #[napi(ts_return_type = "any /* see js/client/client.d.ts: StepOutcome */")]
    pub fn set_context(&self, id: String) -> napi::Result<Value> {
        self.with(|s| s.set_context(&id)).map(step)
    }

    /// Verification work for the current context (of one txid, or all), as JSON text
    /// (see `json_text`); `page` bounds it to `limit` jobs after the job `after`.
    #[napi(ts_return_type = "string /* JSON: js/client/client.d.ts VerificationJob[] */")]
    pub fn pending_verifications(&self, txid: Option<String>, page: Option<JsJobPage>) -> napi::Result<String> {
        let t = txid.map(|t| hash("txid", &t)).transpose()?;
        let jobs = match (t, page) {
            (Some(t), None) => self.with(|s| s.pending_verifications(Some(&t)))?,
            (Some(_), Some(_)) => return Err(invalid("a page of one transaction's jobs is not offered: pass txid or page")),
            (None, page) => {
                let (after, limit) = match page {
                    None => (None, usize::MAX),
                    Some(p) => {
                        let limit = match p.limit {
                            None => usize::MAX,
                            Some(l) if l >= 1 => l as usize,
                            Some(_) => return Err(invalid("limit must be at least 1")),
                        };
                        (p.after.map(job_of).transpose()?, limit)
                    }
                };
                self.with(|s| s.pending_page(after.as_ref(), limit))?
            }
        };
        json_text(&Value::Array(
            jobs.into_iter()
                .map(|j| json!({"txid": j.txid, "variantId": j.variant, "contextId": j.context_id,
                                "firstRaw": {"position": u64s(j.first.position), "index": j.first.index}}))
                .collect(),
        ))
    }

    /// The exact evidence bytes of a verification job (null if unknown).
    #[napi]
    pub fn verification_evidence(&self, txid: String, variant_id: String) -> napi::Result<Option<Buffer>> {
        let (t, v) = (hash("txid", &txid)?, hash("variantId", &variant_id)?);
        Ok(self.with(|s| s.verification_evidence(&t, &v))?.map(Buffer::from))
    }

    /// The evidence variants of a transaction with their recorded verdicts (status,
    /// context and the verifier's reason), or null for an unknown transaction.
    #[napi(ts_return_type = "any /* see js/client/client.d.ts: VariantVerdict[] | null */")]
    pub fn verdicts(&self, txid: String) -> napi::Result<Value> {
        let t = hash("txid", &txid)?;
        let rec = self.with(|s| s.transaction(&t))?;
        let refused = self.with(|s| s.rejections(&t))?;
        if rec.is_none() && refused.is_empty() {
            return Ok(Value::Null);
        }
        let mut out: Vec<Value> = rec.iter().flat_map(|r| &r.variants).map(|v| json!({"variantId": v.id, "verdict": v.verdict})).collect();
        // Evidence refused at receipt (it never became a verification job).
        out.extend(refused.iter().map(|r| json!({"variantId": r.variant, "verdict": r.verdict, "atReceipt": true})));
        Ok(Value::Array(out))
    }

    /// Hands verifier results back through the port, all in one commit.
    #[napi(ts_return_type = "any /* see js/client/client.d.ts: StepOutcome */")]
    pub fn accept_verifications(&self, results: Vec<JsVerificationResult>) -> napi::Result<Value> {
        let results = verification_results(results)?;
        self.with(|s| s.accept_verifications(&results)).map(step)
    }

    /// `acceptVerifications` on the libuv pool: resolves with the same outcome once the
    /// commit is durable (or rejects with the same error); store calls made meanwhile wait.
    #[napi(ts_return_type = "Promise<string /* JSON: js/client/client.d.ts StepOutcome */>")]
    pub fn accept_verifications_async(&self, results: Vec<JsVerificationResult>) -> napi::Result<AsyncTask<WriteTask>> {
        let results = verification_results(results)?;
        WriteTask::new(&self.inner, Box::new(move |s| s.accept_verifications(&results).map(step)))
    }

    /// Clears `limited` verdicts measured against another budget than `policy`, so
    /// they are verified again; returns how many.
    #[napi]
    pub fn requeue_limited(&self, policy: String) -> napi::Result<u32> {
        self.with(|s| s.requeue_limited(&policy)).map(|n| n as u32)
    }

    /// Records a verified Merkle placement of a journal transaction.
    #[napi(ts_return_type = "any /* see js/client/client.d.ts: StepOutcome */")]
    pub fn add_placement(&self, txid: String, placement_: JsPlacement) -> napi::Result<Value> {
        let t = hash("txid", &txid)?;
        let p = placement(placement_)?;
        self.with(|s| s.add_placement(&t, p)).map(step)
    }

    /// Current / spent / pending / conflicting / stale summary, or null before configuration.
    #[napi(ts_return_type = "string /* JSON: js/client/client.d.ts ReconciledView | null */")]
    pub fn reconciled_view(&self) -> napi::Result<String> {
        json_text(&self.with(|s| s.reconciled_view())?.map(view_json).unwrap_or(Value::Null))
    }

    /// The BRC-192 §10.5 ReconciledState (U64 values as strings), or null.
    #[napi(ts_return_type = "any /* see js/client/client.d.ts: ReconciledState | null */")]
    pub fn reconciled_state(&self, network: String, genesis_hash: String) -> napi::Result<Value> {
        let chain = client::parse::Chain { network, genesis_hash };
        Ok(self.with(|s| s.reconciled_state(&chain))?.unwrap_or(Value::Null))
    }

    /// Members, partial members, source state and the reconciled view of one revision,
    /// read together under the commit lock, as JSON text; with `atRevision`, a
    /// `conflict` error once the store has moved past that revision.
    #[napi(ts_return_type = "string /* JSON: js/client/client.d.ts RevisionSnapshot */")]
    pub fn revision_snapshot(&self, source_key: JsSourceKey, at_revision: Option<i64>) -> napi::Result<String> {
        let k = key(source_key)?;
        let at = at_revision.map(|r| u64::try_from(r).map_err(|_| invalid("atRevision is negative"))).transpose()?;
        let snap = self.with(|s| s.revision_snapshot(&k, at))?;
        let mut members = members_json(snap.members)?;
        for (m, c) in members.as_array_mut().into_iter().flatten().zip(snap.currentness) {
            m["currentness"] = serde_json::to_value(c).expect("state serializes");
        }
        let mut state = serde_json::to_value(snap.state).expect("state serializes");
        for p in state["pendingGroups"].as_array_mut().into_iter().flatten() {
            p["sequence"] = u64s(p["sequence"].as_u64().unwrap_or(0));
        }
        json_text(&json!({
            "members": members,
            "partialMembers": members_json(snap.partial_members)?,
            "state": state,
            "reconciled": snap.reconciled.map(view_json).unwrap_or(Value::Null),
        }))
    }
}

fn view_json(v: client::current::ReconciledView) -> Value {
    json!({
        "revision": v.revision, "context": v.context, "through": u64s(v.through),
        "current": v.current,
        "spent": v.spent.iter().map(|(o, by)| json!({"outpoint": o, "by": by})).collect::<Vec<_>>(),
        "pending": v.pending, "conflicting": v.conflicting,
        "stale": v.stale.iter().map(|(t, s)| json!({"txid": t, "status": s.as_str()})).collect::<Vec<_>>(),
    })
}

