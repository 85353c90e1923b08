//! Where a target keeps a move's files while they arrive (docs/format/rebalance.md, section 2,
//! "Staging"): `DATA_DIR/moves/<move>-<attempt>/` (0700), one file per export file name, each
//! file's received length being its size on disk. A chunk is appended only at exactly the
//! bytes received so far and only once its crc32c matches, and it is fsynced before it is
//! acknowledged, so a target that restarts answers the next MoveOpen with what it truly holds.
//! A resent chunk (an earlier offset) is acknowledged without writing; a chunk past the end
//! is refused. A new attempt of a move discards the staging of its earlier attempts.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::{MoveFileError, EXPORTED, MANIFEST_FILE, VIEW_FILE};

/// A chunk is at most 1 MiB (rebalance.md, section 2 bounds).
pub const CHUNK_BYTES_MAX: usize = 1 << 20;

/// The staging directories of a node's incoming moves.
#[derive(Clone, Debug)]
pub struct Staging {
    root: PathBuf,
}

/// One attempt of one move, staged.
#[derive(Clone, Debug)]
pub struct StagedAttempt {
    dir: PathBuf,
}

impl Staging {
    /// `root` (`DATA_DIR/moves`), created 0700 if missing.
    pub fn open(root: &Path) -> Result<Staging, MoveFileError> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(root)
            .map_err(io)?;
        Ok(Staging {
            root: root.to_path_buf(),
        })
    }

    /// The staging of `attempt` of `move_id`, created if new; the staging of every earlier
    /// attempt of the move is removed. A later attempt's existence is refused: this one is
    /// over.
    pub fn attempt(&self, move_id: u64, attempt: u32) -> Result<StagedAttempt, MoveFileError> {
        for (held_move, held_attempt) in self.held()? {
            if held_move != move_id {
                continue;
            }
            if held_attempt > attempt {
                return Err(MoveFileError(format!(
                    "move {move_id} is at attempt {held_attempt}, not {attempt}"
                )));
            }
            if held_attempt < attempt {
                self.remove(held_move, held_attempt)?;
            }
        }
        let dir = self.root.join(dir_name(move_id, attempt));
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(io)?;
        Ok(StagedAttempt { dir })
    }

    /// Removes the staging of `attempt` of `move_id` (after its ingest, or on abort).
    pub fn remove(&self, move_id: u64, attempt: u32) -> Result<(), MoveFileError> {
        match fs::remove_dir_all(self.root.join(dir_name(move_id, attempt))) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(io(error)),
            _ => Ok(()),
        }
    }

    /// Removes the staging of every move `keep` does not keep (at start: the moves the
    /// committed map no longer lists), and anything in the root that is not a staging.
    pub fn retain(&self, keep: impl Fn(u64) -> bool) -> Result<(), MoveFileError> {
        for entry in fs::read_dir(&self.root).map_err(io)? {
            let entry = entry.map_err(io)?;
            let name = entry.file_name();
            let kept = name
                .to_str()
                .and_then(parse_dir_name)
                .is_some_and(|(move_id, _)| keep(move_id));
            if !kept {
                let path = entry.path();
                let removed = if path.is_dir() {
                    fs::remove_dir_all(&path)
                } else {
                    fs::remove_file(&path)
                };
                removed.map_err(io)?;
            }
        }
        Ok(())
    }

    /// The (move, attempt) of every staging present.
    pub fn held(&self) -> Result<Vec<(u64, u32)>, MoveFileError> {
        let mut held = Vec::new();
        for entry in fs::read_dir(&self.root).map_err(io)? {
            let entry = entry.map_err(io)?;
            if let Some(parsed) = entry.file_name().to_str().and_then(parse_dir_name) {
                held.push(parsed);
            }
        }
        held.sort_unstable();
        Ok(held)
    }
}

impl StagedAttempt {
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Each export file held so far and its bytes (MoveOpened's list), in name order.
    pub fn received(&self) -> Result<Vec<(String, u64)>, MoveFileError> {
        let mut files = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io)? {
            let entry = entry.map_err(io)?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if is_export_file(&name) {
                files.push((name, entry.metadata().map_err(io)?.len()));
            }
        }
        files.sort();
        Ok(files)
    }

