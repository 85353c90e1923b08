//! Key-value style mutations (the Couchbase door builds on these): set/add/replace with CAS,
//! remove, touch, all with expiry. Every mutation is also a new CouchDB revision, child of the
//! current winner, so both doors see every change in CAS and `_rev` alike.

use bytes::Bytes;
use settee_revtree::RevId;

use crate::bucket::{Bucket, PlannedWrite, Previous};
use crate::doc_key::DocKey;
use crate::error::EngineError;
use crate::limits::{DocLimits, LimitError};
use crate::record::{DocRecord, Header, Leaf};
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
    /// Memcached APPEND / PREPEND: raw bytes joined to the current value; flags and expiry
    /// stay. A missing document is `NotStored`.
    Concat {
        data: Bytes,
        prepend: bool,
        cas: u64,
    },
    /// Memcached INCREMENT / DECREMENT of a value that is an ASCII unsigned decimal.
    /// Decrement stops at 0, increment wraps at 2^64. A missing document is created with
    /// `initial` (and `expiry`), or is `NotFound` when `initial` is `None`.
    Counter {
        delta: u64,
        decrement: bool,
        initial: Option<u64>,
        expiry: u32,
        cas: u64,
    },
}

impl KvMutation {
    fn cas_mut(&mut self) -> Option<&mut u64> {
        match self {
            KvMutation::Store { cas, .. }
            | KvMutation::Remove { cas }
            | KvMutation::Concat { cas, .. }
            | KvMutation::Counter { cas, .. } => Some(cas),
            KvMutation::Touch { .. } => None,
        }
    }
}

/// A `GET_LOCKED` lock: writers must present `cas` until `until_ns` (clock time).
#[derive(Clone, Copy, Debug)]
pub(crate) struct KvLock {
    pub cas: u64,
    pub until_ns: u64,
}

