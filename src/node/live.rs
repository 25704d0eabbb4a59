//! napi glue for the live provider: converts JS values to core types and back.
//! No protocol logic lives here.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use napi::bindgen_prelude::{Buffer, Function};
use napi::Env;
use napi_derive::napi;
use serde_json::Value;

use crate::select::AttrValue;
use crate::session::{CancelToken, Caller, Caps, Provider, ProviderConfig};
use crate::store::{Admission, Change, Context, Outpoint, RemoveReason, SpendInput, Store, StoreConfig, Ticket};
use crate::wire::Limits;

use super::delivery::{DeliveredAnswers, Delivery, Owed};
use super::error::{coded, guard, invalid_arg, js_error, JsResult};
use crate::wire::ErrorCode;

type Res<T> = JsResult<T>;

/// Store failures keep their code, limit kind and cause (src/node/error.rs).
fn store_error(e: crate::store::StoreError) -> napi::Error<String> {
    js_error(e)
}

#[napi(object)]
pub struct LiveConfig {
    pub data_dir: String,
    /// Create the store when it does not exist yet. Without it a missing store is an error.
    pub create: Option<bool>,
    /// scope.provider: identity key (BRC-103) or exact HTTPS origin (public mode).
    pub provider: String,
    pub network: String,
    pub genesis_hash: String,
    pub session_seconds: u32,
    pub replay_seconds: u32,
    pub max_bytes: Option<u32>,
    pub max_observations: Option<u32>,
    pub max_wait_ms: Option<u32>,
    pub max_rows: Option<i64>,
    pub max_retained_bytes: Option<i64>,
    pub max_sessions_per_principal: Option<u32>,
    pub max_waiters: Option<u32>,
    pub max_waiters_per_principal: Option<u32>,
    pub max_concurrent_work: Option<u32>,
    /// Names the access policy; part of every derived `scope.access`.
    pub access_policy: Option<String>,
}

/// One membership change handed over by the JS ingest layer.
#[napi(object)]
pub struct NativeChange {
    /// `admit`, `remove`, `refresh` (new evidence for a present row) or `invalidate`
    /// (a chain-view change; needs `contextId` and `reason`, no outpoint).
    pub op: String,
    pub service: String,
    /// Required except for `invalidate`.
    pub txid: Option<String>,
    pub output_index: Option<u32>,
    pub topic: Option<String>,
    pub attributes: Option<Value>,
    pub beef: Option<Buffer>,
    pub context_schema: Option<String>,
    pub context_bytes: Option<Buffer>,
    pub expires_at: Option<i64>,
    /// For `remove`: `spent`, `evicted`, `not-retained` or `expired`.
    pub reason: Option<String>,
    pub spending_txid: Option<String>,
    pub spend_beef: Option<Buffer>,
    /// For `invalidate`: the chain-view context whose assessments no longer hold.
    pub context_id: Option<String>,
}

/// One current member of a service, as a reorganization check or the reconciliation at
/// attach needs it.
#[napi(object)]
pub struct MemberRow {
    pub txid: String,
    pub output_index: u32,
    pub topic: String,
    /// The member's current evidence (BEEF bytes); absent when the scan was asked without.
    pub beef: Option<Buffer>,
}

/// See `NativeLive::retention`.
#[napi(object)]
pub struct Retention {
    pub retained_bytes: i64,
    pub max_retained_bytes: Option<i64>,
    pub over: bool,
}

/// What an admission did (`Store::admit`).
#[napi(object)]
pub struct RecordedCommit {
    /// The (last) sequence (decimal), or null when nothing changed.
    pub sequence: Option<String>,
    /// Groups committed although no session can ever be served them (`permanent-group`).
    pub unservable: u32,
    /// The store is above `maxRows` or `maxRetainedBytes` with it (recorded changes only).
    pub over_cap: bool,
}

fn recorded(r: crate::store::Recorded) -> RecordedCommit {
    RecordedCommit {
        sequence: r.sequence.map(|v| v.to_string()),
        unservable: r.unservable.min(u32::MAX as u64) as u32,
        over_cap: r.over_cap,
    }
}

/// A gate ticket from JS (`reserve`): a positive safe integer.
fn ticket_of(t: Option<i64>) -> Option<Ticket> {
    t.filter(|v| *v > 0).map(|v| Ticket(v as u64))
}

