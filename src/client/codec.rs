//! The record codec of the client's store: a compact, self-describing binary encoding of
//! any serde value (docs/design.md "Storage").
//!
//! Why not JSON: a received transaction's record was mostly hex (txids, raw bytes) and
//! field punctuation; its bytes are copied into the engine's pages, written to disk and
//! parsed again on every read. This encoding writes integers as varints, strings and
//! byte strings with a length prefix, and lets types that know they are bytes (txids,
//! raw transactions: they ask [`serde::Serializer::is_human_readable`]) be written as
//! bytes. It is self-describing (every value carries its type), so serde's tagged and
//! flattened representations and `serde_json::Value` fields work as they do in JSON.
//!
//! A record starts with [`MAGIC`]; a value without it is JSON written by an earlier
//! version of the store, which [`decode`] still reads (a record is rewritten in this
//! encoding the next time it changes, so no migration pass is needed).
//!
//! Layout of a value: one tag byte, then
//! - `NULL`, `FALSE`, `TRUE`: nothing;
//! - `UINT` / `NINT`: a LEB128 varint of `n` / of `-1 - n`;
//! - `F64`: 8 bytes little-endian;
//! - `STR` / `BYTES`: a varint length, then the bytes (UTF-8 for `STR`);
//! - `SEQ`: a varint count, then the items;
//! - `MAP`: a varint count, then key and value, alternating;
//! - `NAME`: a varint index into [`NAMES`], a string the store's records repeat (field and
//!   variant names, the verifier's reasons): written once in the code, not in every record.
//!
//! Enums are written as JSON writes them: a unit variant is its name, any other variant
//! a one-entry map from its name to its content. Decoding is bounded by the input: a
//! count or length past the bytes left is an error, never an allocation.

use std::fmt;

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{self, Serialize};

/// First byte of a record in this encoding (not a byte JSON text can start with).
pub const MAGIC: u8 = 0xB1;

const NULL: u8 = 0;
const FALSE: u8 = 1;
const TRUE: u8 = 2;
const UINT: u8 = 3;
const NINT: u8 = 4;
const F64: u8 = 5;
const STR: u8 = 6;
const BYTES: u8 = 7;
const SEQ: u8 = 8;
const MAP: u8 = 9;
const NAME: u8 = 10;

/// Strings a record writes as `NAME` and an index: the field and variant names of the
/// store's records and the fixed reasons they carry, most repeated first (counted over the
/// records of a verified catalogue). Append only: an index once written is read by every
/// later version, so entries are never removed or reordered. Any other string is `STR`.
pub const NAMES: &[&str] = &[
    "txid", "id", "verified", "sequence", "outputs", "outputIndex", "at", "position", "snapshot",
    "phase", "accepted", "status", "source", "root", "reason", "proof", "present", "outpoint",
    "index", "height", "effect", "contextId", "context", "pending", "generation", "verdict",
    "variants", "supplies", "state", "selected-final", "selected", "replaces", "replacements",
    "receipts", "readyContextId", "readyAt", "raw", "published", "proven", "prev", "placements",
    "ordinal", "order", "observations", "observationId", "merkle paths and scripts verify",
    "members", "locktime", "kind", "inputs", "group", "gate", "firstRaw", "exact",
    "evidence_reason", "evidence", "eligible", "digest", "depth", "conflictsWith", "component",
    "candidates", "anchor", "invalid", "limited", "open", "refused", "unresolved", "unsupported",
    "conflicting", "dependent-conflict", "selected-non-final", "included", "preverified",
    "placed", "placement", "withdrawn", "live", "claims", "manual", "spilled", "pending_leaf",
];

fn name_index(s: &str) -> Option<u64> {
    static INDEX: std::sync::OnceLock<FastMap<&'static str, u64>> = std::sync::OnceLock::new();
    INDEX.get_or_init(|| NAMES.iter().enumerate().map(|(i, n)| (*n, i as u64)).collect()).get(s).copied()
}

