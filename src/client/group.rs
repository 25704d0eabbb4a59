//! A received group's durable record and the rule that admits it into membership
//! (BRC-193 §8, §9: groups are applied whole, in retained order).

use serde::{Deserialize, Serialize};

use super::db::{key, Tx};
use super::journal::{Candidate, GroupEvidence, GroupRef};
use super::membership::RetainedObservation;
use super::parse::Phase;
use super::ClientError;

/// Which rule admits a received group into source membership.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Membership {
    /// On receipt: membership is the source's claim (its evidence is judged apart, in
    /// the reconciled graph). The default.
    #[default]
    Claims,
    /// When the group's evidence has all verified (needs the reconciler); a group
    /// without evidence (a withdrawal) needs nothing more. In receipt order.
    Verified,
    /// When the application calls [`ClientDb::mark_verified`]. In receipt order.
    Manual,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct GroupRecord {
    pub(crate) id: String,
    pub(crate) sequence: u64,
    pub(crate) phase: Phase,
    pub(crate) digest: String,
    pub(crate) observations: Vec<RetainedObservation>,
    /// Cleared for membership (by its rule).
    pub(crate) verified: bool,
    pub(crate) accepted: bool,
    #[serde(default)]
    pub(crate) gate: Membership,
    /// The evidence candidates it brought (with the reconciler configured).
    #[serde(default)]
    pub(crate) candidates: Vec<Candidate>,
    /// `None` when it was received without the reconciler (nothing is tracked).
    #[serde(default)]
    pub(crate) evidence: Option<GroupEvidence>,
    #[serde(default)]
    pub(crate) evidence_reason: Option<String>,
}

impl GroupRecord {
    pub(crate) fn load(tx: &Tx, g: &GroupRef) -> Result<Option<GroupRecord>, ClientError> {
        tx.get_json(&key(b'R', &g.source.0, Some(g.generation), &g.ordinal.to_be_bytes()))
    }
    pub(crate) fn save(&self, tx: &mut Tx, g: &GroupRef) {
        tx.put_json(key(b'R', &g.source.0, Some(g.generation), &g.ordinal.to_be_bytes()), self);
    }
}