#[napi(object)]
pub struct ProhibitResult {
    pub number: u32,
    /// Sequence (decimal) of the group that withdrew the present rows, or null.
    pub sequence: Option<String>,
    /// Present rows withdrawn.
    pub rows: u32,
    /// Sessions ended with reset-required.
    pub sessions: u32,
}

#[napi(object)]
pub struct EpochReset {
    pub epoch: String,
    /// Sequence (decimal) of the new epoch's first group, or null when it changed nothing.
    pub sequence: Option<String>,
}

#[napi(object)]
pub struct MemberPage {
    pub rows: Vec<MemberRow>,
    /// Pass back as `afterKey` for the next page; null when the scan is complete.
    pub next: Option<Buffer>,
    /// The sequence the whole scan reads at; pass it back with `afterKey`.
    pub at: String,
}

#[napi(object)]
pub struct CallerInfo {
    pub principal: String,
    pub authenticated: bool,
}

#[napi(object)]
pub struct NativeResponse {
    pub status: u32,
    pub body: Buffer,
}

/// A read request parsed once (`describeRead`): JS asks the host's `authorize` about its
/// session's service and query, then hands it to `readNow` / `readTicketed` as it is.
#[napi]
pub struct NativeRead {
    read: crate::wire::Read,
    /// The session's (service, query) when the caller owns it.
    owner: Option<(String, Value)>,
}

#[napi]
impl NativeRead {
    /// Whether the session exists and belongs to the caller (otherwise the read is answered
    /// reset-required by the provider, without asking `authorize`).
    #[napi(getter)]
    pub fn owned(&self) -> bool {
        self.owner.is_some()
    }

    #[napi(getter)]
    pub fn session(&self) -> String {
        self.read.session.clone()
    }

    #[napi(getter)]
    pub fn service(&self) -> Option<String> {
        self.owner.as_ref().map(|o| o.0.clone())
    }

    #[napi(getter)]
    pub fn query(&self) -> Option<Value> {
        self.owner.as_ref().map(|o| o.1.clone())
    }
}

/// An open request parsed once (`parseOpen`): JS runs the companion's `select` and the
/// host's `authorize` on its service and query, then hands it to `openTicketed`.
#[napi]
pub struct NativeOpen {
    open: crate::wire::Open,
}

#[napi]
impl NativeOpen {
    #[napi(getter)]
    pub fn service(&self) -> String {
        self.open.service.clone()
    }

    #[napi(getter)]
    pub fn query(&self) -> Value {
        self.open.query.clone()
    }

    /// Lowercase hex, when the request names one.
    #[napi(getter)]
    pub fn required_rules_digest(&self) -> Option<String> {
        self.open.required_rules_digest.as_ref().map(|d| d.to_hex())
    }
}

#[napi(object)]
pub struct LiveStats {
    pub sessions: u32,
    /// Distinct (scope, selection) views of the sessions in memory; sessions of one view
    /// share its compiled selection and rendered live groups.
    pub views: u32,
    pub waiters: u32,
    pub high_water: String,
    /// Log groups at or below this sequence have been compacted away.
    pub compacted_through: String,
    pub epoch: String,
    pub log_bytes: i64,
    pub rows: i64,
    pub disk_bytes: i64,
    /// Milliseconds since a commit of this process last became durable and visible to
    /// readers; absent before the first. A growing value on a busy host means ingestion
    /// stalled. bench/sections/waiters.js dates wake latency from it.
    pub published_ago_ms: Option<f64>,
    /// Entries (index entries and row versions) snapshot scans of this process have read:
    /// a count of work. A cancelled open or read stops adding to it.
    pub scan_examined: i64,
    /// Retained bytes (log, row versions, evidence) and the budget (`maxRetainedBytes`, null
    /// without one). While retained bytes are over the budget new opens are refused (503
    /// `unavailable`) until compaction removes history no session was promised;
    /// `retentionRefusals` counts those refusals since start.
    pub retained_bytes: i64,
    pub max_retained_bytes: Option<i64>,
    pub over_retention_budget: bool,
    pub retention_refusals: i64,
    /// Changes holding a place in the admission gate's order, not yet committed (a submit
    /// whose group is still being assembled, and everything made after it).
    pub gate_waiting: i64,
    /// Since this process opened the store: groups an attached Engine applied that no
    /// session can be served (`permanent-group`).
    pub unservable_groups: i64,
}

