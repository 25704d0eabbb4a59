//! Snapshot scans (BRC-193 §3: the immutable snapshot S at W) and log reads.
//!
//! A row version is in S iff `created <= W` and (`removed == 0` or `removed > W`). Scans never
//! write. Plans, chosen from the selection alone:
//! - admission order, filter with an index-usable part (`eq`, `in`, `and` containing one, `or` of
//!   such): merge the matching index prefixes by (created, outpoint); each prefix is already in
//!   admission order, so the merge streams and stops at W. Rows are re-checked against the full
//!   selection.
//! - admission order with a `range`/`prefix` (top level or in an `and`): collect that index
//!   range, sort by (created, outpoint), fetch; if the range holds more than 10,000 entries it is
//!   not selective and the plan falls back to:
//! - admission order otherwise: walk the row table in admission order, stop at W.
//! - attribute order with a filter on another attribute whose index cover holds at most 10,000
//!   entries: collect, fetch, sort by (order value, created, outpoint) — per page.
//! - attribute order otherwise: walk that attribute's index (narrowed by an `eq`/`prefix`/`range`
//!   on the same attribute), forwards or backwards. A list attribute has one entry per element;
//!   only the entry of its smallest element counts.
//!
//! Resume keys are the 44-byte row-version suffix (created, outpoint) for every order: to resume
//! an attribute-order scan, the row version is read back to recompute its position.
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::select::{decode_scalar, encode_scalar, encode_str_prefix, order_value, Filter, Order, Scalar, Selection};

use super::codec::{row_removed, LogGroup, RowVersion, R};
use super::keys::{self, VERSION_KEY_LEN};
use super::{BlobRef, Context, Outpoint, StoreError};

/// One row of a snapshot page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotRow {
    /// Resume key: created (u64 BE) | txid | output index (u32 BE). Stable for the row version.
    pub key: Vec<u8>,
    pub outpoint: Outpoint,
    pub topic: String,
    pub beef: BlobRef,
    pub context: Option<Context>,
    /// The version's admission sequence.
    pub created: u64,
}

fn visible(created: u64, removed: u64, w: u64) -> bool {
    created <= w && (removed == 0 || removed > w)
}

fn corrupt(what: impl Into<String>) -> StoreError {
    StoreError::Corrupt { path: Default::default(), detail: what.into() }
}

/// Decode what a snapshot row needs (no attributes).
fn row_head(v: &[u8], suffix: &[u8]) -> Result<SnapshotRow, StoreError> {
    let (created, outpoint) = keys::parse_version_suffix(suffix).ok_or_else(|| corrupt("malformed row key"))?;
    let mut r = R::new(v);
    let parse = |r: &mut R| -> Option<(BlobRef, String, Option<Context>)> {
        r.u64()?;
        if r.u8()? == 1 {
            r.u64()?;
        }
        Some((r.blob()?, r.string()?, r.context()?))
    };
    let (beef, topic, context) = parse(&mut r).ok_or_else(|| corrupt("malformed row version"))?;
    Ok(SnapshotRow { key: suffix.to_vec(), outpoint, topic, beef, context, created })
}

fn decode_row(v: &[u8]) -> Result<RowVersion, StoreError> {
    RowVersion::decode(v).ok_or_else(|| corrupt("malformed row version"))
}

type Item = Result<SnapshotRow, StoreError>;

/// Asked before every entry a scan reads; `true` ends the scan with [`StoreError::Cancelled`]
/// (BRC-193 §5: cancellation reaches the database scan, so an abandoned open or read stops
/// costing anything). The caller's cancellation token stands behind it.
pub type StopCheck = Arc<dyn Fn() -> bool + Send + Sync>;

/// How a scan is watched: an optional stop check, and the store's count of entries scans
/// read (tests count work with it; bench/ can too).
#[derive(Clone)]
pub(crate) struct Watch {
    pub stop: Option<StopCheck>,
    pub examined: Arc<AtomicU64>,
}

impl Watch {
    fn stopped(&self) -> bool {
        self.stop.as_ref().is_some_and(|s| s())
    }

