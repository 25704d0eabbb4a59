//! A native BRC-100 wallet subset for BRC-103/104 mutual authentication:
//! the operations `@bsv/sdk`'s `Peer`/`AuthFetch` and
//! `@bsv/auth-express-middleware` call (`getPublicKey`, `createSignature`,
//! `verifySignature`, `createHmac`, `verifyHmac`), byte-compatible with the
//! SDK's `ProtoWallet` (2.1.0):
//!
//! - keys are BRC-42 children of the root key for the BRC-43 invoice number
//!   `"<level>-<protocol>-<keyID>"` ([`invoice`]), towards a counterparty
//!   `self`, `anyone` (private key 1) or a public key ([`counterparty`]);
//! - signatures are DER ECDSA over SHA-256 of the data (or over a given
//!   32-byte hash), low-S and RFC 6979 deterministic like the SDK's;
//! - the HMAC key is the x coordinate of `childPriv · childPub` with leading
//!   zero bytes dropped, as the SDK's `SymmetricKey.toArray()` gives it.
//!
//! The root key never leaves this struct: no accessor returns it and `Debug`
//! prints only the identity key.
use std::collections::HashMap;
use std::sync::Mutex;

use hmac::{Hmac, Mac};
use secp256k1::{ecdsa, Message, PublicKey, Scalar, SecretKey, SECP256K1};
use sha2::{Digest, Sha256};

pub mod counterparty;
pub mod der;

pub use counterparty::{parse_public_key, Counterparty};
pub use crate::crypto::invoice_number;

use crate::crypto::brc42;

/// An error with the message `ProtoWallet` gives for the same input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalletError(String);

impl WalletError {
    pub fn new(message: impl Into<String>) -> WalletError {
        WalletError(message.into())
    }
}

impl std::fmt::Display for WalletError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WalletError {}

impl From<crate::crypto::InvoiceError> for WalletError {
    fn from(e: crate::crypto::InvoiceError) -> Self {
        WalletError(e.0)
    }
}

fn derivation_error(_: impl std::fmt::Debug) -> WalletError {
    WalletError::new("BRC-42 derivation produced an invalid key")
}

/// Which key a call uses: protocol ID `[level, name]`, key ID, counterparty.
#[derive(Debug, Clone, Copy)]
pub struct KeyRef<'a> {
    pub level: f64,
    pub protocol: &'a str,
    pub key_id: &'a str,
    pub counterparty: &'a str,
}

/// What a counterparty argument stands for, cached per argument string (the
/// server talks to the same clients again and again; parsing a key is a square
/// root, the shared point a multiplication). The cache is cleared when it is
/// full, so that it stays bounded whatever the callers send.
const SHARED_CACHE_MAX: usize = 4096;

#[derive(Clone, Copy)]
struct Known {
    counterparty: Counterparty,
    /// The counterparty's public key.
    public: PublicKey,
    /// The BRC-42 shared point with it.
    shared: [u8; 33],
}

pub struct Wallet {
    root: SecretKey,
    identity: PublicKey,
    known: Mutex<HashMap<String, Known>>,
}

impl std::fmt::Debug for Wallet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wallet").field("identity", &hex::encode(self.identity.serialize())).finish()
    }
}

/// SHA-256 of `data`, the digest `createSignature` signs.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

impl Wallet {
    pub fn new(root: SecretKey) -> Wallet {
        Wallet { root, identity: PublicKey::from_secret_key_global(&root), known: Mutex::new(HashMap::new()) }
    }

    /// Root key from hex: up to 64 hex digits (shorter ones are left-padded, as
    /// the SDK's `PrivateKey.fromHex` reads them), not zero, below n.
    pub fn from_hex(hex_key: &str) -> Result<Wallet, WalletError> {
        let bad = || WalletError::new("private key must be at most 64 hex digits, not zero and below the curve order");
        if hex_key.is_empty() || hex_key.len() > 64 || !hex_key.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let padded = format!("{hex_key:0>64}");
        let bytes: [u8; 32] = hex::decode(padded).map_err(|_| bad())?.try_into().map_err(|_| bad())?;
        SecretKey::from_byte_array(bytes).map(Wallet::new).map_err(|_| bad())
    }