/// A cancellation handle: JS trips it when the HTTP response closes early.
#[napi]
pub struct NativeCancel {
    inner: Arc<CancelToken>,
}

#[napi]
impl NativeCancel {
    #[napi(constructor)]
    pub fn new() -> Self {
        NativeCancel { inner: CancelToken::new() }
    }

    #[napi]
    pub fn cancel(&self) {
        self.inner.cancel();
    }
}

impl Default for NativeCancel {
    fn default() -> Self {
        Self::new()
    }
}

#[napi]
pub struct NativeLive {
    provider: Arc<Provider>,
    delivery: Arc<Delivery>,
}

fn hex32(s: &str, what: &str) -> napi::Result<[u8; 32], String> {
    let v = hex::decode(s).map_err(|_| invalid_arg(format!("{what} must be 64 hex characters")))?;
    v.try_into().map_err(|_| invalid_arg(format!("{what} must be 64 hex characters")))
}

fn attr_value(v: &Value) -> napi::Result<AttrValue, String> {
    Ok(match v {
        Value::String(s) => AttrValue::Str(s.clone()),
        Value::Bool(b) => AttrValue::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) if i.unsigned_abs() <= 9_007_199_254_740_991 => AttrValue::Int(i),
            _ => return Err(invalid_arg("attribute numbers must be safe integers")),
        },
        Value::Array(items) => AttrValue::List(
            items
                .iter()
                .map(|i| match i {
                    Value::Array(_) => Err(invalid_arg("attribute lists cannot nest")),
                    other => attr_value(other),
                })
                .collect::<Res<_>>()?,
        ),
        _ => return Err(invalid_arg("attribute values are strings, safe integers, booleans or lists of those")),
    })
}

fn attributes(v: Option<&Value>) -> napi::Result<BTreeMap<String, AttrValue>, String> {
    let mut out = BTreeMap::new();
    match v {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                out.insert(k.clone(), attr_value(v)?);
            }
        }
        Some(_) => return Err(invalid_arg("attributes must be an object")),
    }
    Ok(out)
}

fn to_change(c: NativeChange) -> napi::Result<Change, String> {
    if c.op == "invalidate" {
        return Ok(Change::Invalidate {
            service: c.service,
            context_id: c.context_id.ok_or_else(|| invalid_arg("invalidate needs a contextId"))?,
            reason: c.reason.ok_or_else(|| invalid_arg("invalidate needs a reason"))?,
        });
    }
    let txid = c.txid.as_deref().ok_or_else(|| invalid_arg(format!("{} needs a txid", c.op)))?;
    let output_index = c.output_index.ok_or_else(|| invalid_arg(format!("{} needs an outputIndex", c.op)))?;
    let outpoint = Outpoint { txid: hex32(txid, "txid")?, output_index };
    match c.op.as_str() {
        "refresh" => Ok(Change::Refresh {
            service: c.service,
            outpoint,
            beef: c.beef.ok_or_else(|| invalid_arg("refresh needs the BEEF"))?.to_vec(),
        }),
        "admit" => Ok(Change::Admit {
            service: c.service,
            outpoint,
            topic: c.topic.ok_or_else(|| invalid_arg("admit needs a topic"))?,
            attributes: attributes(c.attributes.as_ref())?,
            beef: c.beef.ok_or_else(|| invalid_arg("admit needs the BEEF"))?.to_vec(),
            context: match (c.context_schema, c.context_bytes) {
                (Some(schema), Some(bytes)) => Some(Context { schema, bytes: bytes.to_vec() }),
                (None, None) => None,
                _ => return Err(invalid_arg("context needs both schema and bytes")),
            },
            expires_at: match c.expires_at {
                Some(t) if t < 0 => return Err(invalid_arg("expiresAt must be a non-negative number of seconds")),
                Some(t) => Some(t as u64),
                None => None,
            },
        }),
        "remove" => Ok(Change::Remove {
            service: c.service,
            outpoint,
            reason: match c.reason.as_deref() {
                Some("spent") => RemoveReason::Spent,
                Some("evicted") => RemoveReason::Evicted,
                Some("not-retained") => RemoveReason::NotRetained,
                Some("expired") => RemoveReason::Expired,
                _ => return Err(invalid_arg("remove reason must be spent, evicted, not-retained or expired")),
            },
            spend: match (c.spending_txid, c.spend_beef) {
                (Some(t), Some(b)) => Some(SpendInput { spending_txid: hex32(&t, "spendingTxid")?, beef: b.to_vec() }),
                (None, None) => None,
                _ => return Err(invalid_arg("spend evidence needs both spendingTxid and its BEEF")),
            },
        }),
        other => Err(invalid_arg(format!("unknown change op {other:?}"))),
    }
}

