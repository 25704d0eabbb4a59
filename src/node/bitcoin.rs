//! napi exports of the `bitcoin` module: the provider's hooks read the subject
//! transaction of an Atomic BEEF through the same BEEF reader the client uses.

// The #[napi] registrations are compiled out of unit-test builds.
#![cfg_attr(test, allow(dead_code))]

use napi::bindgen_prelude::Buffer;
use napi_derive::napi;

use super::error::{invalid_arg, JsResult};
use crate::bitcoin::beef;

#[napi(object)]
pub struct SubjectInput {
    /// Display hex.
    #[napi(js_name = "sourceTXID")]
    pub source_txid: String,
    pub source_output_index: u32,
    pub unlocking_script: Buffer,
    pub sequence: u32,
}

#[napi(object)]
pub struct SubjectOutput {
    pub satoshis: i64,
    pub locking_script: Buffer,
}

#[napi(object)]
pub struct SubjectTransaction {
    pub txid: String,
    pub inputs: Vec<SubjectInput>,
    pub outputs: Vec<SubjectOutput>,
}

/// The subject transaction of an Atomic BEEF (BRC-95 around V1 or V2): its txid (from
/// its bytes), inputs and outputs. Bytes after the bundle are ignored, as the SDK
/// ignores them; anything malformed or truncated throws with code `invalid`.
#[napi(js_name = "beefSubject")]
pub fn beef_subject(atomic: Buffer) -> napi::Result<SubjectTransaction, String> {
    let (b, _) = beef::read(&atomic).map_err(|e| invalid_arg(e.to_string()))?;
    let subject = b.subject.ok_or_else(|| invalid_arg("not an Atomic BEEF (BRC-95): missing its prefix"))?;
    let (tx, _) = b.raw(&subject).expect("read checks that the subject is carried");
    Ok(SubjectTransaction {
        txid: subject.to_hex(),
        inputs: tx
            .inputs
            .iter()
            .map(|i| SubjectInput {
                source_txid: i.prev.txid.to_hex(),
                source_output_index: i.prev.vout,
                unlocking_script: Buffer::from(i.script),
                sequence: i.sequence,
            })
            .collect(),
        outputs: tx
            .outputs
            .iter()
            // Satoshis above 2^53 cannot be a real amount; keep the JS number exact.
            .map(|o| Ok(SubjectOutput { satoshis: i64::try_from(o.satoshis).ok().filter(|s| *s <= (1 << 53)).ok_or_else(|| invalid_arg("an output amount exceeds 2^53 satoshis"))?, locking_script: Buffer::from(o.script) }))
            .collect::<JsResult<_>>()?,
    })
}
