//! Helpers shared by the session integration tests: a provider on real sled in a
//! temporary directory, with one service `svc`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use overlay_lookup_live::select::AttrValue;
use overlay_lookup_live::session::{Caller, Caps, Provider, ProviderConfig, Response};
use overlay_lookup_live::store::{Change, Outpoint, Store, StoreConfig};
use overlay_lookup_live::wire::Limits;
use serde_json::{json, Value};

pub struct World {
    _dir: tempfile::TempDir,
    pub provider: Arc<Provider>,
    next: u64,
}

pub fn world() -> World {
    world_with(Caps::default())
}

/// A world whose provider has these capacity caps.
pub fn world_with(caps: Caps) -> World {
    let dir = tempfile::tempdir().unwrap();
    let provider = provider_with(dir.path(), caps);
    World { _dir: dir, provider, next: 0 }
}

/// A provider on a new store in `dir`, with the service `svc` registered.
pub fn provider_in(dir: &std::path::Path) -> Arc<Provider> {
    provider_with(dir, Caps::default())
}

fn provider_with(dir: &std::path::Path, caps: Caps) -> Arc<Provider> {
    provider_with_limits(dir, caps, Limits::provider(4 * 1024 * 1024, 1024, 25_000).unwrap())
}

/// A provider on a new store in `dir` with these caps and provider limits, `svc` registered.
pub fn provider_with_limits(dir: &std::path::Path, caps: Caps, limits: Limits) -> Arc<Provider> {
    let mut cfg = StoreConfig::new(dir);
    cfg.create = true;
    let store = Store::open(cfg).unwrap();
    let provider = Provider::new(
        store,
        ProviderConfig {
            provider: "https://provider.example".into(),
            network: "test".into(),
            genesis_hash: "00".repeat(32),
            session_seconds: 600,
            replay_seconds: 600,
            limits,
            caps,
        },
    )
    .unwrap();
    provider.register_service("svc", &json!({"id": "urn:test:rules", "parameters": {}})).unwrap();
    provider
}

impl World {
    /// Commits one output whose attribute `k` is `k`.
    pub fn admit(&mut self, k: i64) {
        self.admit_with(BTreeMap::from([("k".to_string(), AttrValue::Int(k))]));
    }

    /// Commits one output with these attributes.
    pub fn admit_with(&mut self, attributes: BTreeMap<String, AttrValue>) {
        self.next += 1;
        let mut txid = [0u8; 32];
        txid[..8].copy_from_slice(&self.next.to_be_bytes());
        let change = Change::Admit {
            service: "svc".into(),
            outpoint: Outpoint { txid, output_index: 0 },
            topic: "tm".into(),
            attributes,
            beef: format!("beef-{}", self.next).into_bytes(),
            context: None,
            expires_at: None,
        };
        self.provider.store().commit(vec![change]).unwrap().expect("a new output changes the collection");
    }

    /// Opens a session of `who` selecting outputs with `k == k`; returns (caller, session, live cursor).
    pub fn open(&self, who: &str, k: i64) -> (Caller, String, String) {
        let (caller, b) = self.open_with(who, json!({"where": {"eq": ["k", k]}}), 100);
        assert_eq!(b["snapshotComplete"], true, "an empty collection's snapshot completes at once");
        (caller, b["session"].as_str().unwrap().to_string(), b["cursor"].as_str().unwrap().to_string())
    }
}

impl World {
    /// Opens a session of `who` with a compiled `selection` and pages of at most
    /// `max_observations`; returns the caller and the parsed first batch.
    pub fn open_with(&self, who: &str, selection: Value, max_observations: u32) -> (Caller, Value) {
        let caller = Caller { principal: who.to_string(), authenticated: true };
        let body = serde_json::to_vec(&json!({
            "version": 1, "requestId": format!("open-request-{who:0>8}"), "service": "svc", "query": {"who": who},
            "limits": {"maxBytes": 65536, "maxObservations": max_observations, "waitMs": 0}
        }))
        .unwrap();
        let res = self.provider.open(&body, &caller, "public", &selection);
        (caller, parse(&res))
    }
}

pub fn parse(r: &Response) -> Value {
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    serde_json::from_slice(&r.body).unwrap()
}

pub fn error_code(r: &Response) -> String {
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    v["error"]["code"].as_str().unwrap_or_default().to_string()
}