fn meta_key(name: &str) -> Vec<u8> {
    [b"js/".as_slice(), name.as_bytes()].concat()
}

fn caller(c: CallerInfo) -> Caller {
    Caller { principal: c.principal, authenticated: c.authenticated }
}

fn respond(r: crate::session::Response) -> NativeResponse {
    NativeResponse { status: r.status as u32, body: r.body.into() }
}

/// Runs store work on a blocking thread, with panics caught. Promises of async
/// napi functions can only reject with a plain `napi::Error`; the fields travel in the
/// message as src/node/error.rs encodes them.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Res<T> + Send + 'static) -> napi::Result<T> {
    tokio::task::spawn_blocking(move || std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)))
        .await
        .map_err(|e| coded(ErrorCode::Unavailable, format!("native task failed: {e}")))
        .and_then(|r| r.map_err(|_| coded(ErrorCode::Unavailable, "native code panicked")))
        .and_then(|r| r)
        .map_err(to_async)
}

/// Runs `f` on the blocking pool once `ticket` is first in the store's admission order,
/// awaited without holding a thread (the ticket ahead may wait for JS work that needs one).
async fn in_turn<T: Send + 'static>(
    p: Arc<Provider>,
    ticket: Option<Ticket>,
    f: impl FnOnce(Arc<Provider>, Option<Ticket>) -> Res<T> + Send + 'static,
) -> napi::Result<T> {
    if let Some(t) = ticket {
        p.store().until_turn(t).await.map_err(|e| to_async(store_error(e)))?;
    }
    blocking(move || f(p, ticket)).await
}

fn to_async(e: napi::Error<String>) -> napi::Error {
    napi::Error::new(napi::Status::GenericFailure, e.reason)
}

/// Opens (or creates) the store and the provider on top of it.
#[napi]
pub async fn open_live(config: LiveConfig) -> napi::Result<NativeLive> {
    blocking(move || {
        let store = Store::open(StoreConfig {
            path: PathBuf::from(&config.data_dir),
            create: config.create.unwrap_or(false),
            max_rows: config.max_rows.map(|v| v.max(0) as u64),
            max_retained_bytes: config.max_retained_bytes.map(|v| v.max(0) as u64),
        })
        .map_err(store_error)?;
        let provider_limits = Limits::provider(
            config.max_bytes.unwrap_or(crate::wire::limits::PROFILE_MAX_BYTES),
            config.max_observations.unwrap_or(crate::wire::limits::PROFILE_MAX_OBSERVATIONS),
            config.max_wait_ms.unwrap_or(crate::wire::limits::PROFILE_MAX_WAIT_MS),
        )
        .map_err(invalid_arg)?;
        let defaults = Caps::default();
        let caps = Caps {
            max_sessions_per_principal: config.max_sessions_per_principal.map(|v| v as usize).unwrap_or(defaults.max_sessions_per_principal),
            max_waiters: config.max_waiters.map(|v| v as usize).unwrap_or(defaults.max_waiters),
            max_waiters_per_principal: config.max_waiters_per_principal.map(|v| v as usize).unwrap_or(defaults.max_waiters_per_principal),
            max_concurrent_work: config.max_concurrent_work.map(|v| v as usize).unwrap_or(defaults.max_concurrent_work),
        };
        let provider = Provider::new(
            store,
            ProviderConfig {
                provider: config.provider,
                network: config.network,
                genesis_hash: config.genesis_hash,
                session_seconds: config.session_seconds as u64,
                replay_seconds: config.replay_seconds as u64,
                limits: provider_limits,
                caps,
            },
        )
        .map_err(js_error)?;
        provider.set_access_policy(config.access_policy.as_deref().unwrap_or("default"));
        Ok(NativeLive { provider, delivery: Arc::default() })
    })
    .await
}

