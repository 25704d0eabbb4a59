//! Opaque, authenticated read cursors (BRC-193 §4, docs/design.md "Data flow").
//!
//! A cursor names the position immediately after the batch that returned it. It is
//! bound to one session and one epoch and carries an HMAC-SHA256 tag keyed by the
//! store secret, so a client can neither forge a position nor move a cursor to another
//! session. Anything that fails to decode or verify is reported the same way
//! (`None`), so the caller answers `reset-required` without an oracle.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Cursors are at most this many bytes once encoded (BRC-193 §2).
pub const MAX_CURSOR_BYTES: usize = 1024;
/// Raw bytes behind the longest cursor: unpadded base64 of this many bytes is exactly
/// MAX_CURSOR_BYTES characters.
const MAX_RAW_BYTES: usize = MAX_CURSOR_BYTES / 4 * 3;
const FORMAT: u8 = 1;
const TAG_BYTES: usize = 16;
const TAG_SNAPSHOT: u8 = 1;
const TAG_LIVE: u8 = 2;

/// Where the next read continues.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Position {
    /// Still in the snapshot: continue the scan strictly after this row key
    /// (`None`: from the start).
    Snapshot { after: Option<Vec<u8>> },
    /// In the live log: continue strictly after this sequence.
    Live { through: u64 },
}

/// A decoded, verified cursor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cursor {
    pub session: [u8; 16],
    pub epoch: [u8; 16],
    pub position: Position,
}

/// The cursor MAC keyed by the store secret, with its domain label already absorbed:
/// built once per provider, so a tag costs only the payload's blocks (every read checks
/// one and every batch makes one).
#[derive(Clone)]
pub struct CursorKey(Hmac<Sha256>);

impl CursorKey {
    pub fn new(secret: &[u8; 32]) -> CursorKey {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC accepts any key length");
        mac.update(b"overlay-lookup-live/cursor/1");
        CursorKey(mac)
    }
}

fn tag(key: &CursorKey, payload: &[u8]) -> [u8; TAG_BYTES] {
    let mut mac = key.0.clone();
    mac.update(payload);
    let full = mac.finalize().into_bytes();
    let mut out = [0u8; TAG_BYTES];
    out.copy_from_slice(&full[..TAG_BYTES]);
    out
}

/// Encoded length of a cursor whose position takes `position_bytes` (tag byte included).
fn encoded_len_of(position_bytes: usize) -> usize {
    let raw = 1 + 16 + 16 + position_bytes + TAG_BYTES;
    // Unpadded base64: four characters per three bytes, rounded up.
    (raw * 4).div_ceil(3)
}

/// Encoded length of a snapshot cursor after a row key of `key_len` bytes: a snapshot
/// page needs it for every row it considers, and only the last cursor is encoded.
pub fn snapshot_cursor_len(key_len: usize) -> usize {
    encoded_len_of(1 + key_len)
}

/// A cursor's raw bytes, assembled on the stack.
struct Payload {
    buf: [u8; MAX_RAW_BYTES],
    len: usize,
}

