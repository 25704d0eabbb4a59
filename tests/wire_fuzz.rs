//! Seeded mutation test: 120,000 mutated request bodies through every parser.
//!
//! Properties checked on every input: no panic; an error body stays within its
//! bound; an accepted request re-serializes to a body that parses to the same
//! value; and whatever the strict parser accepts, a general-purpose JSON parser
//! accepts too, with the same canonical form (so strictness only ever removes inputs).

use overlay_lookup_live::wire::{self, parse_strict, NumberMode};

const CASES: usize = 120_000;

/// xorshift64*: tiny, deterministic, good enough to drive mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const SEEDS: &[&str] = &[
    r#"{"version":1,"requestId":"req_0123456789abcdef","service":"ls_notes","query":{"author":"alice","tags":["x","y"],"n":3},"limits":{"maxBytes":65536,"maxObservations":100,"waitMs":1000}}"#,
    r#"{"version":1,"requestId":"AAAAAAAAAAAAAAAAAAAA","service":"s","query":[1,-0,1.0,1e0,"\u00e9\ud83d\ude00",null,true,false,{}],"requiredRulesDigest":"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff","limits":{"maxBytes":1,"maxObservations":1,"waitMs":0},"extensions":{"urn:x:a":{"k":[1]}},"critical":[]}"#,
    r#"{ "version" : 1 , "session" : "s\"1" , "cursor" : "c\\1" , "limits" : { "maxBytes" : 70000 , "maxObservations" : 5 , "waitMs" : 0 } }"#,
    r#"{"version":1,"session":"sess-\u0041"}"#,
    r#"{"version":1,"session":"s","cursor":"c","limits":{"maxBytes":4294967295,"maxObservations":4294967295,"waitMs":4294967295}}"#,
];

const TOKENS: &[&str] = &[
    "{", "}", "[", "]", ",", ":", "\"", "\\", "\\u", "\\ud800", "\\udc00", "\\ud83d\\ude00", "\\u0000", "1e999",
    "-0", "1.5", "9007199254740992", "null", "true", "\"version\":1,", "\"version\":2,", "\"a\":1,\"a\":1,",
    "\"a\":1,\"\\u0061\":1,", "\u{feff}", "\u{0}", "\u{1}", "é", "😀", "  ", "\n", "1e-7", "0.0", "00",
    "\"extensions\":{\"urn:a\":1},\"critical\":[\"urn:a\"],",
];

fn mutate(rng: &mut Rng, input: &mut Vec<u8>) {
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        let len = input.len();
        let at = if len == 0 { 0 } else { rng.below(len + 1) };
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                input[i] = rng.next() as u8;
            }
            2 => input.insert(at, rng.next() as u8),
            3 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(8));
                input.drain(i..i + n);
            }
            4 => input.truncate(at),
            5 => {
                let t = TOKENS[rng.below(TOKENS.len())].as_bytes();
                input.splice(at..at, t.iter().copied());
            }
            6 => {
                // Deep nesting, around the depth limit.
                let d = 28 + rng.below(8);
                let mut nest = "[".repeat(d);
                nest.push_str(&"]".repeat(d));
                nest.push(',');
                input.splice(at..at, nest.bytes());
            }
            7 if len > 1 => {
                // Duplicate a slice of the input elsewhere (often a whole member).
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(40));
                let piece: Vec<u8> = input[i..i + n].to_vec();
                input.splice(at..at, piece);
            }
            _ => {
                // Splice in a slice of another seed.
                let other = SEEDS[rng.below(SEEDS.len())].as_bytes();
                let i = rng.below(other.len());
                let n = 1 + rng.below((other.len() - i).min(60));
                input.splice(at..at, other[i..i + n].iter().copied());
            }
        }
    }
}

fn check_error(e: &wire::WireError) {
    assert!(e.to_body().len() <= wire::MAX_ERROR_BODY_BYTES);
}