#[napi]
impl NativeLive {
    /// Registers a wrapped service with its rules; returns the rulesDigest.
    #[napi]
    pub fn register_service(&self, name: String, rules: Value) -> napi::Result<String, String> {
        self.provider.register_service(&name, &rules).map_err(js_error)
    }

    /// Whether the store holds any history for this service (backfill decision).
    #[napi]
    pub fn service_has_history(&self, name: String) -> napi::Result<bool, String> {
        self.provider.store().service_has_rows(&name).map_err(store_error)
    }

    /// The changes as the store takes them; when one does not convert, the ticket taken for
    /// them is given up (nothing made later may wait for it) and the call fails.
    fn changes_for(&self, ticket: Option<Ticket>, changes: Vec<NativeChange>) -> napi::Result<Vec<Change>> {
        changes.into_iter().map(to_change).collect::<Res<Vec<_>>>().map_err(|e| {
            if let Some(t) = ticket {
                self.provider.store().cancel(t);
            }
            to_async(e)
        })
    }

    /// A place in the admission gate's order, taken now (docs/design.md "Admission gate"):
    /// the change it is for lands after every change whose ticket was taken before, however
    /// long its content takes to be known. Pass it to `admit`, `prohibit`, `changePolicy` or
    /// `resetEpochWith`, or give it up with `cancel`: later changes wait for it.
    #[napi]
    pub fn reserve(&self) -> i64 {
        self.provider.store().reserve().0 as i64
    }

    /// Puts `first` (a ticket, or null for a new one) right before `then`; returns it.
    #[napi]
    pub fn order_before(&self, first: Option<i64>, then: i64) -> i64 {
        let then = ticket_of(Some(then)).unwrap_or(Ticket(0));
        self.provider.store().order_before(ticket_of(first), then).0 as i64
    }

    /// Gives up a ticket.
    #[napi]
    pub fn cancel(&self, ticket: i64) {
        if let Some(t) = ticket_of(Some(ticket)) {
            self.provider.store().cancel(t);
        }
    }

    /// The admission gate (`Store::admit`): commits `changes` at the place of `ticket` (null:
    /// a ticket taken now), after the prohibitions; resolves once they are flushed and
    /// published. `divisible`: groups that each fit the provider's limits; otherwise one
    /// indivisible group. `recorded`: changes the attached Engine already applied, never
    /// refused for the limits or the caps; otherwise a group beyond them is refused (`limited`,
    /// the message starting with `permanent-group:` for the limits) and nothing is written.
    #[napi]
    pub async fn admit(&self, ticket: Option<i64>, changes: Vec<NativeChange>, divisible: bool, recorded_: bool) -> napi::Result<RecordedCommit> {
        let ticket = ticket_of(ticket);
        let changes = self.changes_for(ticket, changes)?;
        let how = Admission { divisible, recorded: recorded_ };
        in_turn(self.provider.clone(), ticket, move |p, t| p.store().admit(t, changes, how).map(recorded).map_err(store_error)).await
    }

    /// Applies expiry timers due now (the store's timer does so on its own, and opens and
    /// reads before they capture a watermark).
    #[napi]
    pub async fn apply_expiries(&self) -> napi::Result<Option<String>> {
        let p = self.provider.clone();
        blocking(move || {
            let now = p.now();
            p.store().apply_expiries(now).map(|s| s.map(|v| v.to_string())).map_err(store_error)
        })
        .await
    }

    /// An open, answered through the delivery function under `ticket` (see
    /// `read_ticketed`): no threadsafe function is created for the call. A panic answers
    /// `unavailable` (the ticket's `Owed` is dropped unanswered).
    #[napi]
    pub fn open_ticketed(&self, open: &NativeOpen, who: CallerInfo, partition: String, selection: Value, cancel: &NativeCancel, ticket: u32) {
        let p = self.provider.clone();
        let token = cancel.inner.clone();
        let open = open.open.clone();
        let owed = Owed { ticket, delivery: self.delivery.clone(), answered: false };
        napi::bindgen_prelude::spawn_blocking(move || {
            // Tripping `cancel` (the client went away) ends the snapshot scan and stores nothing.
            let r = p.open_parsed(open, &caller(who), &partition, &selection, Some(&token));
            owed.answer(r.status as u32, r.body);
        });
    }

