//! Compaction in bounded steps (docs/design.md "Storage": old versions go once no session can read
//! them; log groups once older than every replay promise).
//!
//! Safety argument: group `s` is deleted only when `s <= horizon`, together with the row versions
//! it removed (their `removed == s <= horizon`, so no snapshot at W >= horizon sees them) and the
//! blob references those records held. A reader positioned after the horizon needs only groups
//! `> horizon`, versions with `removed > W` or present, and blobs those reference — all kept.
//! Every removal of a version is recorded in the group that removed it (`old.created`), so walking
//! the log in order finds exactly the versions that become unreachable.
use std::collections::HashMap;
use std::sync::atomic::Ordering;

use super::codec::LogGroup;
use super::commit::{Committer, Txn};
use super::crash::crash_point;
use super::{keys, StoreError};

/// One step: compact consecutive groups after compactedThrough up to `horizon` until about
/// `max_items` deletions; returns whether groups at or below the horizon remain.
pub(crate) fn step(c: &mut Committer, horizon: u64, max_items: usize) -> Result<bool, StoreError> {
    // Only published (durable) groups are compacted.
    let horizon = horizon.min(c.shared.high_water.load(Ordering::Acquire));
    let start = c.shared.compacted.load(Ordering::Acquire);
    if start >= horizon {
        return Ok(false);
    }
    let empty = HashMap::new();
    let mut txn = Txn::new(&c.db, &empty, c.stats);
    let mut items = 0usize;
    let mut last = start;
    while last < horizon && items < max_items {
        let seq = last + 1;
        let k = keys::log(seq);
        let raw = c
            .db
            .get(k)
            .map_err(StoreError::io("reading the log for compaction"))?
            .ok_or_else(|| StoreError::Invalid(format!("log group {seq} is missing")))?;
        let group = LogGroup::decode(&raw).ok_or_else(|| StoreError::Invalid(format!("log group {seq} is unreadable")))?;
        for ch in &group.changes {
            if let Some(old) = &ch.old {
                // A version created by this same group was deleted at commit time.
                if old.created < seq {
                    if let Some(row) = txn.read_row(&ch.service, old.created, &ch.outpoint)? {
                        txn.delete_version(&ch.service, &ch.outpoint, old.created, &row)?;
                        items += 1 + row.attributes.len();
                    }
                }
            }
            if let Some(n) = &ch.new {
                txn.drop_ref(&n.beef.hash)?;
            }
            if let Some((_, b)) = &ch.spend {
                txn.drop_ref(&b.hash)?;
            }
            items += 1;
        }
        txn.del(k.to_vec());
        txn.stats.log_groups = txn.stats.log_groups.saturating_sub(1);
        txn.stats.log_bytes = txn.stats.log_bytes.saturating_sub(9 + raw.len() as u64);
        last = seq;
    }
    let stats = txn.stats;
    let mut batch = sled::Batch::default();
    for (k, v) in txn.writes {
        match v {
            Some(v) => batch.insert(k, v),
            None => batch.remove(k),
        }
    }
    batch.insert(keys::meta("compacted"), last.to_be_bytes().to_vec());
    batch.insert(keys::meta("state"), super::commit::state_record(c.high_water, &stats));
    c.db.apply_batch(batch).map_err(StoreError::io("compacting"))?;
    crash_point("compaction");
    c.db.flush().map_err(StoreError::io("flushing compaction"))?;
    c.set_stats(stats);
    c.shared.compacted.store(last, Ordering::Release);
    Ok(last < horizon)
}