    /// `iter` watched: it ends early once the stop check says so, and counts what it read.
    fn source<I: Iterator>(&self, iter: I) -> Watched<I> {
        Watched { inner: iter, watch: self.clone(), seen: 0 }
    }
}

/// A database iterator under a [`Watch`]. Its count is added to the store's once, when it
/// is dropped, so the hot loop touches no shared cache line.
pub(crate) struct Watched<I> {
    inner: I,
    watch: Watch,
    seen: u64,
}

impl<I: Iterator> Iterator for Watched<I> {
    type Item = I::Item;
    fn next(&mut self) -> Option<I::Item> {
        if self.watch.stopped() {
            return None; // SnapshotIter turns the early end into Cancelled
        }
        self.seen += 1;
        self.inner.next()
    }
}

impl<I: DoubleEndedIterator> DoubleEndedIterator for Watched<I> {
    fn next_back(&mut self) -> Option<I::Item> {
        if self.watch.stopped() {
            return None;
        }
        self.seen += 1;
        self.inner.next_back()
    }
}

impl<I> Drop for Watched<I> {
    fn drop(&mut self) {
        self.watch.examined.fetch_add(self.seen, Ordering::Relaxed);
    }
}

pub struct SnapshotIter<'a> {
    inner: Box<dyn Iterator<Item = Item> + Send + 'a>,
    done: bool,
    watch: Watch,
}

impl Iterator for SnapshotIter<'_> {
    type Item = Item;
    fn next(&mut self) -> Option<Item> {
        if self.done {
            return None;
        }
        let mut r = self.inner.next();
        // Checked after the step too: a stopped source ends the inner scan early, and that
        // end must not read as a complete snapshot.
        if self.watch.stopped() {
            r = Some(Err(StoreError::Cancelled));
        }
        // After an error the scan stops: a caller never sees rows past a gap.
        if matches!(r, Some(Err(_)) | None) {
            self.done = true;
        }
        r
    }
}

impl<'a> SnapshotIter<'a> {
    pub(crate) fn new(db: sled::Db, service: &str, sel: &Selection, w: u64, after: Option<&[u8]>, watch: Watch) -> Result<Self, StoreError> {
        if let Some(a) = after {
            if a.len() != VERSION_KEY_LEN {
                return Err(StoreError::Invalid("snapshot resume key has the wrong length".into()));
            }
        }
        if watch.stopped() {
            return Err(StoreError::Cancelled);
        }
        let sel = sel.clone();
        let inner: Box<dyn Iterator<Item = Item> + Send + 'a> = match sel.order.clone() {
            Order::Attribute { name, desc } => {
                // A filter on another attribute with a small index cover: sort its matches.
                let narrowed = {
                    let base = keys::index_attr_prefix(service, &name);
                    attribute_range(&sel.filter, &name, &base) != (base.clone(), keys::prefix_end(&base))
                };
                let cover = if narrowed { None } else { collect_cover(&db, service, &sel.filter, w)? };
                match cover {
                    Some(suffixes) => {
                        Box::new(sorted_by_attribute(&db, service, &sel, &name, desc, w, after, suffixes)?.into_iter().map(Ok))
                    }
                    None => Box::new(attribute_scan(db, service, sel, &name, desc, w, after, &watch)?),
                }
            }
            Order::Admission => match index_prefixes(&sel.filter) {
                Some(p) => Box::new(index_merge(db, service, sel, p, w, after, &watch)),
                None => match collect_range(&db, service, &sel.filter, w, after)? {
                    Some(suffixes) => Box::new(fetch_each(db, service, sel, w, suffixes)),
                    None => Box::new(admission_scan(db, service, sel, w, after, &watch)),
                },
            },
        };
        Ok(SnapshotIter { inner, done: false, watch })
    }
}