    /// Installs the function that receives answers of `readTicketed` and `openTicketed` in batches.
    #[napi]
    pub fn set_delivery(&self, deliver: Function<'_, DeliveredAnswers, ()>) -> napi::Result<()> {
        self.delivery.install(deliver)
    }

    /// Keeps Node running while reads or opens are outstanding (`true`), or lets it exit.
    #[napi]
    pub fn hold_deliveries(&self, env: Env, hold: bool) -> napi::Result<()> {
        self.delivery.hold(&env, hold)
    }

    /// A caught-up read answered synchronously, or null when it must go through
    /// `readTicketed` (see `Provider::read_now` for which reads qualify: none that
    /// waits, writes or scans).
    #[napi]
    pub fn read_now(&self, read: &NativeRead, who: CallerInfo, partition: String) -> Option<NativeResponse> {
        self.provider.read_now_parsed(&read.read, &caller(who), &partition).map(respond)
    }

    /// A read; long-polls when the live log has nothing eligible. Tripping `cancel`
    /// ends a waiting poll with `cancelled` and consumes nothing. The answer goes to the
    /// delivery function under `ticket`, not to a promise of its own (see
    /// src/node/delivery.rs for why).
    #[napi]
    pub fn read_ticketed(&self, read: &NativeRead, who: CallerInfo, partition: String, cancel: &NativeCancel, ticket: u32) {
        let p = self.provider.clone();
        let token = cancel.inner.clone();
        let read = read.read.clone();
        let owed = Owed { ticket, delivery: self.delivery.clone(), answered: false };
        napi::bindgen_prelude::spawn(async move {
            // A waiting poll parks: this task ends, and the answer comes from whoever
            // answers the poll (src/session/park.rs).
            p.read_parsed_into(read, caller(who), partition, token, Box::new(owed)).await;
        });
    }

    #[napi]
    pub async fn close(&self, body: Buffer, who: CallerInfo) -> napi::Result<NativeResponse> {
        let p = self.provider.clone();
        let body = body.to_vec();
        blocking(move || Ok(respond(p.close(&body, &caller(who))))).await
    }

    /// Parses a read body once, with its session's service and query (for the host's
    /// authorization callback) when the caller owns it. A body that is not a valid read
    /// throws its wire error.
    #[napi]
    pub fn describe_read(&self, body: &[u8], who: CallerInfo) -> napi::Result<NativeRead, String> {
        guard(|| {
            let read = crate::wire::parse_read(body)?;
            let owner = self.provider.describe(&read.session, &caller(who));
            Ok(NativeRead { read, owner })
        })
    }

    /// Parses an open body once (see [`NativeOpen`]). A body that is not a valid open
    /// throws its wire error.
    #[napi]
    pub fn parse_open(&self, body: &[u8]) -> napi::Result<NativeOpen, String> {
        guard(|| Ok(NativeOpen { open: crate::wire::parse_open(body)? }))
    }

    #[napi]
    pub async fn revoke(&self, principal: String) -> napi::Result<u32> {
        let p = self.provider.clone();
        blocking(move || p.revoke(&principal).map(|n| n as u32).map_err(js_error)).await
    }

    /// Ends one session: `unauthorized`, or with `reset` true `reset-required`.
    #[napi]
    pub async fn revoke_session(&self, session: String, reset: Option<bool>) -> napi::Result<bool> {
        let p = self.provider.clone();
        blocking(move || if reset.unwrap_or(false) { p.reset_session(&session) } else { p.revoke_session(&session) }.map_err(js_error)).await
    }

