//! napi glue for `crate::wallet`: argument conversion and error mapping only.
//! The JS layer (js/wallet.js) turns ProtoWallet-shaped arguments into these
//! flat calls; the root key is taken once and never handed back.
use napi::bindgen_prelude::{Buffer, BufferSlice};
use napi::{Error, Result, Status};
use napi_derive::napi;

use crate::wallet::{self, KeyRef, Wallet, WalletError};

fn js(e: WalletError) -> Error {
    Error::new(Status::GenericFailure, e.to_string())
}

fn hash32(bytes: &[u8]) -> Result<&[u8; 32]> {
    bytes.try_into().map_err(|_| Error::new(Status::InvalidArg, "hash must be 32 bytes"))
}

/// The hash a call signs or verifies: SHA-256 of `data`, or `hash` as given.
fn digest(data: Option<BufferSlice<'_>>, hash: Option<BufferSlice<'_>>) -> Result<[u8; 32]> {
    match (hash, data) {
        (Some(h), _) => Ok(*hash32(&h)?),
        (None, Some(d)) => Ok(wallet::sha256(&d)),
        (None, None) => Ok(wallet::sha256(&[])),
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
    pub fn derive_public_key(
        &self,
        level: f64,
        protocol: String,
        key_id: String,
        counterparty: String,
        for_self: bool,
    ) -> Result<String> {
        let key = KeyRef { level, protocol: &protocol, key_id: &key_id, counterparty: &counterparty };
        let public = self.wallet.derive_public_key(&key, for_self).map_err(js)?;
        Ok(hex::encode(public.serialize()))
    }

    #[napi]
    pub fn create_signature(
        &self,
        level: f64,
        protocol: String,
        key_id: String,
        counterparty: String,
        data: Option<BufferSlice<'_>>,
        hash: Option<BufferSlice<'_>>,
    ) -> Result<Buffer> {
        let key = KeyRef { level, protocol: &protocol, key_id: &key_id, counterparty: &counterparty };
        let hash = digest(data, hash)?;
        Ok(self.wallet.create_signature(&key, &hash).map_err(js)?.into())
    }

    #[allow(clippy::too_many_arguments)]
    #[napi]
    pub fn verify_signature(
        &self,
        level: f64,
        protocol: String,
        key_id: String,
        counterparty: String,
        for_self: bool,
        compact: BufferSlice<'_>,
        data: Option<BufferSlice<'_>>,
        hash: Option<BufferSlice<'_>>,
    ) -> Result<bool> {
        let key = KeyRef { level, protocol: &protocol, key_id: &key_id, counterparty: &counterparty };
        let hash = digest(data, hash)?;
        let compact: &[u8; 64] =
            (&compact[..]).try_into().map_err(|_| Error::new(Status::InvalidArg, "signature must be r || s"))?;
        self.wallet.verify_signature(&key, for_self, &hash, compact).map_err(js)
    }

    /// Like `verify_signature`, with the signature in DER as the SDK reads it.
    #[allow(clippy::too_many_arguments)]
    #[napi]
    pub fn verify_signature_der(
        &self,
        level: f64,
        protocol: String,
        key_id: String,
        counterparty: String,
        for_self: bool,
        signature: BufferSlice<'_>,
        data: Option<BufferSlice<'_>>,
        hash: Option<BufferSlice<'_>>,
    ) -> Result<bool> {
        let key = KeyRef { level, protocol: &protocol, key_id: &key_id, counterparty: &counterparty };
        let hash = digest(data, hash)?;
        self.wallet.verify_signature_der(&key, for_self, &hash, &signature).map_err(js)
    }

    #[napi]
    pub fn create_hmac(
        &self,
        level: f64,
        protocol: String,
        key_id: String,
        counterparty: String,
        data: BufferSlice<'_>,
    ) -> Result<Buffer> {
        let key = KeyRef { level, protocol: &protocol, key_id: &key_id, counterparty: &counterparty };
        Ok(self.wallet.create_hmac(&key, &data).map_err(js)?.to_vec().into())
    }

    #[napi]
    pub fn verify_hmac(
        &self,
        level: f64,
        protocol: String,
        key_id: String,
        counterparty: String,
        data: BufferSlice<'_>,
        hmac: BufferSlice<'_>,
    ) -> Result<bool> {
        let key = KeyRef { level, protocol: &protocol, key_id: &key_id, counterparty: &counterparty };
        self.wallet.verify_hmac(&key, &data, &hmac).map_err(js)
    }
}
