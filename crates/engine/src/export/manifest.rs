//! The manifest of a vbucket's export (docs/format/rebalance.md, section 1, `manifest.json`):
//! what the files are (size, keys, crc32c, first and last key) and what the target adopts with
//! them (the vbucket's counters, its failover log, each index group's position and row counts).
//! The source writes it last; the export is the set of files it names.

use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};
use settee_storage::{Cf, SstFile};

use super::{ExportedFile, VbucketExport, EXPORTED, VIEW_FILE};
use crate::error::EngineError;
use crate::failover::FailoverEntry;
use crate::vb_state::VbState;

pub const MANIFEST_FILE: &str = "manifest.json";
/// The manifest's `format`: a target refuses any other.
pub const MANIFEST_FORMAT: u32 = 1;
/// A manifest is at most this long (it travels in one MoveCommit).
pub const MANIFEST_BYTES_MAX: usize = 1 << 20;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveManifest {
    pub format: u32,
    #[serde(rename = "move")]
    pub move_id: u64,
    pub attempt: u32,
    pub bucket: String,
    pub vbucket: u16,
    pub vbucket_count: u16,
    pub snapshot_seqno: u64,
    pub target_bucket_id: u32,
    pub vbstats: Counts,
    pub collections: Vec<CollectionCounts>,
    /// (uuid, seqno), newest first.
    pub failover_log: Vec<(u64, u64)>,
    pub groups: Vec<ManifestGroup>,
    pub files: Vec<ManifestFile>,
}

/// A vbucket's counters (`vbstats`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub high_seqno: u64,
    pub live: u64,
    pub deleted: u64,
    pub bytes: u64,
}

