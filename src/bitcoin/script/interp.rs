//! The interpreter: one input's unlocking script, then the locking script it spends,
//! on one stack, with the rules `@bsv/sdk`'s `Spend.validate` applies when
//! `Transaction.verify` runs it (no explicit verification flags):
//! - a transaction of version 1 is checked strictly (push-only unlocking script,
//!   minimal pushes and numbers, low-S signatures, a null multisig dummy, a clean
//!   stack); version 2 and above is "relaxed" (Chronicle): those rules are off and the
//!   Chronicle signature bit is accepted;
//! - signatures are always strict DER with a defined hash type; public keys always
//!   compressed or uncompressed points on the curve;
//! - every opcode the SDK implements, including OP_2MUL/OP_2DIV, OP_VER, OP_VERIF,
//!   OP_SUBSTR, OP_LEFT, OP_RIGHT, OP_LSHIFTNUM and OP_RSHIFTNUM; numbers of any size.
//!
//! Bounds: the stack and the alt stack are each held to `memory_limit` bytes as the
//! SDK counts them (exceeding it is [`Fault::Memory`], reported `limited`); and an
//! operation budget (opcodes executed plus bytes hashed, [`Fault::Budget`], also
//! `limited`) stops pathological work the SDK would merely take long over.

use num_bigint::BigInt;
use num_traits::{Signed, ToPrimitive, Zero};
use ripemd::Ripemd160;
use secp256k1::{ecdsa, Message, PublicKey, SECP256K1};
use sha1::Sha1;
use sha2::{Digest, Sha256};

use super::num::{self, cast_to_bool};
use super::sighash::{self, Cache, Signing};
use super::{find_and_delete, parse, serialize, Chunk, OP_PUSHDATA1, OP_PUSHDATA2};
use crate::bitcoin::tx::TxView;

/// The SDK's default stack memory bound.
pub const DEFAULT_MEMORY_LIMIT: usize = 32_000_000;
/// The largest push or OP_CAT result the SDK accepts (1 GiB).
const MAX_PUSH: usize = 1 << 30;
/// The largest BigInt V8 holds (bits): a larger result is an error in the SDK.
const MAX_BIGINT_BITS: u64 = 1 << 30;
const HALF_ORDER: [u8; 32] = [
    0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x5d, 0x57, 0x6e, 0x73, 0x57, 0xa4, 0x50, 0x1d, 0xdf, 0xe9, 0x2f, 0x46, 0x68, 0x1b, 0x20, 0xa0,
];

/// Why a spend does not validate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The scripts fail (an invalid spend).
    Script(String),
    /// The stack memory bound was exceeded (`limited`).
    Memory(String),
    /// The operation budget was exhausted (`limited`).
    Budget(String),
}

impl Fault {
    pub fn message(&self) -> &str {
        match self {
            Fault::Script(m) | Fault::Memory(m) | Fault::Budget(m) => m,
        }
    }
}

fn fail<T>(m: impl Into<String>) -> Result<T, Fault> {
    Err(Fault::Script(m.into()))
}

/// Work done, counted for the caller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    pub ops: u64,
    pub hashed_bytes: u64,
    pub signatures: u64,
}

/// Bounds of one spend.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub memory_limit: usize,
    /// Opcodes executed plus bytes hashed (including signature digests).
    pub budget: u64,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds { memory_limit: DEFAULT_MEMORY_LIMIT, budget: 1 << 32 }
    }
}

/// One input to validate.
pub struct Spend<'a, 'b> {
    pub tx: &'b TxView<'a>,
    pub input: usize,
    pub locking: &'b [u8],
    pub satoshis: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Unlocking,
    Locking,
}

struct Machine<'a, 'b, 'c> {
    spend: &'c Spend<'a, 'b>,
    relaxed: bool,
    bounds: Bounds,
    stack: Vec<Vec<u8>>,
    alt: Vec<Vec<u8>>,
    mem: usize,
    alt_mem: usize,
    if_stack: Vec<bool>,
    /// How many entries of `if_stack` are false (so "is this branch executing" is O(1)).
    if_false: usize,
    else_stack: Vec<bool>,
    returning: bool,
    last_sep: Option<usize>,
    pc: usize,
    cache: &'c mut Cache,
    work: &'c mut Work,
}

fn mem_error(limit: usize) -> Fault {
    Fault::Memory(format!("Stack memory usage has exceeded {limit} bytes"))
}

fn name(op: u8) -> String {
    format!("opcode 0x{op:02x}")
}

/// Validates one spend; `Ok(())` when the scripts succeed.
pub fn validate(spend: &Spend<'_, '_>, bounds: Bounds, cache: &mut Cache, work: &mut Work) -> Result<(), Fault> {
    let unlocking_bytes = spend.tx.inputs[spend.input].script;
    let unlocking = parse(unlocking_bytes);
    let locking = parse(spend.locking);
    let relaxed = spend.tx.version > 1;
    if !relaxed && !super::is_push_only(&unlocking) {
        return fail("Unlocking scripts can only contain push operations, and no other opcodes.");
    }
    let mut m = Machine {
        spend,
        relaxed,
        bounds,
        stack: Vec::new(),
        alt: Vec::new(),
        mem: 0,
        alt_mem: 0,
        if_stack: Vec::new(),
        if_false: 0,
        else_stack: Vec::new(),
        returning: false,
        last_sep: None,
        pc: 0,
        cache,
        work,
    };
    m.run(&unlocking, Ctx::Unlocking)?;
    m.run(&locking, Ctx::Locking)?;
    m.require_truthy()?;
    if !relaxed && m.stack.len() != 1 {
        return fail(format!("The clean stack rule requires exactly one item to be on the stack after script execution, found {}.", m.stack.len()));
    }
    m.require_truthy()
}

