//! The BEEF reader (src/bitcoin/beef.rs) against bundles written by @bsv/sdk 2.1.0 and by
//! the Engine's nested @bsv/sdk 1.x (tests/fixtures/beef/bundles.json, made by
//! tests/fixtures/beef/generate.js): V1, V2, Atomic, txid-only entries and a mined subject.
//! It must read what the SDK reads, and refuse every truncation; no corruption panics.

use overlay_lookup_live::bitcoin::beef::{self, Entry, Version};
use overlay_lookup_live::bitcoin::tx::Hash32;
use serde_json::Value;

fn cases() -> Vec<(String, Vec<u8>, Value)> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/beef/bundles.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), hex::decode(c["hex"].as_str().unwrap()).unwrap(), c["sdk"].clone()))
        .collect()
}

#[test]
fn reads_what_the_sdk_reads() {
    let all = cases();
    assert!(all.len() >= 15);
    let mut seen = (false, false, false, false);
    for (name, bytes, sdk) in &all {
        let b = beef::parse(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let version = if b.version == Version::V1 { 1 } else { 2 };
        assert_eq!(version, sdk["version"].as_u64().unwrap(), "{name}");
        assert_eq!(b.subject.map(|s| s.to_hex()), sdk["subject"].as_str().map(String::from), "{name}");
        let entries: Vec<Value> = b
            .entries
            .iter()
            .map(|e| match e {
                Entry::Raw { tx, bump } => serde_json::json!({"txid": tx.txid.to_hex(), "raw": true, "bump": bump}),
                Entry::TxidOnly(t) => serde_json::json!({"txid": t.to_hex(), "raw": false, "bump": null}),
            })
            .collect();
        assert_eq!(Value::Array(entries), sdk["entries"], "{name}");
        for p in sdk["proofs"].as_array().unwrap() {
            let txid = Hash32::from_hex(p["txid"].as_str().unwrap()).unwrap();
            let (_, bump) = b.raw(&txid).unwrap();
            let bp = &b.bumps[bump.unwrap()];
            assert_eq!(bp.height, p["height"].as_u64().unwrap(), "{name}");
            assert_eq!(beef::merkle_root(bp, &txid).unwrap().to_hex(), p["root"].as_str().unwrap(), "{name}");
        }
        seen.0 |= b.version == Version::V1;
        seen.1 |= b.version == Version::V2;
        seen.2 |= b.entries.iter().any(|e| matches!(e, Entry::TxidOnly(_)));
        seen.3 |= b.subject.is_some_and(|s| b.raw(&s).is_some_and(|(_, bump)| bump.is_some()));
    }
    assert_eq!(seen, (true, true, true, true), "V1, V2, txid-only and a mined subject are all covered");
}

#[test]
fn every_truncation_is_refused_and_no_corruption_panics() {
    for (name, bytes, _) in cases() {
        for len in 0..bytes.len() {
            assert!(beef::parse(&bytes[..len]).is_err(), "{name}: a prefix of {len} bytes was accepted");
        }
        let mut accepted = 0;
        for pos in 0..bytes.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = bytes.clone();
                bad[pos] ^= flip;
                if let Ok(b) = beef::parse(&bad) {
                    accepted += 1;
                    // Whatever is accepted names each transaction by the hash of its bytes.
                    for e in &b.entries {
                        if let Entry::Raw { tx, .. } = e {
                            assert_eq!(tx.txid, Hash32::of_double_sha256(tx.raw), "{name}");
                        }
                    }
                    if let Some(s) = b.subject {
                        assert!(b.raw(&s).is_some(), "{name}: an Atomic subject must be carried");
                    }
                }
            }
        }
        // Script bytes and BUMP hashes can change without breaking the structure.
        assert!(accepted > 0, "{name}");
    }
}
