//! Key derivation and signatures of the BSV identity protocols, shared by the
//! manifest (BRC-194 signatures), the native wallet (BRC-103/104 authentication)
//! and the client (manifest acceptance):
//!
//! - [`brc42`]: BRC-42 child keys from an ECDH shared point and an invoice number.
//! - [`invoice`]: BRC-43 invoice numbers, validated as `@bsv/sdk`'s `ProtoWallet` does.
//! - [`brc77`]: BRC-77 message signatures for the `anyone` verifier.
//!
//! Everything is on the `secp256k1` crate; nothing here holds a key longer than a call.
pub mod brc42;
pub mod brc77;
pub mod invoice;

pub use brc77::{sign_brc77, sign_brc77_with_key_id, verify_brc77, Brc77Error, Identity};
pub use invoice::{invoice_number, InvoiceError};