#[test]
fn mutated_requests_never_panic_and_accepted_ones_round_trip() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut accepted = 0usize;
    let mut strict_ok = 0usize;
    for case in 0..CASES {
        let mut input = SEEDS[case % SEEDS.len()].as_bytes().to_vec();
        mutate(&mut rng, &mut input);

        match wire::parse_open(&input) {
            Ok(open) => {
                accepted += 1;
                let again = wire::parse_open(&serde_json::to_vec(&open).unwrap()).expect("re-serialized Open parses");
                assert_eq!(again, open);
                assert_eq!(again.normalized_bytes(), open.normalized_bytes());
            }
            Err(e) => check_error(&e),
        }
        match wire::parse_read(&input) {
            Ok(read) => {
                accepted += 1;
                assert_eq!(wire::parse_read(&serde_json::to_vec(&read).unwrap()).unwrap(), read);
            }
            Err(e) => check_error(&e),
        }
        match wire::parse_close(&input) {
            Ok(close) => {
                accepted += 1;
                assert_eq!(wire::parse_close(&serde_json::to_vec(&close).unwrap()).unwrap(), close);
            }
            Err(e) => check_error(&e),
        }
        if let Ok(v) = parse_strict(&input, NumberMode::SafeInteger) {
            strict_ok += 1;
            let general: serde_json::Value =
                serde_json::from_slice(&input).expect("strictly accepted JSON is JSON");
            assert_eq!(wire::canonicalize(&v).unwrap(), wire::canonicalize(&general).unwrap(), "case {case}");
        }
        if let Ok(v) = parse_strict(&input, NumberMode::Finite) {
            let canonical = wire::canonicalize(&v).unwrap();
            // Canonical output is itself strict JSON with the same canonical form.
            let again = parse_strict(canonical.as_bytes(), NumberMode::Finite).unwrap();
            assert_eq!(wire::canonicalize(&again).unwrap(), canonical);
        }
    }
    eprintln!("{CASES} mutated inputs: {accepted} accepted requests, {strict_ok} strictly valid JSON texts");
    // The mutations must leave a meaningful share of inputs valid, or the
    // accepted-path properties above would be vacuous.
    assert!(accepted > CASES / 100, "only {accepted} accepted");
    assert!(strict_ok > CASES / 20, "only {strict_ok} strictly valid");
}

#[test]
fn mutated_batches_never_panic_and_accepted_ones_round_trip() {
    use wire::{Batch, Bytes, Chain, Evidence, Group, Hex32, Limits, Observation, Outpoint, Payload, Phase, Scope, U64, V1};
    let chain = Chain { network: "main".into(), genesis_hash: Hex32([1; 32]) };
    let scope = Scope {
        chain: chain.clone(),
        provider: "p".into(),
        service: "s".into(),
        query_digest: Hex32([2; 32]),
        rules_digest: Hex32([3; 32]),
        access: "a".into(),
        epoch: "e".into(),
    };
    let outpoint = Outpoint { chain, txid: Hex32([4; 32]), output_index: 1 };
    let obs = |id: &str, payload| Observation { id: id.into(), scope: scope.clone(), payload };
    let batch = Batch {
        version: V1,
        session: "s".into(),
        scope: scope.clone(),
        phase: Phase::Snapshot,
        groups: vec![Group {
            id: "g".into(),
            sequence: U64(3),
            observations: vec![
                obs("a", Payload::Output { evidence: Evidence { txid: Hex32([5; 32]), output_index: 0, beef: Bytes(vec![7; 5]) }, context: None }),
                obs("b", Payload::Spend { previous: outpoint.clone(), spending_txid: Hex32([6; 32]), beef: Bytes(vec![]) }),
                obs("c", Payload::Withdraw { outpoint, reason: "r".into() }),
            ],
        }],
        cursor: "c".into(),
        snapshot_complete: false,
        through: U64(3),
        high_water: U64(9),
        expires_at: U64(10),
        replay_until: U64(20),
        limits: Limits { max_bytes: 65536, max_observations: 1, wait_ms: 0 },
    };
    let seed = wire::response_bytes(&batch).unwrap();
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let mut accepted = 0;
    for _ in 0..30_000 {
        let mut input = seed.clone();
        mutate(&mut rng, &mut input);
        match wire::parse_batch(&input) {
            Ok(b) => {
                accepted += 1;
                assert_eq!(wire::parse_batch(&wire::response_bytes(&b).unwrap()).unwrap(), b);
            }
            Err(e) => check_error(&e),
        }
        if let Ok(e) = wire::parse_error_body(&input) {
            assert!(e.to_body().len() <= wire::MAX_ERROR_BODY_BYTES);
        }
    }
    assert!(accepted > 100, "only {accepted} accepted");
}
