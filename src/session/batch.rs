//! Batch bodies and the byte budget (BRC-193 §2, §3, §8).
//!
//! A batch is rendered by hand in a fixed field order so that its exact UTF-8 length
//! is known before it is sent: the budget counts the complete response body,
//! envelope included. Groups are rendered once and never split.

use std::sync::Arc;

use serde_json::Value;

use crate::wire::limits::{PROFILE_MAX_BYTES, PROFILE_MAX_OBSERVATIONS};
use crate::wire::{ErrorCode, Limit, LimitKind, Limits, WireError};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Snapshot,
    Live,
}

impl Phase {
    fn as_str(self) -> &'static str {
        match self {
            Phase::Snapshot => "snapshot",
            Phase::Live => "live",
        }
    }
}

/// The parts of a batch fixed for the whole session (borrowed from its record: a
/// woken poll renders one without allocating).
pub struct Frame<'a> {
    pub session: &'a str,
    /// The scope, already rendered as JSON (it is repeated in every observation).
    pub scope_json: Arc<[u8]>,
    pub expires_at: u64,
    pub replay_until: u64,
    pub limits: Limits,
}

/// The parts of a batch that depend on its position.
pub struct Tail<'a> {
    pub phase: Phase,
    pub cursor: &'a str,
    pub snapshot_complete: bool,
    pub through: u64,
    pub high_water: u64,
}

/// Where rendered bytes go: a body, or a [`Measure`] that only counts them, so a body's
/// length is known without rendering it and always agrees with the rendering.
pub(crate) trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Counts the bytes a rendering would produce.
#[derive(Default)]
pub(crate) struct Measure(pub usize);

impl Sink for Measure {
    fn put(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }
}

/// Appends already rendered JSON values separated by commas (the inside of an array).
fn push_joined<T: AsRef<[u8]>>(out: &mut impl Sink, items: &[T]) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.put(b",");
        }
        out.put(item.as_ref());
    }
}

/// Appends the decimal digits of `v` (renders run once per batch and per woken poll,
/// so they avoid formatting machinery and temporary strings).
pub(crate) fn push_u64(out: &mut impl Sink, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.put(&buf[i..]);
}

/// Appends `s` as a JSON string, escaped as serde_json escapes it. Ids need no
/// escaping, and are copied as they are.
fn push_json_str(out: &mut impl Sink, s: &str) {
    if is_plain(s) {
        push_plain_str(out, s);
    } else {
        out.put(&serde_json::to_vec(s).expect("a string serializes"));
    }
}

/// True when `s` is a JSON string's content as it is: no control character, quote or
/// backslash. Checked without stopping early, so the check runs over whole vectors.
pub(crate) fn is_plain(s: &str) -> bool {
    s.bytes().fold(true, |plain, b| plain & (b >= 0x20) & (b != b'"') & (b != b'\\'))
}

/// Appends a string the provider made itself and that needs no escaping by
/// construction: a session id (hex) or a cursor (base64url). Every woken poll renders
/// both, and measures them for its envelope twice; skipping the check cut a wake pass's
/// CPU time by about a tenth (bench section 4, alternating runs).
fn push_plain_str(out: &mut impl Sink, s: &str) {
    debug_assert!(is_plain(s), "a provider-made string needs no escaping: {s:?}");
    out.put(b"\"");
    out.put(s.as_bytes());
    out.put(b"\"");
}

