//! Entries handed over in any order and given back in key order, in bounded memory: the sort
//! before [`write_sst`](crate::write_sst) for entries that are not read in key order (a
//! vbucket's view rows, found through the back index: docs/format/rebalance.md, "Index rows").
//!
//! Entries collect in memory up to a bound; past it they are sorted and written to a chunk
//! file in the run's directory. Taking the run back: with no chunk file, the entries are
//! sorted in memory; otherwise the rest is written as a last chunk and the chunks are merged,
//! holding one entry of each in memory. Of equal keys, the one pushed first is kept. Chunk
//! files are removed when the run (or what it gave back) is dropped.
//!
//! A chunk file is a sequence of `keylen u32 | key | valuelen u32 | value`, big-endian, in key
//! order; it never outlives the process that wrote it, so it has no version or checksum.

use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::error::StoreError;

/// What an entry costs in memory beyond its key and value bytes (two vectors' headers).
const ENTRY_OVERHEAD_BYTES: usize = 48;
/// The buffer of each chunk file while it is written or merged.
const CHUNK_BUFFER_BYTES: usize = 64 * 1024;

/// One entry of a run: key and value.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// Entries pushed in any order, handed back in key order by [`SortedRun::into_sorted`].
pub struct SortedRun {
    dir: PathBuf,
    name: String,
    chunk_bytes_max: usize,
    entries: Vec<KeyValue>,
    /// What `entries` costs, overhead included.
    entries_bytes: usize,
    chunks: ChunkFiles,
}

impl SortedRun {
    /// An empty run keeping at most about `chunk_bytes_max` bytes of entries in memory; its
    /// chunk files are `dir/<name>.<n>` (`dir` must exist).
    pub fn new(dir: &Path, name: &str, chunk_bytes_max: usize) -> SortedRun {
        SortedRun {
            dir: dir.to_owned(),
            name: name.to_owned(),
            chunk_bytes_max,
            entries: Vec::new(),
            entries_bytes: 0,
            chunks: ChunkFiles(Vec::new()),
        }
    }

    pub fn push(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<(), StoreError> {
        self.entries_bytes += key.len() + value.len() + ENTRY_OVERHEAD_BYTES;
        self.entries.push((key, value));
        if self.entries_bytes > self.chunk_bytes_max {
            self.spill()?;
        }
        Ok(())
    }

    /// How many chunk files the run has written so far.
    pub fn chunks_written(&self) -> usize {
        self.chunks.0.len()
    }

    /// The entries in key order.
    pub fn into_sorted(mut self) -> Result<SortedEntries, StoreError> {
        if self.chunks.0.is_empty() {
            let entries = sorted(std::mem::take(&mut self.entries));
            return Ok(SortedEntries(Order::Memory(entries.into_iter())));
        }
        if !self.entries.is_empty() {
            self.spill()?;
        }
        let chunks = std::mem::replace(&mut self.chunks, ChunkFiles(Vec::new()));
        let mut readers = Vec::with_capacity(chunks.0.len());
        let mut heads = BinaryHeap::with_capacity(chunks.0.len());
        for (chunk, path) in chunks.0.iter().enumerate() {
            let mut reader =
                BufReader::with_capacity(CHUNK_BUFFER_BYTES, File::open(path).map_err(io_error)?);
            if let Some((key, value)) = read_entry(&mut reader)? {
                heads.push(std::cmp::Reverse(Head { key, chunk, value }));
            }
            readers.push(reader);
        }
        Ok(SortedEntries(Order::Merge(Merge {
            readers,
            heads,
            last_key: None,
            _chunks: chunks,
        })))
    }

    /// Writes the entries in memory, sorted, as the next chunk file.
    fn spill(&mut self) -> Result<(), StoreError> {
        let entries = sorted(std::mem::take(&mut self.entries));
        self.entries_bytes = 0;
        let path = self
            .dir
            .join(format!("{}.{}", self.name, self.chunks.0.len()));
        // Listed before it exists, so a file left half written is removed too.
        self.chunks.0.push(path.clone());
        let mut writer =
            BufWriter::with_capacity(CHUNK_BUFFER_BYTES, File::create(&path).map_err(io_error)?);
        for (key, value) in &entries {
            write_field(&mut writer, key)?;
            write_field(&mut writer, value)?;
        }
        writer.flush().map_err(io_error)
    }
}

/// What [`SortedRun::into_sorted`] gives back: the entries in strictly rising key order.
pub struct SortedEntries(Order);

enum Order {
    /// The run never left memory.
    Memory(std::vec::IntoIter<KeyValue>),
    Merge(Merge),
}

impl Iterator for SortedEntries {
    type Item = Result<KeyValue, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            Order::Memory(entries) => entries.next().map(Ok),
            Order::Merge(merge) => merge.next(),
        }
    }
}

/// The k-way merge of sorted chunk files.
struct Merge {
    readers: Vec<BufReader<File>>,
    /// The next entry of each chunk not yet exhausted; the smallest key (then the earliest
    /// chunk) on top.
    heads: BinaryHeap<std::cmp::Reverse<Head>>,
    /// The key given last, so that an equal key of a later chunk is dropped.
    last_key: Option<Vec<u8>>,
    /// Removed when the merge is dropped.
    _chunks: ChunkFiles,
}

