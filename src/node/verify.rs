//! napi exports of native evidence verification ([`crate::bitcoin::verify`]): the
//! verdict of one BEEF for one txid, with the Merkle root claims a ChainTracker must
//! confirm. `verifyBeef` runs on the calling thread; `verifyBeefAsync` and
//! `verifyBeefBatch` run on the libuv pool (napi AsyncTask), so the JS thread only
//! hands bytes over and reads the answer. js/client/verifier.js settles the claims.

// The #[napi] registrations are compiled out of unit-test builds.
#![cfg_attr(test, allow(dead_code))]

use std::panic::{catch_unwind, AssertUnwindSafe};

use napi::bindgen_prelude::{AsyncTask, Buffer};
use napi::{Env, Task};
use napi_derive::napi;

use super::error::invalid_arg;
use crate::bitcoin::tx::Hash32;
use crate::bitcoin::verify::{self, Limits, Status, Verification};

/// Bounds of a native verification (js/client/verifier.js's verification options).
#[napi(object)]
#[derive(Clone, Default)]
pub struct NativeVerifyOptions {
    /// Largest evidence accepted (bytes; default 1 MiB).
    pub max_bytes: Option<u32>,
    /// Most transactions a bundle may carry (default 256).
    pub max_transactions: Option<u32>,
    /// Deepest unconfirmed ancestry (default 64).
    pub max_depth: Option<u32>,
    /// Most script bytes the unconfirmed ancestry may run (default 1 MiB).
    pub max_script_bytes: Option<u32>,
    /// Stack memory bound of the interpreter (bytes; default 32,000,000 as the SDK's).
    pub memory_limit: Option<f64>,
    /// Operation budget over the bundle: opcodes executed plus bytes hashed (default 2^32).
    pub budget: Option<f64>,
}

#[napi(object)]
pub struct NativeRootClaim {
    pub height: f64,
    /// Display hex, as `isValidRootForHeight` takes it.
    pub root: String,
    pub txid: String,
    /// The proven transaction is at offset 0 (a coinbase).
    pub coinbase: bool,
    /// An unmined transaction of the bundle spends an output of it: a coinbase must then be
    /// at least 100 blocks below the next block (the node's maturity rule).
    pub spent: bool,
}

#[napi(object)]
pub struct NativeVerifyWork {
    pub ops: f64,
    pub hashed_bytes: f64,
    pub signatures: f64,
}

#[napi(object)]
pub struct NativeVerification {
    /// 'verified' | 'invalid' | 'limited' | 'unresolved': the outcome once every claim
    /// is confirmed by the ChainTracker.
    pub status: String,
    pub reason: String,
    /// Roots to confirm, in the order `Transaction.verify` asks for them.
    pub claims: Vec<NativeRootClaim>,
    /// The highest block a proof relied on is in (compare with `currentHeight()`).
    pub proof_height: Option<f64>,
    /// The subject transaction's bytes, when the bundle holds it.
    pub raw: Option<Buffer>,
    pub work: NativeVerifyWork,
}

#[napi(object)]
pub struct NativeVerifyJob {
    pub beef: Buffer,
    pub txid: String,
}

fn limits(o: Option<&NativeVerifyOptions>) -> Limits {
    let d = Limits::default();
    let Some(o) = o else { return d };
    let num = |v: Option<f64>, dflt: u64| v.filter(|x| x.is_finite() && *x >= 0.0).map_or(dflt, |x| x as u64);
    Limits {
        max_bytes: o.max_bytes.map_or(d.max_bytes, |x| x as usize),
        max_transactions: o.max_transactions.map_or(d.max_transactions, |x| x as usize),
        max_depth: o.max_depth.map_or(d.max_depth, |x| x as usize),
        max_script_bytes: o.max_script_bytes.map_or(d.max_script_bytes, |x| x as usize),
        memory_limit: num(o.memory_limit, d.memory_limit as u64) as usize,
        budget: num(o.budget, d.budget),
    }
}

/// One job's answer computed off the JS thread (no JS values inside).
pub struct Computed(Verification);