impl Frame<'_> {
    /// Renders the complete body with the given (already rendered) groups.
    #[cfg(test)]
    pub fn render<G: AsRef<[u8]>>(&self, tail: &Tail, groups: &[G]) -> Vec<u8> {
        let groups_len: usize = groups.iter().map(|g| g.as_ref().len()).sum::<usize>() + groups.len().saturating_sub(1);
        let mut out = Vec::with_capacity(self.envelope_len(tail) + groups_len);
        self.write(&mut out, tail, groups);
        out
    }

    /// Length of the body with no groups.
    pub fn envelope_len(&self, tail: &Tail) -> usize {
        let mut m = Measure::default();
        self.write::<&[u8]>(&mut m, tail, &[]);
        m.0
    }

    fn write<G: AsRef<[u8]>>(&self, out: &mut impl Sink, tail: &Tail, groups: &[G]) {
        out.put(b"{\"version\":1,\"session\":");
        push_plain_str(out, self.session);
        out.put(b",\"scope\":");
        out.put(&self.scope_json);
        out.put(b",\"phase\":\"");
        out.put(tail.phase.as_str().as_bytes());
        out.put(b"\",\"groups\":[");
        push_joined(out, groups);
        out.put(b"],\"cursor\":");
        push_plain_str(out, tail.cursor);
        out.put(b",\"snapshotComplete\":");
        out.put(if tail.snapshot_complete { b"true" } else { b"false" });
        for (name, v) in [
            (&b",\"through\":\""[..], tail.through),
            (b",\"highWater\":\"", tail.high_water),
            (b",\"expiresAt\":\"", self.expires_at),
            (b",\"replayUntil\":\"", self.replay_until),
        ] {
            out.put(name);
            push_u64(out, v);
            out.put(b"\"");
        }
        out.put(b",\"limits\":{\"maxBytes\":");
        push_u64(out, self.limits.max_bytes as u64);
        out.put(b",\"maxObservations\":");
        push_u64(out, self.limits.max_observations as u64);
        out.put(b",\"waitMs\":");
        push_u64(out, self.limits.wait_ms as u64);
        out.put(b"}}");
    }
}

/// Renders one observation `{id, scope, kind, payload}` (BRC-192 §2).
pub fn observation(id: &str, scope_json: &[u8], kind: &str, payload: &Value) -> Vec<u8> {
    let payload = serde_json::to_vec(payload).expect("writing JSON to a Vec cannot fail");
    observation_raw(id, scope_json, kind, &payload)
}

/// Renders one observation whose payload is already rendered JSON.
pub fn observation_raw(id: &str, scope_json: &[u8], kind: &str, payload_json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(scope_json.len() + payload_json.len() + 64);
    out.extend_from_slice(b"{\"id\":");
    push_json_str(&mut out, id);
    out.extend_from_slice(b",\"scope\":");
    out.extend_from_slice(scope_json);
    out.extend_from_slice(b",\"kind\":");
    push_json_str(&mut out, kind);
    out.extend_from_slice(b",\"payload\":");
    out.extend_from_slice(payload_json);
    out.push(b'}');
    out
}

/// Renders a group of one observation straight into one buffer: what [`group`] of one
/// [`observation_raw`] gives, without the intermediate copies (a snapshot page renders one
/// such group per row). `payload` appends the observation's payload JSON.
pub fn single_group<E>(
    group_id: &str,
    sequence: u64,
    scope_json: &[u8],
    kind: &str,
    payload_hint: usize,
    payload: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
) -> Result<RenderedGroup, E> {
    let mut out = Vec::with_capacity(2 * group_id.len() + scope_json.len() + payload_hint + 96);
    out.extend_from_slice(b"{\"id\":");
    push_json_str(&mut out, group_id);
    out.extend_from_slice(b",\"sequence\":\"");
    push_u64(&mut out, sequence);
    out.extend_from_slice(b"\",\"observations\":[{\"id\":\"");
    out.extend_from_slice(group_id.as_bytes()); // ids are `[a-z0-9.-]`: no escaping
    out.extend_from_slice(b".0\",\"scope\":");
    out.extend_from_slice(scope_json);
    out.extend_from_slice(b",\"kind\":");
    push_json_str(&mut out, kind);
    out.extend_from_slice(b",\"payload\":");
    payload(&mut out)?;
    out.extend_from_slice(b"}]}");
    Ok(RenderedGroup { bytes: out, observations: 1 })
}

