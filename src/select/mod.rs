//! Declarative selections: what a live companion's `select(query)` returns, compiled once per
//! open and evaluated natively for snapshot scans and live projection (docs/companions.md
//! "`select(query)`"; BRC-193 §3 "Membership transitions are query-specific").
//!
//! JSON shape: `{ where: Filter, order?: 'admission' | { attribute, direction?: 'asc'|'desc' } }`
//! (`order` defaults to `'admission'`). Filters: `{all:true}`, `{eq:[attr,value]}`,
//! `{in:[attr,[values]]}`, `{prefix:[attr,string]}`, `{range:[attr,{gte?,gt?,lte?,lt?}]}`,
//! `{and:[..]}`, `{or:[..]}`, `{not:F}`, `{topic:string}`. Every object is closed.
//!
//! Decisions (tests pin them):
//! - Values are typed: `eq(["n", 5])` does not match the string `"5"`. A range's bounds must all be
//!   integers or all strings and only match values of that type. Booleans support eq/in only.
//! - A list attribute matches `eq`/`in`/`prefix`/`range` if any element matches; `not` negates the
//!   whole node, so `not eq` on a list means "no element equals".
//! - Attribute order: a row lacking the order attribute (or with an empty list) is NOT selected, so
//!   snapshot and live projection agree. A list attribute sorts by its smallest element. Values of
//!   different types sort bool < integer < string. `desc` is the exact reverse of `asc`.
//! - Ties (same order value, or the same admission sequence) are broken by admission sequence, then
//!   outpoint (txid bytes, then output index); for `desc` the whole order reverses. This lets one
//!   index `(attribute, value, admission, outpoint)` serve filters and orders alike.
use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

/// An attribute value produced by a companion's `index(output)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AttrValue {
    Str(String),
    Int(i64),
    Bool(bool),
    /// Elements are scalars (nested lists are rejected by [`validate_attributes`]).
    List(Vec<AttrValue>),
}

pub type Attributes = BTreeMap<String, AttrValue>;

/// Bounds on selections and attributes: nothing a client or companion sends is unbounded.
pub const MAX_DEPTH: usize = 16;
pub const MAX_NODES: usize = 256;
pub const MAX_IN_VALUES: usize = 256;
pub const MAX_NAME_BYTES: usize = 128;
pub const MAX_STRING_BYTES: usize = 1024;
pub const MAX_LIST_LEN: usize = 256;
pub const MAX_ATTRIBUTES: usize = 64;
/// Largest integer with an exact JSON/IEEE-754 representation (BRC-192 "safe integers").
pub const MAX_SAFE_INT: i64 = 9_007_199_254_740_991;

/// An invalid selection or attribute set. `kind` is always `"invalid"` (BRC-193 §6 code).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectError {
    pub message: String,
}

impl SelectError {
    pub fn kind(&self) -> &'static str {
        "invalid"
    }
    fn new(message: impl Into<String>) -> Self {
        SelectError { message: message.into() }
    }
}

impl fmt::Display for SelectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid selection: {}", self.message)
    }
}

impl std::error::Error for SelectError {}

/// A scalar value inside a filter.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scalar {
    Bool(bool),
    Int(i64),
    Str(String),
}