impl Payload {
    /// Appends `bytes`; `None` if they do not fit.
    fn put(&mut self, bytes: &[u8]) -> Option<()> {
        self.buf.get_mut(self.len..self.len + bytes.len())?.copy_from_slice(bytes);
        self.len += bytes.len();
        Some(())
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Cursor {
    /// Encodes and authenticates the cursor. Returns `None` when the position is too
    /// large to fit the 1024-byte bound (a snapshot key longer than the budget).
    pub fn encode(&self, key: &CursorKey) -> Option<String> {
        // The payload is assembled on the stack: every batch makes a cursor, and a
        // payload that would not fit here would not fit the encoded bound either.
        let mut p = Payload { buf: [0u8; MAX_RAW_BYTES], len: 0 };
        p.put(&[FORMAT])?;
        p.put(&self.session)?;
        p.put(&self.epoch)?;
        match &self.position {
            Position::Snapshot { after } => {
                p.put(&[TAG_SNAPSHOT])?;
                if let Some(key) = after {
                    p.put(key)?;
                }
            }
            Position::Live { through } => {
                p.put(&[TAG_LIVE])?;
                p.put(&through.to_be_bytes())?;
            }
        }
        let t = tag(key, p.bytes());
        p.put(&t)?;
        let text = URL_SAFE_NO_PAD.encode(p.bytes());
        (text.len() <= MAX_CURSOR_BYTES).then_some(text)
    }

    /// The length `encode` gives, without computing the tag.
    pub fn encoded_len(&self) -> usize {
        match &self.position {
            Position::Snapshot { after } => snapshot_cursor_len(after.as_ref().map_or(0, Vec::len)),
            Position::Live { .. } => encoded_len_of(1 + 8),
        }
    }

    /// Decodes and verifies a cursor string. Any failure is `None`.
    pub fn decode(text: &str, key: &CursorKey) -> Option<Cursor> {
        if text.len() > MAX_CURSOR_BYTES {
            return None;
        }
        let raw = URL_SAFE_NO_PAD.decode(text.as_bytes()).ok()?;
        // format + session + epoch + kind + tag
        if raw.len() < 1 + 16 + 16 + 1 + TAG_BYTES {
            return None;
        }
        let (payload, got) = raw.split_at(raw.len() - TAG_BYTES);
        let want = tag(key, payload);
        if !constant_time_eq(&want, got) || payload[0] != FORMAT {
            return None;
        }
        let mut session = [0u8; 16];
        session.copy_from_slice(&payload[1..17]);
        let mut epoch = [0u8; 16];
        epoch.copy_from_slice(&payload[17..33]);
        let body = &payload[34..];
        let position = match payload[33] {
            TAG_SNAPSHOT => Position::Snapshot { after: (!body.is_empty()).then(|| body.to_vec()) },
            TAG_LIVE if body.len() == 8 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(body);
                Position::Live { through: u64::from_be_bytes(b) }
            }
            _ => return None,
        };
        Some(Cursor { session, epoch, position })
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    static SECRET: std::sync::LazyLock<CursorKey> = std::sync::LazyLock::new(|| CursorKey::new(&[7u8; 32]));

    fn sample(position: Position) -> Cursor {
        Cursor { session: [1u8; 16], epoch: [2u8; 16], position }
    }

    #[test]
    fn encoded_len_is_the_length_encode_gives() {
        // Key lengths on both sides of the 1024-byte cursor bound.
        for n in (0..200usize).chain(740..780) {
            let c = sample(Position::Snapshot { after: Some(vec![0xa5; n]) });
            match c.encode(&SECRET) {
                Some(text) => assert_eq!(text.len(), c.encoded_len(), "key of {n} bytes"),
                None => assert!(c.encoded_len() > MAX_CURSOR_BYTES, "key of {n} bytes"),
            }
        }
        for p in [Position::Snapshot { after: None }, Position::Live { through: u64::MAX }] {
            let c = sample(p);
            assert_eq!(c.encode(&SECRET).unwrap().len(), c.encoded_len());
        }
    }

    #[test]
    fn round_trips_every_position() {
        for p in [
            Position::Snapshot { after: None },
            Position::Snapshot { after: Some(b"row-key".to_vec()) },
            Position::Live { through: 0 },
            Position::Live { through: u64::MAX },
        ] {
            let c = sample(p);
            let text = c.encode(&SECRET).unwrap();
            // Bodies render cursors into JSON unescaped (batch::push_plain_str).
            assert!(crate::session::batch::is_plain(&text), "{text}");
            assert_eq!(Cursor::decode(&text, &SECRET), Some(c));
        }
    }

    #[test]
    fn any_single_character_change_is_rejected() {
        let text = sample(Position::Live { through: 42 }).encode(&SECRET).unwrap();
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        for i in 0..text.len() {
            let mut bytes = text.clone().into_bytes();
            bytes[i] = if bytes[i] == alphabet[0] { alphabet[1] } else { alphabet[0] };
            let tampered = String::from_utf8(bytes).unwrap();
            assert_eq!(Cursor::decode(&tampered, &SECRET), None, "position {i}");
        }
    }

    #[test]
    fn another_secret_or_garbage_is_rejected() {
        let text = sample(Position::Live { through: 1 }).encode(&SECRET).unwrap();
        assert_eq!(Cursor::decode(&text, &CursorKey::new(&[8u8; 32])), None);
        assert_eq!(Cursor::decode("", &SECRET), None);
        assert_eq!(Cursor::decode("!!!!", &SECRET), None);
        assert_eq!(Cursor::decode(&"A".repeat(2000), &SECRET), None);
    }

    #[test]
    fn oversized_positions_do_not_encode() {
        let c = sample(Position::Snapshot { after: Some(vec![0u8; 1000]) });
        assert_eq!(c.encode(&SECRET), None);
    }
}
