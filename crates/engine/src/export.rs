//! A vbucket's document data as sorted files, for a rebalance move (docs/format/rebalance.md,
//! section 1): the source writes the vbucket's ranges of `doc`, `seq`, `local`, `att` and `exp`
//! (every collection) from one snapshot, each key's bucket id replaced by the target's; the
//! target ingests them whole. The view rows, the manifest and the vbucket's metadata are the
//! next parts of the executor.

use std::path::Path;

use settee_storage::{write_sst, Cf, SstFile};

use crate::bucket::Bucket;
use crate::error::EngineError;
use crate::keys;

/// The families of a vbucket's document data, with the file each goes to.
pub const EXPORTED: [(Cf, &str); 5] = [
    (Cf::Doc, "doc.sst"),
    (Cf::Seq, "seq.sst"),
    (Cf::Local, "local.sst"),
    (Cf::Att, "att.sst"),
    (Cf::Exp, "exp.sst"),
];

/// One file of an export: its column family and what `write_sst` made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportedFile {
    pub cf: Cf,
    pub file: SstFile,
}

/// What [`Bucket::export_vbucket_files`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VbucketExport {
    /// One per family whose range is not empty.
    pub files: Vec<ExportedFile>,
    /// The vbucket's high seqno in the snapshot the files were read from.
    pub snapshot_seqno: u64,
}

impl Bucket {
    /// Writes `vbucket`'s document data as it stands now into `dir` (which must exist), one
    /// sorted file per family, every key's bucket id replaced by `target_bucket_id`. Blocking:
    /// call it off the async threads.
    pub fn export_vbucket_files(
        &self,
        vbucket: u16,
        dir: &Path,
        target_bucket_id: u32,
    ) -> Result<VbucketExport, EngineError> {
        if vbucket >= self.vbuckets {
            return Err(EngineError::Invalid(format!("no vbucket {vbucket}")));
        }
        let snapshot = self.store.snapshot();
        let stats_key = keys::meta::vb_stats(self.id, vbucket);
        let snapshot_seqno = snapshot
            .scan(Cf::Meta, &stats_key, &keys::prefix_end(&stats_key))
            .next()
            .transpose()?
            .and_then(|(_, value)| Some(u64::from_be_bytes(value.get(..8)?.try_into().ok()?)))
            .unwrap_or(0);
        let target = target_bucket_id.to_be_bytes();
        let mut files = Vec::new();
        for (cf, name) in EXPORTED {
            // Collection 0's short range, then every other collection's long range (the
            // `seq` family has only the short one): in key order.
            let mut ranges = vec![keys::vb_range(self.id, vbucket)];
            if cf != Cf::Seq {
                ranges.push(keys::long_range(self.id, vbucket));
            }
            let entries = ranges.iter().flat_map(|(lower, upper)| {
                snapshot.scan(cf, lower, upper).map(|entry| {
                    entry.map(|(key, value)| {
                        let mut moved = key.into_vec();
                        moved[..4].copy_from_slice(&target);
                        (moved, value.into_vec())
                    })
                })
            });
            if let Some(file) = write_sst(&dir.join(name), entries)? {
                files.push(ExportedFile { cf, file });
            }
        }
        Ok(VbucketExport {
            files,
            snapshot_seqno,
        })
    }

    /// Ingests the files of another node's [`Bucket::export_vbucket_files`] made for this
    /// bucket: each must hold keys of this bucket's `vbucket` only (checked before anything is
    /// ingested). Blocking.
    pub fn ingest_vbucket_files(
        &self,
        vbucket: u16,
        files: &[ExportedFile],
    ) -> Result<(), EngineError> {
        if vbucket >= self.vbuckets {
            return Err(EngineError::Invalid(format!("no vbucket {vbucket}")));
        }
        let short = keys::vb_range(self.id, vbucket);
        let long = keys::long_range(self.id, vbucket);
        let inside = |key: &[u8], cf: Cf| {
            let within = |(lower, upper): &(Vec<u8>, Vec<u8>)| {
                key >= lower.as_slice() && key < upper.as_slice()
            };
            within(&short) || (cf != Cf::Seq && within(&long))
        };
        for exported in files {
            let file = &exported.file;
            if !EXPORTED.iter().any(|(cf, _)| *cf == exported.cf)
                || !inside(&file.smallest, exported.cf)
                || !inside(&file.largest, exported.cf)
            {
                return Err(EngineError::Invalid(format!(
                    "a file of keys outside vbucket {vbucket} of this bucket"
                )));
            }
        }
        for (cf, _) in EXPORTED {
            let of_cf: Vec<SstFile> = files
                .iter()
                .filter(|exported| exported.cf == cf)
                .map(|exported| exported.file.clone())
                .collect();
            self.store.ingest(cf, &of_cf)?;
        }
        // The files may have brought purge markers (their index is in the `att` file).
        self.markers.note(vbucket);
        Ok(())
    }
}
