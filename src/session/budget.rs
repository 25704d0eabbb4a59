//! The provider's own limits applied to the groups it commits (BRC-193 §8: "providers must
//! bound groups at mutation admission"). The store asks this budget, per service, whether a
//! group could ever be served; it refuses a group that could not and splits the groups it
//! makes itself (src/store/commit.rs).
//!
//! "Could ever be served" is measured for the smallest session that sees the whole group: a
//! selection holding every row it touches (each change at its widest, `store::Shape`), the
//! shortest scope (an access scope of one character) and an envelope whose numbers are at
//! their widest. The lengths here are the lengths `Provider::live_group` renders (the test
//! below compares them), so a group admitted is one that such a session can read with the
//! provider's limits; a session with a longer access scope may still find it too large, and
//! is told `permanent-group` (src/session/batch.rs).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::store::{GroupBudget, Shape};
use crate::wire::Limits;

use super::batch::{self, Frame, Phase, Tail};
use super::cursor::{Cursor, Position};
use super::{outpoint_json, scope_json, ProviderConfig};

/// Scopes kept measured, one per service; the map is cleared when it holds more.
const MAX_SCOPES: usize = 1024;

pub(crate) struct ProviderBudget {
    cfg: ProviderConfig,
    limits: Limits,
    scopes: Mutex<HashMap<String, Arc<[u8]>>>,
}

/// Length of standard padded base64 of `n` bytes.
fn base64_len(n: u64) -> u64 {
    n.div_ceil(3) * 4
}