    /// Prohibits serving rows of `service` (src/session/prohibit.rs): `outpoints` as
    /// `txid.outputIndex`, and/or those matching `filter` (a selection's `where`). Durable and
    /// in force when it resolves.
    #[napi]
    pub async fn prohibit(&self, ticket: Option<i64>, service: String, outpoints: Vec<String>, filter: Option<Value>, reason: String) -> napi::Result<ProhibitResult> {
        in_turn(self.provider.clone(), ticket_of(ticket), move |p, ticket| {
            let o = p.prohibit(ticket, &service, outpoints, filter, &reason).map_err(js_error)?;
            Ok(ProhibitResult { number: o.number as u32, sequence: o.sequence.map(|s| s.to_string()), rows: o.rows as u32, sessions: o.sessions as u32 })
        })
        .await
    }

    /// A policy change (`Provider::change_policy`); resolves with the sessions ended.
    #[napi]
    pub async fn change_policy(&self, ticket: Option<i64>, partitions: Option<Vec<String>>, principals: Option<Vec<String>>) -> napi::Result<u32> {
        in_turn(self.provider.clone(), ticket_of(ticket), move |p, ticket| {
            p.change_policy(ticket, partitions, principals).map(|n| n as u32).map_err(js_error)
        })
        .await
    }

    /// The `scope.access` a session of `partition` gets now.
    #[napi]
    pub fn access_of(&self, partition: String) -> String {
        self.provider.access_of(&partition)
    }

    /// One bounded compaction pass; resolves true when more work remains.
    #[napi]
    pub async fn compact(&self, max_items: u32) -> napi::Result<bool> {
        let p = self.provider.clone();
        blocking(move || p.compact(max_items as usize).map_err(js_error)).await
    }

    /// The sequence of the latest group carrying an invalidation in this epoch ("0" if
    /// none): the current chain view is named after it.
    #[napi]
    pub fn view_since(&self) -> napi::Result<String, String> {
        self.provider.store().view_since().map(|v| v.to_string()).map_err(store_error)
    }

    /// A new epoch whose first group is `changes`, written atomically with the reset (so the
    /// new epoch is never seen empty). Resolves with the new epoch and the group's sequence.
    #[napi]
    pub async fn reset_epoch_with(&self, ticket: Option<i64>, changes: Vec<NativeChange>) -> napi::Result<EpochReset> {
        let ticket = ticket_of(ticket);
        let changes = self.changes_for(ticket, changes)?;
        in_turn(self.provider.clone(), ticket, move |p, ticket| {
            p.store().reset_epoch_with(ticket, changes)
                .map(|(epoch, seq)| EpochReset { epoch, sequence: seq.map(|v| v.to_string()) })
                .map_err(store_error)
        })
        .await
    }

    #[napi]
    pub fn epoch(&self) -> String {
        self.provider.store().epoch()
    }

    #[napi]
    pub fn high_water(&self) -> String {
        self.provider.store().high_water().to_string()
    }

    /// Retained bytes against `maxRetainedBytes`, without touching the disk (a recorded
    /// commit asks after each group).
    #[napi]
    pub fn retention(&self) -> Retention {
        let store = self.provider.store();
        let over = store.over_retained();
        Retention {
            retained_bytes: store.retained_bytes() as i64,
            max_retained_bytes: store.max_retained_bytes().map(|v| v as i64),
            over: over.is_some(),
        }
    }

    #[napi]
    pub fn stats(&self) -> napi::Result<LiveStats, String> {
        // Read first, so that it is dated as close to the caller's call as possible.
        let published_ago_ms = self.provider.store().published_ago().map(|d| d.as_secs_f64() * 1000.0);
        let s = self.provider.store().stats().map_err(store_error)?;
        Ok(LiveStats {
            sessions: self.provider.session_count() as u32,
            views: self.provider.view_count() as u32,
            waiters: self.provider.waiters.total() as u32,
            high_water: s.high_water.to_string(),
            compacted_through: s.compacted_through.to_string(),
            epoch: s.epoch.clone(),
            log_bytes: s.log_bytes as i64,
            rows: s.rows as i64,
            disk_bytes: s.disk_bytes as i64,
            published_ago_ms,
            scan_examined: self.provider.store().scan_examined() as i64,
            retained_bytes: s.retained_bytes as i64,
            max_retained_bytes: self.provider.store().max_retained_bytes().map(|v| v as i64),
            over_retention_budget: self.provider.store().over_retained().is_some(),
            retention_refusals: self.provider.retention_refusals() as i64,
            gate_waiting: s.gate_waiting as i64,
            unservable_groups: s.unservable_groups as i64,
        })
    }

