//! A rebalance move's file set (docs/format/rebalance.md, section 1): the sorted files a
//! vbucket's export is made of, by name and column family, and the manifest (`manifest.json`,
//! format 1) that names them — size, keys, crc32c, first and last key — with what the target
//! adopts (the vbucket's counters, its failover log, each index group's position and rows).
//! The source writes the manifest last; the target checks every file against it before it
//! ingests anything. The engine exports and ingests (`settee_engine::export`); this crate is
//! the format between them, where a target stages a move's files while they arrive
//! (`staging.rs`) and the throttle every move of a node shares (`throttle.rs`).

mod staging;
mod throttle;

pub use staging::{StagedAttempt, Staging, CHUNK_BYTES_MAX};
pub use throttle::{Throttle, THROTTLE_MBPS_DEFAULT};

use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};
use settee_storage::{Cf, SstFile};

/// The families of a vbucket's document data, with the file each goes to.
pub const EXPORTED: [(Cf, &str); 5] = [
    (Cf::Doc, "doc.sst"),
    (Cf::Seq, "seq.sst"),
    (Cf::Local, "local.sst"),
    (Cf::Att, "att.sst"),
    (Cf::Exp, "exp.sst"),
];

/// The file of a vbucket's index rows (the `view` family).
pub const VIEW_FILE: (Cf, &str) = (Cf::View, "view.sst");

pub const MANIFEST_FILE: &str = "manifest.json";
/// The manifest's `format`: a target refuses any other.
pub const MANIFEST_FORMAT: u32 = 1;
/// A manifest is at most this long (it travels in one MoveCommit).
pub const MANIFEST_BYTES_MAX: usize = 1 << 20;
/// A failover log has at most this many entries (dcp.md).
pub const FAILOVER_ENTRIES_MAX: usize = 25;

/// One file of an export: its column family and what `write_sst` made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportedFile {
    pub cf: Cf,
    pub file: SstFile,
}

/// Why a manifest or a file is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct MoveFileError(pub String);

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

impl MoveManifest {
    /// Writes `manifest.json` into `dir`, durably (written last: its presence says the
    /// export is whole).
    pub fn write(&self, dir: &Path) -> Result<(), MoveFileError> {
        let bytes = serde_json::to_vec(self).map_err(|error| MoveFileError(error.to_string()))?;
        if bytes.len() > MANIFEST_BYTES_MAX {
            return Err(MoveFileError("the manifest is over 1 MiB".into()));
        }
        let path = dir.join(MANIFEST_FILE);
        std::fs::write(&path, &bytes).map_err(io)?;
        std::fs::File::open(&path)
            .and_then(|file| file.sync_all())
            .map_err(io)
    }

    /// A manifest as received (at most 1 MiB of JSON in this layout, of format 1).
    pub fn parse(bytes: &[u8]) -> Result<MoveManifest, MoveFileError> {
        if bytes.is_empty() || bytes.len() > MANIFEST_BYTES_MAX {
            return Err(MoveFileError("a manifest is 1 byte to 1 MiB".into()));
        }
        let manifest: MoveManifest = serde_json::from_slice(bytes)
            .map_err(|error| MoveFileError(format!("the manifest: {error}")))?;
        if manifest.format != MANIFEST_FORMAT {
            return Err(MoveFileError(format!(
                "manifest format {} (this node reads {MANIFEST_FORMAT})",
                manifest.format
            )));
        }
        Ok(manifest)
    }

