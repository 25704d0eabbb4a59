//! BRC-74 BUMP Merkle paths: the one implementation of "which root does this path give
//! for this txid", used by the receipt side ([`super::beef::merkle_root`]) and by the
//! native verifier ([`crate::bitcoin::verify`]).
//!
//! The computation follows `@bsv/sdk`'s `MerklePath.computeRoot` (the verdicts must be
//! the same whichever engine computed them):
//! - the txid's offset is the offset of its leaf at level 0;
//! - at each height the sibling `(index >> height) ^ 1` is read from the path, or
//!   computed from the two nodes below it when the path omits it (a compound BUMP
//!   whose txids cover a subtree);
//! - a leaf with the duplicate flag stands for "same as the working hash";
//! - the tree height is at least the number of levels, and for a path that has only
//!   level 0 (every leaf given, as a compound single-level BUMP is written) the height
//!   the highest offset implies; there the last odd node of a level is paired with
//!   itself, as Bitcoin's Merkle tree pairs it;
//! - a block of one transaction (one level, one leaf) has the txid as its root.
//!
//! [`check`] is the structural validation the SDK applies when it reads a BUMP
//! (`new MerklePath(...)`): no empty level 0, no repeated offset in a level, and every
//! level-0 leaf computes the same root.

use sha2::{Digest, Sha256};

use super::beef::Bump;
use super::tx::Hash32;

fn sha256d(a: &[u8; 32], b: &[u8; 32]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(a);
    h.update(b);
    Sha256::digest(h.finalize()).into()
}

/// The offset of `wire` (a txid in wire byte order) among the level-0 leaves.
pub fn index_of(bump: &Bump, wire: &[u8; 32]) -> Option<u64> {
    bump.levels.first()?.iter().find(|(_, h)| h.as_ref() == Some(wire)).map(|(o, _)| *o)
}

/// A node of the tree: `Some(Some(hash))` a hash, `Some(None)` the duplicate flag,
/// `None` unknown.
type Node = Option<Option<[u8; 32]>>;

fn max_offset(bump: &Bump) -> u64 {
    bump.levels.first().and_then(|l| l.keys().next_back().copied()).unwrap_or(0)
}

/// The node at (height, offset): given by the path, or computed from the level below
/// (as the SDK's `findOrComputeLeaf`).
fn find_or_compute(bump: &Bump, height: usize, offset: u64, max0: u64, budget: &mut u32) -> Node {
    if let Some(level) = bump.levels.get(height) {
        if let Some(n) = level.get(&offset) {
            return Some(*n);
        }
    }
    if height == 0 {
        return None;
    }
    // A compound path can make the recursion wide: bounded, never a hang.
    if *budget == 0 {
        return None;
    }
    *budget -= 1;
    let h = height - 1;
    let l = offset.checked_shl(1)?;
    let left = match find_or_compute(bump, h, l, max0, budget) {
        Some(Some(x)) => x,
        _ => return None,
    };
    match find_or_compute(bump, h, l.wrapping_add(1), max0, budget) {
        Some(Some(right)) => Some(Some(sha256d(&left, &right))),
        Some(None) => Some(Some(sha256d(&left, &left))),
        None => {
            if bump.levels.len() == 1 && l == (max0 >> h) {
                Some(Some(sha256d(&left, &left)))
            } else {
                None
            }
        }
    }
}

/// Why a path gives no root for a txid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RootError {
    NotInPath,
    Missing { height: usize },
}

impl std::fmt::Display for RootError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RootError::NotInPath => f.write_str("the transaction is not in the Merkle path"),
            RootError::Missing { height } => write!(f, "the Merkle path lacks a hash at height {height}"),
        }
    }
}

/// The root the path computes for `txid` (display order), as the SDK's `computeRoot`.
pub fn compute_root(bump: &Bump, txid: &Hash32) -> Result<Hash32, RootError> {
    let mut wire = txid.0;
    wire.reverse();
    compute_root_wire(bump, &wire).map(|h| Hash32::from_wire(&h))
}