fn digits(mut n: u64) -> u64 {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Sum of the decimal digits counts of 0..n.
fn digits_up_to(n: u64) -> u64 {
    let (mut total, mut low, mut width) = (0u64, 0u64, 1u64);
    while low < n {
        let high = if low == 0 { 10 } else { low.saturating_mul(10) }.min(n);
        total += (high - low) * width;
        low = high;
        width += 1;
    }
    total
}

fn json_len(v: &serde_json::Value) -> u64 {
    serde_json::to_vec(v).expect("a JSON value serializes").len() as u64
}

impl ProviderBudget {
    pub(crate) fn new(cfg: &ProviderConfig) -> ProviderBudget {
        ProviderBudget { cfg: cfg.clone(), limits: cfg.limits.min(Limits::PROFILE_MAX), scopes: Mutex::new(HashMap::new()) }
    }

    /// The shortest scope a session of `service` can have.
    fn scope(&self, service: &str) -> Arc<[u8]> {
        let mut scopes = self.scopes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = scopes.get(service) {
            return s.clone();
        }
        if scopes.len() >= MAX_SCOPES {
            scopes.clear();
        }
        let hex64 = "0".repeat(64);
        let scope: Arc<[u8]> = scope_json(&self.cfg, service, &hex64, &hex64, "x", &"0".repeat(32)).into();
        scopes.insert(service.to_string(), scope.clone());
        scope
    }

    fn payload_len(&self, obs: &Shape) -> (&'static str, u64) {
        match obs {
            // As `Provider::push_output_payload` writes it.
            Shape::Output { outpoint, beef_len, context } => {
                let mut n = r#"{"evidence":{"txid":"","outputIndex":,"beef":""}}"#.len() as u64;
                n += 64 + digits(outpoint.output_index as u64) + base64_len(*beef_len);
                if let Some((schema, bytes_len)) = context {
                    n += r#","context":{"schema":,"bytes":""}"#.len() as u64;
                    n += json_len(&serde_json::Value::from(schema.as_str())) + base64_len(*bytes_len);
                }
                ("output", n)
            }
            Shape::Withdraw { outpoint, reason } => {
                ("withdraw", json_len(&serde_json::json!({"outpoint": outpoint_json(&self.cfg, outpoint), "reason": reason})))
            }
            Shape::Spend { previous, spending_txid, beef_len } => {
                let v = serde_json::json!({"previous": outpoint_json(&self.cfg, previous), "spendingTxid": hex::encode(spending_txid), "beef": ""});
                ("spend", json_len(&v) + base64_len(*beef_len))
            }
            Shape::Invalidated { context_id, reason } => {
                ("assessment-invalidated", json_len(&serde_json::json!({"contextId": context_id, "reason": reason})))
            }
        }
    }
}

impl GroupBudget for ProviderBudget {
    fn observation_bytes(&self, service: &str, obs: &Shape) -> u64 {
        let (kind, payload) = self.payload_len(obs);
        batch::observation_len(0, self.scope(service).len(), kind, payload as usize) as u64
    }

    fn fits(&self, service: &str, seq: u64, observations: u64, bytes: u64) -> bool {
        if observations > self.limits.max_observations as u64 {
            return false;
        }
        // Ids `l-<seq>` and `l-<seq>.<i>` (BRC-193 §8: they depend on epoch and sequence only).
        let group_id = 2 + digits(seq);
        let ids = observations * (group_id + 1) + digits_up_to(observations);
        let group = batch::group_len(group_id as usize, seq, observations as usize, (bytes + ids) as usize);
        let cursor = Cursor { session: [0; 16], epoch: [0; 16], position: Position::Live { through: 0 } }.encoded_len();
        let cursor = "A".repeat(cursor);
        let session = "0".repeat(32);
        let frame = Frame { session: &session, scope_json: self.scope(service), expires_at: u64::MAX, replay_until: u64::MAX, limits: self.limits };
        let tail = Tail { phase: Phase::Live, cursor: &cursor, snapshot_complete: true, through: u64::MAX, high_water: u64::MAX };
        let need = batch::minimum_body(frame.envelope_len(&tail), group, &self.limits);
        batch::provider_can_carry(need, observations as usize, &self.limits)
    }

    fn describe(&self) -> String {
        format!("maxObservations {}, maxBytes {}", self.limits.max_observations, self.limits.max_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::Selection;
    use crate::session::Provider;
    use crate::store::{Change, Context, Outpoint, RemoveReason, SpendInput, Store, StoreConfig};

    #[test]
    fn digit_sums() {
        for n in [0u64, 1, 9, 10, 11, 99, 100, 101, 1234] {
            assert_eq!(digits_up_to(n), (0..n).map(digits).sum::<u64>(), "{n}");
        }
    }

    fn op(n: u8, i: u32) -> Outpoint {
        Outpoint { txid: [n; 32], output_index: i }
    }

    /// Every kind of observation, measured as the budget measures it and rendered as a read
    /// renders it for the shortest scope: the lengths agree exactly.
    #[test]
    fn measured_groups_are_as_long_as_rendered_groups() {
        let dir = std::env::temp_dir().join(format!("oll-budget-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::open(StoreConfig { create: true, ..StoreConfig::new(&dir) }).unwrap();
        let cfg = ProviderConfig::for_tests("02".to_string() + &"ab".repeat(32));
        let provider = Provider::new(store.clone(), cfg.clone()).unwrap();
        let svc = "svc \"quoted\"".to_string();
        let admit = |n: u8, i: u32, ctx: Option<Context>| Change::Admit {
            service: svc.clone(),
            outpoint: op(n, i),
            topic: "t".into(),
            attributes: Default::default(),
            beef: vec![n; 1000 + n as usize],
            context: ctx,
            expires_at: None,
        };
        store.commit(vec![admit(1, 0, None), admit(2, 12, None)]).unwrap();
        let seq = store
            .commit(vec![
                Change::Invalidate { service: svc.clone(), context_id: "chain-view/0".into(), reason: "reorg \u{1}".into() },
                Change::Remove { service: svc.clone(), outpoint: op(1, 0), reason: RemoveReason::Spent, spend: Some(SpendInput { spending_txid: [9; 32], beef: vec![7; 77] }) },
                Change::Remove { service: svc.clone(), outpoint: op(2, 12), reason: RemoveReason::Expired, spend: None },
                admit(3, 1, Some(Context { schema: "urn:x:\"s\"".into(), bytes: vec![1, 2, 3, 4] })),
                Change::Refresh { service: svc.clone(), outpoint: op(3, 1), beef: vec![5; 301] },
            ])
            .unwrap()
            .unwrap();
        let budget = ProviderBudget::new(&cfg);
        let (_, group) = store.log_after(seq - 1, seq).next().unwrap().unwrap();
        let projected = store.project(&group, &svc, &Selection::all());
        let shapes: Vec<Shape> = vec![
            Shape::Invalidated { context_id: "chain-view/0".into(), reason: "reorg \u{1}".into() },
            Shape::Withdraw { outpoint: op(1, 0), reason: "spent" },
            Shape::Spend { previous: op(1, 0), spending_txid: [9; 32], beef_len: 77 },
            Shape::Withdraw { outpoint: op(2, 12), reason: "expired" },
            Shape::Output { outpoint: op(3, 1), beef_len: 1003, context: Some(("urn:x:\"s\"".into(), 4)) },
            Shape::Output { outpoint: op(3, 1), beef_len: 301, context: Some(("urn:x:\"s\"".into(), 4)) },
        ];
        assert_eq!(projected.len(), shapes.len());
        let scope = budget.scope(&svc);
        let rendered = provider.live_group(&scope, seq, &projected).unwrap();
        let bytes: u64 = shapes.iter().map(|s| budget.observation_bytes(&svc, s)).sum();
        let group_id = 2 + digits(seq);
        let n = shapes.len() as u64;
        let measured = batch::group_len(group_id as usize, seq, n as usize, (bytes + n * (group_id + 1) + digits_up_to(n)) as usize);
        assert_eq!(measured, rendered.bytes.len());
        drop(provider);
        store.close().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