fn run(beef: &[u8], txid: &str, l: &Limits) -> Verification {
    let Ok(id) = Hash32::from_hex(txid) else {
        return Verification { status: Status::Invalid, reason: format!("{txid:?} is not a txid"), claims: Vec::new(), proof_height: None, raw: None, work: Default::default() };
    };
    match catch_unwind(AssertUnwindSafe(|| verify::verify_beef(beef, &id, l))) {
        Ok(v) => v,
        // Never unwinds into Node; a bug is reported, never a verdict on the evidence.
        Err(_) => Verification { status: Status::Unresolved, reason: "internal error in the native verifier".into(), claims: Vec::new(), proof_height: None, raw: None, work: Default::default() },
    }
}

fn to_js(v: Verification) -> NativeVerification {
    NativeVerification {
        status: v.status.as_str().to_string(),
        reason: v.reason,
        claims: v.claims.into_iter().map(|c| NativeRootClaim { height: c.height as f64, root: c.root.to_hex(), txid: c.txid.to_hex(), coinbase: c.coinbase, spent: c.spent }).collect(),
        proof_height: v.proof_height.map(|h| h as f64),
        raw: v.raw.map(Buffer::from),
        work: NativeVerifyWork { ops: v.work.ops as f64, hashed_bytes: v.work.hashed_bytes as f64, signatures: v.work.signatures as f64 },
    }
}

/// Verifies `txid`'s evidence on the calling thread (see `verifyBeefAsync` to keep the
/// JS thread free). Never throws for bad evidence: the status says what it is.
#[napi(js_name = "verifyBeef")]
pub fn verify_beef(beef: Buffer, txid: String, opts: Option<NativeVerifyOptions>) -> NativeVerification {
    to_js(run(&beef, &txid, &limits(opts.as_ref())))
}

pub struct VerifyTask {
    jobs: Vec<(Vec<u8>, String)>,
    limits: Limits,
}

impl Task for VerifyTask {
    type Output = Vec<Computed>;
    type JsValue = Vec<NativeVerification>;
    fn compute(&mut self) -> napi::Result<Self::Output> {
        Ok(self.jobs.iter().map(|(b, t)| Computed(run(b, t, &self.limits))).collect())
    }
    fn resolve(&mut self, _env: Env, output: Self::Output) -> napi::Result<Self::JsValue> {
        Ok(output.into_iter().map(|c| to_js(c.0)).collect())
    }
}

pub struct VerifyOneTask(VerifyTask);

impl Task for VerifyOneTask {
    type Output = Vec<Computed>;
    type JsValue = NativeVerification;
    fn compute(&mut self) -> napi::Result<Self::Output> {
        self.0.compute()
    }
    fn resolve(&mut self, _env: Env, output: Self::Output) -> napi::Result<Self::JsValue> {
        output.into_iter().next().map(|c| to_js(c.0)).ok_or_else(|| napi::Error::from_reason("no result"))
    }
}

/// `verifyBeef` on the libuv thread pool: resolves with the same answer.
#[napi(js_name = "verifyBeefAsync", ts_return_type = "Promise<NativeVerification>")]
pub fn verify_beef_async(beef: Buffer, txid: String, opts: Option<NativeVerifyOptions>) -> AsyncTask<VerifyOneTask> {
    AsyncTask::new(VerifyOneTask(VerifyTask { jobs: vec![(beef.to_vec(), txid)], limits: limits(opts.as_ref()) }))
}

/// Several jobs in one pool task (less handing over per job); answers in job order.
#[napi(js_name = "verifyBeefBatch", ts_return_type = "Promise<Array<NativeVerification>>")]
pub fn verify_beef_batch(jobs: Vec<NativeVerifyJob>, opts: Option<NativeVerifyOptions>) -> napi::Result<AsyncTask<VerifyTask>, String> {
    if jobs.len() > 1 << 16 {
        return Err(invalid_arg("a batch holds at most 65536 jobs"));
    }
    Ok(AsyncTask::new(VerifyTask { jobs: jobs.into_iter().map(|j| (j.beef.to_vec(), j.txid)).collect(), limits: limits(opts.as_ref()) }))
}