/// FNV-1a: every string a record encodes (field names included) is looked up in [`NAMES`],
/// and the standard SipHash of those short keys was 5 % of a verifier commit's time. It is
/// not keyed: use it only for maps a peer cannot grow past a bound (the fixed names here; a
/// commit's record memo, `db::Tx::records`, holds what one commit touches).
#[derive(Clone, Copy)]
pub(crate) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A hash map keyed with [`Fnv`].
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<Fnv>>;

/// Nesting bound of decoding (records nest a few levels; a corrupt value cannot recurse
/// without bound).
const MAX_DEPTH: u32 = 64;

#[derive(Debug)]
pub struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Error {}
impl ser::Error for Error {
    fn custom<T: fmt::Display>(m: T) -> Self {
        Error(m.to_string())
    }
}
impl de::Error for Error {
    fn custom<T: fmt::Display>(m: T) -> Self {
        Error(m.to_string())
    }
}

/// `value` in this encoding, [`MAGIC`] first.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(128);
    out.push(MAGIC);
    value.serialize(&mut Encoder { out: &mut out })?;
    Ok(out)
}

/// A record written by [`encode`], or JSON written by an earlier version of the store.
pub fn decode<'de, T: serde::Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, Error> {
    match bytes.split_first() {
        Some((&MAGIC, rest)) => {
            let mut d = Decoder { input: rest, depth: 0 };
            let v = T::deserialize(&mut d)?;
            if !d.input.is_empty() {
                return Err(Error(format!("{} bytes after the record", d.input.len())));
            }
            Ok(v)
        }
        _ => serde_json::from_slice(bytes).map_err(|e| Error(e.to_string())),
    }
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

struct Encoder<'a> {
    out: &'a mut Vec<u8>,
}

impl Encoder<'_> {
    fn head(&mut self, tag: u8, n: u64) {
        self.out.push(tag);
        put_varint(self.out, n);
    }
    fn str(&mut self, s: &str) {
        if let Some(i) = name_index(s) {
            return self.head(NAME, i);
        }
        self.head(STR, s.len() as u64);
        self.out.extend_from_slice(s.as_bytes());
    }
    fn int(&mut self, v: i64) {
        if v >= 0 {
            self.head(UINT, v as u64)
        } else {
            self.head(NINT, (-1 - v) as u64)
        }
    }
}

/// A sequence or map whose length serde did not say: counted as it is written, then
/// the count is put in front.
struct Compound<'a, 'b> {
    enc: &'a mut Encoder<'b>,
    tag: u8,
    start: usize,
    count: u64,
    /// For a variant with content: the one-entry map around it is already open.
    known: bool,
}

impl<'a, 'b> Compound<'a, 'b> {
    fn begin(enc: &'a mut Encoder<'b>, tag: u8, len: Option<usize>) -> Self {
        let start = enc.out.len();
        let known = len.is_some();
        if let Some(n) = len {
            enc.head(tag, n as u64);
        }
        Compound { enc, tag, start, count: 0, known }
    }
    fn end(self) {
        if !self.known {
            let mut head = vec![self.tag];
            put_varint(&mut head, self.count);
            self.enc.out.splice(self.start..self.start, head);
        }
    }
}