    pub fn identity_key(&self) -> PublicKey {
        self.identity
    }

    /// The counterparty `given` (an argument as the caller passed it), parsed with
    /// its shared point, from the cache when seen before.
    fn known(&self, given: &str) -> Result<Known, WalletError> {
        if let Some(k) = self.known.lock().expect("cache lock").get(given) {
            return Ok(*k);
        }
        let counterparty = Counterparty::parse(given)?;
        let public = counterparty.public_key(&self.identity);
        let shared = brc42::shared_point(&self.root, &public).map_err(derivation_error)?;
        let known = Known { counterparty, public, shared };
        let mut cache = self.known.lock().expect("cache lock");
        if cache.len() >= SHARED_CACHE_MAX {
            cache.clear();
        }
        cache.insert(given.to_string(), known);
        Ok(known)
    }

    /// Counterparty and BRC-42 tweak for `key`, checked in the SDK's order
    /// (counterparty first, then the invoice number).
    fn resolve(&self, key: &KeyRef<'_>) -> Result<(Counterparty, PublicKey, Scalar), WalletError> {
        let known = self.known(key.counterparty)?;
        let invoice = invoice_number(key.level, key.protocol, key.key_id)?;
        Ok((known.counterparty, known.public, brc42::tweak(&known.shared, &invoice)))
    }

    /// `getPublicKey` for a derived key: the counterparty's child key, or with
    /// `for_self` our own child key towards the counterparty.
    pub fn derive_public_key(&self, key: &KeyRef<'_>, for_self: bool) -> Result<PublicKey, WalletError> {
        let (_, other, tweak) = self.resolve(key)?;
        let base = if for_self { self.identity } else { other };
        base.add_exp_tweak(SECP256K1, &tweak).map_err(derivation_error)
    }

    fn derive_private_key(&self, key: &KeyRef<'_>) -> Result<SecretKey, WalletError> {
        let (_, _, tweak) = self.resolve(key)?;
        self.root.add_tweak(&tweak).map_err(derivation_error)
    }

    /// The symmetric key's x coordinate (32 bytes, big-endian): the ECDH point
    /// of our child private key and the counterparty's child public key.
    fn symmetric_x(&self, key: &KeyRef<'_>) -> Result<[u8; 32], WalletError> {
        let (counterparty, other, tweak) = self.resolve(key)?;
        let child = self.root.add_tweak(&tweak).map_err(derivation_error)?;
        let point = match counterparty {
            // Our own child public key is child·G, and anyone's is (1 + t)·G:
            // the point is then a scalar product times G.
            Counterparty::Myself => PublicKey::from_secret_key_global(
                &child.mul_tweak(&Scalar::from(child)).map_err(derivation_error)?,
            ),
            Counterparty::Anyone => {
                let one_plus_t = brc42::anyone_private().add_tweak(&tweak).map_err(derivation_error)?;
                PublicKey::from_secret_key_global(
                    &child.mul_tweak(&Scalar::from(one_plus_t)).map_err(derivation_error)?,
                )
            }
            Counterparty::Key(_) => other
                .add_exp_tweak(SECP256K1, &tweak)
                .and_then(|p| p.mul_tweak(SECP256K1, &Scalar::from(child)))
                .map_err(derivation_error)?,
        };
        let full = point.serialize_uncompressed();
        Ok(full[1..33].try_into().expect("32 bytes"))
    }

    fn hmac(&self, key: &KeyRef<'_>) -> Result<Hmac<Sha256>, WalletError> {
        let x = self.symmetric_x(key)?;
        // The SDK's SymmetricKey.toArray() has no leading zero bytes.
        let start = x.iter().position(|&b| b != 0).unwrap_or(31);
        Ok(Hmac::<Sha256>::new_from_slice(&x[start..]).expect("HMAC accepts any key length"))
    }

    /// `createHmac`: HMAC-SHA256 of `data` with the derived symmetric key.
    pub fn create_hmac(&self, key: &KeyRef<'_>, data: &[u8]) -> Result<[u8; 32], WalletError> {
        let mut mac = self.hmac(key)?;
        mac.update(data);
        Ok(mac.finalize().into_bytes().into())
    }