    /// One page of the current members of `service`, with their evidence unless `evidence`
    /// is false, in admission order, read at one immutable snapshot: `at` (null on the first
    /// page = highWater now). Used to find members whose proofs a reorganization may have
    /// orphaned, and to compare the store with Engine storage at attach.
    #[napi]
    pub async fn scan_members(&self, service: String, at: Option<String>, after_key: Option<Buffer>, limit: u32, evidence: Option<bool>) -> napi::Result<MemberPage> {
        let evidence = evidence.unwrap_or(true);
        let p = self.provider.clone();
        let after_key = after_key.map(|b| b.to_vec());
        blocking(move || {
            let store = p.store();
            let at = match at {
                None => store.high_water(),
                Some(s) => s.parse::<u64>().map_err(|_| invalid_arg("at must be a decimal sequence"))?,
            };
            let limit = limit.clamp(1, 10_000) as usize;
            let sel = crate::select::Selection::all();
            let mut rows = Vec::new();
            let mut last_key = None;
            let mut more = false;
            for r in store.snapshot(&service, &sel, at, after_key.as_deref()).map_err(store_error)? {
                let r = r.map_err(store_error)?;
                if rows.len() == limit {
                    more = true;
                    break;
                }
                let beef = match evidence {
                    false => None,
                    true => Some(
                        store
                            .blob_at(&r.beef)
                            .map_err(store_error)?
                            .ok_or_else(|| coded(ErrorCode::Unavailable, "a member's evidence blob is missing"))?
                            .to_vec()
                            .into(),
                    ),
                };
                rows.push(MemberRow { txid: hex::encode(r.outpoint.txid), output_index: r.outpoint.output_index, topic: r.topic, beef });
                last_key = Some(r.key);
            }
            Ok(MemberPage { rows, next: if more { last_key.map(Into::into) } else { None }, at: at.to_string() })
        })
        .await
    }

    /// Small JS-layer records kept in the store (e.g. the issued capability
    /// manifest, so a restart keeps its digest valid for open sessions).
    #[napi]
    pub fn meta_get(&self, name: String) -> napi::Result<Option<String>, String> {
        let v = self.provider.store().aux_get(&meta_key(&name)).map_err(store_error)?;
        Ok(v.map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// Stores a JS-layer record; written and flushed before it returns.
    #[napi]
    pub fn meta_put(&self, name: String, value: String) -> napi::Result<(), String> {
        if value.len() > 1024 * 1024 {
            return Err(invalid_arg("meta values are at most 1 MiB"));
        }
        self.provider.store().aux_write(vec![(meta_key(&name), Some(value.into_bytes()))]).map_err(store_error)
    }

    /// The provider's clock in milliseconds (the one expiry timers follow).
    #[napi]
    pub fn now_ms(&self) -> f64 {
        self.provider.now_ms() as f64
    }

    /// Test support: moves this provider's clock forward (expiry tests).
    #[napi]
    pub fn advance_clock_ms(&self, ms: i64) {
        self.provider.advance_clock_ms(ms);
    }

    /// Test support: commits `changes` at the exact point where the next long poll
    /// has registered its waiter and is about to sleep (BRC-193 §7).
    #[napi]
    pub fn inject_after_waiter_registered(&self, changes: Vec<NativeChange>) -> napi::Result<(), String> {
        let changes = changes.into_iter().map(to_change).collect::<Res<Vec<_>>>()?;
        self.provider.hooks.after_waiter_registered.lock().unwrap().push(changes);
        Ok(())
    }

    /// Graceful shutdown: every waiting poll is answered now with what its cursor can see,
    /// and later opens and reads get `unavailable`. Resolves with how many polls were waiting.
    #[napi]
    pub async fn shut_down(&self) -> napi::Result<u32> {
        let p = self.provider.clone();
        blocking(move || Ok(p.shut_down() as u32)).await
    }

    /// Flushes and releases the data directory so it can be reopened.
    #[napi]
    pub async fn close_store(&self) -> napi::Result<()> {
        let p = self.provider.clone();
        blocking(move || p.store().close().map_err(store_error)).await
    }
}