/// Range bounds; all present bounds share one type (checked at compile time of the selection).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct RangeBounds {
    pub lower: Option<(Scalar, bool)>, // (value, inclusive)
    pub upper: Option<(Scalar, bool)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Filter {
    All,
    Eq(String, Scalar),
    In(String, Vec<Scalar>),
    Prefix(String, String),
    Range(String, RangeBounds),
    And(Vec<Filter>),
    Or(Vec<Filter>),
    Not(Box<Filter>),
    Topic(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Order {
    Admission,
    Attribute { name: String, desc: bool },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    pub filter: Filter,
    pub order: Order,
}

impl Selection {
    /// Compile a selection from the companion's JSON. Errors are `invalid` with a path.
    pub fn from_json(v: &Value) -> Result<Selection, SelectError> {
        let obj = v.as_object().ok_or_else(|| SelectError::new("selection must be an object"))?;
        for k in obj.keys() {
            if k != "where" && k != "order" {
                return Err(SelectError::new(format!("unknown field `{k}` in selection")));
            }
        }
        let w = obj.get("where").ok_or_else(|| SelectError::new("selection needs `where`"))?;
        let mut nodes = 0usize;
        let filter = parse_filter(w, 1, &mut nodes, "where")?;
        let order = match obj.get("order") {
            None => Order::Admission,
            Some(o) => parse_order(o)?,
        };
        Ok(Selection { filter, order })
    }

    /// A selection of every row in admission order.
    pub fn all() -> Selection {
        Selection { filter: Filter::All, order: Order::Admission }
    }

    /// Whether a row version with this topic and these attributes is selected. For attribute
    /// order, a row without a usable order value is not selected (see module docs).
    pub fn matches(&self, topic: &str, a: &Attributes) -> bool {
        if let Order::Attribute { name, .. } = &self.order {
            if order_value(a.get(name)).is_none() {
                return false;
            }
        }
        self.filter.matches(topic, a)
    }
}

/// The value a row sorts by under attribute order: the scalar itself, or a list's smallest
/// element; `None` when absent or an empty list.
pub fn order_value(v: Option<&AttrValue>) -> Option<Scalar> {
    match v? {
        AttrValue::List(items) => items.iter().filter_map(scalar_of).min(),
        other => scalar_of(other),
    }
}

fn scalar_of(v: &AttrValue) -> Option<Scalar> {
    match v {
        AttrValue::Str(s) => Some(Scalar::Str(s.clone())),
        AttrValue::Int(i) => Some(Scalar::Int(*i)),
        AttrValue::Bool(b) => Some(Scalar::Bool(*b)),
        AttrValue::List(_) => None,
    }
}

impl Filter {
    pub fn matches(&self, topic: &str, a: &Attributes) -> bool {
        match self {
            Filter::All => true,
            Filter::Topic(t) => t == topic,
            Filter::Eq(name, v) => any_elem(a.get(name), |e| scalar_eq(e, v)),
            Filter::In(name, vs) => any_elem(a.get(name), |e| vs.iter().any(|v| scalar_eq(e, v))),
            Filter::Prefix(name, p) => {
                any_elem(a.get(name), |e| matches!(e, AttrValue::Str(s) if s.starts_with(p.as_str())))
            }
            Filter::Range(name, b) => any_elem(a.get(name), |e| in_range(e, b)),
            Filter::And(fs) => fs.iter().all(|f| f.matches(topic, a)),
            Filter::Or(fs) => fs.iter().any(|f| f.matches(topic, a)),
            Filter::Not(f) => !f.matches(topic, a),
        }
    }
}

fn any_elem(v: Option<&AttrValue>, pred: impl Fn(&AttrValue) -> bool) -> bool {
    match v {
        None => false,
        Some(AttrValue::List(items)) => items.iter().any(&pred),
        Some(other) => pred(other),
    }
}

fn scalar_eq(e: &AttrValue, v: &Scalar) -> bool {
    match (e, v) {
        (AttrValue::Str(a), Scalar::Str(b)) => a == b,
        (AttrValue::Int(a), Scalar::Int(b)) => a == b,
        (AttrValue::Bool(a), Scalar::Bool(b)) => a == b,
        _ => false,
    }
}

fn in_range(e: &AttrValue, b: &RangeBounds) -> bool {
    let Some(s) = scalar_of(e) else { return false };
    let same_type = |x: &Scalar| std::mem::discriminant(x) == std::mem::discriminant(&s);
    if let Some((lo, incl)) = &b.lower {
        if !same_type(lo) || (if *incl { s < *lo } else { s <= *lo }) {
            return false;
        }
    }
    if let Some((hi, incl)) = &b.upper {
        if !same_type(hi) || (if *incl { s > *hi } else { s >= *hi }) {
            return false;
        }
    }
    true
}

fn parse_order(v: &Value) -> Result<Order, SelectError> {
    match v {
        Value::String(s) if s == "admission" => Ok(Order::Admission),
        Value::Object(o) => {
            for k in o.keys() {
                if k != "attribute" && k != "direction" {
                    return Err(SelectError::new(format!("unknown field `{k}` in order")));
                }
            }
            let name = match o.get("attribute") {
                Some(Value::String(s)) => check_name(s, "order.attribute")?,
                _ => return Err(SelectError::new("order.attribute must be a string")),
            };
            let desc = match o.get("direction") {
                None => false,
                Some(Value::String(d)) if d == "asc" => false,
                Some(Value::String(d)) if d == "desc" => true,
                _ => return Err(SelectError::new("order.direction must be 'asc' or 'desc'")),
            };
            Ok(Order::Attribute { name, desc })
        }
        _ => Err(SelectError::new("order must be 'admission' or {attribute, direction?}")),
    }
}

fn parse_filter(v: &Value, depth: usize, nodes: &mut usize, path: &str) -> Result<Filter, SelectError> {
    if depth > MAX_DEPTH {
        return Err(SelectError::new(format!("{path}: filter nested deeper than {MAX_DEPTH}")));
    }
    *nodes += 1;
    if *nodes > MAX_NODES {
        return Err(SelectError::new(format!("filter has more than {MAX_NODES} nodes")));
    }
    let obj = v.as_object().ok_or_else(|| SelectError::new(format!("{path}: filter must be an object")))?;
    if obj.len() != 1 {
        return Err(SelectError::new(format!("{path}: filter must have exactly one operator")));
    }
    let (op, arg) = obj.iter().next().expect("one entry");
    let here = format!("{path}.{op}");
    match op.as_str() {
        "all" => match arg {
            Value::Bool(true) => Ok(Filter::All),
            _ => Err(SelectError::new(format!("{here} must be true"))),
        },
        "topic" => Ok(Filter::Topic(check_string(arg, &here)?)),
        "eq" => {
            let (name, val) = pair(arg, &here)?;
            Ok(Filter::Eq(name, parse_scalar(val, &here)?))
        }
        "in" => {
            let (name, val) = pair(arg, &here)?;
            let items = val.as_array().ok_or_else(|| SelectError::new(format!("{here}[1] must be an array")))?;
            if items.len() > MAX_IN_VALUES {
                return Err(SelectError::new(format!("{here} has more than {MAX_IN_VALUES} values")));
            }
            let vals = items.iter().map(|x| parse_scalar(x, &here)).collect::<Result<Vec<_>, _>>()?;
            Ok(Filter::In(name, vals))
        }
        "prefix" => {
            let (name, val) = pair(arg, &here)?;
            Ok(Filter::Prefix(name, check_string(val, &here)?))
        }
        "range" => {
            let (name, val) = pair(arg, &here)?;
            Ok(Filter::Range(name, parse_range(val, &here)?))
        }
        "and" | "or" => {
            let items = arg.as_array().ok_or_else(|| SelectError::new(format!("{here} must be an array")))?;
            if items.is_empty() {
                return Err(SelectError::new(format!("{here} must not be empty")));
            }
            let fs = items
                .iter()
                .enumerate()
                .map(|(i, x)| parse_filter(x, depth + 1, nodes, &format!("{here}[{i}]")))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(if op == "and" { Filter::And(fs) } else { Filter::Or(fs) })
        }
        "not" => Ok(Filter::Not(Box::new(parse_filter(arg, depth + 1, nodes, &here)?))),
        other => Err(SelectError::new(format!("{path}: unknown filter operator `{other}`"))),
    }
}

fn pair<'v>(arg: &'v Value, here: &str) -> Result<(String, &'v Value), SelectError> {
    match arg.as_array() {
        Some(a) if a.len() == 2 => {
            let name = match &a[0] {
                Value::String(s) => check_name(s, here)?,
                _ => return Err(SelectError::new(format!("{here}[0] must be an attribute name"))),
            };
            Ok((name, &a[1]))
        }
        _ => Err(SelectError::new(format!("{here} must be [attribute, value]"))),
    }
}

fn parse_range(v: &Value, here: &str) -> Result<RangeBounds, SelectError> {
    let o = v.as_object().ok_or_else(|| SelectError::new(format!("{here}[1] must be an object")))?;
    let mut b = RangeBounds::default();
    for (k, x) in o {
        let s = parse_scalar(x, here)?;
        if matches!(s, Scalar::Bool(_)) {
            return Err(SelectError::new(format!("{here}: range bounds must be integers or strings")));
        }
        let slot = match k.as_str() {
            "gte" | "gt" => &mut b.lower,
            "lte" | "lt" => &mut b.upper,
            other => return Err(SelectError::new(format!("{here}: unknown range bound `{other}`"))),
        };
        if slot.is_some() {
            return Err(SelectError::new(format!("{here}: two bounds on the same side")));
        }
        *slot = Some((s, k.len() == 3));
    }
    match (&b.lower, &b.upper) {
        (None, None) => Err(SelectError::new(format!("{here}: range needs at least one bound"))),
        (Some((l, _)), Some((u, _))) if std::mem::discriminant(l) != std::mem::discriminant(u) => {
            Err(SelectError::new(format!("{here}: bounds must have the same type")))
        }
        _ => Ok(b),
    }
}

fn parse_scalar(v: &Value, here: &str) -> Result<Scalar, SelectError> {
    match v {
        Value::String(_) => Ok(Scalar::Str(check_string(v, here)?)),
        Value::Bool(b) => Ok(Scalar::Bool(*b)),
        Value::Number(n) => safe_int(n).map(Scalar::Int).ok_or_else(|| {
            SelectError::new(format!("{here}: numbers must be safe integers"))
        }),
        _ => Err(SelectError::new(format!("{here}: values must be strings, safe integers or booleans"))),
    }
}

fn safe_int(n: &serde_json::Number) -> Option<i64> {
    let i = n.as_i64()?;
    (-MAX_SAFE_INT..=MAX_SAFE_INT).contains(&i).then_some(i)
}

fn check_string(v: &Value, here: &str) -> Result<String, SelectError> {
    match v {
        Value::String(s) if s.len() <= MAX_STRING_BYTES => Ok(s.clone()),
        Value::String(_) => Err(SelectError::new(format!("{here}: string longer than {MAX_STRING_BYTES} bytes"))),
        _ => Err(SelectError::new(format!("{here} must be a string"))),
    }
}

fn check_name(s: &str, here: &str) -> Result<String, SelectError> {
    if s.is_empty() || s.len() > MAX_NAME_BYTES || s.contains('\0') {
        return Err(SelectError::new(format!(
            "{here}: attribute names are 1..={MAX_NAME_BYTES} bytes without NUL"
        )));
    }
    Ok(s.to_string())
}

/// Convert a companion's JSON attributes object into [`Attributes`], with the same bounds that
/// [`validate_attributes`] enforces.
pub fn attributes_from_json(v: &Value) -> Result<Attributes, SelectError> {
    let obj = v.as_object().ok_or_else(|| SelectError::new("attributes must be an object"))?;
    let mut out = Attributes::new();
    for (k, x) in obj {
        let here = format!("attributes.{k}");
        let val = match x {
            Value::Array(items) => AttrValue::List(
                items.iter().map(|i| scalar_attr(i, &here)).collect::<Result<Vec<_>, _>>()?,
            ),
            other => scalar_attr(other, &here)?,
        };
        out.insert(k.clone(), val);
    }
    validate_attributes(&out)?;
    Ok(out)
}

fn scalar_attr(v: &Value, here: &str) -> Result<AttrValue, SelectError> {
    Ok(match parse_scalar(v, here)? {
        Scalar::Str(s) => AttrValue::Str(s),
        Scalar::Int(i) => AttrValue::Int(i),
        Scalar::Bool(b) => AttrValue::Bool(b),
    })
}

/// Bounds every stored attribute set: names, string sizes, list lengths, safe integers, no
/// nested lists. Commit rejects anything else as invalid.
pub fn validate_attributes(a: &Attributes) -> Result<(), SelectError> {
    if a.len() > MAX_ATTRIBUTES {
        return Err(SelectError::new(format!("more than {MAX_ATTRIBUTES} attributes")));
    }
    for (k, v) in a {
        check_name(k, "attributes")?;
        let here = format!("attributes.{k}");
        match v {
            AttrValue::List(items) => {
                if items.len() > MAX_LIST_LEN {
                    return Err(SelectError::new(format!("{here}: list longer than {MAX_LIST_LEN}")));
                }
                for i in items {
                    if matches!(i, AttrValue::List(_)) {
                        return Err(SelectError::new(format!("{here}: nested lists are not allowed")));
                    }
                    validate_scalar(i, &here)?;
                }
            }
            other => validate_scalar(other, &here)?,
        }
    }
    Ok(())
}

fn validate_scalar(v: &AttrValue, here: &str) -> Result<(), SelectError> {
    match v {
        AttrValue::Str(s) if s.len() > MAX_STRING_BYTES => {
            Err(SelectError::new(format!("{here}: string longer than {MAX_STRING_BYTES} bytes")))
        }
        AttrValue::Int(i) if !(-MAX_SAFE_INT..=MAX_SAFE_INT).contains(i) => {
            Err(SelectError::new(format!("{here}: integer outside the safe range")))
        }
        _ => Ok(()),
    }
}

/// Order-preserving, self-delimiting key encoding of a scalar, used by the attribute index:
/// bool (tag 1) < int (tag 2, sign-flipped big-endian) < string (tag 3, NUL escaped as 00 FF,
/// terminated by 00 01). Byte order of encodings equals [`Scalar`] order.
pub fn encode_scalar(s: &Scalar, out: &mut Vec<u8>) {
    match s {
        Scalar::Bool(b) => {
            out.push(1);
            out.push(*b as u8);
        }
        Scalar::Int(i) => {
            out.push(2);
            out.extend_from_slice(&((*i as u64) ^ (1u64 << 63)).to_be_bytes());
        }
        Scalar::Str(st) => {
            out.push(3);
            escape_str(st, out);
            out.extend_from_slice(&[0, 1]);
        }
    }
}

/// The key prefix shared by every string value starting with `p` (no terminator).
pub fn encode_str_prefix(p: &str, out: &mut Vec<u8>) {
    out.push(3);
    escape_str(p, out);
}

fn escape_str(s: &str, out: &mut Vec<u8>) {
    for &b in s.as_bytes() {
        if b == 0 {
            out.extend_from_slice(&[0, 0xFF]);
        } else {
            out.push(b);
        }
    }
}

/// Decode one encoded scalar from the front of `b`; returns it and the bytes consumed.
pub fn decode_scalar(b: &[u8]) -> Option<(Scalar, usize)> {
    match *b.first()? {
        1 => Some((Scalar::Bool(*b.get(1)? != 0), 2)),
        2 => {
            let raw: [u8; 8] = b.get(1..9)?.try_into().ok()?;
            Some((Scalar::Int((u64::from_be_bytes(raw) ^ (1u64 << 63)) as i64), 9))
        }
        3 => {
            let mut s = Vec::new();
            let mut i = 1;
            loop {
                match (*b.get(i)?, b.get(i + 1).copied()) {
                    (0, Some(1)) => return Some((Scalar::Str(String::from_utf8(s).ok()?), i + 2)),
                    (0, Some(0xFF)) => {
                        s.push(0);
                        i += 2;
                    }
                    (0, _) => return None,
                    (c, _) => {
                        s.push(c);
                        i += 1;
                    }
                }
            }
        }
        _ => None,
    }
}

/// Every distinct scalar under which a value is indexed (a list indexes each element once).
pub fn index_values(v: &AttrValue) -> Vec<Scalar> {
    match v {
        AttrValue::List(items) => {
            let mut s: Vec<Scalar> = items.iter().filter_map(scalar_of).collect();
            s.sort();
            s.dedup();
            s
        }
        other => scalar_of(other).into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs(v: Value) -> Attributes {
        attributes_from_json(&v).unwrap()
    }

    #[test]
    fn parses_and_matches_each_operator() {
        let a = attrs(json!({"author": "ann", "n": 5, "ok": true, "tags": ["x", "yz"]}));
        let cases = [
            (json!({"all": true}), true),
            (json!({"eq": ["author", "ann"]}), true),
            (json!({"eq": ["author", "bob"]}), false),
            (json!({"eq": ["n", "5"]}), false),
            (json!({"eq": ["ok", true]}), true),
            (json!({"in": ["n", [1, 5]]}), true),
            (json!({"in": ["n", []]}), false),
            (json!({"prefix": ["tags", "y"]}), true),
            (json!({"prefix": ["author", "b"]}), false),
            (json!({"range": ["n", {"gte": 5, "lt": 6}]}), true),
            (json!({"range": ["n", {"gt": 5}]}), false),
            (json!({"range": ["author", {"gt": "a", "lte": "ann"}]}), true),
            (json!({"range": ["author", {"gt": 1}]}), false),
            (json!({"and": [{"eq": ["tags", "x"]}, {"eq": ["n", 5]}]}), true),
            (json!({"or": [{"eq": ["tags", "q"]}, {"eq": ["n", 6]}]}), false),
            (json!({"not": {"eq": ["tags", "x"]}}), false),
            (json!({"topic": "tm_notes"}), true),
            (json!({"topic": "tm_other"}), false),
            (json!({"eq": ["missing", 1]}), false),
        ];
        for (f, want) in cases {
            let sel = Selection::from_json(&json!({"where": f.clone()})).unwrap();
            assert_eq!(sel.matches("tm_notes", &a), want, "{f}");
        }
    }

    #[test]
    fn rejects_invalid_selections() {
        let bad = [
            json!(null),
            json!({}),
            json!({"where": {"all": true}, "extra": 1}),
            json!({"where": {"all": false}}),
            json!({"where": {"eq": ["a", 1], "in": ["a", [1]]}}),
            json!({"where": {"eq": ["a"]}}),
            json!({"where": {"eq": ["", 1]}}),
            json!({"where": {"eq": ["a", 1.5]}}),
            json!({"where": {"eq": ["a", 9007199254740992i64]}}),
            json!({"where": {"eq": ["a", null]}}),
            json!({"where": {"eq": ["a", [1]]}}),
            json!({"where": {"range": ["a", {}]}}),
            json!({"where": {"range": ["a", {"gt": 1, "gte": 2}]}}),
            json!({"where": {"range": ["a", {"gt": 1, "lt": "z"}]}}),
            json!({"where": {"range": ["a", {"gt": true}]}}),
            json!({"where": {"range": ["a", {"near": 1}]}}),
            json!({"where": {"and": []}}),
            json!({"where": {"xor": []}}),
            json!({"where": {"prefix": ["a", 1]}}),
            json!({"where": {"all": true}, "order": "newest"}),
            json!({"where": {"all": true}, "order": {"attribute": "a", "direction": "up"}}),
            json!({"where": {"all": true}, "order": {"attribute": "a", "x": 1}}),
            json!({"where": {"eq": ["a", "x".repeat(MAX_STRING_BYTES + 1)]}}),
        ];
        for b in bad {
            let e = Selection::from_json(&b).unwrap_err();
            assert_eq!(e.kind(), "invalid");
            assert!(!e.message.is_empty());
        }
    }

    #[test]
    fn bounds_depth_and_nodes() {
        let mut f = json!({"all": true});
        for _ in 0..MAX_DEPTH {
            f = json!({"not": f});
        }
        assert!(Selection::from_json(&json!({"where": f})).unwrap_err().message.contains("deeper"));
        let many: Vec<Value> = (0..MAX_NODES).map(|i| json!({"eq": ["a", i]})).collect();
        let e = Selection::from_json(&json!({"where": {"or": many}})).unwrap_err();
        assert!(e.message.contains("nodes"));
    }

    #[test]
    fn attribute_order_requires_a_value() {
        let sel = Selection::from_json(&json!({"where": {"all": true}, "order": {"attribute": "n"}})).unwrap();
        assert!(sel.matches("t", &attrs(json!({"n": 1}))));
        assert!(!sel.matches("t", &attrs(json!({"m": 1}))));
        assert!(!sel.matches("t", &attrs(json!({"n": []}))));
        assert_eq!(order_value(Some(&attrs(json!({"n": [3, "a", 2]}))["n"])), Some(Scalar::Int(2)));
    }

    #[test]
    fn scalar_encoding_preserves_order_and_round_trips() {
        let vals = vec![
            Scalar::Bool(false),
            Scalar::Bool(true),
            Scalar::Int(-MAX_SAFE_INT),
            Scalar::Int(-1),
            Scalar::Int(0),
            Scalar::Int(7),
            Scalar::Str(String::new()),
            Scalar::Str("\0".into()),
            Scalar::Str("\0a".into()),
            Scalar::Str("a".into()),
            Scalar::Str("a\0".into()),
            Scalar::Str("ab".into()),
            Scalar::Str("b".into()),
        ];
        let enc: Vec<Vec<u8>> = vals
            .iter()
            .map(|v| {
                let mut o = Vec::new();
                encode_scalar(v, &mut o);
                o
            })
            .collect();
        for w in enc.windows(2) {
            assert!(w[0] < w[1]);
        }
        for (v, e) in vals.iter().zip(&enc) {
            assert_eq!(decode_scalar(e), Some((v.clone(), e.len())));
        }
        let mut p = Vec::new();
        encode_str_prefix("a", &mut p);
        assert!(enc[9].starts_with(&p) && enc[10].starts_with(&p) && enc[11].starts_with(&p));
        assert!(!enc[12].starts_with(&p));
    }

    #[test]
    fn rejects_bad_attributes() {
        assert!(attributes_from_json(&json!({"a": [[1]]})).is_err());
        assert!(attributes_from_json(&json!({"a": 1.5})).is_err());
        assert!(attributes_from_json(&json!({"a": null})).is_err());
        assert!(attributes_from_json(&json!({"": 1})).is_err());
        assert!(attributes_from_json(&json!([1])).is_err());
    }
}