/// Ordered by key, then by chunk: of equal keys the earlier chunk's (pushed first) comes first.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Head {
    key: Vec<u8>,
    chunk: usize,
    value: Vec<u8>,
}

impl Merge {
    fn next(&mut self) -> Option<Result<KeyValue, StoreError>> {
        loop {
            let std::cmp::Reverse(head) = self.heads.pop()?;
            match read_entry(&mut self.readers[head.chunk]) {
                Ok(Some((key, value))) => self.heads.push(std::cmp::Reverse(Head {
                    key,
                    chunk: head.chunk,
                    value,
                })),
                Ok(None) => {}
                Err(error) => {
                    self.heads.clear();
                    return Some(Err(error));
                }
            }
            if self.last_key.as_ref() == Some(&head.key) {
                continue;
            }
            self.last_key = Some(head.key.clone());
            return Some(Ok((head.key, head.value)));
        }
    }
}

/// The paths of a run's chunk files, removed on drop.
struct ChunkFiles(Vec<PathBuf>);

impl Drop for ChunkFiles {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// `entries` by key, the first pushed of equal keys kept (the sort is stable).
fn sorted(mut entries: Vec<KeyValue>) -> Vec<KeyValue> {
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries.dedup_by(|later, earlier| later.0 == earlier.0);
    entries
}

fn write_field(writer: &mut impl Write, bytes: &[u8]) -> Result<(), StoreError> {
    let len = u32::try_from(bytes.len())
        .map_err(|_| StoreError::Invalid("an entry of a sorted run over 4 GiB".into()))?;
    writer.write_all(&len.to_be_bytes()).map_err(io_error)?;
    writer.write_all(bytes).map_err(io_error)
}

fn read_field(reader: &mut impl Read) -> Result<Vec<u8>, StoreError> {
    let mut len = [0u8; 4];
    reader.read_exact(&mut len).map_err(io_error)?;
    let mut bytes = vec![0u8; u32::from_be_bytes(len) as usize];
    reader.read_exact(&mut bytes).map_err(io_error)?;
    Ok(bytes)
}

/// The next entry of a chunk file; `None` at its end.
fn read_entry(reader: &mut BufReader<File>) -> Result<Option<KeyValue>, StoreError> {
    if reader.fill_buf().map_err(io_error)?.is_empty() {
        return Ok(None);
    }
    let key = read_field(reader)?;
    let value = read_field(reader)?;
    Ok(Some((key, value)))
}

/// A chunk file that could not be written or read back: a full disk is `NoSpace`, anything
/// else an I/O failure whose details (the path) go to the log only.
fn io_error(error: std::io::Error) -> StoreError {
    if error.kind() == std::io::ErrorKind::StorageFull {
        return StoreError::NoSpace;
    }
    tracing::error!(%error, "a sorted run's chunk file");
    StoreError::Engine { kind: "IO error" }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Entries with repeated keys, in a scrambled order: (key, value) where the value names
    /// the push, so the test can tell which of equal keys was kept.
    fn scrambled(count: u64) -> Vec<KeyValue> {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        (0..count)
            .map(|push| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let key = format!("key-{:05}", state % (count * 3 / 4)).into_bytes();
                (key, push.to_be_bytes().to_vec())
            })
            .collect()
    }

    fn collect(run: SortedRun) -> Vec<KeyValue> {
        run.into_sorted()
            .expect("sorted")
            .collect::<Result<_, _>>()
            .expect("entries")
    }

    #[test]
    fn chunks_merged_equal_the_run_sorted_in_memory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let entries = scrambled(5_000);
        let mut expected = BTreeMap::new();
        for (key, value) in &entries {
            expected.entry(key.clone()).or_insert(value.clone());
        }
        let expected: Vec<_> = expected.into_iter().collect();

        let mut in_memory = SortedRun::new(dir.path(), "memory", usize::MAX);
        let mut chunked = SortedRun::new(dir.path(), "chunked", 4096);
        for (key, value) in entries {
            in_memory.push(key.clone(), value.clone()).expect("push");
            chunked.push(key, value).expect("push");
        }
        assert_eq!(in_memory.chunks_written(), 0);
        assert!(
            chunked.chunks_written() > 10,
            "{}",
            chunked.chunks_written()
        );
        assert_eq!(collect(in_memory), expected);
        assert_eq!(collect(chunked), expected);
        // The chunk files went with the merge.
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
    }

    #[test]
    fn an_empty_run_gives_nothing_and_a_dropped_one_leaves_no_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(collect(SortedRun::new(dir.path(), "empty", 16)).is_empty());
        let mut dropped = SortedRun::new(dir.path(), "dropped", 16);
        for (key, value) in scrambled(100) {
            dropped.push(key, value).expect("push");
        }
        assert!(dropped.chunks_written() > 0);
        drop(dropped);
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
        // One entry past the bound is one chunk; merged alone it is still the run.
        let mut single = SortedRun::new(dir.path(), "single", 1);
        single.push(b"k".to_vec(), b"v".to_vec()).expect("push");
        assert_eq!(single.chunks_written(), 1);
        assert_eq!(collect(single), [(b"k".to_vec(), b"v".to_vec())]);
    }
}
