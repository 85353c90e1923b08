use crate::store::Cf;

/// One write operation inside a [`Batch`].
#[derive(Debug, Clone)]
pub(crate) enum Op {
    Put {
        cf: Cf,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        cf: Cf,
        key: Vec<u8>,
    },
    /// Deletes keys in `[from, to)`.
    DeleteRange {
        cf: Cf,
        from: Vec<u8>,
        to: Vec<u8>,
    },
}

impl Op {
    pub(crate) fn cf(&self) -> Cf {
        match self {
            Op::Put { cf, .. } | Op::Delete { cf, .. } | Op::DeleteRange { cf, .. } => *cf,
        }
    }
}

/// A set of writes applied atomically by [`crate::Store::commit`].
///
/// The batch is plain data (no RocksDB handle) so it can be built anywhere, moved between threads
/// and merged with other batches by the committer.
#[derive(Debug, Default, Clone)]
pub struct Batch {
    pub(crate) ops: Vec<Op>,
    pub(crate) bytes: usize,
}

impl Batch {
    pub fn new() -> Batch {
        Batch::default()
    }

    pub fn put(&mut self, cf: Cf, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        let (key, value) = (key.into(), value.into());
        self.bytes += key.len() + value.len();
        self.ops.push(Op::Put { cf, key, value });
    }

    pub fn delete(&mut self, cf: Cf, key: impl Into<Vec<u8>>) {
        let key = key.into();
        self.bytes += key.len();
        self.ops.push(Op::Delete { cf, key });
    }

    /// Deletes every key `k` with `from <= k < to`.
    pub fn delete_range(&mut self, cf: Cf, from: impl Into<Vec<u8>>, to: impl Into<Vec<u8>>) {
        let (from, to) = (from.into(), to.into());
        self.bytes += from.len() + to.len();
        self.ops.push(Op::DeleteRange { cf, from, to });
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Approximate payload size, used to bound group commits.
    pub fn size_bytes(&self) -> usize {
        self.bytes
    }

    /// Appends all of `other`'s operations after this batch's.
    pub fn extend(&mut self, other: Batch) {
        self.bytes += other.bytes;
        self.ops.extend(other.ops);
    }
}
