//! `_local` documents: per-bucket, never replicated, not in changes or `_all_docs`. Their
//! revisions are `0-N` with N counting edits, as in CouchDB.

use bytes::Bytes;
use settee_storage::{Batch, Cf};

use crate::bucket::Bucket;
use crate::doc_key::DocKey;
use crate::error::EngineError;
use crate::keys;

const VERSION: u8 = 1;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LocalOutcome {
    Saved { generation: u64 },
    Conflict,
    NotFound,
}

impl Bucket {
    fn local_storage_key(&self, key: DocKey<'_>) -> Vec<u8> {
        keys::local_key(self.id, self.vbucket_of(key.key), key.collection, key.key)
    }

    /// Every `_local` document of `collection`, sorted by key: `(key, generation)` (what
    /// `_local_docs` lists; bodies are not read).
    pub fn local_docs_in(&self, collection: u32) -> Result<Vec<(Vec<u8>, u64)>, EngineError> {
        self.check_live(collection)?;
        let ranges: Vec<(Vec<u8>, Vec<u8>)> = (0..self.vbuckets())
            .map(|vbucket| keys::coll_range(self.id, vbucket, collection))
            .collect();
        let mut found = Vec::new();
        self.store.seek_each(Cf::Local, &ranges, |_, key, value| {
            if value.len() >= 9 && value[0] == VERSION {
                let generation = u64::from_be_bytes(value[1..9].try_into().unwrap_or([0; 8]));
                found.push((keys::key_of_doc_key(key).to_vec(), generation));
            }
            false
        })?;
        found.sort_unstable();
        Ok(found)
    }

    /// `(generation, body)` of a `_local` document (of a collection: each has its own).
    pub fn get_local<'k>(
        &self,
        key: impl Into<DocKey<'k>>,
    ) -> Result<Option<(u64, Bytes)>, EngineError> {
        let key = key.into();
        self.check_live(key.collection)?;
        let Some(raw) = self.store.get(Cf::Local, &self.local_storage_key(key))? else {
            return Ok(None);
        };
        if raw.len() < 9 || raw[0] != VERSION {
            return Err(EngineError::Corrupt("local document".into()));
        }
        let generation = u64::from_be_bytes(raw[1..9].try_into().unwrap_or([0; 8]));
        Ok(Some((generation, Bytes::copy_from_slice(&raw[9..]))))
    }

    /// Writes (or with `body: None`, deletes) a `_local` document. `generation` is the `0-N` the
    /// writer read; CouchDB accepts a missing rev for a create and, like it, checks it otherwise.
    pub async fn put_local<'k>(
        &self,
        key: impl Into<DocKey<'k>>,
        generation: Option<u64>,
        body: Option<Bytes>,
    ) -> Result<LocalOutcome, EngineError> {
        let key = key.into();
        let _guards = self.lock_keys(std::iter::once(key)).await;
        let current = self.get_local(key)?.map(|(generation, _)| generation);
        let storage_key = self.local_storage_key(key);
        let mut batch = Batch::new();
        let outcome = match (current, generation, body) {
            (None, _, None) => return Ok(LocalOutcome::NotFound),
            (Some(stored), Some(given), _) if stored != given => return Ok(LocalOutcome::Conflict),
            (Some(_), None, None) => return Ok(LocalOutcome::Conflict),
            (Some(_), None, Some(_)) => return Ok(LocalOutcome::Conflict),
            (_, _, None) => {
                batch.delete(Cf::Local, storage_key);
                LocalOutcome::Saved { generation: 0 }
            }
            (current, _, Some(body)) => {
                let next = current.unwrap_or(0) + 1;
                let mut value = Vec::with_capacity(9 + body.len());
                value.push(VERSION);
                value.extend_from_slice(&next.to_be_bytes());
                value.extend_from_slice(&body);
                batch.put(Cf::Local, storage_key, value);
                LocalOutcome::Saved { generation: next }
            }
        };
        let vbucket = self.vbucket_of(key.key);
        self.commit_in_collection(vbucket, key.collection, batch)?
            .await?;
        Ok(outcome)
    }

    /// Bytes of one stored attachment body.
    pub fn get_attachment<'k>(
        &self,
        key: impl Into<DocKey<'k>>,
        md5: &[u8; 16],
    ) -> Result<Option<Bytes>, EngineError> {
        let key = key.into();
        self.check_live(key.collection)?;
        let vbucket = self.vbucket_of(key.key);
        let storage_key = keys::att_key(self.id, vbucket, key.collection, key.key, md5);
        Ok(self.store.get(Cf::Att, &storage_key)?.map(Bytes::from))
    }
}
