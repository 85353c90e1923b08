//! Key-value style mutations (the Couchbase door builds on these): set/add/replace with CAS,
//! remove, touch, all with expiry. Every mutation is also a new CouchDB revision, child of the
//! current winner, so both doors see every change in CAS and `_rev` alike.

use bytes::Bytes;
use settee_revtree::RevId;

use crate::bucket::{Bucket, PlannedWrite, Previous};
use crate::error::EngineError;
use crate::record::{DocRecord, Leaf};
use crate::update::{empty_record, finish, revision_hash};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreMode {
    /// Create or overwrite.
    Set,
    /// Create only.
    Add,
    /// Overwrite only.
    Replace,
}

/// A key-value mutation; `cas` 0 means "any version".
#[derive(Clone, Debug)]
pub enum KvMutation {
    Store {
        mode: StoreMode,
        value: Bytes,
        json: bool,
        item_flags: u32,
        expiry: u32,
        cas: u64,
    },
    Remove {
        cas: u64,
    },
    Touch {
        expiry: u32,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvOutcome {
    Stored { cas: u64, seqno: u64, rev: RevId },
    NotFound,
    Exists,
    CasMismatch,
}

/// A live document: present, not deleted, not past its expiry.
fn live(record: Option<&DocRecord>, now_secs: u32) -> Option<&DocRecord> {
    record.filter(|record| !record.is_deleted() && (record.expiry == 0 || record.expiry > now_secs))
}

pub(crate) fn plan_kv(
    current: Option<&DocRecord>,
    mutation: &KvMutation,
    now_secs: u32,
    revs_limit: u32,
) -> Result<(DocRecord, RevId), KvOutcome> {
    let alive = live(current, now_secs);
    let check_cas = |cas: u64| -> Result<(), KvOutcome> {
        match alive {
            _ if cas == 0 => Ok(()),
            None => Err(KvOutcome::NotFound),
            Some(record) if record.cas != cas => Err(KvOutcome::CasMismatch),
            Some(_) => Ok(()),
        }
    };
    let (value, json, item_flags, expiry, deleted) = match mutation {
        KvMutation::Store {
            mode,
            value,
            json,
            item_flags,
            expiry,
            cas,
        } => {
            match (mode, alive) {
                (StoreMode::Add, Some(_)) => return Err(KvOutcome::Exists),
                (StoreMode::Replace, None) => return Err(KvOutcome::NotFound),
                _ => {}
            }
            if *mode != StoreMode::Add {
                check_cas(*cas)?;
            }
            (value.clone(), *json, *item_flags, *expiry, false)
        }
        KvMutation::Remove { cas } => {
            let Some(record) = alive else {
                return Err(KvOutcome::NotFound);
            };
            check_cas(*cas)?;
            let _ = record;
            (Bytes::from_static(b"{}"), true, 0, 0, true)
        }
        KvMutation::Touch { expiry } => {
            let Some(record) = alive else {
                return Err(KvOutcome::NotFound);
            };
            let winner = record.winner().ok_or(KvOutcome::NotFound)?;
            (
                winner.body.clone(),
                winner.json,
                record.item_flags,
                *expiry,
                false,
            )
        }
    };
    let mut record = current.cloned().unwrap_or_else(empty_record);
    let parent = record.winner().map(|leaf| leaf.rev.clone());
    let rev = RevId {
        pos: parent.as_ref().map_or(1, |parent| parent.pos + 1),
        hash: revision_hash(parent.as_ref(), deleted, &value, &[]),
    };
    if record
        .tree
        .edit(parent.as_ref(), rev.clone(), deleted)
        .is_err()
    {
        // The winner is always a leaf, so this only happens on a hash collision with history.
        return Err(KvOutcome::Exists);
    }
    if let Some(parent) = &parent {
        record.leaves.retain(|leaf| &leaf.rev != parent);
    }
    record.leaves.push(Leaf {
        rev: rev.clone(),
        deleted,
        json,
        body: value,
        attachments: Vec::new(),
    });
    record.item_flags = item_flags;
    record.expiry = expiry;
    finish(&mut record, revs_limit);
    Ok((record, rev))
}

impl Bucket {
    pub async fn kv_mutate(
        &self,
        key: &[u8],
        mutation: KvMutation,
    ) -> Result<KvOutcome, EngineError> {
        let _guards = self.lock_keys(std::iter::once(key)).await;
        let current = self.read_record(key)?;
        let (record, rev) = match plan_kv(
            current.as_ref(),
            &mutation,
            self.now_secs(),
            self.revs_limit(),
        ) {
            Ok(planned) => planned,
            Err(outcome) => return Ok(outcome),
        };
        let mut writes = [PlannedWrite {
            vbucket: self.vbucket_of(key),
            key: key.to_vec(),
            previous: current.as_ref().map(Previous::of),
            record: Some(record),
            new_attachments: Vec::new(),
        }];
        let committed = self.commit_writes(&mut writes).await?;
        Ok(KvOutcome::Stored {
            cas: committed[0].cas,
            seqno: committed[0].seqno,
            rev,
        })
    }

    /// The live value of `key`: (body, json, item_flags, cas, expiry). Expired documents read as
    /// absent (lazy expiry); the purger turns them into deletions later.
    pub fn kv_get(&self, key: &[u8]) -> Result<Option<KvValue>, EngineError> {
        let Some((header, body)) = self.read_winner(key)? else {
            return Ok(None);
        };
        if header.deleted || self.is_expired(header.expiry) {
            return Ok(None);
        }
        Ok(Some(KvValue {
            body,
            json: header.json,
            item_flags: header.item_flags,
            cas: header.cas,
            expiry: header.expiry,
        }))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvValue {
    pub body: Bytes,
    pub json: bool,
    pub item_flags: u32,
    pub cas: u64,
    pub expiry: u32,
}
