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
    fn key(&self) -> &[u8] {
        match self {
            Op::Put { key, .. } | Op::Delete { key, .. } => key,
            Op::DeleteRange { from, .. } => from,
        }
    }

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

    /// Orders the writes by column family and key, keeping the relative order of writes to the
    /// same key, so the memtable inserts them in sequence (its skip list then starts each
    /// search where the previous insert ended). A large batch of scattered keys costs a full
    /// skip-list search per key otherwise. Batches holding a range deletion stay as they are:
    /// moving a write across a range deletion would change what the batch does.
    pub fn sort_by_key(&mut self) {
        if self
            .ops
            .iter()
            .any(|op| matches!(op, Op::DeleteRange { .. }))
        {
            return;
        }
        self.ops
            .sort_by(|a, b| (a.cf() as u8, a.key()).cmp(&(b.cf() as u8, b.key())));
    }

    /// Appends all of `other`'s operations after this batch's.
    pub fn extend(&mut self, other: Batch) {
        self.bytes += other.bytes;
        self.ops.extend(other.ops);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(batch: &Batch) -> Vec<(Cf, Vec<u8>, bool)> {
        batch
            .ops
            .iter()
            .map(|op| (op.cf(), op.key().to_vec(), matches!(op, Op::Put { .. })))
            .collect()
    }

    #[test]
    fn sorting_orders_by_family_then_key_and_keeps_same_key_order() {
        let mut batch = Batch::new();
        batch.put(Cf::View, b"b".to_vec(), b"1".to_vec());
        batch.delete(Cf::View, b"a".to_vec());
        batch.put(Cf::Seq, b"z".to_vec(), b"2".to_vec());
        batch.delete(Cf::View, b"b".to_vec());
        batch.sort_by_key();
        assert_eq!(
            keys(&batch),
            [
                (Cf::Seq, b"z".to_vec(), true),
                (Cf::View, b"a".to_vec(), false),
                (Cf::View, b"b".to_vec(), true),
                (Cf::View, b"b".to_vec(), false),
            ]
        );
    }

    #[test]
    fn a_batch_with_a_range_deletion_keeps_its_order() {
        let mut batch = Batch::new();
        batch.put(Cf::View, b"b".to_vec(), b"1".to_vec());
        batch.delete_range(Cf::View, b"a".to_vec(), b"c".to_vec());
        batch.put(Cf::View, b"a".to_vec(), b"2".to_vec());
        let before = keys(&batch);
        batch.sort_by_key();
        assert_eq!(keys(&batch), before);
    }
}
