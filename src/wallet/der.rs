//! DER signatures read the way `@bsv/sdk` 2.1.0's `Signature.fromDER` reads
//! them, so that the same byte strings are accepted and refused with the same
//! messages. That parser is lax in places (a leading 0x80 byte, empty
//! integers, integers longer than 32 bytes are all read as numbers); values
//! that do not fit in 32 bytes cannot be below n and never verify.
use super::WalletError;

/// `r || s` when both fit in 32 bytes, `None` when one does not.
pub type Compact = Option<[u8; 64]>;

fn invalid(message: &str) -> WalletError {
    WalletError::new(message)
}

/// A short-form DER length byte at `at`; `None` past the end (the SDK then
/// reads `undefined`, which fails the next length comparison).
fn length(data: &[u8], at: usize) -> Result<Option<usize>, WalletError> {
    match data.get(at) {
        Some(&b) if b & 0x80 != 0 => Err(invalid("Invalid DER entity length")),
        Some(&b) => Ok(Some(b as usize)),
        None => Ok(None),
    }
}

/// Drops the one leading zero the SDK allows (only before a byte with the high bit set).
fn integer<'a>(value: &'a [u8], which: &str) -> Result<&'a [u8], WalletError> {
    if value.first() == Some(&0) {
        if value.get(1).is_some_and(|b| b & 0x80 != 0) {
            return Ok(&value[1..]);
        }
        return Err(invalid(&format!("Invalid {which}-value in signature DER")));
    }
    Ok(value)
}

fn left_pad(value: &[u8], out: &mut [u8]) -> bool {
    if value.len() > 32 {
        return false;
    }
    out[32 - value.len()..].copy_from_slice(value);
    true
}

pub fn parse(data: &[u8]) -> Result<Compact, WalletError> {
    if data.first() != Some(&0x30) {
        return Err(invalid("Signature DER must start with 0x30"));
    }
    let total = length(data, 1)?;
    if total.map(|l| l + 2) != Some(data.len()) {
        return Err(invalid("Signature DER invalid"));
    }
    if data.get(2) != Some(&0x02) {
        return Err(invalid("Signature DER invalid"));
    }
    let r_len = length(data, 3)?.ok_or_else(|| invalid("Signature DER invalid"))?;
    let s_tag = 4 + r_len;
    if data.get(s_tag) != Some(&0x02) {
        return Err(invalid("Signature DER invalid"));
    }
    let r = &data[4..s_tag];
    let s_len = length(data, s_tag + 1)?;
    if s_len.map(|l| l + s_tag + 2) != Some(data.len()) {
        return Err(invalid("Invalid R-length in signature DER"));
    }
    let s = &data[s_tag + 2..];
    let r = integer(r, "R")?;
    let s = integer(s, "S")?;
    let mut compact = [0u8; 64];
    let fits = left_pad(r, &mut compact[..32]) && left_pad(s, &mut compact[32..]);
    Ok(fits.then_some(compact))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(bytes: &[u8]) -> String {
        parse(bytes).unwrap_err().to_string()
    }

    #[test]
    fn reads_canonical_and_lax_forms() {
        let c = parse(&[0x30, 0x06, 0x02, 0x01, 0x05, 0x02, 0x01, 0x07]).unwrap().unwrap();
        assert_eq!((c[31], c[63]), (5, 7));
        // A "negative" integer without its zero byte is read as a positive number.
        let c = parse(&[0x30, 0x06, 0x02, 0x01, 0x85, 0x02, 0x01, 0x07]).unwrap().unwrap();
        assert_eq!(c[31], 0x85);
        // Empty integers are zero.
        assert_eq!(parse(&[0x30, 0x04, 0x02, 0x00, 0x02, 0x00]).unwrap(), Some([0u8; 64]));
        // 33 significant bytes do not fit.
        let mut long = vec![0x30, 0x26, 0x02, 0x21];
        long.extend([0x01; 33]);
        long.extend([0x02, 0x01, 0x01]);
        assert_eq!(parse(&long).unwrap(), None);
    }

    #[test]
    fn refuses_with_the_sdk_messages() {
        assert_eq!(err(&[]), "Signature DER must start with 0x30");
        assert_eq!(err(&[0x30]), "Signature DER invalid");
        assert_eq!(err(&[0x30, 0x81, 0x00]), "Invalid DER entity length");
        assert_eq!(err(&[0x30, 0x01, 0x02]), "Signature DER invalid");
        assert_eq!(err(&[0x30, 0x03, 0x02, 0x01, 0x05]), "Signature DER invalid");
        assert_eq!(err(&[0x30, 0x04, 0x02, 0x01, 0x05, 0x02]), "Invalid R-length in signature DER");
        assert_eq!(err(&[0x30, 0x05, 0x02, 0x01, 0x05, 0x02, 0x02]), "Invalid R-length in signature DER");
        assert_eq!(err(&[0x30, 0x06, 0x02, 0x01, 0x00, 0x02, 0x01, 0x07]), "Invalid R-value in signature DER");
        assert_eq!(err(&[0x30, 0x07, 0x02, 0x02, 0x00, 0x05, 0x02, 0x01, 0x07]), "Invalid R-value in signature DER");
        assert_eq!(err(&[0x30, 0x06, 0x02, 0x01, 0x05, 0x02, 0x01, 0x00]), "Invalid S-value in signature DER");
    }
}