impl<'a, 'b> ser::Serializer for &'a mut Encoder<'b> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a, 'b>;
    type SerializeTuple = Compound<'a, 'b>;
    type SerializeTupleStruct = Compound<'a, 'b>;
    type SerializeTupleVariant = Compound<'a, 'b>;
    type SerializeMap = Compound<'a, 'b>;
    type SerializeStruct = Compound<'a, 'b>;
    type SerializeStructVariant = Compound<'a, 'b>;

    fn is_human_readable(&self) -> bool {
        false
    }
    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.out.push(if v { TRUE } else { FALSE });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.int(v.into());
        Ok(())
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.int(v.into());
        Ok(())
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.int(v.into());
        Ok(())
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.int(v);
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.head(UINT, v.into());
        Ok(())
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.head(UINT, v.into());
        Ok(())
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.head(UINT, v.into());
        Ok(())
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.head(UINT, v);
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        self.serialize_f64(v.into())
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        self.out.push(F64);
        self.out.extend_from_slice(&v.to_le_bytes());
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.str(v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.str(v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        self.head(BYTES, v.len() as u64);
        self.out.extend_from_slice(v);
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.out.push(NULL);
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.out.push(NULL);
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result<(), Error> {
        self.str(variant);
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        self.head(MAP, 1);
        self.str(variant);
        v.serialize(self)
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Ok(Compound::begin(self, SEQ, len))
    }
    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple, Error> {
        Ok(Compound::begin(self, SEQ, Some(len)))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Self::SerializeTupleStruct, Error> {
        Ok(Compound::begin(self, SEQ, Some(len)))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        self.head(MAP, 1);
        self.str(variant);
        Ok(Compound::begin(self, SEQ, Some(len)))
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Ok(Compound::begin(self, MAP, len))
    }
    // Fields skipped by `skip_serializing_if` are not counted in `len`: count as written.
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Error> {
        Ok(Compound::begin(self, MAP, None))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        self.head(MAP, 1);
        self.str(variant);
        Ok(Compound::begin(self, MAP, None))
    }
}

impl ser::SerializeSeq for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        self.count += 1;
        v.serialize(&mut *self.enc)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self);
        Ok(())
    }
}
impl ser::SerializeTuple for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        ser::SerializeSeq::serialize_element(self, v)
    }
    fn end(self) -> Result<(), Error> {
        ser::SerializeSeq::end(self)
    }
}
impl ser::SerializeTupleStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        ser::SerializeSeq::serialize_element(self, v)
    }
    fn end(self) -> Result<(), Error> {
        ser::SerializeSeq::end(self)
    }
}
impl ser::SerializeTupleVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        ser::SerializeSeq::serialize_element(self, v)
    }
    fn end(self) -> Result<(), Error> {
        ser::SerializeSeq::end(self)
    }
}
impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> Result<(), Error> {
        self.count += 1;
        k.serialize(&mut *self.enc)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        v.serialize(&mut *self.enc)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self);
        Ok(())
    }
}
impl ser::SerializeStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, v: &T) -> Result<(), Error> {
        self.count += 1;
        self.enc.str(key);
        v.serialize(&mut *self.enc)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self);
        Ok(())
    }
}
impl ser::SerializeStructVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, v: &T) -> Result<(), Error> {
        ser::SerializeStruct::serialize_field(self, key, v)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self);
        Ok(())
    }
}

struct Decoder<'de> {
    input: &'de [u8],
    depth: u32,
}

impl<'de> Decoder<'de> {
    fn byte(&mut self) -> Result<u8, Error> {
        let (&b, rest) = self.input.split_first().ok_or_else(|| Error("truncated record".into()))?;
        self.input = rest;
        Ok(b)
    }
    fn peek(&self) -> Result<u8, Error> {
        self.input.first().copied().ok_or_else(|| Error("truncated record".into()))
    }
    fn varint(&mut self) -> Result<u64, Error> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(Error("varint too long".into()))
    }
    fn take(&mut self, n: u64) -> Result<&'de [u8], Error> {
        if n > self.input.len() as u64 {
            return Err(Error("length past the end of the record".into()));
        }
        let (a, b) = self.input.split_at(n as usize);
        self.input = b;
        Ok(a)
    }
    /// A count of items, each at least one byte: bounded by what is left.
    fn count(&mut self) -> Result<u64, Error> {
        let n = self.varint()?;
        if n > self.input.len() as u64 {
            return Err(Error("count past the end of the record".into()));
        }
        Ok(n)
    }
    fn str(&mut self) -> Result<&'de str, Error> {
        let n = self.varint()?;
        std::str::from_utf8(self.take(n)?).map_err(|_| Error("string is not UTF-8".into()))
    }
    fn name(&mut self) -> Result<&'static str, Error> {
        let i = self.varint()?;
        NAMES.get(i as usize).copied().ok_or_else(|| Error(format!("unknown name {i}")))
    }
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, Error>) -> Result<T, Error> {
        if self.depth >= MAX_DEPTH {
            return Err(Error("record nests too deeply".into()));
        }
        self.depth += 1;
        let r = f(self);
        self.depth -= 1;
        r
    }
}