/// Walk the row table in admission order.
fn admission_scan(db: sled::Db, service: &str, sel: Selection, w: u64, after: Option<&[u8]>, watch: &Watch) -> AdmissionScan {
    let prefix = keys::service_prefix(keys::ROW, service);
    let start = match after {
        Some(a) => Bound::Excluded([prefix.as_slice(), a].concat()),
        None => Bound::Included(prefix.clone()),
    };
    let end = match keys::prefix_end(&prefix) {
        Some(e) => Bound::Excluded(e),
        None => Bound::Unbounded,
    };
    AdmissionScan {
        iter: watch.source(db.range::<Vec<u8>, _>((start, end))),
        plen: prefix.len(),
        w,
        all: sel.filter == Filter::All,
        sel,
        topic: String::new(),
        done: false,
    }
}

/// The admission-order walk as one flat iterator: this is the hot loop of a full snapshot, so
/// it avoids adapter layers and re-validating a topic equal to the previous row's.
struct AdmissionScan {
    iter: Watched<sled::Iter>,
    plen: usize,
    w: u64,
    sel: Selection,
    all: bool,
    /// The previous row's topic (rows of a service mostly share a few topics).
    topic: String,
    done: bool,
}

impl AdmissionScan {
    /// The row for one entry: `Ok(None)` when it is not visible or not selected; `done` is set
    /// at the first version created after W (rows are in created order).
    fn row(&mut self, k: &[u8], v: &[u8]) -> Result<Option<SnapshotRow>, StoreError> {
        let suffix = k.get(self.plen..).ok_or_else(|| corrupt("short row key"))?;
        let created = u64::from_be_bytes(suffix.get(..8).ok_or_else(|| corrupt("short row key"))?.try_into().unwrap());
        if created > self.w {
            self.done = true;
            return Ok(None);
        }
        let removed = row_removed(v).ok_or_else(|| corrupt("short row version"))?;
        if !visible(created, removed, self.w) {
            return Ok(None);
        }
        if !self.all {
            let row = decode_row(v)?;
            if !self.sel.matches(&row.topic, &row.attributes) {
                return Ok(None);
            }
        }
        row_head_with(v, suffix, &mut self.topic).map(Some)
    }
}