/// Length of what [`observation_raw`] renders for an id, scope, kind and payload of these
/// lengths (`id` and `kind` need no escaping: the provider makes both).
pub(crate) fn observation_len(id_len: usize, scope_len: usize, kind: &str, payload_len: usize) -> usize {
    const FIXED: usize = "{\"id\":\"\",\"scope\":,\"kind\":\"\",\"payload\":}".len();
    FIXED + id_len + scope_len + kind.len() + payload_len
}

/// Length of what [`group`] renders for an id of `id_len` bytes at `sequence` with `count`
/// observations of `observations_len` bytes in all.
pub(crate) fn group_len(id_len: usize, sequence: u64, count: usize, observations_len: usize) -> usize {
    const FIXED: usize = "{\"id\":\"\",\"sequence\":\"\",\"observations\":[]}".len();
    FIXED + id_len + digits(sequence) + observations_len + count.saturating_sub(1)
}

/// A rendered group and the number of observations in it.
pub struct RenderedGroup {
    pub bytes: Vec<u8>,
    pub observations: usize,
}

impl AsRef<[u8]> for RenderedGroup {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// Renders one group `{id, sequence, observations}`.
pub fn group(id: &str, sequence: u64, observations: &[Vec<u8>]) -> RenderedGroup {
    let mut out = Vec::with_capacity(observations.iter().map(Vec::len).sum::<usize>() + 64);
    out.extend_from_slice(b"{\"id\":");
    push_json_str(&mut out, id);
    out.extend_from_slice(b",\"sequence\":\"");
    push_u64(&mut out, sequence);
    out.extend_from_slice(b"\",\"observations\":[");
    push_joined(&mut out, observations);
    out.extend_from_slice(b"]}");
    RenderedGroup { bytes: out, observations: observations.len() }
}

/// Accumulates whole groups under the effective limits.
pub struct Packer {
    limits: Limits,
    /// The provider's own limits (already within the profile maxima): a group they cannot
    /// carry is `permanent-group`, whatever the request asks.
    provider: Limits,
    max_bytes: usize,
    max_observations: usize,
    /// Shared: a live group rendered once serves every session of its view.
    groups: Vec<Taken>,
    group_bytes: usize,
    observations: usize,
}

/// A group the packer took, rendered as it is (no list of slices is built to render it).
struct Taken(Arc<RenderedGroup>);

impl AsRef<[u8]> for Taken {
    fn as_ref(&self) -> &[u8] {
        &self.0.bytes
    }
}

/// What happened when a group was offered to the packer.
pub enum Offer {
    Taken,
    /// It does not fit after the groups already taken: stop here.
    Full,
    /// It is the first group and does not fit at all: the read is `limited`.
    Limited(WireError),
}

impl Packer {
    /// `limits` are the effective limits of the batch, `provider` the provider's own.
    pub fn new(limits: &Limits, provider: &Limits) -> Packer {
        Packer {
            limits: *limits,
            provider: provider.min(Limits::PROFILE_MAX),
            max_bytes: limits.max_bytes as usize,
            max_observations: limits.max_observations as usize,
            groups: Vec::new(),
            group_bytes: 0,
            observations: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Body length if `extra` more bytes of group were added, for an envelope of
    /// `envelope` bytes.
    fn body_len_with(&self, envelope: usize, extra: usize) -> usize {
        let count = self.groups.len() + 1;
        envelope + self.group_bytes + extra + (count - 1)
    }

    /// Offers a group; `envelope` must be an upper bound of the envelope length of
    /// the batch that would end with this group.
    pub fn offer(&mut self, envelope: usize, g: impl Into<Arc<RenderedGroup>>) -> Offer {
        let g = g.into();
        let body = self.body_len_with(envelope, g.bytes.len());
        let obs = self.observations + g.observations;
        if body <= self.max_bytes && obs <= self.max_observations {
            self.group_bytes += g.bytes.len();
            self.observations = obs;
            self.groups.push(Taken(g));
            return Offer::Taken;
        }
        if !self.groups.is_empty() {
            return Offer::Full;
        }
        Offer::Limited(limited_for(envelope, g.bytes.len(), g.observations, &self.limits, &self.provider))
    }

    /// Checks that an envelope with no groups fits at all.
    fn check_envelope(&self, envelope: usize) -> Result<(), WireError> {
        if envelope <= self.max_bytes {
            Ok(())
        } else {
            Err(limited_error(
                LimitKind::Envelope,
                Some(minimum_body(envelope, 0, &self.limits) as u64),
                None,
                "the byte limit cannot hold the batch envelope",
            ))
        }
    }

    /// Renders the batch with the groups taken, after checking that its envelope
    /// fits at all (the groups were already checked against the budget as offered).
    pub fn finish(self, frame: &Frame, tail: &Tail) -> Result<Vec<u8>, WireError> {
        Ok(self.ready(frame, tail)?.into_vec())
    }

    /// The batch with the groups taken, measured but not rendered (see [`Ready`]), after
    /// the same check as `finish`.
    pub fn ready(self, frame: &Frame, tail: &Tail) -> Result<Ready, WireError> {
        let envelope = frame.envelope_len(tail);
        self.check_envelope(envelope)?;
        let len = envelope + self.group_bytes + self.groups.len().saturating_sub(1);
        Ok(Ready(Prepared::Parts(Box::new(Parts {
            session: frame.session.to_owned(),
            scope_json: frame.scope_json.clone(),
            expires_at: frame.expires_at,
            replay_until: frame.replay_until,
            limits: frame.limits,
            phase: tail.phase,
            cursor: tail.cursor.to_owned(),
            snapshot_complete: tail.snapshot_complete,
            through: tail.through,
            high_water: tail.high_water,
            groups: self.groups,
            len,
        }))))
    }
}

/// A successful batch body whose length is known and whose bytes are written where
/// they are going. A woken poll's body (about 16 KiB in the bench, nearly all of it the
/// shared group) is rendered straight into the buffer that carries it to JS
/// (src/node/delivery.rs) instead of into a body of its own that is then copied there:
/// the copy and the allocation were about a quarter of a wake pass (perf, bench
/// section 4).
pub struct Ready(Prepared);

enum Prepared {
    /// Rendered already (a snapshot page, a stored first batch).
    Bytes(Vec<u8>),
    Parts(Box<Parts>),
}

/// What a [`Frame`] and a [`Tail`] borrow, owned, with the groups the packer took.
struct Parts {
    session: String,
    scope_json: Arc<[u8]>,
    expires_at: u64,
    replay_until: u64,
    limits: Limits,
    phase: Phase,
    cursor: String,
    snapshot_complete: bool,
    through: u64,
    high_water: u64,
    groups: Vec<Taken>,
    len: usize,
}

impl From<Vec<u8>> for Ready {
    fn from(bytes: Vec<u8>) -> Ready {
        Ready(Prepared::Bytes(bytes))
    }
}

impl Ready {
    /// The body's exact length in bytes.
    pub fn len(&self) -> usize {
        match &self.0 {
            Prepared::Bytes(b) => b.len(),
            Prepared::Parts(p) => p.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the body to `out` (exactly `len()` bytes).
    pub fn write_to(&self, out: &mut Vec<u8>) {
        match &self.0 {
            Prepared::Bytes(b) => out.extend_from_slice(b),
            Prepared::Parts(p) => {
                let start = out.len();
                out.reserve(p.len);
                let frame = Frame {
                    session: &p.session,
                    scope_json: p.scope_json.clone(),
                    expires_at: p.expires_at,
                    replay_until: p.replay_until,
                    limits: p.limits,
                };
                let tail = Tail {
                    phase: p.phase,
                    cursor: &p.cursor,
                    snapshot_complete: p.snapshot_complete,
                    through: p.through,
                    high_water: p.high_water,
                };
                frame.write(out, &tail, &p.groups);
                debug_assert_eq!(out.len() - start, p.len, "a body renders to its measured length");
            }
        }
    }

    /// The body as a vector of its own (rendered now if it was not yet).
    pub fn into_vec(self) -> Vec<u8> {
        match self.0 {
            Prepared::Bytes(b) => b,
            Prepared::Parts(_) => {
                let mut out = Vec::with_capacity(self.len());
                self.write_to(&mut out);
                out
            }
        }
    }
}

fn limited_error(kind: LimitKind, bytes: Option<u64>, observations: Option<u64>, message: &str) -> WireError {
    let mut e = WireError::new(ErrorCode::Limited, message);
    e.limit = Some(Limit {
        kind,
        minimum_bytes: bytes.filter(|b| *b <= PROFILE_MAX_BYTES as u64).map(|b| b as u32),
        minimum_observations: observations.filter(|o| *o <= PROFILE_MAX_OBSERVATIONS as u64).map(|o| o as u32),
    });
    e
}

fn digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// The smallest `maxBytes` that holds a body of `envelope + group_len` bytes
/// rendered under `limits`. The body echoes the limits, so their digits count:
/// `maxBytes` is taken as the answer itself (a fixed point), the other two at
/// their widest profile values, so the advertised minimum always suffices.
pub(crate) fn minimum_body(envelope: usize, group_len: usize, limits: &Limits) -> usize {
    let echoed = digits(limits.max_bytes as u64) + digits(limits.max_observations as u64) + digits(limits.wait_ms as u64);
    let widest_others = digits(PROFILE_MAX_OBSERVATIONS as u64) + digits(crate::wire::limits::PROFILE_MAX_WAIT_MS as u64);
    let base = envelope + group_len + widest_others - echoed;
    let mut need = base + digits(base as u64);
    while base + digits(need as u64) != need {
        need = base + digits(need as u64);
    }
    need
}

/// Whether a group of `observations` observations whose smallest body is `need` bytes (from
/// [`minimum_body`]) can ever be carried under the provider's limits.
pub(crate) fn provider_can_carry(need: usize, observations: usize, provider: &Limits) -> bool {
    need <= provider.max_bytes as usize && observations <= provider.max_observations as usize
}

/// The `limited` answer for a first group that does not fit (BRC-193 §8). A group the
/// provider's own limits can never carry is `permanent-group`: no request can raise the
/// effective limits above them, so a minimum would send the client round in circles.
fn limited_for(envelope: usize, group_len: usize, group_obs: usize, limits: &Limits, provider: &Limits) -> WireError {
    let need = minimum_body(envelope, group_len, limits);
    if !provider_can_carry(need, group_obs, provider) {
        return limited_error(
            LimitKind::PermanentGroup,
            None,
            None,
            "the next group is larger than this provider can ever deliver in one batch",
        );
    }
    if envelope > limits.max_bytes as usize {
        return limited_error(
            LimitKind::Envelope,
            Some(minimum_body(envelope, 0, limits) as u64),
            None,
            "the byte limit cannot hold the batch envelope",
        );
    }
    limited_error(
        LimitKind::Group,
        Some(need as u64),
        Some(group_obs as u64),
        "the next group does not fit the requested limits",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(max_bytes: u32, max_observations: u32) -> Frame<'static> {
        Frame {
            session: "abc",
            scope_json: Arc::from(&br#"{"epoch":"e"}"#[..]),
            expires_at: 100,
            replay_until: 200,
            limits: Limits { max_bytes, max_observations, wait_ms: 0 },
        }
    }

    fn tail(cursor: &str) -> Tail<'_> {
        Tail { phase: Phase::Live, cursor, snapshot_complete: true, through: 7, high_water: 9 }
    }

    #[test]
    fn a_single_group_is_the_group_of_its_one_observation() {
        let scope = br#"{"epoch":"e"}"#;
        let payload = br#"{"evidence":{"txid":"ab","outputIndex":0}}"#;
        let composed = group("s-1f", 42, &[observation_raw("s-1f.0", scope, "output", payload)]);
        let direct = single_group::<()>("s-1f", 42, scope, "output", 0, |out| {
            out.extend_from_slice(payload);
            Ok(())
        })
        .unwrap();
        assert_eq!(String::from_utf8(direct.bytes).unwrap(), String::from_utf8(composed.bytes).unwrap());
        assert_eq!(direct.observations, 1);
    }

    #[test]
    fn rendered_body_is_valid_json_and_exactly_measured() {
        let f = frame(4096, 10);
        let o = observation("l-1.0", &f.scope_json, "withdraw", &serde_json::json!({"reason": "spent"}));
        let g = group("l-1", 1, &[o.clone(), o]);
        let t = tail("CUR");
        let body = f.render(&t, &[g.bytes.clone(), g.bytes.clone()]);
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["groups"].as_array().unwrap().len(), 2);
        assert_eq!(v["through"], "7");
        assert_eq!(v["limits"]["maxBytes"], 4096);
        assert_eq!(body.len(), f.envelope_len(&t) + 2 * g.bytes.len() + 1);
    }

    #[test]
    fn packer_never_exceeds_the_budget_and_never_splits() {
        let f = frame(400, 10);
        let t = tail("CUR");
        let env = f.envelope_len(&t);
        let mut p = Packer::new(&f.limits, &Limits::PROFILE_MAX);
        let mut taken = 0;
        loop {
            let o = observation("x", b"{}", "withdraw", &serde_json::json!({}));
            match p.offer(env, group("g", 1, &[o])) {
                Offer::Taken => taken += 1,
                Offer::Full => break,
                Offer::Limited(_) => panic!("first group fits"),
            }
        }
        assert!(taken > 0);
        let body = p.finish(&f, &t).unwrap();
        assert!(body.len() <= 400, "{}", body.len());
    }

    #[test]
    fn a_ready_body_appends_exactly_what_finish_renders() {
        let f = frame(100_000, 10);
        let t = tail("CUR");
        let env = f.envelope_len(&t);
        let packed = || {
            let mut p = Packer::new(&f.limits, &Limits::PROFILE_MAX);
            for i in 0..3 {
                let o = observation(&format!("l-{i}.0"), b"{}", "withdraw", &serde_json::json!({"reason": "spent"}));
                assert!(matches!(p.offer(env, group(&format!("l-{i}"), i, &[o])), Offer::Taken));
            }
            p
        };
        let whole = packed().finish(&f, &t).unwrap();
        let ready = packed().ready(&f, &t).unwrap();
        assert_eq!(ready.len(), whole.len());
        let mut out = b"before".to_vec();
        ready.write_to(&mut out);
        assert_eq!(&out[..6], b"before");
        assert_eq!(out[6..], whole[..]);
        assert_eq!(Ready::from(whole.clone()).into_vec(), whole);
    }

    #[test]
    fn first_group_too_big_is_limited_with_its_minimum() {
        let f = frame(400, 10);
        let t = tail("CUR");
        let env = f.envelope_len(&t);
        assert!(env < 400);
        let mut p = Packer::new(&f.limits, &Limits::PROFILE_MAX);
        let big = observation("x", b"{}", "withdraw", &serde_json::json!({"reason": "r".repeat(500)}));
        let g = group("g", 1, &[big]);
        let need = env + g.bytes.len();
        let rendered = g.bytes.clone();
        match p.offer(env, g) {
            Offer::Limited(e) => {
                let l = e.limit.unwrap();
                assert_eq!(l.kind, LimitKind::Group);
                let min = l.minimum_bytes.unwrap() as usize;
                assert!(min >= need && min <= need + 8, "{min} vs {need}");
                // The advertised minimum really holds the body once it is echoed.
                let f2 = Frame { limits: Limits { max_bytes: min as u32, max_observations: 1024, wait_ms: 25000 }, ..f };
                let body = f2.render(&t, &[rendered]);
                assert!(body.len() <= min, "{} > {min}", body.len());
            }
            _ => panic!("expected limited"),
        }
    }

    #[test]
    fn measured_lengths_equal_rendered_lengths() {
        let scope = br#"{"epoch":"e","access":"x"}"#;
        for (id, kind, payload) in [("l-7.0", "output", &br#"{"a":1}"#[..]), ("l-123.45", "withdraw", b"{}")] {
            let o = observation_raw(id, scope, kind, payload);
            assert_eq!(observation_len(id.len(), scope.len(), kind, payload.len()), o.len());
        }
        let o1 = observation_raw("l-12.0", scope, "output", b"{}");
        let o2 = observation_raw("l-12.1", scope, "spend", b"{\"b\":2}");
        for obs in [vec![], vec![o1.clone()], vec![o1, o2]] {
            let g = group("l-12", 12, &obs);
            assert_eq!(group_len(4, 12, obs.len(), obs.iter().map(Vec::len).sum()), g.bytes.len());
        }
        assert_eq!((digits(0), digits(9), digits(10), digits(u64::MAX)), (1, 1, 2, 20));
    }

    #[test]
    fn a_group_the_provider_can_never_carry_is_permanent() {
        let f = frame(100_000, 10);
        let t = tail("CUR");
        let env = f.envelope_len(&t);
        let o = observation("x", b"{}", "withdraw", &serde_json::json!({}));
        let six = || group("g", 1, &vec![o.clone(); 6]);
        // The request asks for 3; the provider allows 5: no request can ever get 6.
        let provider = Limits { max_bytes: 100_000, max_observations: 5, wait_ms: 0 };
        let mut p = Packer::new(&Limits { max_observations: 3, ..f.limits }, &provider);
        match p.offer(env, six()) {
            Offer::Limited(e) => {
                let l = e.limit.unwrap();
                assert_eq!(l.kind, LimitKind::PermanentGroup);
                assert_eq!((l.minimum_bytes, l.minimum_observations), (None, None));
            }
            _ => panic!("expected limited"),
        }
        // The provider allows 6: the request can be raised, so it is a group limit.
        let provider = Limits { max_observations: 6, ..provider };
        let mut p = Packer::new(&Limits { max_observations: 3, ..f.limits }, &provider);
        match p.offer(env, six()) {
            Offer::Limited(e) => assert_eq!(e.limit.unwrap().kind, LimitKind::Group),
            _ => panic!("expected limited"),
        }
        // Bytes likewise: a group whose smallest body exceeds the provider's maxBytes.
        let big = observation("x", b"{}", "withdraw", &serde_json::json!({"r": "r".repeat(70_000)}));
        let provider = Limits { max_bytes: 65_536, max_observations: 1024, wait_ms: 0 };
        let mut p = Packer::new(&Limits { max_bytes: 65_536, ..f.limits }, &provider);
        match p.offer(env, group("g", 1, &[big])) {
            Offer::Limited(e) => assert_eq!(e.limit.unwrap().kind, LimitKind::PermanentGroup),
            _ => panic!("expected limited"),
        }
    }

    #[test]
    fn observation_count_limit_is_a_group_limit() {
        let f = frame(100_000, 1);
        let t = tail("CUR");
        let env = f.envelope_len(&t);
        let mut p = Packer::new(&f.limits, &Limits::PROFILE_MAX);
        let o = observation("x", b"{}", "withdraw", &serde_json::json!({}));
        match p.offer(env, group("g", 1, &[o.clone(), o])) {
            Offer::Limited(e) => assert_eq!(e.limit.unwrap().minimum_observations, Some(2)),
            _ => panic!("expected limited"),
        }
    }
}