/// [`compute_root`] on wire-order hashes.
pub fn compute_root_wire(bump: &Bump, wire: &[u8; 32]) -> Result<[u8; 32], RootError> {
    let index = index_of(bump, wire).ok_or(RootError::NotInPath)?;
    if bump.levels.len() == 1 && bump.levels[0].len() == 1 {
        return Ok(*wire);
    }
    let max0 = max_offset(bump);
    let implied = 64 - max0.leading_zeros() as usize;
    let tree_height = bump.levels.len().max(implied);
    let mut working = *wire;
    let mut budget = 1u32 << 16;
    for height in 0..tree_height {
        let offset = (index >> height) ^ 1;
        match find_or_compute(bump, height, offset, max0, &mut budget) {
            None => {
                if bump.levels.len() == 1 && (index >> height) == (max0 >> height) {
                    working = sha256d(&working, &working);
                    continue;
                }
                return Err(RootError::Missing { height });
            }
            Some(None) => working = sha256d(&working, &working),
            Some(Some(sib)) => {
                working = if offset % 2 == 1 { sha256d(&working, &sib) } else { sha256d(&sib, &working) };
            }
        }
    }
    Ok(working)
}

/// The SDK's reading checks on a BUMP: level 0 is not empty and every level-0 leaf
/// computes the same root (offsets are unique by construction of [`Bump`]).
pub fn check(bump: &Bump) -> Result<(), String> {
    let level0 = match bump.levels.first() {
        Some(l) if !l.is_empty() => l,
        _ => return Err("the BUMP has an empty level 0".into()),
    };
    let first_hash = level0.values().find_map(|h| *h);
    let mut root: Option<Result<[u8; 32], RootError>> = None;
    for h in level0.values() {
        // A duplicate leaf computes the root of the first leaf that has a hash.
        let leaf = match h.or(first_hash) {
            Some(x) => x,
            None => return Err("the BUMP has no leaf with a hash".into()),
        };
        let r = compute_root_wire(bump, &leaf);
        match &root {
            None => root = Some(r),
            Some(prev) => {
                if *prev != r {
                    return Err("the BUMP's leaves compute different roots".into());
                }
            }
        }
    }
    match root {
        Some(Err(e)) => Err(format!("the BUMP does not compute a root: {e}")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn h(b: u8) -> [u8; 32] {
        [b; 32]
    }

    #[test]
    fn single_transaction_block_root_is_the_txid() {
        let bump = Bump { height: 1, levels: vec![BTreeMap::from([(0, Some(h(1)))])] };
        assert_eq!(compute_root_wire(&bump, &h(1)).unwrap(), h(1));
        assert_eq!(compute_root_wire(&bump, &h(2)), Err(RootError::NotInPath));
    }

    #[test]
    fn two_level_path_and_its_compound_single_level_form_agree() {
        // Leaves 0..3: root = H(H(a,b), H(c,d)).
        let (a, b, c, d) = (h(1), h(2), h(3), h(4));
        let root = sha256d(&sha256d(&a, &b), &sha256d(&c, &d));
        let path = Bump { height: 5, levels: vec![BTreeMap::from([(2, Some(c)), (3, Some(d))]), BTreeMap::from([(0, Some(sha256d(&a, &b)))])] };
        assert_eq!(compute_root_wire(&path, &c).unwrap(), root);
        let flat = Bump { height: 5, levels: vec![BTreeMap::from([(0, Some(a)), (1, Some(b)), (2, Some(c)), (3, Some(d))])] };
        for x in [a, b, c, d] {
            assert_eq!(compute_root_wire(&flat, &x).unwrap(), root);
        }
        assert!(check(&flat).is_ok());
        // Three leaves: the last odd one pairs with itself.
        let odd = Bump { height: 5, levels: vec![BTreeMap::from([(0, Some(a)), (1, Some(b)), (2, Some(c))])] };
        assert_eq!(compute_root_wire(&odd, &c).unwrap(), sha256d(&sha256d(&a, &b), &sha256d(&c, &c)));
    }
}