fn minimal_push(c: &Chunk<'_>) -> bool {
    let Some(d) = c.data else { return true };
    let op = c.op;
    match d.len() {
        0 => op == super::OP_0,
        1 if (1..=16).contains(&d[0]) => op == super::OP_1 + (d[0] - 1),
        1 if d[0] == 0x81 => op == super::OP_1NEGATE,
        n if n <= 75 => op as usize == n,
        n if n <= 255 => op == OP_PUSHDATA1,
        n if n <= 65535 => op == OP_PUSHDATA2,
        _ => true,
    }
}

/// The SDK's `isChecksigFormatHelper` (strict DER with a trailing hash type).
fn checksig_format(b: &[u8]) -> bool {
    let n = b.len();
    if !(9..=73).contains(&n) || b[0] != 0x30 || b[1] as usize != n - 3 || b[2] != 0x02 {
        return false;
    }
    let r_len = b[3] as usize;
    if r_len == 0 || 5 + r_len >= n {
        return false;
    }
    let s_at = 4 + r_len;
    let s_len = b[s_at + 1] as usize;
    if b[s_at] != 0x02 || s_len == 0 {
        return false;
    }
    if b[4] & 0x80 != 0 || (r_len > 1 && b[4] == 0 && b[5] & 0x80 == 0) {
        return false;
    }
    let sv = s_at + 2;
    if sv >= n || b[sv] & 0x80 != 0 || (s_len > 1 && b[sv] == 0 && b.get(sv + 1).is_some_and(|x| x & 0x80 == 0)) {
        return false;
    }
    r_len + s_len + 7 == n
}

/// r and s of a signature that passed [`checksig_format`], with the leading zero the
/// SDK's `Signature.fromDER` strips; `None` where `fromDER` throws (a lone zero byte).
fn der_parts(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let r_len = b[3] as usize;
    let mut r = &b[4..4 + r_len];
    let s_at = 4 + r_len;
    let s_len = b[s_at + 1] as usize;
    let mut s = &b[s_at + 2..s_at + 2 + s_len];
    for v in [&mut r, &mut s] {
        if v[0] == 0 {
            if v.get(1).is_some_and(|x| x & 0x80 != 0) {
                *v = &v[1..];
            } else {
                return None;
            }
        }
    }
    Some((r, s))
}

fn be_gt(a: &[u8], b: &[u8; 32]) -> bool {
    let a = {
        let mut a = a;
        while a.len() > 1 && a[0] == 0 {
            a = &a[1..];
        }
        a
    };
    if a.len() != 32 {
        return a.len() > 32;
    }
    a > &b[..]
}

impl<'a, 'b, 'c> Machine<'a, 'b, 'c> {
    fn charge(&mut self, n: u64) -> Result<(), Fault> {
        let used = self.work.ops + self.work.hashed_bytes;
        if used.saturating_add(n) > self.bounds.budget {
            return Err(Fault::Budget(format!("script work over the budget of {} operations", self.bounds.budget)));
        }
        Ok(())
    }
    fn hashed(&mut self, n: usize) -> Result<(), Fault> {
        self.charge(n as u64)?;
        self.work.hashed_bytes += n as u64;
        Ok(())
    }

    fn ensure(&self, add: usize) -> Result<(), Fault> {
        if self.mem.saturating_add(add) > self.bounds.memory_limit {
            return Err(mem_error(self.bounds.memory_limit));
        }
        Ok(())
    }
    fn push(&mut self, v: Vec<u8>) -> Result<(), Fault> {
        self.ensure(v.len())?;
        self.mem += v.len();
        self.stack.push(v);
        Ok(())
    }
    fn pop(&mut self) -> Result<Vec<u8>, Fault> {
        match self.stack.pop() {
            Some(v) => {
                self.mem -= v.len();
                Ok(v)
            }
            None => fail("Attempted to pop from an empty stack."),
        }
    }
    /// `i` = 1 for the top.
    fn top(&self, i: usize) -> Result<&Vec<u8>, Fault> {
        if i == 0 || self.stack.len() < i {
            return fail(format!("Stack underflow accessing element at index -{i}. Stack length is {}.", self.stack.len()));
        }
        Ok(&self.stack[self.stack.len() - i])
    }
    fn need(&self, n: usize, op: u8) -> Result<(), Fault> {
        if self.stack.len() < n {
            return fail(format!("{} requires at least {n} items to be on the stack.", name(op)));
        }
        Ok(())
    }
    fn num(&self, b: &[u8]) -> Result<BigInt, Fault> {
        num::decode(b, !self.relaxed).map_err(Fault::Script)
    }
    fn pop_num(&mut self) -> Result<BigInt, Fault> {
        let b = self.pop()?;
        self.num(&b)
    }
    /// The SDK's `toNumber` (which throws above 2^53).
    fn safe(n: &BigInt) -> Result<i64, Fault> {
        match n.to_i64() {
            Some(v) if v.unsigned_abs() <= (1u64 << 53) - 1 => Ok(v),
            _ => fail("Number can only safely store up to 53 bits"),
        }
    }
    fn require_truthy(&self) -> Result<(), Fault> {
        match self.stack.last() {
            None => fail("The top stack element must be truthy after script evaluation (stack is empty)."),
            Some(v) if !cast_to_bool(v) => fail("The top stack element must be truthy after script evaluation."),
            _ => Ok(()),
        }
    }