/// Metadata of a document, tombstones included (`GET_META`, the SDKs' `exists`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvMeta {
    pub deleted: bool,
    pub item_flags: u32,
    pub expiry: u32,
    /// Revision generation: how many times the document was written.
    pub rev_seqno: u64,
    pub cas: u64,
    pub json: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockOutcome {
    Locked(KvValue),
    NotFound,
    AlreadyLocked,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnlockOutcome {
    Unlocked,
    NotFound,
    NotLocked,
    CasMismatch,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvOutcome {
    Stored {
        cas: u64,
        seqno: u64,
        rev: RevId,
    },
    /// A counter's new value.
    Counted {
        cas: u64,
        seqno: u64,
        value: u64,
    },
    NotFound,
    Exists,
    CasMismatch,
    /// Locked by `GET_LOCKED` and the right CAS was not given.
    Locked,
    /// APPEND/PREPEND to a missing document.
    NotStored,
    /// INCREMENT/DECREMENT of a value that is not an unsigned decimal number.
    NotANumber,
    /// The new value is larger or deeper than the document limits (`limits.rs`); nothing was
    /// written.
    OverLimit(LimitError),
    /// The document's winning revision is at the largest generation, so no mutation can
    /// follow it (only possible for a revision replicated in with such a position).
    GenerationOverflow,
    /// A validation function of the bucket refused the write (`validate.rs`).
    Refused(crate::Refusal),
}

/// A live document: present, not deleted, not past its expiry.
pub(crate) fn live(record: Option<&DocRecord>, now_secs: u32) -> Option<&DocRecord> {
    record.filter(|record| !record.is_deleted() && (record.expiry == 0 || record.expiry > now_secs))
}

/// Whether `bytes` is one JSON value (what the `json` bit of a stored value means). Text that is
/// not UTF-8 is not JSON, as kv_engine's validator says (serde_json's skipping parser alone
/// would accept invalid UTF-8 inside strings, and every reader of the value would then fail).
pub fn is_json(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_ok()
        && serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok()
}

/// The counter value a mutation leaves, when it is a counter.
pub(crate) fn counter_result(
    current: Option<&DocRecord>,
    mutation: &KvMutation,
    now_secs: u32,
) -> Option<u64> {
    let KvMutation::Counter {
        delta,
        decrement,
        initial,
        ..
    } = mutation
    else {
        return None;
    };
    match live(current, now_secs).and_then(|record| record.winner()) {
        None => *initial,
        Some(winner) => {
            let old: u64 = std::str::from_utf8(&winner.body).ok()?.parse().ok()?;
            Some(if *decrement {
                old.saturating_sub(*delta)
            } else {
                old.wrapping_add(*delta)
            })
        }
    }
}

pub(crate) fn plan_kv(
    current: Option<&DocRecord>,
    mutation: &KvMutation,
    now_secs: u32,
    revs_limit: u32,
    limits: &DocLimits,
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
        KvMutation::Concat { data, prepend, cas } => {
            let Some(record) = alive else {
                return Err(KvOutcome::NotStored);
            };
            check_cas(*cas)?;
            let winner = record.winner().ok_or(KvOutcome::NotStored)?;
            let mut joined = Vec::with_capacity(winner.body.len() + data.len());
            if *prepend {
                joined.extend_from_slice(data);
                joined.extend_from_slice(&winner.body);
            } else {
                joined.extend_from_slice(&winner.body);
                joined.extend_from_slice(data);
            }
            let json = is_json(&joined);
            (
                Bytes::from(joined),
                json,
                record.item_flags,
                record.expiry,
                false,
            )
        }
        KvMutation::Counter {
            initial,
            expiry,
            cas,
            ..
        } => {
            match alive {
                None if initial.is_none() => return Err(KvOutcome::NotFound),
                None => {}
                Some(_) => check_cas(*cas)?,
            }
            let value = counter_result(current, mutation, now_secs).ok_or(KvOutcome::NotANumber)?;
            let (item_flags, expiry) = match alive {
                Some(record) => (record.item_flags, record.expiry),
                None => (0, *expiry),
            };
            (
                Bytes::from(value.to_string()),
                true,
                item_flags,
                expiry,
                false,
            )
        }
    };
    // A new value is checked against the limits; TOUCH rewrites the stored one as it is and
    // a deletion stores `{}`, so neither can pass them.
    if matches!(
        mutation,
        KvMutation::Store { .. } | KvMutation::Concat { .. } | KvMutation::Counter { .. }
    ) {
        let xattrs_len = current.map_or(0, |record| record.xattrs.len());
        limits
            .check(&value, json, xattrs_len)
            .map_err(KvOutcome::OverLimit)?;
    }
    let mut record = current.cloned().unwrap_or_else(empty_record);
    let parent = record.winner().map(|leaf| leaf.rev.clone());
    let rev = RevId {
        pos: RevId::next_pos(parent.as_ref()).ok_or(KvOutcome::GenerationOverflow)?,
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
    /// A KV mutation by `writer`; every one that changes the body (all but TOUCH) is
    /// validated as theirs (`validate.rs`).
    pub async fn kv_mutate<'k>(
        &self,
        key: impl Into<DocKey<'k>>,
        mut mutation: KvMutation,
        writer: &crate::Writer,
    ) -> Result<KvOutcome, EngineError> {
        let key = key.into();
        self.check_active(self.vbucket_of(key.key))?;
        let _guards = self.lock_keys(std::iter::once(key)).await;
        let current = self.read_record(key)?;
        let lock = self.current_lock(key);
        if let Some(lock) = lock {
            // A locked document takes writes only from the lock holder, who proves it with
            // the CAS GET_LOCKED returned; that write releases the lock.
            match (mutation.cas_mut(), current.as_ref()) {
                (Some(cas), Some(record)) if *cas == lock.cas => *cas = record.cas,
                _ => return Ok(KvOutcome::Locked),
            }
        }
        let (record, rev) = match plan_kv(
            current.as_ref(),
            &mutation,
            self.now_secs(),
            self.revs_limit(),
            &self.limits,
        ) {
            Ok(planned) => planned,
            Err(outcome) => return Ok(outcome),
        };
        if !matches!(mutation, KvMutation::Touch { .. }) {
            let verdict = self.validate_record(key, writer, &record, &rev, current.as_ref());
            if let Err(refusal) = verdict.await {
                return Ok(KvOutcome::Refused(refusal));
            }
        }
        // kv_engine caps a new expiry (a store, a touch, a counter's create); APPEND and
        // PREPEND keep the stored one as it is.
        let apply_max_ttl = match &mutation {
            KvMutation::Store { .. } | KvMutation::Touch { .. } => true,
            KvMutation::Counter { .. } => live(current.as_ref(), self.now_secs()).is_none(),
            KvMutation::Remove { .. } | KvMutation::Concat { .. } => false,
        };
        let mut writes = [PlannedWrite {
            vbucket: self.vbucket_of(key.key),
            collection: key.collection,
            key: key.key.to_vec(),
            previous: current.as_ref().map(Previous::of),
            record: Some(record),
            new_attachments: Vec::new(),
            macro_nonce: None,
            apply_max_ttl,
            old_revisions: Default::default(),
        }];
        let counter = counter_result(current.as_ref(), &mutation, self.now_secs());
        let committed = self.commit_writes(&mut writes).await?;
        if lock.is_some() {
            self.release_kv_lock(key);
        }
        Ok(match counter {
            Some(value) => KvOutcome::Counted {
                cas: committed[0].cas,
                seqno: committed[0].seqno,
                value,
            },
            None => KvOutcome::Stored {
                cas: committed[0].cas,
                seqno: committed[0].seqno,
                rev,
            },
        })
    }

    pub(crate) fn release_kv_lock(&self, key: DocKey<'_>) {
        let mut locks = self.kv_locks.lock();
        locks.remove(&key.lock_name());
        self.kv_lock_count
            .store(locks.len(), std::sync::atomic::Ordering::Relaxed);
    }

    /// The unexpired lock on `key`, dropping an expired one.
    pub(crate) fn current_lock(&self, key: DocKey<'_>) -> Option<KvLock> {
        let name = key.lock_name();
        let mut locks = self.kv_locks.lock();
        let lock = *locks.get(&name)?;
        if lock.until_ns <= self.clock.now_ns() {
            locks.remove(&name);
            self.kv_lock_count
                .store(locks.len(), std::sync::atomic::Ordering::Relaxed);
            return None;
        }
        Some(lock)
    }

    /// `GET_LOCKED`: the live value, locked for `lock_secs` against writers that do not
    /// present the returned CAS.
    pub async fn kv_get_and_lock<'k>(
        &self,
        key: impl Into<DocKey<'k>>,
        lock_secs: u32,
    ) -> Result<LockOutcome, EngineError> {
        let key = key.into();
        let _guards = self.lock_keys(std::iter::once(key)).await;
        let Some(mut value) = self.kv_get_unlocked(key)? else {
            return Ok(LockOutcome::NotFound);
        };
        if self.current_lock(key).is_some() {
            return Ok(LockOutcome::AlreadyLocked);
        }
        let lock = KvLock {
            cas: self.hlc.next(self.clock.as_ref()),
            until_ns: self
                .clock
                .now_ns()
                .saturating_add(u64::from(lock_secs) * 1_000_000_000),
        };
        let mut locks = self.kv_locks.lock();
        locks.insert(key.lock_name(), lock);
        self.kv_lock_count
            .store(locks.len(), std::sync::atomic::Ordering::Relaxed);
        drop(locks);
        value.cas = lock.cas;
        Ok(LockOutcome::Locked(value))
    }

    /// `UNLOCK_KEY` with the CAS `GET_LOCKED` returned.
    pub async fn kv_unlock<'k>(
        &self,
        key: impl Into<DocKey<'k>>,
        cas: u64,
    ) -> Result<UnlockOutcome, EngineError> {
        let key = key.into();
        let _guards = self.lock_keys(std::iter::once(key)).await;
        if self.kv_get_unlocked(key)?.is_none() {
            return Ok(UnlockOutcome::NotFound);
        }
        match self.current_lock(key) {
            None => Ok(UnlockOutcome::NotLocked),
            Some(lock) if lock.cas != cas => Ok(UnlockOutcome::CasMismatch),
            Some(_) => {
                self.release_kv_lock(key);
                Ok(UnlockOutcome::Unlocked)
            }
        }
    }

    /// Metadata, tombstones included; expired documents read as absent.
    pub fn kv_meta<'k>(&self, key: impl Into<DocKey<'k>>) -> Result<Option<KvMeta>, EngineError> {
        let Some(record) = self.read_record(key)? else {
            return Ok(None);
        };
        if !record.is_deleted() && self.is_expired(record.expiry) {
            return Ok(None);
        }
        let Some(winner) = record.winner() else {
            return Ok(None);
        };
        Ok(Some(KvMeta {
            deleted: record.is_deleted(),
            item_flags: record.item_flags,
            expiry: record.expiry,
            rev_seqno: winner.rev.pos,
            cas: record.cas,
            json: winner.json,
        }))
    }

    /// The live value of `key`: (body, json, item_flags, cas, expiry). Expired documents read as
    /// absent (lazy expiry); the purger turns them into deletions later.
    /// A locked document reads with CAS `u64::MAX`, as on Couchbase Server, so only the lock
    /// holder can write it.
    pub fn kv_get<'k>(&self, key: impl Into<DocKey<'k>>) -> Result<Option<KvValue>, EngineError> {
        let key = key.into();
        let mut value = self.kv_get_unlocked(key)?;
        if let Some(value) = value.as_mut() {
            if self.is_kv_locked(key) {
                value.cas = u64::MAX;
            }
        }
        Ok(value)
    }

    fn has_locks(&self) -> bool {
        self.kv_lock_count
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    }

    /// Whether `key` holds a live `GET_LOCKED` lock.
    pub(crate) fn is_kv_locked(&self, key: DocKey<'_>) -> bool {
        self.has_locks() && self.current_lock(key).is_some()
    }

    /// The live value of `key` lent to `read` without copying (the KV door's GET path:
    /// the value goes from RocksDB's pinned block straight into the reply buffer).
    pub fn kv_read<'k, R>(
        &self,
        key: impl Into<DocKey<'k>>,
        read: impl FnOnce(KvRef<'_>) -> R,
    ) -> Result<Option<R>, EngineError> {
        let key = key.into();
        self.check_live(key.collection)?;
        let vbucket = self.vbucket_of(key.key);
        let Some(doc_key) = crate::keys::DocKeyBuf::new(self.id, vbucket, key.collection, key.key)
        else {
            return Ok(None);
        };
        let locked = self.is_kv_locked(key);
        let now = self.now_secs();
        let result = self
            .store
            .get_with(settee_storage::Cf::Doc, doc_key.as_slice(), |raw| {
                let header = Header::decode(raw)?;
                if header.deleted || (header.expiry != 0 && header.expiry <= now) {
                    return Ok(None);
                }
                Ok(Some(read(KvRef {
                    body: header.body(raw)?,
                    json: header.json,
                    item_flags: header.item_flags,
                    cas: if locked { u64::MAX } else { header.cas },
                    expiry: header.expiry,
                })))
            })?;
        result.transpose().map(Option::flatten)
    }

    fn kv_get_unlocked(&self, key: DocKey<'_>) -> Result<Option<KvValue>, EngineError> {
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

/// A live value borrowed from storage for the duration of a `kv_read` callback.
#[derive(Clone, Copy, Debug)]
pub struct KvRef<'a> {
    pub body: &'a [u8],
    pub json: bool,
    pub item_flags: u32,
    pub cas: u64,
    pub expiry: u32,
}

impl KvValue {
    pub fn as_ref(&self) -> KvRef<'_> {
        KvRef {
            body: &self.body,
            json: self.json,
            item_flags: self.item_flags,
            cas: self.cas,
            expiry: self.expiry,
        }
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