impl<'de> de::Deserializer<'de> for &mut Decoder<'de> {
    type Error = Error;

    fn is_human_readable(&self) -> bool {
        false
    }

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.byte()? {
            NULL => v.visit_unit(),
            FALSE => v.visit_bool(false),
            TRUE => v.visit_bool(true),
            UINT => v.visit_u64(self.varint()?),
            NINT => {
                let n = self.varint()?;
                if n > i64::MAX as u64 {
                    return Err(Error("negative integer out of range".into()));
                }
                v.visit_i64(-1 - n as i64)
            }
            F64 => {
                let b = self.take(8)?;
                v.visit_f64(f64::from_le_bytes(b.try_into().expect("8 bytes")))
            }
            STR => v.visit_borrowed_str(self.str()?),
            NAME => v.visit_borrowed_str(self.name()?),
            BYTES => {
                let n = self.varint()?;
                v.visit_borrowed_bytes(self.take(n)?)
            }
            SEQ => {
                let n = self.count()?;
                self.nested(|d| {
                    let r = v.visit_seq(Items { d: &mut *d, left: n })?;
                    Ok(r)
                })
            }
            MAP => {
                let n = self.count()?;
                self.nested(|d| v.visit_map(Items { d: &mut *d, left: n }))
            }
            t => Err(Error(format!("unknown tag {t}"))),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        if self.peek()? == NULL {
            self.byte()?;
            v.visit_none()
        } else {
            v.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _: &'static str, v: V) -> Result<V::Value, Error> {
        v.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        match self.byte()? {
            STR => v.visit_enum(self.str()?.into_deserializer()),
            NAME => v.visit_enum(self.name()?.into_deserializer()),
            MAP => {
                if self.varint()? != 1 {
                    return Err(Error("an enum variant is a map of one entry".into()));
                }
                self.nested(|d| v.visit_enum(Variant { d }))
            }
            t => Err(Error(format!("tag {t} is not an enum variant"))),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

struct Items<'a, 'de> {
    d: &'a mut Decoder<'de>,
    left: u64,
}

impl<'de> SeqAccess<'de> for Items<'_, 'de> {
    type Error = Error;
    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.d).map(Some)
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.left as usize)
    }
}

impl<'de> MapAccess<'de> for Items<'_, 'de> {
    type Error = Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.d).map(Some)
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        seed.deserialize(&mut *self.d)
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.left as usize)
    }
}

struct Variant<'a, 'de> {
    d: &'a mut Decoder<'de>,
}

impl<'a, 'de> de::EnumAccess<'de> for Variant<'a, 'de> {
    type Error = Error;
    type Variant = Self;
    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self), Error> {
        let name = seed.deserialize(&mut *self.d)?;
        Ok((name, self))
    }
}