    fn run(&mut self, chunks: &[Chunk<'_>], ctx: Ctx) -> Result<(), Fault> {
        self.pc = 0;
        self.if_stack.clear();
        self.if_false = 0;
        self.else_stack.clear();
        self.returning = false;
        self.alt.clear();
        self.alt_mem = 0;
        self.last_sep = None;
        while self.pc < chunks.len() {
            self.step(chunks, ctx)?;
        }
        if !self.if_stack.is_empty() {
            return fail("Every OP_IF, OP_NOTIF, or OP_ELSE must be terminated with OP_ENDIF prior to the end of the script.");
        }
        self.if_stack.clear();
        self.if_false = 0;
        self.else_stack.clear();
        self.alt.clear();
        self.alt_mem = 0;
        self.last_sep = None;
        Ok(())
    }

    fn step(&mut self, chunks: &[Chunk<'_>], ctx: Ctx) -> Result<(), Fault> {
        let limit = self.bounds.memory_limit;
        if self.mem > limit {
            return Err(mem_error(limit));
        }
        if self.alt_mem > limit {
            return Err(Fault::Memory(format!("Alt stack memory usage has exceeded {limit} bytes")));
        }
        let chunk = chunks[self.pc];
        let op = chunk.op;
        if chunk.invalid_length {
            return fail(format!("Malformed push data at pc={}.", self.pc));
        }
        if chunk.data.is_some_and(|d| d.len() > MAX_PUSH) {
            return fail("Data push over the maximum size.");
        }
        let executing = !self.returning && self.if_false == 0;
        if executing && op <= super::OP_PUSHDATA4 {
            if !self.relaxed && !minimal_push(&chunk) {
                return fail(format!("This data is not minimally-encoded. (PC: {})", self.pc));
            }
            self.charge(1)?;
            self.work.ops += 1;
            self.push(chunk.data.unwrap_or(&[]).to_vec())?;
        } else if executing || (super::OP_IF..=super::OP_ENDIF).contains(&op) {
            self.charge(1)?;
            self.work.ops += 1;
            self.exec(op, executing, chunks, ctx)?;
        }
        if self.returning && self.if_stack.is_empty() {
            self.pc = chunks.len();
        } else {
            self.pc += 1;
        }
        Ok(())
    }

    fn version_bytes(&self) -> [u8; 4] {
        self.spend.tx.version.to_le_bytes()
    }

    fn exec(&mut self, op: u8, executing: bool, chunks: &[Chunk<'_>], ctx: Ctx) -> Result<(), Fault> {
        match op {
            0x62 => {
                // OP_VER
                let v = self.version_bytes().to_vec();
                self.push(v)?;
            }
            0xb3 => {
                // OP_SUBSTR
                self.need(3, op)?;
                let len = Self::safe(&self.pop_num()?)?;
                let offset = Self::safe(&self.pop_num()?)?;
                let buf = self.pop()?;
                let size = buf.len() as i64;
                if offset < 0 || offset >= size || len < 0 || len > size - offset {
                    return fail(format!("OP_SUBSTR offset ({offset}) must be in range [0, {size}) and length ({len}) must be in range [0, {}]", size - offset));
                }
                self.push(buf[offset as usize..(offset + len) as usize].to_vec())?;
            }
            0xb4 | 0xb5 => {
                // OP_LEFT, OP_RIGHT
                self.need(2, op)?;
                let len = Self::safe(&self.pop_num()?)?;
                let buf = self.pop()?;
                let size = buf.len() as i64;
                if len < 0 || len > size {
                    return fail(format!("{} length ({len}) must be in range [0, {size}]", name(op)));
                }
                let v = if op == 0xb4 { buf[..len as usize].to_vec() } else { buf[(size - len) as usize..].to_vec() };
                self.push(v)?;
            }
            0xb6 | 0xb7 => {
                // OP_LSHIFTNUM, OP_RSHIFTNUM
                self.need(2, op)?;
                let bits = self.pop_num()?;
                if bits.is_negative() {
                    return fail(format!("{} bits to shift must not be negative.", name(op)));
                }
                let value = self.pop_num()?;
                let r = if op == 0xb6 {
                    if value.is_zero() {
                        BigInt::zero()
                    } else {
                        let total = bits.to_u64().and_then(|b| b.checked_add(value.bits())).filter(|t| *t <= MAX_BIGINT_BITS);
                        let Some(total) = total else { return fail("Maximum BigInt size exceeded") };
                        // The encoded length, checked before the shifted number is built.
                        let len = total.div_ceil(8) as usize + usize::from(total % 8 == 0);
                        self.ensure(len)?;
                        self.charge(len as u64)?;
                        value << bits.to_u64().unwrap()
                    }
                } else {
                    match bits.to_u64() {
                        Some(b) if b < value.bits() => {
                            if value.is_negative() {
                                -((-value) >> b)
                            } else {
                                value >> b
                            }
                        }
                        _ => BigInt::zero(),
                    }
                };
                self.push(num::encode(&r))?;
            }
            0x4f => self.push(vec![0x81])?,
            0x51..=0x60 => self.push(num::from_i64((op - 0x50) as i64))?,
            0x61 | 0xb0 | 0xb1 | 0xb2 | 0xb8 | 0xb9 => {}
            0x65 | 0x66 => {
                // OP_VERIF, OP_VERNOTIF
                let mut f = false;
                if executing {
                    if self.stack.is_empty() {
                        return fail("OP_VERIF and OP_VERNOTIF require at least one item on the stack when they are used!");
                    }
                    let b = self.pop()?;
                    if b.len() == 4 {
                        f = b[..] == self.version_bytes();
                    }
                    if op == 0x66 {
                        f = !f;
                    }
                }
                self.if_false += usize::from(!f);
                self.if_stack.push(f);
                self.else_stack.push(false);
            }
            0x63 | 0x64 => {
                let mut f = false;
                if executing {
                    if self.stack.is_empty() {
                        return fail("OP_IF and OP_NOTIF require at least one item on the stack when they are used!");
                    }
                    let b = self.pop()?;
                    f = cast_to_bool(&b);
                    if op == 0x64 {
                        f = !f;
                    }
                }
                self.if_false += usize::from(!f);
                self.if_stack.push(f);
                self.else_stack.push(false);
            }
            0x67 => {
                // After Genesis the node allows one OP_ELSE per OP_IF (UNBALANCED_CONDITIONAL);
                // the SDK allows more unless it is given explicit flags.
                if self.else_stack.last() == Some(&true) {
                    return fail("OP_ELSE may only be used once for each OP_IF or OP_NOTIF after Genesis.");
                }
                let Some(top) = self.if_stack.last_mut() else { return fail("OP_ELSE requires a preceeding OP_IF.") };
                if *top {
                    self.if_false += 1;
                } else {
                    self.if_false -= 1;
                }
                *top = !*top;
                if let Some(e) = self.else_stack.last_mut() {
                    *e = true;
                }
            }
            0x68 => {
                if self.if_stack.is_empty() {
                    return fail("OP_ENDIF requires a preceeding OP_IF.");
                }
                if self.if_stack.pop() == Some(false) {
                    self.if_false -= 1;
                }
                self.else_stack.pop();
            }
            0x69 => {
                self.need(1, op)?;
                if !cast_to_bool(self.top(1)?) {
                    return fail("OP_VERIFY requires the top stack value to be truthy.");
                }
                self.pop()?;
            }
            0x6a => {
                if !self.if_stack.is_empty() {
                    self.returning = true;
                } else {
                    self.pc = chunks.len() - 1;
                }
            }
            0x6b => {
                self.need(1, op)?;
                let v = self.pop()?;
                if self.alt_mem.saturating_add(v.len()) > self.bounds.memory_limit {
                    return Err(Fault::Memory(format!("Alt stack memory usage has exceeded {} bytes", self.bounds.memory_limit)));
                }
                self.alt_mem += v.len();
                self.alt.push(v);
            }
            0x6c => {
                let Some(v) = self.alt.pop() else { return fail("OP_FROMALTSTACK requires at least one item to be on the stack.") };
                self.alt_mem -= v.len();
                self.push(v)?;
            }
            0x6d => {
                self.need(2, op)?;
                self.pop()?;
                self.pop()?;
            }
            0x6e => {
                self.need(2, op)?;
                let (a, b) = (self.top(2)?.clone(), self.top(1)?.clone());
                self.push(a)?;
                self.push(b)?;
            }
            0x6f => {
                self.need(3, op)?;
                let (a, b, c) = (self.top(3)?.clone(), self.top(2)?.clone(), self.top(1)?.clone());
                self.push(a)?;
                self.push(b)?;
                self.push(c)?;
            }
            0x70 => {
                self.need(4, op)?;
                let (a, b) = (self.top(4)?.clone(), self.top(3)?.clone());
                self.push(a)?;
                self.push(b)?;
            }
            0x71 => {
                // OP_2ROT: x1 x2 x3 x4 x5 x6 -> x3 x4 x5 x6 x1 x2
                self.need(6, op)?;
                let n = self.stack.len();
                self.stack[n - 6..].rotate_left(2);
            }
            0x72 => {
                self.need(4, op)?;
                let n = self.stack.len();
                self.stack[n - 4..].rotate_left(2);
            }
            0x73 => {
                self.need(1, op)?;
                let t = self.top(1)?;
                if cast_to_bool(t) {
                    let t = t.clone();
                    self.push(t)?;
                }
            }
            0x74 => {
                let d = num::from_i64(self.stack.len() as i64);
                self.push(d)?;
            }
            0x75 => {
                self.need(1, op)?;
                self.pop()?;
            }
            0x76 => {
                self.need(1, op)?;
                let t = self.top(1)?.clone();
                self.push(t)?;
            }
            0x77 => {
                self.need(2, op)?;
                let b = self.pop()?;
                self.pop()?;
                self.push(b)?;
            }
            0x78 => {
                self.need(2, op)?;
                let t = self.top(2)?.clone();
                self.push(t)?;
            }
            0x79 | 0x7a => {
                self.need(2, op)?;
                let n = self.pop_num()?;
                let idx = match n.to_usize() {
                    Some(i) if !n.is_negative() && i < self.stack.len() => i,
                    _ => return fail(format!("{} requires the top stack element to be 0 or a positive number less than the current size of the stack.", name(op))),
                };
                let at = self.stack.len() - 1 - idx;
                if op == 0x7a {
                    let v = self.stack.remove(at);
                    self.mem -= v.len();
                    self.push(v)?;
                } else {
                    let v = self.stack[at].clone();
                    self.push(v)?;
                }
            }
            0x7b => {
                self.need(3, op)?;
                let n = self.stack.len();
                self.stack[n - 3..].rotate_left(1);
            }
            0x7c => {
                self.need(2, op)?;
                let n = self.stack.len();
                self.stack.swap(n - 1, n - 2);
            }
            0x7d => {
                self.need(2, op)?;
                let t = self.top(1)?.clone();
                self.ensure(t.len())?;
                self.mem += t.len();
                let n = self.stack.len();
                self.stack.insert(n - 2, t);
            }
            0x82 => {
                self.need(1, op)?;
                let s = num::from_i64(self.top(1)?.len() as i64);
                self.push(s)?;
            }
            0x84..=0x86 => {
                self.need(2, op)?;
                let b2 = self.pop()?;
                let mut b1 = self.pop()?;
                if b1.len() != b2.len() {
                    return fail(format!("{} requires the top two stack items to be the same size.", name(op)));
                }
                for (x, y) in b1.iter_mut().zip(&b2) {
                    *x = match op {
                        0x84 => *x & y,
                        0x85 => *x | y,
                        _ => *x ^ y,
                    };
                }
                self.push(b1)?;
            }
            0x83 => {
                self.need(1, op)?;
                let mut b = self.pop()?;
                for x in b.iter_mut() {
                    *x = !*x;
                }
                self.push(b)?;
            }
            0x98 | 0x99 => self.bit_shift(op)?,
            0x87 | 0x88 => {
                self.need(2, op)?;
                let b2 = self.pop()?;
                let b1 = self.pop()?;
                let eq = b1 == b2;
                self.push(if eq { vec![1] } else { vec![] })?;
                if op == 0x88 {
                    if !eq {
                        return fail("OP_EQUALVERIFY requires the top two stack items to be equal.");
                    }
                    self.pop()?;
                }
            }
            0x8b..=0x92 => {
                self.need(1, op)?;
                let bn = self.pop_num()?;
                let r = match op {
                    0x8b => bn + 1,
                    0x8c => bn - 1,
                    0x8d => bn * 2,
                    0x8e => bn / 2,
                    0x8f => -bn,
                    0x90 => bn.abs(),
                    0x91 => BigInt::from(u8::from(bn.is_zero())),
                    _ => BigInt::from(u8::from(!bn.is_zero())),
                };
                self.push(num::encode(&r))?;
            }
            0x93..=0x97 | 0x9a..=0xa4 => {
                self.need(2, op)?;
                let b2 = self.pop()?;
                let b1 = self.pop()?;
                let n2 = self.num(&b2)?;
                let n1 = self.num(&b1)?;
                let (l1, l2) = (num::byte_len(&n1), num::byte_len(&n2));
                let predicted = match op {
                    0x95 => l1 + l2,
                    0x93 | 0x94 => l1.max(l2) + 1,
                    _ => l1.max(l2),
                };
                self.ensure(usize::try_from(predicted).unwrap_or(usize::MAX))?;
                if op == 0x95 {
                    self.charge(predicted)?;
                }
                let b = |x: bool| BigInt::from(u8::from(x));
                let r = match op {
                    0x93 => n1 + n2,
                    0x94 => n1 - n2,
                    0x95 => n1 * n2,
                    0x96 | 0x97 => {
                        if n2.is_zero() {
                            return fail(if op == 0x96 { "OP_DIV cannot divide by zero!" } else { "OP_MOD cannot divide by zero!" });
                        }
                        if op == 0x96 {
                            n1 / n2
                        } else {
                            n1 % n2
                        }
                    }
                    0x9a => b(!n1.is_zero() && !n2.is_zero()),
                    0x9b => b(!n1.is_zero() || !n2.is_zero()),
                    0x9c | 0x9d => b(n1 == n2),
                    0x9e => b(n1 != n2),
                    0x9f => b(n1 < n2),
                    0xa0 => b(n1 > n2),
                    0xa1 => b(n1 <= n2),
                    0xa2 => b(n1 >= n2),
                    0xa3 => {
                        if n1 < n2 {
                            n1
                        } else {
                            n2
                        }
                    }
                    _ => {
                        if n1 > n2 {
                            n1
                        } else {
                            n2
                        }
                    }
                };
                self.push(num::encode(&r))?;
                if op == 0x9d {
                    if !cast_to_bool(self.top(1)?) {
                        return fail("OP_NUMEQUALVERIFY requires the top stack item to be truthy.");
                    }
                    self.pop()?;
                }
            }
            0xa5 => {
                self.need(3, op)?;
                let max = self.pop_num()?;
                let min = self.pop_num()?;
                let x = self.pop_num()?;
                let v = x >= min && x < max;
                self.push(if v { vec![1] } else { vec![] })?;
            }
            0xa6..=0xaa => {
                self.need(1, op)?;
                let b = self.pop()?;
                self.hashed(b.len())?;
                let h: Vec<u8> = match op {
                    0xa6 => Ripemd160::digest(&b).to_vec(),
                    0xa7 => Sha1::digest(&b).to_vec(),
                    0xa8 => Sha256::digest(&b).to_vec(),
                    0xa9 => Ripemd160::digest(Sha256::digest(&b)).to_vec(),
                    _ => Sha256::digest(Sha256::digest(&b)).to_vec(),
                };
                self.push(h)?;
            }
            0xab => self.last_sep = Some(self.pc),
            0xac | 0xad => {
                self.need(2, op)?;
                let key = self.pop()?;
                let sig = self.pop()?;
                self.check_sig_encoding(&sig)?;
                self.check_key_encoding(&key)?;
                let mut ok = false;
                if !sig.is_empty() {
                    let mut sub: Vec<Chunk<'_>> = chunks[self.last_sep.map_or(0, |s| s + 1)..].to_vec();
                    find_and_delete(&mut sub, &sig);
                    ok = self.verify(&sig, &key, &sub)?;
                }
                self.push(if ok { vec![1] } else { vec![] })?;
                if op == 0xad {
                    if !ok {
                        return fail("OP_CHECKSIGVERIFY requires that a valid signature is provided.");
                    }
                    self.pop()?;
                }
            }
            0xae | 0xaf => self.check_multisig(op, chunks)?,
            0x7e => {
                self.need(2, op)?;
                let b2 = self.pop()?;
                let mut b1 = self.pop()?;
                if b1.len() + b2.len() > MAX_PUSH {
                    return fail("OP_CAT result over the maximum push size.");
                }
                // The SDK builds the result before its memory check: so the check here.
                self.ensure(b1.len() + b2.len())?;
                b1.extend_from_slice(&b2);
                self.push(b1)?;
            }
            0x7f => {
                self.need(2, op)?;
                let pos = self.pop()?;
                let data = self.pop()?;
                let n = self.num(&pos)?;
                let at = match n.to_usize() {
                    Some(i) if !n.is_negative() && i <= data.len() => i,
                    _ => return fail("OP_SPLIT requires the first stack item to be a non-negative number less than or equal to the size of the second-from-top stack item."),
                };
                let (a, b) = data.split_at(at);
                let (a, b) = (a.to_vec(), b.to_vec());
                self.push(a)?;
                self.push(b)?;
            }
            0x80 => {
                self.need(2, op)?;
                let size = self.pop_num()?;
                let size = match size.to_usize() {
                    Some(s) if !size.is_negative() && s <= MAX_PUSH => s,
                    _ => return fail("It's not currently possible to push data larger than the maximum size or of a negative size."),
                };
                let mut raw = num::minimally_encode(&self.pop()?);
                if raw.len() > size {
                    return fail("OP_NUM2BIN requires that the size expressed in the top stack item is large enough to hold the value expressed in the second-from-top stack item.");
                }
                if raw.len() == size {
                    self.push(raw)?;
                } else {
                    self.ensure(size)?;
                    let mut out = vec![0u8; size];
                    let mut sign = 0;
                    if let Some(last) = raw.last_mut() {
                        sign = *last & 0x80;
                        *last &= 0x7f;
                    }
                    out[..raw.len()].copy_from_slice(&raw);
                    if sign != 0 {
                        out[size - 1] |= 0x80;
                    }
                    self.push(out)?;
                }
            }
            0x81 => {
                self.need(1, op)?;
                let b = self.pop()?;
                let r = num::minimally_encode(&b);
                self.push(r)?;
            }
            _ => return fail(format!("Invalid opcode {op} (pc={}).", self.pc)),
        }
        let _ = ctx;
        Ok(())
    }

    fn bit_shift(&mut self, op: u8) -> Result<(), Fault> {
        self.need(2, op)?;
        let n = self.pop_num()?;
        let buf = self.pop()?;
        if n.is_negative() {
            return fail(format!("{} requires the top item on the stack not to be negative.", name(op)));
        }
        if buf.is_empty() {
            return self.push(Vec::new());
        }
        let len = buf.len();
        let bits_total = (len as u64) * 8;
        let value_bits = {
            let first = buf.iter().position(|x| *x != 0);
            match first {
                None => 0,
                Some(i) => ((len - i) as u64) * 8 - buf[i].leading_zeros() as u64,
            }
        };
        let out = if op == 0x98 {
            // The SDK shifts the whole number before masking: too large a result is an error.
            if value_bits > 0 && n.to_u64().and_then(|s| s.checked_add(value_bits)).is_none_or(|t| t > MAX_BIGINT_BITS) {
                return fail("Maximum BigInt size exceeded");
            }
            let s = n.to_u64().unwrap_or(u64::MAX);
            // The SDK builds the whole shifted number (up to 2^30 bits) before masking it: that
            // work is counted against the operation budget.
            if value_bits > 0 {
                self.charge((value_bits + s) / 8)?;
            }
            shift_bytes_left(&buf, if s >= bits_total { bits_total } else { s })
        } else {
            let s = n.to_u64().unwrap_or(u64::MAX);
            shift_bytes_right(&buf, if s >= bits_total { bits_total } else { s })
        };
        self.push(out)
    }

    fn check_sig_encoding(&self, sig: &[u8]) -> Result<(), Fault> {
        if sig.is_empty() {
            return Ok(());
        }
        if !checksig_format(sig) || der_parts(sig).is_none() {
            return fail("The signature format is invalid.");
        }
        let scope = sig[sig.len() - 1];
        let base = scope & 0x1f;
        if !(sighash::ALL..=sighash::SINGLE).contains(&base) {
            return fail("The signature hash type is invalid.");
        }
        if scope & sighash::CHRONICLE != 0 && !self.relaxed {
            return fail("The signature hash type is invalid before Chronicle.");
        }
        if !self.relaxed {
            let (_, s) = der_parts(sig).unwrap();
            if be_gt(s, &HALF_ORDER) {
                return fail("The signature must have a low S value.");
            }
        }
        Ok(())
    }

    fn check_key_encoding(&self, key: &[u8]) -> Result<(), Fault> {
        if key.is_empty() {
            return fail("Public key is empty.");
        }
        if key.len() < 33 {
            return fail("The public key is too short, it must be at least 33 bytes.");
        }
        match key[0] {
            0x04 if key.len() != 65 => return fail("The non-compressed public key must be 65 bytes."),
            0x02 | 0x03 if key.len() != 33 => return fail("The compressed public key must be 33 bytes."),
            0x02..=0x04 => {}
            _ => return fail("The public key is in an unknown format."),
        }
        if PublicKey::from_slice(key).is_err() {
            return fail("The public key is in an unknown format.");
        }
        Ok(())
    }

    /// ECDSA check of `sig` (with its hash type) by `key` over this input's digest.
    fn verify(&mut self, sig: &[u8], key: &[u8], sub: &[Chunk<'_>]) -> Result<bool, Fault> {
        let Some((r, s)) = der_parts(sig) else { return Ok(false) };
        let Ok(pk) = PublicKey::from_slice(key) else { return Ok(false) };
        if r.len() > 32 || s.len() > 32 {
            return Ok(false);
        }
        let mut compact = [0u8; 64];
        compact[32 - r.len()..32].copy_from_slice(r);
        compact[64 - s.len()..].copy_from_slice(s);
        let Ok(mut esig) = ecdsa::Signature::from_compact(&compact) else { return Ok(false) };
        if compact[..32].iter().all(|x| *x == 0) || compact[32..].iter().all(|x| *x == 0) {
            return Ok(false);
        }
        let mut code = Vec::new();
        serialize(sub, &mut code);
        let scope = sig[sig.len() - 1];
        let tx = self.spend.tx;
        self.hashed(code.len() + 160 + if sighash::uses_original(scope) { tx.raw.len() } else { 0 })?;
        self.work.signatures += 1;
        let digest = sighash::digest(&Signing { tx, input: self.spend.input, satoshis: self.spend.satoshis, subscript: &code, scope }, self.cache);
        esig.normalize_s();
        Ok(SECP256K1.verify_ecdsa(Message::from_digest(digest), &esig, &pk).is_ok())
    }

    fn check_multisig(&mut self, op: u8, chunks: &[Chunk<'_>]) -> Result<(), Fault> {
        let mut i = 1usize;
        if self.stack.len() < i {
            return fail("OP_CHECKMULTISIG requires at least 1 item for nKeys.");
        }
        let nk = self.num(self.top(i)?)?;
        let mut n_keys = match nk.to_u64() {
            Some(k) if !nk.is_negative() && k <= (1 << 31) - 1 => k as usize,
            _ => return fail("OP_CHECKMULTISIG requires a key count between 0 and 2147483647."),
        };
        let declared_keys = n_keys;
        i += 1;
        let mut ikey = i;
        i += n_keys;
        if self.stack.len() < i {
            return fail(format!("OP_CHECKMULTISIG stack too small for nKeys and keys. Need {i}, have {}.", self.stack.len()));
        }
        let ns = self.num(self.top(i)?)?;
        let mut n_sigs = match ns.to_u64() {
            Some(k) if !ns.is_negative() && k as usize <= n_keys => k as usize,
            _ => return fail("OP_CHECKMULTISIG requires the number of signatures to be no greater than the number of keys."),
        };
        let declared_sigs = n_sigs;
        i += 1;
        let mut isig = i;
        i += n_sigs;
        if self.stack.len() < i {
            return fail(format!("OP_CHECKMULTISIG stack too small for N, keys, M, sigs, and dummy. Need {i}, have {}.", self.stack.len()));
        }
        let mut sub: Vec<Chunk<'_>> = chunks[self.last_sep.map_or(0, |s| s + 1)..].to_vec();
        for k in 0..n_sigs {
            let sig = self.top(isig + k)?.clone();
            find_and_delete(&mut sub, &sig);
        }
        let mut success = true;
        while success && n_sigs > 0 {
            if n_keys == 0 {
                success = false;
                break;
            }
            let sig = self.top(isig)?.clone();
            let key = self.top(ikey)?.clone();
            self.check_sig_encoding(&sig)?;
            self.check_key_encoding(&key)?;
            let ok = !sig.is_empty() && self.verify(&sig, &key, &sub)?;
            if ok {
                isig += 1;
                n_sigs -= 1;
            }
            ikey += 1;
            n_keys -= 1;
            if n_sigs > n_keys {
                success = false;
            }
        }
        for _ in 0..(declared_keys + declared_sigs + 2) {
            self.pop()?;
        }
        if self.stack.is_empty() {
            return fail("OP_CHECKMULTISIG requires an extra item (dummy) to be on the stack.");
        }
        let dummy = self.pop()?;
        if !self.relaxed && !dummy.is_empty() {
            return fail("OP_CHECKMULTISIG requires the extra stack item (dummy) to be empty.");
        }
        self.push(if success { vec![1] } else { vec![] })?;
        if op == 0xaf {
            if !success {
                return fail("OP_CHECKMULTISIGVERIFY requires that a sufficient number of valid signatures are provided.");
            }
            self.pop()?;
        }
        Ok(())
    }
}

/// `buf` as a big-endian number shifted left by `s` bits, kept to its length.
fn shift_bytes_left(buf: &[u8], s: u64) -> Vec<u8> {
    let len = buf.len();
    let mut out = vec![0u8; len];
    let byte = (s / 8) as usize;
    let bit = (s % 8) as u32;
    for i in 0..len {
        let src = i + byte;
        if src >= len {
            break;
        }
        let mut v = (buf[src] as u16) << bit;
        if bit > 0 && src + 1 < len {
            v |= (buf[src + 1] as u16) >> (8 - bit);
        }
        out[i] = v as u8;
    }
    out
}

/// `buf` as a big-endian number shifted right by `s` bits, kept to its length.
fn shift_bytes_right(buf: &[u8], s: u64) -> Vec<u8> {
    let len = buf.len();
    let mut out = vec![0u8; len];
    let byte = (s / 8) as usize;
    let bit = (s % 8) as u32;
    for i in (0..len).rev() {
        if i < byte {
            break;
        }
        let src = i - byte;
        let mut v = (buf[src] as u16) >> bit;
        if bit > 0 && src >= 1 {
            v |= ((buf[src - 1] as u16) << (8 - bit)) & 0xff;
        }
        out[i] = v as u8;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_shifts() {
        assert_eq!(shift_bytes_left(&[0x01, 0x80], 1), vec![0x03, 0x00]);
        assert_eq!(shift_bytes_left(&[0x01, 0x80], 8), vec![0x80, 0x00]);
        assert_eq!(shift_bytes_right(&[0x01, 0x80], 1), vec![0x00, 0xc0]);
        assert_eq!(shift_bytes_right(&[0x01, 0x80], 9), vec![0x00, 0x00]);
        assert_eq!(shift_bytes_right(&[0x01, 0x80], 16), vec![0x00, 0x00]);
        assert!(checksig_format(&hex::decode("3006020101020101").map(|mut v| { v.push(0x41); v }).unwrap()));
    }
}

#[cfg(test)]
mod nesting {
    use super::*;
    use crate::bitcoin::tx::view_prefix;

    /// A transaction of one input (unlocking `unlock`) and one output, for spends in tests.
    /// Version 2 (relaxed): tests here are of script rules, not of the strict version-1 ones.
    pub(super) fn tx_with(unlock: &[u8]) -> Vec<u8> {
        let mut t = vec![2, 0, 0, 0, 1];
        t.extend_from_slice(&[0x11; 32]);
        t.extend_from_slice(&[0, 0, 0, 0]);
        t.extend_from_slice(&[0xfe]);
        t.extend_from_slice(&(unlock.len() as u32).to_le_bytes());
        t.extend_from_slice(unlock);
        t.extend_from_slice(&[0xff; 4]);
        t.push(1);
        t.extend_from_slice(&[0; 8]);
        t.push(1);
        t.push(0x51);
        t.extend_from_slice(&[0; 4]);
        t
    }

    #[test]
    fn deep_conditionals_run_in_linear_time() {
        // 200,000 nested OP_1 OP_IF ... OP_ENDIF: each step asks "is this branch executing".
        let n = 200_000;
        let mut lock = Vec::new();
        for _ in 0..n {
            lock.extend_from_slice(&[0x51, 0x63]);
        }
        lock.push(0x00);
        lock.push(0x63);
        lock.extend(std::iter::repeat_n(0x51, 10));
        lock.push(0x68);
        lock.extend(std::iter::repeat_n(0x68, n));
        lock.push(0x51);
        let raw = tx_with(&[]);
        let tx = view_prefix(&raw).unwrap();
        let spend = Spend { tx: &tx, input: 0, locking: &lock, satoshis: 1 };
        let mut work = Work::default();
        assert_eq!(validate(&spend, Bounds::default(), &mut Cache::default(), &mut work), Ok(()));
        // Every opcode but the ten skipped ones ran (the skipped branch costs its IF and ENDIF).
        assert_eq!(work.ops, (3 * n + 4) as u64);
        // The operation budget stops it, as `limited`.
        let small = Bounds { memory_limit: DEFAULT_MEMORY_LIMIT, budget: 1000 };
        assert!(matches!(validate(&spend, small, &mut Cache::default(), &mut Work::default()), Err(Fault::Budget(_))));
    }
}

/// Rows of the node's own script tests (bitcoin-sv `src/test/data/script_tests.json`, vendored in
/// tests/fixtures/script with their source): the conditionals after Genesis.
#[cfg(test)]
mod node_vectors {
    use super::nesting::tx_with;
    use super::*;
    use crate::bitcoin::tx::view_prefix;

    /// The node's test notation for the tokens these rows use: numbers, '' strings, raw 0x
    /// bytes and opcode names.
    fn assemble(text: &str) -> Vec<u8> {
        let mut out = Vec::new();
        for token in text.split_whitespace() {
            if let Some(hex) = token.strip_prefix("0x") {
                out.extend(hex::decode(hex).expect("hex token"));
            } else if token.starts_with('\'') {
                let s = token.trim_matches('\'').as_bytes();
                assert!(s.len() < 0x4c, "short strings only");
                out.push(s.len() as u8);
                out.extend_from_slice(s);
            } else if let Ok(n) = token.parse::<i64>() {
                out.push(match n {
                    0 => 0x00,
                    -1 => 0x4f,
                    1..=16 => 0x50 + n as u8,
                    _ => panic!("number {n} is not used by these rows"),
                });
            } else {
                out.push(match token {
                    "IF" => 0x63,
                    "NOTIF" => 0x64,
                    "VERIF" => 0x65,
                    "VERNOTIF" => 0x66,
                    "ELSE" => 0x67,
                    "ENDIF" => 0x68,
                    "RETURN" => 0x6a,
                    "EQUAL" => 0x87,
                    "ADD" => 0x93,
                    "SHA1" => 0xa7,
                    other => panic!("opcode {other} is not used by these rows"),
                });
            }
        }
        out
    }

    #[test]
    fn a_second_else_in_one_if_is_unbalanced_after_genesis_as_the_node_says() {
        let rows: Vec<Vec<String>> =
            serde_json::from_str(include_str!("../../../tests/fixtures/script/bsv-genesis-conditionals.json")).unwrap();
        let mut checked = 0;
        for row in rows.iter().filter(|r| r.len() >= 4) {
            let (sig, pubkey, expected) = (&row[0], &row[1], &row[3]);
            let raw = tx_with(&assemble(sig));
            let tx = view_prefix(&raw).unwrap();
            let locking = assemble(pubkey);
            let spend = Spend { tx: &tx, input: 0, locking: &locking, satoshis: 0 };
            let got = validate(&spend, Bounds::default(), &mut Cache::default(), &mut Work::default());
            match expected.as_str() {
                "OK" => assert_eq!(got, Ok(()), "{sig} | {pubkey}"),
                "UNBALANCED_CONDITIONAL" => assert!(matches!(got, Err(Fault::Script(_))), "{sig} | {pubkey}: {got:?}"),
                other => panic!("unexpected expectation {other}"),
            }
            checked += 1;
        }
        assert_eq!(checked, 18);
    }
}