    /// Appends `bytes` to `name` at `offset` if that is exactly what is held of it and their
    /// crc32c is `crc32c`, durably; returns the bytes held of it after (MoveChunkAck). A chunk
    /// the file already holds (an earlier offset) writes nothing.
    pub fn write_chunk(
        &self,
        name: &str,
        offset: u64,
        crc32c: u32,
        bytes: &[u8],
    ) -> Result<u64, MoveFileError> {
        if !is_export_file(name) {
            return Err(MoveFileError(format!("{name} is not a file of an export")));
        }
        if bytes.is_empty() || bytes.len() > CHUNK_BYTES_MAX {
            return Err(MoveFileError("a chunk is 1 byte to 1 MiB".into()));
        }
        let path = self.dir.join(name);
        let held = match fs::metadata(&path) {
            Ok(metadata) => metadata.len(),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => 0,
            Err(error) => return Err(io(error)),
        };
        let end = offset
            .checked_add(bytes.len() as u64)
            .ok_or_else(|| MoveFileError("a chunk past the end of u64".into()))?;
        if end <= held {
            return Ok(held);
        }
        if offset != held {
            return Err(MoveFileError(format!(
                "{name}: a chunk at {offset}, {held} bytes are held"
            )));
        }
        if crc32c::crc32c(bytes) != crc32c {
            return Err(MoveFileError(format!(
                "{name}: the chunk at {offset} does not match its crc32c"
            )));
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(io)?;
        file.write_all(bytes).map_err(io)?;
        file.sync_data().map_err(io)?;
        Ok(end)
    }
}

fn is_export_file(name: &str) -> bool {
    name == MANIFEST_FILE
        || EXPORTED
            .iter()
            .chain([&VIEW_FILE])
            .any(|(_, known)| *known == name)
}

fn dir_name(move_id: u64, attempt: u32) -> String {
    format!("{move_id}-{attempt}")
}

fn parse_dir_name(name: &str) -> Option<(u64, u32)> {
    let (move_id, attempt) = name.split_once('-')?;
    let parsed = (move_id.parse().ok()?, attempt.parse().ok()?);
    (dir_name(parsed.0, parsed.1) == name).then_some(parsed)
}

fn io(error: std::io::Error) -> MoveFileError {
    MoveFileError(format!("a move's staging: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crc(bytes: &[u8]) -> u32 {
        crc32c::crc32c(bytes)
    }

    #[test]
    fn chunks_are_appended_in_order_once_and_checked() {
        let root = tempfile::tempdir().expect("dir");
        let staging = Staging::open(&root.path().join("moves")).expect("open");
        let attempt = staging.attempt(17, 1).expect("attempt");
        assert_eq!(attempt.received().expect("list"), vec![]);
        assert_eq!(
            attempt.write_chunk("doc.sst", 0, crc(b"abc"), b"abc"),
            Ok(3)
        );
        // A resent chunk is acknowledged without writing.
        assert_eq!(
            attempt.write_chunk("doc.sst", 0, crc(b"abc"), b"abc"),
            Ok(3)
        );
        // A chunk past what is held, or with a wrong crc32c, is refused; nothing is written.
        assert!(attempt.write_chunk("doc.sst", 4, crc(b"d"), b"d").is_err());
        assert!(attempt
            .write_chunk("doc.sst", 3, crc(b"d") ^ 1, b"d")
            .is_err());
        assert_eq!(
            attempt.write_chunk("doc.sst", 3, crc(b"def"), b"def"),
            Ok(6)
        );
        assert_eq!(attempt.write_chunk("seq.sst", 0, crc(b"s"), b"s"), Ok(1));
        for refused in ["../doc.sst", "other.sst", ""] {
            assert!(
                attempt.write_chunk(refused, 0, crc(b"x"), b"x").is_err(),
                "{refused}"
            );
        }
        assert!(attempt.write_chunk("att.sst", 0, crc(b""), b"").is_err());
        assert_eq!(
            attempt.received().expect("list"),
            vec![("doc.sst".to_owned(), 6), ("seq.sst".to_owned(), 1)]
        );
        assert_eq!(
            std::fs::read(attempt.dir().join("doc.sst")).expect("read"),
            b"abcdef"
        );
        // Opened again (a restarted target, a reconnected source): what is held is known.
        let again = staging.attempt(17, 1).expect("again");
        assert_eq!(again.received().expect("list").len(), 2);
    }

    #[test]
    fn a_new_attempt_discards_the_old_and_retain_drops_unlisted_moves() {
        let root = tempfile::tempdir().expect("dir");
        let staging = Staging::open(root.path()).expect("open");
        let first = staging.attempt(5, 1).expect("attempt");
        first
            .write_chunk("doc.sst", 0, crc(b"old"), b"old")
            .expect("chunk");
        staging.attempt(9, 3).expect("another move");
        let second = staging.attempt(5, 2).expect("attempt 2");
        assert_eq!(second.received().expect("list"), vec![]);
        assert_eq!(staging.held().expect("held"), vec![(5, 2), (9, 3)]);
        // An earlier attempt after a later one is refused.
        assert!(staging.attempt(5, 1).is_err());
        std::fs::write(root.path().join("stray"), b"x").expect("stray");
        staging.retain(|move_id| move_id == 9).expect("retain");
        assert_eq!(staging.held().expect("held"), vec![(9, 3)]);
        assert!(!root.path().join("stray").exists());
        staging.remove(9, 3).expect("remove");
        staging.remove(9, 3).expect("removing twice is no error");
        assert_eq!(staging.held().expect("held"), vec![]);
    }

    #[test]
    fn only_canonical_directory_names_are_stagings() {
        assert_eq!(parse_dir_name("17-2"), Some((17, 2)));
        for other in ["17", "17-", "-2", "017-2", "17-02", "17-2-3", "a-1", "+1-1"] {
            assert_eq!(parse_dir_name(other), None, "{other}");
        }
    }
}
