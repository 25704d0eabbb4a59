//! napi glue for `crate::wallet`: argument conversion and error mapping only.
//! The JS layer (js/auth/wallet.js) turns ProtoWallet-shaped arguments into these
//! flat calls; the root key is taken once and never handed back.
use napi::bindgen_prelude::{Buffer, BufferSlice};
use napi::{Error, Result};
use napi_derive::napi;

use crate::wallet::{self, KeyRef, Wallet, WalletError};

fn js(e: WalletError) -> Error {
    super::error::status_error(e)
}

fn invalid(message: &str) -> Error {
    js(WalletError::new(message))
}

fn hash32(bytes: &[u8]) -> Result<&[u8; 32]> {
    bytes.try_into().map_err(|_| invalid("hash must be 32 bytes"))
}

/// The hash a call signs or verifies: SHA-256 of `data`, or `hash` as given.
fn digest(data: Option<BufferSlice<'_>>, hash: Option<BufferSlice<'_>>) -> Result<[u8; 32]> {
    match (hash, data) {
        (Some(h), _) => Ok(*hash32(&h)?),
        (None, Some(d)) => Ok(wallet::sha256(&d)),
        (None, None) => Ok(wallet::sha256(&[])),
    }
}

/// Which key a call uses: the BRC-43 invoice parts and the BRC-42 counterparty
/// (`self`, `anyone` or a public key in hex); `forSelf` derives the caller's own child
/// key towards the counterparty instead of the counterparty's.
#[napi(object)]
pub struct KeyArgs {
    pub level: f64,
    pub protocol: String,
    pub key_id: String,
    pub counterparty: String,
    pub for_self: Option<bool>,
}

impl KeyArgs {
    fn key(&self) -> KeyRef<'_> {
        KeyRef { level: self.level, protocol: &self.protocol, key_id: &self.key_id, counterparty: &self.counterparty }
    }
    fn for_self(&self) -> bool {
        self.for_self.unwrap_or(false)
    }
}

#[napi]
pub struct NativeWalletCore {
    wallet: Wallet,
}

#[napi]
impl NativeWalletCore {
    #[napi(factory)]
    pub fn from_private_key(hex_key: String) -> Result<NativeWalletCore> {
        Wallet::from_hex(&hex_key).map(|wallet| NativeWalletCore { wallet }).map_err(js)
    }

    #[napi]
    pub fn identity_key(&self) -> String {
        hex::encode(self.wallet.identity_key().serialize())
    }

    #[napi]
    pub fn derive_public_key(&self, key: KeyArgs) -> Result<String> {
        let public = self.wallet.derive_public_key(&key.key(), key.for_self()).map_err(js)?;
        Ok(hex::encode(public.serialize()))
    }

    #[napi]
    pub fn create_signature(&self, key: KeyArgs, data: Option<BufferSlice<'_>>, hash: Option<BufferSlice<'_>>) -> Result<Buffer> {
        let hash = digest(data, hash)?;
        Ok(self.wallet.create_signature(&key.key(), &hash).map_err(js)?.into())
    }

    /// Verifies a compact `r || s` signature.
    #[napi]
    pub fn verify_signature(
        &self,
        key: KeyArgs,
        compact: BufferSlice<'_>,
        data: Option<BufferSlice<'_>>,
        hash: Option<BufferSlice<'_>>,
    ) -> Result<bool> {
        let hash = digest(data, hash)?;
        let compact: &[u8; 64] =
            (&compact[..]).try_into().map_err(|_| invalid("signature must be r || s"))?;
        self.wallet.verify_signature(&key.key(), key.for_self(), &hash, compact).map_err(js)
    }

    /// Like `verify_signature`, with the signature in DER as the SDK reads it.
    #[napi]
    pub fn verify_signature_der(
        &self,
        key: KeyArgs,
        signature: BufferSlice<'_>,
        data: Option<BufferSlice<'_>>,
        hash: Option<BufferSlice<'_>>,
    ) -> Result<bool> {
        let hash = digest(data, hash)?;
        self.wallet.verify_signature_der(&key.key(), key.for_self(), &hash, &signature).map_err(js)
    }

    #[napi]
    pub fn create_hmac(&self, key: KeyArgs, data: BufferSlice<'_>) -> Result<Buffer> {
        Ok(self.wallet.create_hmac(&key.key(), &data).map_err(js)?.to_vec().into())
    }

    #[napi]
    pub fn verify_hmac(&self, key: KeyArgs, data: BufferSlice<'_>, hmac: BufferSlice<'_>) -> Result<bool> {
        self.wallet.verify_hmac(&key.key(), &data, &hmac).map_err(js)
    }
}