impl<'de> de::VariantAccess<'de> for Variant<'_, 'de> {
    type Error = Error;
    fn unit_variant(self) -> Result<(), Error> {
        de::Deserialize::deserialize(&mut *self.d)
    }
    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        seed.deserialize(&mut *self.d)
    }
    fn tuple_variant<V: Visitor<'de>>(self, _: usize, v: V) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_any(&mut *self.d, v)
    }
    fn struct_variant<V: Visitor<'de>>(self, _: &'static [&'static str], v: V) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_any(&mut *self.d, v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bitcoin::tx::Hash32;
    use serde::{Deserialize, Serialize};
    use serde_json::json;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "kind", rename_all = "kebab-case")]
    enum Tagged {
        Receive { source: String, txids: Vec<Hash32> },
        Context { id: String },
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    enum External {
        Unit,
        New(u32),
        Tuple(u8, String),
        Struct { a: Option<i64> },
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Record {
        id: Hash32,
        n: u64,
        neg: i32,
        f: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        skipped: Option<String>,
        opt: Option<Option<bool>>,
        list: Vec<External>,
        tagged: Vec<Tagged>,
        ctx: Option<serde_json::Value>,
        #[serde(with = "crate::client::journal::hex_bytes")]
        raw: Vec<u8>,
    }

    fn sample() -> Record {
        Record {
            id: Hash32([7; 32]),
            n: u64::MAX,
            neg: -300,
            f: 1.5,
            skipped: None,
            opt: Some(None),
            list: vec![External::Unit, External::New(9), External::Tuple(1, "x".into()), External::Struct { a: Some(-1) }],
            tagged: vec![
                Tagged::Receive { source: "s".into(), txids: vec![Hash32([1; 32])] },
                Tagged::Context { id: "tip".into() },
            ],
            ctx: Some(json!({ "a": [1, -2, 3.25, null, true, "z"], "b": {} })),
            raw: vec![0, 1, 2, 255],
        }
    }

    #[test]
    fn round_trips_every_shape_the_records_use() {
        let r = sample();
        let bytes = encode(&r).unwrap();
        assert_eq!(bytes[0], MAGIC);
        // `opt: Some(None)` reads back as None, as it does from JSON.
        let back: Record = decode(&bytes).unwrap();
        assert_eq!(back, Record { opt: None, ..sample() });
        assert!(bytes.len() < serde_json::to_vec(&r).unwrap().len());
        // A txid is written as its 32 bytes (tag and length first), not 64 hex digits.
        assert_eq!(encode(&Hash32([9; 32])).unwrap().len(), 1 + 2 + 32);
    }

    #[test]
    fn repeated_names_are_written_as_their_index() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Published {
            status: Tagged2,
            context_id: String,
            other: String,
        }
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        enum Tagged2 {
            SelectedFinal,
            Conflicting,
        }
        let p = Published { status: Tagged2::SelectedFinal, context_id: "verified".into(), other: "not a name".into() };
        let bytes = encode(&p).unwrap();
        assert_eq!(decode::<Published>(&bytes).unwrap(), p);
        // `status`, `selected-final`, `contextId` and the value `verified` are two bytes each
        // (tag, index); `other` and its value are written out.
        assert_eq!(bytes.len(), 1 + 2 + 4 * 2 + (2 + 5) + (2 + 10));
        assert_eq!(decode::<serde_json::Value>(&bytes).unwrap(), json!({"status": "selected-final", "contextId": "verified", "other": "not a name"}));
        // The table's entries are unique (an index names one string) and an index past it
        // is an error.
        let unique: std::collections::BTreeSet<_> = NAMES.iter().collect();
        assert_eq!(unique.len(), NAMES.len());
        let mut past = vec![MAGIC, NAME];
        put_varint(&mut past, NAMES.len() as u64);
        assert!(decode::<String>(&past).is_err());
        // Index 0 is `txid` for good: records written with the table read back the same.
        assert_eq!(decode::<String>(&[MAGIC, NAME, 0]).unwrap(), "txid");
    }

    #[test]
    fn reads_json_records_of_earlier_versions() {
        let json = serde_json::to_vec(&sample()).unwrap();
        let back: Record = decode(&json).unwrap();
        assert_eq!(back, Record { opt: None, ..sample() });
    }

    #[test]
    fn corrupt_records_are_errors_not_panics() {
        let bytes = encode(&sample()).unwrap();
        for cut in 1..bytes.len() {
            assert!(decode::<Record>(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        // A huge count or length is refused before anything is allocated for it.
        let mut huge = vec![MAGIC, SEQ];
        put_varint(&mut huge, u64::MAX >> 1);
        assert!(decode::<Vec<u64>>(&huge).is_err());
        let mut deep = vec![MAGIC];
        deep.extend(std::iter::repeat([SEQ, 1]).take(1000).flatten());
        deep.push(NULL);
        assert!(decode::<serde_json::Value>(&deep).is_err());
        assert!(decode::<u64>(&[MAGIC, 0xEE]).is_err());
        assert!(decode::<u64>(&[MAGIC, UINT, 1, 0]).is_err(), "trailing bytes");
    }

    #[test]
    fn every_byte_flip_decodes_or_errs() {
        let bytes = encode(&sample()).unwrap();
        for i in 1..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                let _ = decode::<Record>(&b);
                let _ = decode::<serde_json::Value>(&b);
            }
        }
    }
}
