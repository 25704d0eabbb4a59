//! Projection of a log group onto one session's (service, selection) — BRC-193 §3 "Membership
//! transitions are query-specific"; docs/companions.md "What clients receive".
//!
//! Per change, in the group's change order: membership before = old version exists and matches;
//! after = new version exists and matches.
//! - enter -> `Output`;
//! - leave with the row gone -> `Withdraw` with the removal's reason (`spent`, `evicted`,
//!   `expired`, or `removed` when the Engine stopped retaining it), and for an actual spend with
//!   evidence also `Spend` right after the withdraw;
//! - leave with the row still present (attributes changed) -> `Withdraw{not-selected}`;
//! - stay a member with changed topic, evidence or context -> a new `Output`;
//! - otherwise nothing. An empty result means the group is irrelevant to the session.
//!
//! A group's invalidations (chain-view changes) project first, to every session of their
//! service, as `Invalidated`.
use crate::select::Selection;

use super::codec::LogGroup;
use super::{BlobRef, Context, Outpoint, Txid};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Projected {
    Output { outpoint: Outpoint, topic: String, beef: BlobRef, context: Option<Context> },
    Spend { previous: Outpoint, spending_txid: Txid, beef: BlobRef },
    Withdraw { outpoint: Outpoint, reason: &'static str },
    /// Assessments made under the chain-view context `context_id` no longer hold (BRC-192 §2).
    Invalidated { context_id: String, reason: String },
}

pub(crate) fn project(group: &LogGroup, service: &str, sel: &Selection) -> Vec<Projected> {
    let mut out = Vec::new();
    // A changed chain view concerns every session of the service whatever its selection: the
    // view is under the whole collection. It precedes the reassessed rows (BRC-192 §3).
    for inv in group.invalidations.iter().filter(|i| i.service == service) {
        out.push(Projected::Invalidated { context_id: inv.context_id.clone(), reason: inv.reason.clone() });
    }
    for ch in group.changes.iter().filter(|c| c.service == service) {
        let before = ch.old.as_ref().is_some_and(|o| sel.matches(&o.topic, &o.attributes));
        let after = ch.new.as_ref().filter(|n| sel.matches(&n.topic, &n.attributes));
        match (before, after) {
            (false, None) => {}
            (_, Some(n)) if !before || ch.evidence_changed => out.push(Projected::Output {
                outpoint: ch.outpoint.clone(),
                topic: n.topic.clone(),
                beef: n.beef,
                context: n.context.clone(),
            }),
            (_, Some(_)) => {}
            (true, None) => {
                let reason = match (&ch.new, ch.reason) {
                    (Some(_), _) => "not-selected",
                    (None, Some(r)) => r.as_withdraw_reason(),
                    (None, None) => "removed",
                };
                out.push(Projected::Withdraw { outpoint: ch.outpoint.clone(), reason });
                if let Some((spending_txid, beef)) = ch.spend {
                    out.push(Projected::Spend { previous: ch.outpoint.clone(), spending_txid, beef });
                }
            }
        }
    }
    out
}