/// One collection's share of the vbucket (`cstats`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectionCounts {
    pub cid: u32,
    pub live: u64,
    pub deleted: u64,
    pub bytes: u64,
    pub high_seqno: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestGroup {
    /// 32 hex digits.
    pub signature: String,
    pub target_group: u32,
    pub collection: u32,
    pub meta: GroupMeta,
    pub indexed_seqno: u64,
    /// Rows exported per view, in the order of `meta.views`.
    pub rows: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupMeta {
    pub signature: String,
    pub name: String,
    pub views: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    pub name: String,
    pub cf: String,
    pub bytes: u64,
    pub keys: u64,
    pub crc32c: u32,
    /// The file's first and last keys, in hex.
    pub smallest: String,
    pub largest: String,
}

impl From<VbState> for Counts {
    fn from(state: VbState) -> Counts {
        Counts {
            high_seqno: state.high_seqno,
            live: state.live,
            deleted: state.deleted,
            bytes: state.record_bytes,
        }
    }
}

impl Counts {
    pub(crate) fn state(&self) -> VbState {
        VbState {
            high_seqno: self.high_seqno,
            live: self.live,
            deleted: self.deleted,
            record_bytes: self.bytes,
        }
    }
}

impl CollectionCounts {
    pub(crate) fn state(&self) -> VbState {
        VbState {
            high_seqno: self.high_seqno,
            live: self.live,
            deleted: self.deleted,
            record_bytes: self.bytes,
        }
    }
}

impl VbucketExport {
    /// The manifest of this export as move `move_id`'s attempt `attempt`: every file read once
    /// for its crc32c.
    pub fn manifest(&self, move_id: u64, attempt: u32) -> Result<MoveManifest, EngineError> {
        let files = self
            .files
            .iter()
            .map(|exported| {
                let name = file_name(exported.cf)
                    .ok_or_else(|| EngineError::Invalid("an unknown export file".into()))?;
                Ok(ManifestFile {
                    name: name.to_owned(),
                    cf: exported.cf.name().to_owned(),
                    bytes: exported.file.bytes,
                    keys: exported.file.keys,
                    crc32c: crc32c_of(&exported.file.path)?,
                    smallest: crate::update::hex(&exported.file.smallest),
                    largest: crate::update::hex(&exported.file.largest),
                })
            })
            .collect::<Result<_, EngineError>>()?;
        let groups = self
            .groups
            .iter()
            .map(|group| {
                let signature = crate::update::hex(&group.signature);
                ManifestGroup {
                    signature: signature.clone(),
                    target_group: group.target_group,
                    collection: group.collection,
                    meta: GroupMeta {
                        signature,
                        name: group.name.clone(),
                        views: group.views.clone(),
                    },
                    indexed_seqno: group.indexed_seqno,
                    rows: group.rows.clone(),
                }
            })
            .collect();
        Ok(MoveManifest {
            format: MANIFEST_FORMAT,
            move_id,
            attempt,
            bucket: self.bucket.clone(),
            vbucket: self.vbucket,
            vbucket_count: self.vbucket_count,
            snapshot_seqno: self.snapshot_seqno,
            target_bucket_id: self.target_bucket_id,
            vbstats: self.vbstats.into(),
            collections: self
                .collections
                .iter()
                .map(|(cid, state)| CollectionCounts {
                    cid: *cid,
                    live: state.live,
                    deleted: state.deleted,
                    bytes: state.record_bytes,
                    high_seqno: state.high_seqno,
                })
                .collect(),
            failover_log: self
                .failover_log
                .iter()
                .map(|entry| (entry.uuid, entry.seqno))
                .collect(),
            groups,
            files,
        })
    }
}

impl MoveManifest {
    /// Writes `manifest.json` into `dir`, durably (written last: its presence says the
    /// export is whole).
    pub fn write(&self, dir: &Path) -> Result<(), EngineError> {
        let bytes =
            serde_json::to_vec(self).map_err(|error| EngineError::Invalid(error.to_string()))?;
        if bytes.len() > MANIFEST_BYTES_MAX {
            return Err(EngineError::Invalid("the manifest is over 1 MiB".into()));
        }
        let path = dir.join(MANIFEST_FILE);
        std::fs::write(&path, &bytes).map_err(io)?;
        std::fs::File::open(&path)
            .and_then(|file| file.sync_all())
            .map_err(io)
    }

    /// A manifest as received (at most 1 MiB of JSON in this layout, of format 1).
    pub fn parse(bytes: &[u8]) -> Result<MoveManifest, EngineError> {
        if bytes.is_empty() || bytes.len() > MANIFEST_BYTES_MAX {
            return Err(EngineError::Invalid("a manifest is 1 byte to 1 MiB".into()));
        }
        let manifest: MoveManifest = serde_json::from_slice(bytes)
            .map_err(|error| EngineError::Invalid(format!("the manifest: {error}")))?;
        if manifest.format != MANIFEST_FORMAT {
            return Err(EngineError::Invalid(format!(
                "manifest format {} (this node reads {MANIFEST_FORMAT})",
                manifest.format
            )));
        }
        Ok(manifest)
    }

    /// The failover log as entries; at least one.
    pub(crate) fn failover_entries(&self) -> Result<Vec<FailoverEntry>, EngineError> {
        let log: Vec<FailoverEntry> = self
            .failover_log
            .iter()
            .map(|(uuid, seqno)| FailoverEntry {
                uuid: *uuid,
                seqno: *seqno,
            })
            .collect();
        if log.is_empty() || log.len() > crate::failover::FAILOVER_ENTRIES_MAX {
            return Err(EngineError::Invalid(
                "the manifest's failover log has 1 to 25 entries".into(),
            ));
        }
        Ok(log)
    }

    /// The files in `dir` as the manifest names them, each checked whole: its name and family
    /// one of the export's, named once, its size and crc32c those of the manifest.
    pub(crate) fn checked_files(&self, dir: &Path) -> Result<Vec<ExportedFile>, EngineError> {
        let mut files = Vec::with_capacity(self.files.len());
        for named in &self.files {
            let cf = EXPORTED
                .into_iter()
                .chain([VIEW_FILE])
                .find(|(cf, name)| *name == named.name && cf.name() == named.cf)
                .map(|(cf, _)| cf)
                .ok_or_else(|| invalid(format!("unknown file {} ({})", named.name, named.cf)))?;
            if files.iter().any(|file: &ExportedFile| file.cf == cf) {
                return Err(invalid(format!("{} named twice", named.name)));
            }
            let path = dir.join(&named.name);
            let bytes = std::fs::metadata(&path).map_err(io)?.len();
            if bytes != named.bytes {
                return Err(invalid(format!(
                    "{} has {bytes} bytes, the manifest says {}",
                    named.name, named.bytes
                )));
            }
            if crc32c_of(&path)? != named.crc32c {
                return Err(invalid(format!("{} does not match its crc32c", named.name)));
            }
            let key = |hex: &str| {
                unhex(hex).ok_or_else(|| invalid(format!("{}: a key that is not hex", named.name)))
            };
            files.push(ExportedFile {
                cf,
                file: SstFile {
                    path,
                    keys: named.keys,
                    bytes,
                    smallest: key(&named.smallest)?,
                    largest: key(&named.largest)?,
                },
            });
        }
        Ok(files)
    }
}

fn file_name(cf: Cf) -> Option<&'static str> {
    EXPORTED
        .into_iter()
        .chain([VIEW_FILE])
        .find(|(known, _)| *known == cf)
        .map(|(_, name)| name)
}

fn crc32c_of(path: &Path) -> Result<u32, EngineError> {
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut crc = 0u32;
    loop {
        let read = file.read(&mut buffer).map_err(io)?;
        if read == 0 {
            return Ok(crc);
        }
        crc = crc32c::crc32c_append(crc, &buffer[..read]);
    }
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}

fn invalid(reason: String) -> EngineError {
    EngineError::Invalid(reason)
}

fn io(error: std::io::Error) -> EngineError {
    EngineError::Invalid(format!("an export file: {error}"))
}
