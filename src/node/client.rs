//! napi glue for the client checkpoint store (`src/client`). Converts types and
//! errors only: every rule lives in `crate::client`.
//!
//! Errors carry the BRC-192 §6 code (`invalid`, `conflict`,
//! `equivocation`, `limited`, `reset-required`, `unsupported`, `unavailable`).
//! U64 protocol values (through, highWater, expiresAt, replayUntil, sequence) are
//! decimal strings, as on the wire; generations and revisions are numbers.

use std::sync::Mutex;

use napi::bindgen_prelude::Buffer;
use napi_derive::napi;
use serde_json::{json, Value};

use crate::client::{self, ClientError, CommitOptions, SourceKey};



/// The message starts with `[code] `; the JS wrapper (`js/client.js`) moves it to
/// `error.code`. (napi 3 class methods only throw `Status`-coded errors.)
fn err(e: ClientError) -> napi::Error {
    napi::Error::new(napi::Status::GenericFailure, format!("[{}] {}", e.code.as_str(), e.message))
}

fn invalid(m: impl Into<String>) -> napi::Error {
    err(ClientError::invalid(m))
}

/// A source (session branch): BRC-192 Scope minus chain, rules, epoch.
#[napi(object, js_name = "SourceKey")]
pub struct JsSourceKey {
    pub provider: String,
    pub service: String,
    pub query_digest: String,
    pub access: String,
}

fn key(v: JsSourceKey) -> napi::Result<SourceKey> {
    let k = SourceKey { provider: v.provider, service: v.service, query_digest: v.query_digest, access: v.access };
    k.validate().map_err(err)?;
    Ok(k)
}

fn generation(g: i64) -> napi::Result<u64> {
    u64::try_from(g).map_err(|_| invalid("generation must be a non-negative integer"))
}

#[napi(object)]
pub struct CommitBatchOptions {
    /// The maxBytes the read requested (the profile maximum, 4 MiB, applies too).
    pub max_bytes: Option<u32>,
    pub max_observations: Option<u32>,
    /// `false` keeps the groups as pending work until `markVerified`. Default `true`.
    pub verified: Option<bool>,
    /// For an open response: the label whose pending open request id is consumed.
    pub open_label: Option<String>,
}

/// Durable checkpoint store of the lookup-live client (BRC-193 §4, §9).
#[napi(js_name = "CheckpointStore")]
pub struct JsCheckpointStore {
    inner: Mutex<Option<client::CheckpointStore>>,
}

impl JsCheckpointStore {
    fn with<T>(&self, f: impl FnOnce(&client::CheckpointStore) -> Result<T, ClientError>) -> napi::Result<T> {
        let guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let store = guard.as_ref().ok_or_else(|| invalid("checkpoint store is closed"))?;
        f(store).map_err(err)
    }
}

fn u64s(v: u64) -> Value {
    Value::String(v.to_string())
}

#[napi]
impl JsCheckpointStore {
    /// Opens (or creates) the store directory. One open store per path.
    #[napi(factory)]
    pub fn open(path: String) -> napi::Result<Self> {
        let store = client::CheckpointStore::open(&path).map_err(err)?;
        Ok(JsCheckpointStore { inner: Mutex::new(Some(store)) })
    }

    /// Flushes and releases the path. Further calls throw.
    #[napi]
    pub fn close(&self) -> napi::Result<()> {
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match guard.take() {
            Some(s) => s.close().map_err(err),
            None => Ok(()),
        }
    }

    /// Starts a new generation of the source `{provider, service, queryDigest, access}`;
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

    /// The newest generation's committed position, or null.
    #[napi(ts_return_type = "any /* see js/client.d.ts: Checkpoint | null */")]
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
                "epoch": c.epoch, "invalidated": c.invalidated,
            }),
        })
    }

    /// Checks and commits one batch from its exact response bytes, durably, against
    /// the committed cursor (`null` for the open response).
    #[napi(
        ts_return_type = "any /* see js/client.d.ts: CommitOutcome */"
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
        let mut opts = CommitOptions::default();
        if let Some(o) = options {
            if let Some(b) = o.max_bytes {
                opts.max_bytes = b as usize;
            }
            if let Some(n) = o.max_observations {
                opts.max_observations = n as usize;
            }
            if let Some(v) = o.verified {
                opts.verified = v;
            }
            opts.open_label = o.open_label;
        }
        let out = self.with(|s| s.commit_batch(&k, g, expected_cursor.as_deref(), &batch, &opts))?;
        Ok(serde_json::to_value(out).expect("outcome serializes"))
    }

    /// Marks a received group verified; accepts what that unblocks, in order.
    #[napi(ts_return_type = "any /* see js/client.d.ts: CommitOutcome */")]
    pub fn mark_verified(&self, source_key: JsSourceKey, generation_: i64, group_id: String) -> napi::Result<Value> {
        let k = key(source_key)?;
        let g = generation(generation_)?;
        let out = self.with(|s| s.mark_verified(&k, g, &group_id))?;
        Ok(serde_json::to_value(out).expect("outcome serializes"))
    }

    /// Published membership (current generation), present and absent rows.
    #[napi(ts_return_type = "any /* see js/client.d.ts: Member[] */")]
    pub fn members(&self, source_key: JsSourceKey) -> napi::Result<Value> {
        let k = key(source_key)?;
        members_json(self.with(|s| s.members(&k))?)
    }

    /// The replacement generation's accepted rows while it is incomplete.
    #[napi(ts_return_type = "any /* see js/client.d.ts: Member[] */")]
    pub fn partial_members(&self, source_key: JsSourceKey) -> napi::Result<Value> {
        let k = key(source_key)?;
        members_json(self.with(|s| s.partial_members(&k))?)
    }

    #[napi(ts_return_type = "any /* see js/client.d.ts: SourceState */")]
    pub fn state(&self, source_key: JsSourceKey) -> napi::Result<Value> {
        let k = key(source_key)?;
        let st = self.with(|s| s.state(&k))?;
        let mut v = serde_json::to_value(st).expect("state serializes");
        for p in v["pendingGroups"].as_array_mut().into_iter().flatten() {
            p["sequence"] = u64s(p["sequence"].as_u64().unwrap_or(0));
        }
        Ok(v)
    }

    #[napi]
    pub fn revision(&self) -> napi::Result<i64> {
        self.with(|s| s.revision()).map(|r| r as i64)
    }
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