    /// The files in `dir` as the manifest names them, each checked whole: its name and family
    /// one of the export's, named once, its size and crc32c those of the manifest.
    pub fn checked_files(&self, dir: &Path) -> Result<Vec<ExportedFile>, MoveFileError> {
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

/// The export file of family `cf`.
pub fn file_name(cf: Cf) -> Option<&'static str> {
    EXPORTED
        .into_iter()
        .chain([VIEW_FILE])
        .find(|(known, _)| *known == cf)
        .map(|(_, name)| name)
}

/// The crc32c of the file at `path`, read in 1 MiB pieces.
pub fn crc32c_of(path: &Path) -> Result<u32, MoveFileError> {
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

/// Bytes written as lowercase or uppercase hex digits, two per byte.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}

/// Bytes as lowercase hex digits.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

fn invalid(reason: String) -> MoveFileError {
    MoveFileError(reason)
}

fn io(error: std::io::Error) -> MoveFileError {
    MoveFileError(format!("an export file: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_what_is_not_hex() {
        let bytes = [0x00, 0x7f, 0x80, 0xff, 0x12];
        assert_eq!(hex(&bytes), "007f80ff12");
        assert_eq!(unhex("007f80FF12"), Some(bytes.to_vec()));
        for bad in ["0", "+1", "zz", "0x00"] {
            assert_eq!(unhex(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_manifest_of_another_format_or_shape_or_size_is_refused() {
        let manifest = MoveManifest {
            format: MANIFEST_FORMAT,
            move_id: 3,
            attempt: 1,
            bucket: "db".into(),
            vbucket: 2,
            vbucket_count: 4,
            snapshot_seqno: 9,
            target_bucket_id: 5,
            vbstats: Counts {
                high_seqno: 9,
                live: 3,
                deleted: 1,
                bytes: 300,
            },
            collections: Vec::new(),
            failover_log: vec![(77, 0)],
            groups: Vec::new(),
            files: Vec::new(),
        };
        let json = serde_json::to_vec(&manifest).expect("json");
        assert_eq!(MoveManifest::parse(&json), Ok(manifest.clone()));
        let mut other = serde_json::to_value(&manifest).expect("json");
        other["format"] = 2.into();
        assert!(MoveManifest::parse(other.to_string().as_bytes()).is_err());
        assert!(MoveManifest::parse(b"").is_err());
        assert!(MoveManifest::parse(b"{\"format\":1}").is_err());
        assert!(MoveManifest::parse(&vec![b' '; MANIFEST_BYTES_MAX + 1]).is_err());
    }

    #[test]
    fn files_are_checked_whole_against_the_manifest() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("doc.sst"), b"sorted bytes").expect("write");
        let named = ManifestFile {
            name: "doc.sst".into(),
            cf: "doc".into(),
            bytes: 12,
            keys: 1,
            crc32c: crc32c::crc32c(b"sorted bytes"),
            smallest: hex(b"a"),
            largest: hex(b"b"),
        };
        let manifest = |files: Vec<ManifestFile>| MoveManifest {
            format: MANIFEST_FORMAT,
            move_id: 1,
            attempt: 1,
            bucket: "db".into(),
            vbucket: 0,
            vbucket_count: 1,
            snapshot_seqno: 0,
            target_bucket_id: 1,
            vbstats: Counts {
                high_seqno: 0,
                live: 0,
                deleted: 0,
                bytes: 0,
            },
            collections: Vec::new(),
            failover_log: vec![(1, 0)],
            groups: Vec::new(),
            files,
        };
        let files = manifest(vec![named.clone()])
            .checked_files(dir.path())
            .expect("whole");
        assert_eq!(files[0].cf, Cf::Doc);
        assert_eq!(
            (
                files[0].file.smallest.as_slice(),
                files[0].file.largest.as_slice()
            ),
            (&b"a"[..], &b"b"[..])
        );
        let refused = |file: ManifestFile| manifest(vec![file]).checked_files(dir.path()).is_err();
        assert!(refused(ManifestFile {
            crc32c: named.crc32c ^ 1,
            ..named.clone()
        }));
        assert!(refused(ManifestFile {
            bytes: 11,
            ..named.clone()
        }));
        assert!(refused(ManifestFile {
            cf: "seq".into(),
            ..named.clone()
        }));
        assert!(refused(ManifestFile {
            name: "../doc.sst".into(),
            ..named.clone()
        }));
        assert!(refused(ManifestFile {
            smallest: "zz".into(),
            ..named.clone()
        }));
        assert!(manifest(vec![named.clone(), named])
            .checked_files(dir.path())
            .is_err());
    }
}
