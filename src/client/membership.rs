//! Source membership (BRC-193 §9, BRC-192 §10.5). Pure: the store loads the rows a
//! group touches, calls [`apply_group`], and writes the result in the same commit.
//!
//! Invariants enforced here:
//! - a group's observations apply in their array order (the last one for an
//!   outpoint wins within the group);
//! - `output` sets present with the newest context, `withdraw` sets absent; other
//!   kinds leave membership alone;
//! - a row never moves back to an older sequence: an effect whose sequence is below
//!   the row's is stale and ignored (the generation/sequence fence). Equal sequences
//!   are allowed because snapshot groups share W and keep their page order.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::parse::{Effect, OutpointId, Phase};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemberRow {
    pub outpoint: OutpointId,
    pub present: bool,
    pub sequence: u64,
    #[serde(rename = "observationId")]
    pub observation_id: String,
    pub context: Option<Value>,
    pub phase: Phase,
}

/// One received observation as the store retains it for later acceptance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RetainedObservation {
    pub id: String,
    pub effect: Effect,
}

/// The outpoints a group touches, in first-touch order.
pub fn touched(observations: &[RetainedObservation]) -> Vec<OutpointId> {
    let mut out: Vec<OutpointId> = Vec::new();
    for o in observations {
        let op = match &o.effect {
            Effect::Present { outpoint, .. } | Effect::Absent { outpoint } => outpoint,
            Effect::None => continue,
        };
        if !out.contains(op) {
            out.push(op.clone());
        }
    }
    out
}

/// Applies one accepted group to `rows` (keyed by [`OutpointId::key`]). Returns how
/// many rows changed.
pub fn apply_group(
    rows: &mut BTreeMap<Vec<u8>, MemberRow>,
    phase: Phase,
    sequence: u64,
    observations: &[RetainedObservation],
) -> usize {
    let mut changed = 0;
    for o in observations {
        let (outpoint, present, context) = match &o.effect {
            Effect::Present { outpoint, context } => (outpoint, true, context.clone()),
            Effect::Absent { outpoint } => (outpoint, false, None),
            Effect::None => continue,
        };
        let key = outpoint.key();
        if rows.get(&key).is_some_and(|r| r.sequence > sequence) {
            continue; // stale: never a reversal
        }
        rows.insert(
            key,
            MemberRow {
                outpoint: outpoint.clone(),
                present,
                sequence,
                observation_id: o.id.clone(),
                context,
                phase,
            },
        );
        changed += 1;
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(i: u32) -> OutpointId {
        OutpointId { txid: "ab".repeat(32), output_index: i }
    }
    fn present(id: &str, i: u32, ctx: Option<&str>) -> RetainedObservation {
        RetainedObservation {
            id: id.into(),
            effect: Effect::Present { outpoint: op(i), context: ctx.map(|c| Value::String(c.into())) },
        }
    }
    fn absent(id: &str, i: u32) -> RetainedObservation {
        RetainedObservation { id: id.into(), effect: Effect::Absent { outpoint: op(i) } }
    }

    #[test]
    fn array_order_within_a_group_last_wins() {
        let mut rows = BTreeMap::new();
        apply_group(&mut rows, Phase::Live, 10, &[present("a", 0, None), absent("b", 0), present("c", 0, Some("x"))]);
        let r = &rows[&op(0).key()];
        assert!(r.present);
        assert_eq!((r.sequence, r.observation_id.as_str()), (10, "c"));
        assert_eq!(r.context, Some(Value::String("x".into())));
    }

    #[test]
    fn enter_leave_reenter_and_newest_context() {
        let mut rows = BTreeMap::new();
        apply_group(&mut rows, Phase::Live, 1, &[present("1", 0, Some("old"))]);
        apply_group(&mut rows, Phase::Live, 2, &[absent("2", 0)]);
        assert!(!rows[&op(0).key()].present);
        apply_group(&mut rows, Phase::Live, 3, &[present("3", 0, Some("new"))]);
        let r = &rows[&op(0).key()];
        assert!(r.present);
        assert_eq!(r.context, Some(Value::String("new".into())));
    }

    #[test]
    fn older_sequence_is_a_no_op() {
        let mut rows = BTreeMap::new();
        apply_group(&mut rows, Phase::Live, 11, &[absent("w", 0)]);
        let n = apply_group(&mut rows, Phase::Live, 10, &[present("p", 0, None)]);
        assert_eq!(n, 0);
        assert!(!rows[&op(0).key()].present);
        assert_eq!(rows[&op(0).key()].sequence, 11);
    }

    #[test]
    fn spend_and_other_kinds_do_not_touch_membership() {
        let mut rows = BTreeMap::new();
        let n = apply_group(&mut rows, Phase::Live, 5, &[RetainedObservation { id: "s".into(), effect: Effect::None }]);
        assert_eq!(n, 0);
        assert!(rows.is_empty());
        assert!(touched(&[RetainedObservation { id: "s".into(), effect: Effect::None }]).is_empty());
    }

    #[test]
    fn snapshot_groups_sharing_w_apply_in_page_order() {
        let mut rows = BTreeMap::new();
        apply_group(&mut rows, Phase::Snapshot, 10, &[present("p1", 0, None)]);
        apply_group(&mut rows, Phase::Snapshot, 10, &[absent("p2", 0)]);
        assert!(!rows[&op(0).key()].present);
        assert_eq!(rows[&op(0).key()].observation_id, "p2");
    }
}