    /// `verifyHmac`, compared in constant time; `false` when it does not match.
    pub fn verify_hmac(&self, key: &KeyRef<'_>, data: &[u8], provided: &[u8]) -> Result<bool, WalletError> {
        let mut mac = self.hmac(key)?;
        mac.update(data);
        Ok(mac.verify_slice(provided).is_ok())
    }

    /// `createSignature` over a 32-byte hash (the SHA-256 of the data, or the
    /// caller's `hashToDirectlySign`): DER, low-S, RFC 6979 nonce.
    pub fn create_signature(&self, key: &KeyRef<'_>, hash: &[u8; 32]) -> Result<Vec<u8>, WalletError> {
        let child = self.derive_private_key(key)?;
        // The SDK reduces the hash modulo n before signing and before deriving
        // its nonce; doing the same keeps the signatures byte-identical.
        let reduced = brc42::reduce_mod_n(*hash).to_be_bytes();
        Ok(child.sign_ecdsa(Message::from_digest(reduced)).serialize_der().to_vec())
    }

    /// `verifySignature` of a signature given as `r || s` (32 bytes each).
    /// Like the SDK: r and s must lie in [1, n-1]; high-S is accepted.
    pub fn verify_signature(
        &self,
        key: &KeyRef<'_>,
        for_self: bool,
        hash: &[u8; 32],
        compact: &[u8; 64],
    ) -> Result<bool, WalletError> {
        let (_, other, tweak) = self.resolve(key)?;
        let base = if for_self { self.identity } else { other };
        if compact[..32].iter().all(|&b| b == 0) || compact[32..].iter().all(|&b| b == 0) {
            return Ok(false);
        }
        let Ok(mut signature) = ecdsa::Signature::from_compact(compact) else {
            return Ok(false); // r or s is not below n
        };
        signature.normalize_s();
        let r = Scalar::from_be_bytes(compact[..32].try_into().expect("32 bytes")).expect("r is below n: from_compact checked it");
        let z = brc42::reduce_mod_n(*hash);
        match shifted_message(&z, &r, &tweak) {
            Some(message) => Ok(base.verify(SECP256K1, Message::from_digest(message), &signature).is_ok()),
            // z + r·t is 0 mod n (or t is 0): negligible, but answered the long way.
            None => {
                let child = base.add_exp_tweak(SECP256K1, &tweak).map_err(derivation_error)?;
                Ok(child.verify(SECP256K1, Message::from_digest(z.to_be_bytes()), &signature).is_ok())
            }
        }
    }

    /// `verifySignature` of a DER signature, parsed like the SDK parses it
    /// ([`der::parse`]). A key argument error is reported before a DER error,
    /// in the SDK's order.
    pub fn verify_signature_der(
        &self,
        key: &KeyRef<'_>,
        for_self: bool,
        hash: &[u8; 32],
        signature: &[u8],
    ) -> Result<bool, WalletError> {
        match der::parse(signature) {
            Ok(Some(compact)) => self.verify_signature(key, for_self, hash, &compact),
            Ok(None) => self.derive_public_key(key, for_self).map(|_| false),
            Err(e) => {
                self.derive_public_key(key, for_self)?;
                Err(e)
            }
        }
    }
}

/// The message whose signature under a base key `B` is valid exactly when a
/// signature `(r, s)` over `z` is valid under the child key `B + t·G`.
///
/// ECDSA accepts when the x coordinate of `s⁻¹z·G + s⁻¹r·(B + t·G)` is `r`; that
/// point is `s⁻¹(z + r·t)·G + s⁻¹r·B`, the one checked for `z + r·t` under `B`.
/// So verifying under a BRC-42 child key needs a product of scalars, not the
/// point multiplication `t·G` that deriving the child key costs (about a third
/// of a verification). `None` when `t` or `z + r·t` is zero mod n.
fn shifted_message(z: &Scalar, r: &Scalar, t: &Scalar) -> Option<[u8; 32]> {
    let t = SecretKey::from_byte_array(t.to_be_bytes()).ok()?;
    Some(t.mul_tweak(r).ok()?.add_tweak(z).ok()?.secret_bytes())
}

#[cfg(test)]
mod tests;
