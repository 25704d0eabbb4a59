//! Reading a row's present version by its outpoint, with its attributes: what a prohibition
//! (src/session/prohibit.rs) checks sessions' selections against.
use super::codec::RowVersion;
use super::{keys, Attributes, Outpoint, Store, StoreError};

/// A row's present version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PresentVersion {
    /// Its admission sequence.
    pub created: u64,
    pub topic: String,
    pub attributes: Attributes,
}

impl Store {
    /// The present version of (service, outpoint) as of highWater, or `None` if the row is
    /// absent.
    pub fn present_version(&self, service: &str, o: &Outpoint) -> Result<Option<PresentVersion>, StoreError> {
        let db = self.db()?;
        let Some(c) = db.get(keys::current(service, o)).map_err(StoreError::io("reading a current-row pointer"))? else {
            return Ok(None);
        };
        let created = u64::from_be_bytes(c.as_ref().try_into().map_err(|_| StoreError::Invalid("malformed current-row pointer".into()))?);
        let Some(v) = db.get(keys::row(service, created, o)).map_err(StoreError::io("reading a row"))? else { return Ok(None) };
        let row = RowVersion::decode(&v).ok_or_else(|| StoreError::Invalid("malformed row version".into()))?;
        if row.removed != 0 {
            return Ok(None);
        }
        Ok(Some(PresentVersion { created, topic: row.topic, attributes: row.attributes }))
    }
}
