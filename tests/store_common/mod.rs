//! Helpers shared by the store integration tests (real sled in temp directories).
#![allow(dead_code)]
use std::sync::Arc;

use overlay_lookup_live::select::{attributes_from_json, Attributes, Selection};
use overlay_lookup_live::store::{Change, Context, Outpoint, RemoveReason, SpendInput, Store, StoreConfig};
use serde_json::Value;

pub fn op(n: u32) -> Outpoint {
    let mut txid = [0u8; 32];
    txid[28..].copy_from_slice(&n.to_be_bytes());
    Outpoint { txid, output_index: n % 3 }
}

pub fn attrs(v: Value) -> Attributes {
    attributes_from_json(&v).unwrap()
}

pub fn sel(v: Value) -> Selection {
    Selection::from_json(&v).unwrap()
}

pub fn beef(n: u32) -> Vec<u8> {
    format!("beef-{n}").into_bytes()
}

pub fn admit(svc: &str, n: u32, a: Value) -> Change {
    Change::Admit {
        service: svc.into(),
        outpoint: op(n),
        topic: "tm_test".into(),
        attributes: attrs(a),
        beef: beef(n),
        context: None,
        expires_at: None,
    }
}

pub fn admit_full(svc: &str, n: u32, topic: &str, a: Value, beef: Vec<u8>, ctx: Option<&str>, exp: Option<u64>) -> Change {
    Change::Admit {
        service: svc.into(),
        outpoint: op(n),
        topic: topic.into(),
        attributes: attrs(a),
        beef,
        context: ctx.map(|c| Context { schema: "urn:test:ctx".into(), bytes: c.as_bytes().to_vec() }),
        expires_at: exp,
    }
}

pub fn remove(svc: &str, n: u32, reason: RemoveReason) -> Change {
    Change::Remove { service: svc.into(), outpoint: op(n), reason, spend: None }
}

pub fn spend(svc: &str, n: u32, spender: u8) -> Change {
    Change::Remove {
        service: svc.into(),
        outpoint: op(n),
        reason: RemoveReason::Spent,
        spend: Some(SpendInput { spending_txid: [spender; 32], beef: vec![spender, 1, 2, 3] }),
    }
}

pub fn open(dir: &std::path::Path) -> Arc<Store> {
    let mut cfg = StoreConfig::new(dir.join("store"));
    cfg.create = true;
    Store::open(cfg).unwrap()
}

pub fn reopen(dir: &std::path::Path) -> Arc<Store> {
    Store::open(StoreConfig::new(dir.join("store"))).unwrap()
}

/// Outpoints of a full snapshot scan.
pub fn scan_ops(s: &Store, svc: &str, selection: &Selection, w: u64) -> Vec<Outpoint> {
    s.snapshot(svc, selection, w, None).unwrap().map(|r| r.unwrap().outpoint).collect()
}