impl Iterator for AdmissionScan {
    type Item = Item;
    fn next(&mut self) -> Option<Item> {
        while !self.done {
            let r = match self.iter.next()? {
                Ok((k, v)) => self.row(&k, &v),
                Err(e) => Err(StoreError::io("scanning rows")(e)),
            };
            match r {
                Ok(Some(row)) => return Some(Ok(row)),
                Ok(None) => {}
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}

/// [`row_head`], reusing `last_topic` when the topic bytes repeat (no UTF-8 re-validation).
fn row_head_with(v: &[u8], suffix: &[u8], last_topic: &mut String) -> Result<SnapshotRow, StoreError> {
    let (created, outpoint) = keys::parse_version_suffix(suffix).ok_or_else(|| corrupt("malformed row key"))?;
    let mut r = R::new(v);
    let parse = |r: &mut R, last: &mut String| -> Option<(BlobRef, String, Option<Context>)> {
        r.u64()?;
        if r.u8()? == 1 {
            r.u64()?;
        }
        let blob = r.blob()?;
        let t = r.bytes()?;
        if t != last.as_bytes() {
            *last = std::str::from_utf8(t).ok()?.to_string();
        }
        Some((blob, last.clone(), r.context()?))
    };
    let (beef, topic, context) = parse(&mut r, last_topic).ok_or_else(|| corrupt("malformed row version"))?;
    Ok(SnapshotRow { key: suffix.to_vec(), outpoint, topic, beef, context, created })
}

/// Most index prefixes one admission-order plan merges.
const MAX_PREFIXES: usize = 256;

/// (attribute, value) pairs whose index entries cover every row the filter can match, or
/// `None` if the filter has no such bounded cover.
fn index_prefixes(f: &Filter) -> Option<Vec<(String, Scalar)>> {
    match f {
        Filter::Eq(a, v) => Some(vec![(a.clone(), v.clone())]),
        Filter::In(a, vs) => Some(vs.iter().map(|v| (a.clone(), v.clone())).collect()),
        Filter::And(fs) => fs.iter().filter_map(index_prefixes).min_by_key(|p| p.len()),
        Filter::Or(fs) => {
            let mut all = Vec::new();
            for f in fs {
                all.extend(index_prefixes(f)?);
            }
            (all.len() <= MAX_PREFIXES).then_some(all)
        }
        _ => None,
    }
}

/// Merge index prefixes in (created, outpoint) order, dedup, fetch and re-check each row.
fn index_merge(
    db: sled::Db,
    service: &str,
    sel: Selection,
    mut prefixes: Vec<(String, Scalar)>,
    w: u64,
    after: Option<&[u8]>,
    watch: &Watch,
) -> impl Iterator<Item = Item> + Send {
    prefixes.sort();
    prefixes.dedup();
    let mut sources: Vec<(usize, Watched<sled::Iter>)> = Vec::new();
    for (a, v) in &prefixes {
        let mut p = keys::index_attr_prefix(service, a);
        encode_scalar(v, &mut p);
        let start = match after {
            Some(k) => Bound::Excluded([p.as_slice(), k].concat()),
            None => Bound::Included(p.clone()),
        };
        let end = match keys::prefix_end(&p) {
            Some(e) => Bound::Excluded(e),
            None => Bound::Unbounded,
        };
        sources.push((p.len(), watch.source(db.range::<Vec<u8>, _>((start, end)))));
    }
    let service = service.to_string();
    let mut heap: BinaryHeap<Reverse<([u8; VERSION_KEY_LEN], usize)>> = BinaryHeap::new();
    let mut pending_err: Option<StoreError> = None;
    let advance = move |i: usize,
                       sources: &mut Vec<(usize, Watched<sled::Iter>)>,
                       heap: &mut BinaryHeap<Reverse<([u8; VERSION_KEY_LEN], usize)>>,
                       err: &mut Option<StoreError>| {
        let (plen, it) = &mut sources[i];
        match it.next() {
            None => {}
            Some(Err(e)) => *err = Some(StoreError::io("scanning an index")(e)),
            Some(Ok((k, _))) => {
                let suffix: [u8; VERSION_KEY_LEN] = match k.get(*plen..).and_then(|s| s.try_into().ok()) {
                    Some(s) => s,
                    None => return *err = Some(corrupt("malformed index key")),
                };
                // Each prefix is in created order: past W this source is finished.
                if u64::from_be_bytes(suffix[..8].try_into().unwrap()) <= w {
                    heap.push(Reverse((suffix, i)));
                }
            }
        }
    };
    for i in 0..sources.len() {
        advance(i, &mut sources, &mut heap, &mut pending_err);
    }
    let mut last: Option<[u8; VERSION_KEY_LEN]> = None;
    std::iter::from_fn(move || loop {
        if let Some(e) = pending_err.take() {
            return Some(Err(e));
        }
        let Reverse((suffix, i)) = heap.pop()?;
        advance(i, &mut sources, &mut heap, &mut pending_err);
        if last == Some(suffix) {
            continue; // the same row version under several values
        }
        last = Some(suffix);
        match fetch_visible(&db, &service, &suffix, w, &sel) {
            Ok(Some((row, _))) => return Some(Ok(row)),
            Ok(None) => continue,
            Err(e) => return Some(Err(e)),
        }
    })
}

/// Most index entries an admission-order `range`/`prefix` plan collects and sorts before it
/// falls back to walking the rows (the range is then not selective enough to be worth it).
const MAX_COLLECT: usize = 10_000;

/// The first `range`/`prefix` on an attribute (top level or an `and` conjunct).
fn range_attribute(f: &Filter) -> Option<&str> {
    match f {
        Filter::Range(a, _) | Filter::Prefix(a, _) => Some(a),
        Filter::And(fs) => fs.iter().find_map(range_attribute),
        _ => None,
    }
}

/// For admission order with a `range`/`prefix`: the sorted row-version suffixes (created <= W,
/// after the resume key) from that attribute's index range, or `None` if there is no such
/// filter or the range holds more than [`MAX_COLLECT`] entries.
fn collect_range(
    db: &sled::Db,
    service: &str,
    f: &Filter,
    w: u64,
    after: Option<&[u8]>,
) -> Result<Option<Vec<[u8; VERSION_KEY_LEN]>>, StoreError> {
    let Some(name) = range_attribute(f) else { return Ok(None) };
    let base = keys::index_attr_prefix(service, name);
    let (lo, hi) = attribute_range(f, name, &base);
    let end = match hi {
        Some(h) => Bound::Excluded(h),
        None => Bound::Unbounded,
    };
    let mut out = Vec::new();
    for (seen, kv) in db.range::<Vec<u8>, _>((Bound::Included(lo), end)).enumerate() {
        if seen >= MAX_COLLECT {
            return Ok(None);
        }
        let (k, _) = kv.map_err(StoreError::io("scanning an index"))?;
        let rest = &k[base.len()..];
        let (_, used) = decode_scalar(rest).ok_or_else(|| corrupt("malformed index key"))?;
        let suffix: [u8; VERSION_KEY_LEN] = rest[used..].try_into().map_err(|_| corrupt("malformed index key"))?;
        let created = u64::from_be_bytes(suffix[..8].try_into().unwrap());
        if created <= w && after.map_or(true, |a| suffix.as_slice() > a) {
            out.push(suffix);
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(Some(out))
}

/// Row versions (created <= W) from the filter's index cover — `eq`/`in`/`or` prefixes or a
/// `range`/`prefix` — sorted by (created, outpoint), or `None` without a cover of at most
/// [`MAX_COLLECT`] entries.
fn collect_cover(db: &sled::Db, service: &str, f: &Filter, w: u64) -> Result<Option<Vec<[u8; VERSION_KEY_LEN]>>, StoreError> {
    let Some(prefixes) = index_prefixes(f) else { return collect_range(db, service, f, w, None) };
    let mut out = Vec::new();
    for (a, v) in prefixes {
        let mut p = keys::index_attr_prefix(service, &a);
        encode_scalar(&v, &mut p);
        for kv in db.scan_prefix(&p) {
            if out.len() >= MAX_COLLECT {
                return Ok(None);
            }
            let (k, _) = kv.map_err(StoreError::io("scanning an index"))?;
            let suffix: [u8; VERSION_KEY_LEN] = k[p.len()..].try_into().map_err(|_| corrupt("malformed index key"))?;
            if u64::from_be_bytes(suffix[..8].try_into().unwrap()) > w {
                break; // each prefix is in created order
            }
            out.push(suffix);
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(Some(out))
}

/// Attribute order over a collected candidate list: fetch, keep visible selected rows, sort by
/// (order value, created, outpoint), reverse for `desc`, and drop everything up to `after`.
#[allow(clippy::too_many_arguments)]
fn sorted_by_attribute(
    db: &sled::Db,
    service: &str,
    sel: &Selection,
    name: &str,
    desc: bool,
    w: u64,
    after: Option<&[u8]>,
    suffixes: Vec<[u8; VERSION_KEY_LEN]>,
) -> Result<Vec<SnapshotRow>, StoreError> {
    let mut rows = Vec::new();
    for sfx in suffixes {
        if let Some((row, full)) = fetch_visible(db, service, &sfx, w, sel)? {
            // `matches` guarantees an order value under attribute order.
            if let Some(v) = order_value(full.attributes.get(name)) {
                rows.push(((v, sfx), row));
            }
        }
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    if desc {
        rows.reverse();
    }
    if let Some(a) = after {
        let pos = resume_position(db, service, name, a)?;
        rows.retain(|(k, _)| if desc { *k < pos } else { *k > pos });
    }
    Ok(rows.into_iter().map(|(_, r)| r).collect())
}

/// (order value, suffix) of the row version a resume key names.
fn resume_position(db: &sled::Db, service: &str, name: &str, a: &[u8]) -> Result<(Scalar, [u8; VERSION_KEY_LEN]), StoreError> {
    let (created, op) = keys::parse_version_suffix(a).ok_or_else(|| StoreError::Invalid("bad resume key".into()))?;
    let v = db
        .get(keys::row(service, created, &op))
        .map_err(StoreError::io("reading a row"))?
        .ok_or_else(|| StoreError::Gone("the snapshot row to resume from was compacted".into()))?;
    let row = decode_row(&v)?;
    let ov = order_value(row.attributes.get(name))
        .ok_or_else(|| StoreError::Invalid("resume key does not belong to this selection".into()))?;
    Ok((ov, a.try_into().map_err(|_| StoreError::Invalid("bad resume key".into()))?))
}

/// Fetch and re-check each row version in the given (already ordered) list.
fn fetch_each(
    db: sled::Db,
    service: &str,
    sel: Selection,
    w: u64,
    suffixes: Vec<[u8; VERSION_KEY_LEN]>,
) -> impl Iterator<Item = Item> + Send {
    let service = service.to_string();
    suffixes.into_iter().filter_map(move |sfx| fetch_visible(&db, &service, &sfx, w, &sel).map(|r| r.map(|(row, _)| row)).transpose())
}

/// Read a row version by its suffix; `Some` if visible at W and selected.
fn fetch_visible(
    db: &sled::Db,
    service: &str,
    suffix: &[u8],
    w: u64,
    sel: &Selection,
) -> Result<Option<(SnapshotRow, RowVersion)>, StoreError> {
    let mut k = keys::service_prefix(keys::ROW, service);
    k.extend_from_slice(suffix);
    let Some(v) = db.get(&k).map_err(StoreError::io("reading a row"))? else {
        // Compaction deletes a version and its index entries in one batch, but a concurrent
        // reader can see the batch half-applied. Compaction only deletes versions removed at or
        // below its horizon (<= W of every snapshot still read), so such a version is not
        // visible here anyway.
        return Ok(None);
    };
    let created = u64::from_be_bytes(suffix[..8].try_into().unwrap());
    let removed = row_removed(&v).ok_or_else(|| corrupt("short row version"))?;
    if !visible(created, removed, w) {
        return Ok(None);
    }
    let row = decode_row(&v)?;
    if !sel.matches(&row.topic, &row.attributes) {
        return Ok(None);
    }
    Ok(Some((row_head(&v, suffix)?, row)))
}

/// The index key range on `name` that covers every row the filter can match.
fn attribute_range(f: &Filter, name: &str, base: &[u8]) -> (Vec<u8>, Option<Vec<u8>>) {
    let whole = (base.to_vec(), keys::prefix_end(base));
    let narrowed = |f: &Filter| -> Option<(Vec<u8>, Option<Vec<u8>>)> {
        match f {
            Filter::Eq(a, v) if a == name => {
                let mut p = base.to_vec();
                encode_scalar(v, &mut p);
                Some((p.clone(), keys::prefix_end(&p)))
            }
            Filter::Prefix(a, s) if a == name => {
                let mut p = base.to_vec();
                encode_str_prefix(s, &mut p);
                Some((p.clone(), keys::prefix_end(&p)))
            }
            Filter::Range(a, b) if a == name => {
                let mut lo = base.to_vec();
                if let Some((v, _)) = &b.lower {
                    encode_scalar(v, &mut lo);
                }
                let hi = match &b.upper {
                    Some((v, _)) => {
                        let mut h = base.to_vec();
                        encode_scalar(v, &mut h);
                        keys::prefix_end(&h)
                    }
                    None => keys::prefix_end(base),
                };
                Some((lo, hi))
            }
            _ => None,
        }
    };
    match f {
        Filter::And(fs) => fs.iter().find_map(narrowed).unwrap_or(whole),
        other => narrowed(other).unwrap_or(whole),
    }
}

/// Walk the order attribute's index (see module docs).
#[allow(clippy::too_many_arguments)]
fn attribute_scan<'a>(
    db: sled::Db,
    service: &str,
    sel: Selection,
    name: &str,
    desc: bool,
    w: u64,
    after: Option<&[u8]>,
    watch: &Watch,
) -> Result<impl Iterator<Item = Item> + Send + 'a, StoreError> {
    let base = keys::index_attr_prefix(service, name);
    let (lo, hi) = attribute_range(&sel.filter, name, &base);
    let mut start = Bound::Included(lo);
    let mut end = match hi {
        Some(h) => Bound::Excluded(h),
        None => Bound::Unbounded,
    };
    if let Some(a) = after {
        // Reposition at the resumed row's own index entry.
        let (ov, _) = resume_position(&db, service, name, a)?;
        let mut k = base.clone();
        encode_scalar(&ov, &mut k);
        k.extend_from_slice(a);
        if desc {
            end = Bound::Excluded(k);
        } else {
            start = Bound::Excluded(k);
        }
    }
    let iter = watch.source(db.range::<Vec<u8>, _>((start, end)));
    let iter: Box<dyn Iterator<Item = sled::Result<(sled::IVec, sled::IVec)>> + Send> =
        if desc { Box::new(iter.rev()) } else { Box::new(iter) };
    let service = service.to_string();
    let name = name.to_string();
    let blen = base.len();
    Ok(iter.filter_map(move |kv| {
        let r = (|| -> Result<Option<SnapshotRow>, StoreError> {
            let (k, _) = kv.map_err(StoreError::io("scanning an index"))?;
            let rest = &k[blen..];
            let (val, used) = decode_scalar(rest).ok_or_else(|| corrupt("malformed index key"))?;
            let suffix = &rest[used..];
            if suffix.len() != VERSION_KEY_LEN {
                return Err(corrupt("malformed index key"));
            }
            if u64::from_be_bytes(suffix[..8].try_into().unwrap()) > w {
                return Ok(None);
            }
            match fetch_visible(&db, &service, suffix, w, &sel)? {
                // A list attribute sorts once, by its smallest element.
                Some((row, full)) if order_value(full.attributes.get(&name)) == Some(val) => Ok(Some(row)),
                _ => Ok(None),
            }
        })();
        r.transpose()
    }))
}

/// Log groups `after < seq <= upto` in order; a missing sequence means it was compacted.
pub struct LogIter {
    inner: Option<sled::Iter>,
    next_seq: u64,
    upto: u64,
    err: Option<StoreError>,
}

impl LogIter {
    pub(crate) fn new(db: sled::Db, after: u64, upto: u64) -> LogIter {
        let it = if after < upto { Some(db.range(keys::log(after + 1)..=keys::log(upto))) } else { None };
        LogIter { inner: it, next_seq: after + 1, upto, err: None }
    }
    pub(crate) fn failed(e: StoreError) -> LogIter {
        LogIter { inner: None, next_seq: 1, upto: 0, err: Some(e) }
    }
}

impl Iterator for LogIter {
    type Item = Result<(u64, LogGroup), StoreError>;
    fn next(&mut self) -> Option<Self::Item> {
        if let Some(e) = self.err.take() {
            self.inner = None;
            return Some(Err(e));
        }
        if self.next_seq > self.upto {
            return None;
        }
        let it = self.inner.as_mut()?;
        let r = match it.next() {
            None => Err(StoreError::Gone(format!("log group {} is no longer retained", self.next_seq))),
            Some(Err(e)) => Err(StoreError::io("reading the log")(e)),
            Some(Ok((k, v))) => {
                let seq = u64::from_be_bytes(k[1..].try_into().unwrap_or([0; 8]));
                if seq != self.next_seq {
                    Err(StoreError::Gone(format!("log group {} is no longer retained", self.next_seq)))
                } else {
                    LogGroup::decode(&v).map(|g| (seq, g)).ok_or_else(|| corrupt(format!("log group {seq} is unreadable")))
                }
            }
        };
        match &r {
            Ok(_) => self.next_seq += 1,
            Err(_) => self.inner = None,
        }
        Some(r)
    }
}
