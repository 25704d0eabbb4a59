//! The whole public reconciliation corpus (BRC-192 §10, BRC-193 §9), vendored in
//! tests/fixtures/spec, replayed through the real on-disk store: every one of the 34
//! traces, every field of every `expect` step (`restart` closes and reopens sled).
//! The replay is `client::conformance`, the same code `npm run conformance:client`
//! runs. The second test shows that each trace can fail: one wrong expectation per
//! trace must be reported as that trace's first difference.

mod client_common;

use client_common::conformance;
use serde_json::{json, Value};

#[test]
fn every_trace_of_the_corpus_passes_through_the_durable_store() {
    let corpus = conformance::load(&conformance::vendored()).unwrap();
    assert_eq!(corpus.traces.len(), 34, "the corpus has 34 traces");
    let dir = tempfile::tempdir().unwrap();
    let results = conformance::run_all(&corpus, dir.path());
    let failures: Vec<String> = results.iter().filter_map(|(n, r)| r.as_ref().err().map(|e| format!("{n}: {e}"))).collect();
    assert!(failures.is_empty(), "failing traces:\n{}", failures.join("\n"));
    assert_eq!(results.len(), 34);
}

/// A wrong value for the given expect field (always differs from the right one).
fn corrupt(field: &str, v: &Value) -> Value {
    match (field, v) {
        ("walletActions", _) => json!(1),
        ("view", _) => json!("no-such-view"),
        ("orders", Value::Object(m)) => {
            let mut m = m.clone();
            let (k, o) = m.iter().next().map(|(k, o)| (k.clone(), o.clone())).unwrap();
            let mut o = o;
            o["readyAt"] = json!(o["readyAt"].as_u64().unwrap() + 1);
            m.insert(k, o);
            Value::Object(m)
        }
        (_, Value::Array(a)) => {
            let mut a = a.clone();
            a.push(json!("P:7"));
            Value::Array(a)
        }
        _ => panic!("no corruption for {field}"),
    }
}

#[test]
fn a_wrong_expectation_in_any_trace_is_reported() {
    let corpus = conformance::load(&conformance::vendored()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut checked_fields = std::collections::BTreeSet::new();
    for (i, trace) in corpus.traces.iter().enumerate() {
        let steps = trace["steps"].as_array().unwrap();
        // Corrupt the last expect step, each field in turn (first field first).
        let at = steps.iter().rposition(|s| s["op"] == "expect").unwrap();
        let fields: Vec<String> = steps[at]["value"].as_object().unwrap().keys().cloned().collect();
        for (j, field) in fields.iter().enumerate() {
            let mut t = trace.clone();
            let wrong = corrupt(field, &t["steps"][at]["value"][field]);
            t["steps"][at]["value"][field] = wrong;
            let d = dir.path().join(format!("t{i}-{j}"));
            std::fs::create_dir_all(&d).unwrap();
            let err = conformance::run_trace(&corpus, &t, &d).expect_err("a wrong expectation must fail");
            assert!(err.contains(&format!("step {at} ")) && err.contains(&format!("{field}:")), "{}: {err}", trace["name"]);
            checked_fields.insert(field.clone());
        }
    }
    for f in ["states", "current", "spent", "walletActions", "orders", "memberships", "stale", "view"] {
        assert!(checked_fields.contains(f), "field {f} was never checked");
    }
}

#[test]
fn an_unknown_expect_field_or_op_fails() {
    let corpus = conformance::load(&conformance::vendored()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut t = corpus.traces[0].clone();
    t["steps"][3]["value"]["colour"] = json!("blue");
    let err = conformance::run_trace(&corpus, &t, dir.path()).unwrap_err();
    assert!(err.contains("unknown expect field colour"), "{err}");
    let mut t = corpus.traces[0].clone();
    t["steps"].as_array_mut().unwrap().insert(0, json!({"op": "teleport"}));
    let d = dir.path().join("b");
    std::fs::create_dir_all(&d).unwrap();
    assert!(conformance::run_trace(&corpus, &t, &d).unwrap_err().contains("unknown op teleport"));
}

/// The corpus's finality and replacement vectors against the parsed transactions
/// (§10.3): each `height` is the selected tip height, so H = height + 1.
#[test]
fn finality_and_replacement_vectors() {
    use overlay_lookup_live::client::chain::{is_final, replaces, Finality};
    use overlay_lookup_live::bitcoin::tx::parse_tx;
    let corpus = conformance::load(&conformance::vendored()).unwrap();
    let v = &corpus.vectors;
    let tx = |name: &str| {
        let t = &v["transactions"][name];
        let parsed = parse_tx(&hex::decode(t["raw"].as_str().unwrap()).unwrap()).unwrap();
        assert_eq!(parsed.txid.to_hex(), t["txid"].as_str().unwrap(), "{name}");
        parsed
    };
    let fin = v["finality"].as_array().unwrap();
    assert_eq!(fin.len(), 17);
    for f in fin {
        let at = Finality { tip_height: f["height"].as_u64().unwrap(), mtp: f["mtp"].as_u64().unwrap() };
        assert_eq!(is_final(&tx(f["name"].as_str().unwrap()), at), f["expected"].as_bool().unwrap(), "{f}");
    }
    let rep = v["replacements"].as_array().unwrap();
    assert_eq!(rep.len(), 11);
    for r in rep {
        let (old, new, want) = (r[0].as_str().unwrap(), r[1].as_str().unwrap(), r[2].as_bool().unwrap());
        assert_eq!(replaces(&tx(new), &tx(old)), want, "{new} replaces {old}");
    }
}

/// This project's own traces (tests/fixtures/traces/project-traces.json) over the public
/// vectors: group evidence, refused claims and pending evidence, through the same replay.
#[test]
fn the_project_traces_pass_and_can_fail() {
    let corpus = conformance::load_traces(&conformance::vendored(), &conformance::project_traces()).unwrap();
    assert!(corpus.traces.len() >= 4);
    let dir = tempfile::tempdir().unwrap();
    let results = conformance::run_all(&corpus, dir.path());
    let failures: Vec<String> = results.iter().filter_map(|(n, r)| r.as_ref().err().map(|e| format!("{n}: {e}"))).collect();
    assert!(failures.is_empty(), "failing traces:\n{}", failures.join("\n"));
    for (i, trace) in corpus.traces.iter().enumerate() {
        let steps = trace["steps"].as_array().unwrap();
        let at = steps.iter().rposition(|s| s["op"] == "expect").unwrap();
        for field in steps[at]["value"].as_object().unwrap().keys() {
            let mut t = trace.clone();
            t["steps"][at]["value"][field] = corrupt(field, &t["steps"][at]["value"][field]);
            let d = dir.path().join(format!("wrong-{i}-{field}"));
            std::fs::create_dir_all(&d).unwrap();
            let err = conformance::run_trace(&corpus, &t, &d).expect_err("a wrong expectation must fail");
            assert!(err.contains(&format!("step {at} ")), "{}: {err}", trace["name"]);
        }
    }
}
