//! Keys and values of the `view` column family and the index metadata in `meta`; the layout is
//! specified in `docs/format/views.md`.

pub const KIND_ROW: u8 = 0x01;
pub const KIND_BACK: u8 = 0x02;
pub const KIND_STATE: u8 = 0x03;
const STATE_VERSION: u8 = 2;
const BACK_VERSION: u8 = 1;

pub const META_NEXT_GROUP_ID: &[u8] = b"view/next_group_id";

/// The `meta` key naming a group by its signature: `view/sig/` for collection 0 (as before
/// collections), `view/csig/` with the collection id for the others
/// (`docs/format/collections.md`, CF `view`).
pub fn meta_signature(bucket: u32, collection: u32, signature: &[u8; 16]) -> Vec<u8> {
    let mut key = meta_signature_prefix(bucket, collection);
    key.extend_from_slice(signature);
    key
}

/// Where one collection's signature keys start.
pub fn meta_signature_prefix(bucket: u32, collection: u32) -> Vec<u8> {
    let mut key = if collection == 0 {
        b"view/sig/".to_vec()
    } else {
        b"view/csig/".to_vec()
    };
    key.extend_from_slice(&bucket.to_be_bytes());
    if collection != 0 {
        key.extend_from_slice(&collection.to_be_bytes());
    }
    key
}

pub fn meta_group(bucket: u32, group: u32) -> Vec<u8> {
    let mut key = meta_group_prefix(bucket);
    key.extend_from_slice(&group.to_be_bytes());
    key
}

/// Where one bucket's group records start (every collection's).
pub fn meta_group_prefix(bucket: u32) -> Vec<u8> {
    let mut key = b"view/group/".to_vec();
    key.extend_from_slice(&bucket.to_be_bytes());
    key
}

pub fn group_prefix(bucket: u32, group: u32) -> Vec<u8> {
    let mut key = Vec::with_capacity(9);
    key.extend_from_slice(&bucket.to_be_bytes());
    key.extend_from_slice(&group.to_be_bytes());
    key
}

/// The first key after every key that starts with `prefix`: the layout's own rule.
pub use settee_keys::prefix_end;

pub fn view_prefix(bucket: u32, group: u32, view: u16) -> Vec<u8> {
    let mut key = group_prefix(bucket, group);
    key.push(KIND_ROW);
    key.extend_from_slice(&view.to_be_bytes());
    key
}

/// Appends the escaped document id: `0x00` becomes `0x00 0xFF`, then `0x00 0x01`.
pub fn push_escaped_id(id: &[u8], out: &mut Vec<u8>) {
    for &byte in id {
        out.push(byte);
        if byte == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

fn unescape_id(escaped: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(escaped.len());
    let mut at = 0;
    while at < escaped.len() {
        let byte = escaped[at];
        if byte == 0 {
            match escaped.get(at + 1) {
                Some(0xFF) => out.push(0),
                Some(0x01) if at + 2 == escaped.len() => return Some(out),
                _ => return None,
            }
            at += 2;
        } else {
            out.push(byte);
            at += 1;
        }
    }
    None
}

pub fn row_key(view_prefix: &[u8], encoded_key: &[u8], id: &[u8], emit: u16) -> Vec<u8> {
    let mut key = Vec::with_capacity(view_prefix.len() + encoded_key.len() + id.len() + 6);
    key.extend_from_slice(view_prefix);
    key.extend_from_slice(encoded_key);
    push_escaped_id(id, &mut key);
    key.extend_from_slice(&emit.to_be_bytes());
    key
}

pub fn back_key(bucket: u32, group: u32, id: &[u8]) -> Vec<u8> {
    let mut key = group_prefix(bucket, group);
    key.push(KIND_BACK);
    key.extend_from_slice(id);
    key
}

pub fn state_key(bucket: u32, group: u32) -> Vec<u8> {
    let mut key = group_prefix(bucket, group);
    key.push(KIND_STATE);
    key
}

pub use settee_engine::seqvec::{get_varint, put_varint};

/// Row value: `enclen varint | keylen varint | key JSON | value JSON`. The encoded key's
/// length lets a reader find the document id inside the row key without decoding the key.
pub fn row_value(encoded_len: usize, key_json: &[u8], value_json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key_json.len() + value_json.len() + 4);
    put_varint(&mut out, encoded_len as u64);
    put_varint(&mut out, key_json.len() as u64);
    out.extend_from_slice(key_json);
    out.extend_from_slice(value_json);
    out
}

/// A stored row, split: (document id, key JSON, value JSON).
pub fn split_row<'a>(
    view_prefix_len: usize,
    key: &'a [u8],
    value: &'a [u8],
) -> Option<(Vec<u8>, &'a [u8], &'a [u8])> {
    let mut at = 0;
    let encoded_len = get_varint(value, &mut at)? as usize;
    let key_len = get_varint(value, &mut at)? as usize;
    let key_json = value.get(at..at + key_len)?;
    let value_json = value.get(at + key_len..)?;
    let id_start = view_prefix_len + encoded_len;
    let id_end = key.len().checked_sub(2)?;
    let id = unescape_id(key.get(id_start..id_end)?)?;
    Some((id, key_json, value_json))
}

/// One row a document emitted, as its back index entry remembers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackEntry {
    pub view: u16,
    pub emit: u16,
    pub encoded_key: Vec<u8>,
}

pub fn encode_back(entries: &[BackEntry]) -> Vec<u8> {
    let mut out = vec![BACK_VERSION];
    for entry in entries {
        out.extend_from_slice(&entry.view.to_be_bytes());
        out.extend_from_slice(&entry.emit.to_be_bytes());
        put_varint(&mut out, entry.encoded_key.len() as u64);
        out.extend_from_slice(&entry.encoded_key);
    }
    out
}

pub fn decode_back(raw: &[u8]) -> Option<Vec<BackEntry>> {
    if *raw.first()? != BACK_VERSION {
        return None;
    }
    let mut entries = Vec::new();
    let mut at = 1;
    while at < raw.len() {
        let view = u16::from_be_bytes(raw.get(at..at + 2)?.try_into().ok()?);
        let emit = u16::from_be_bytes(raw.get(at + 2..at + 4)?.try_into().ok()?);
        at += 4;
        let len = get_varint(raw, &mut at)? as usize;
        let encoded_key = raw.get(at..at + len)?.to_vec();
        at += len;
        entries.push(BackEntry {
            view,
            emit,
            encoded_key,
        });
    }
    Some(entries)
}

/// The group's progress: per vbucket seqno reached, per view row count, and the purge
/// sequence of its collection it has applied (partitions.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupState {
    pub seqnos: Vec<u64>,
    pub row_counts: Vec<u64>,
    /// 0 in a version 1 state (written before the purge log): then every purge the
    /// collection had is unknown to the group, and catching up from the log finds the gap.
    pub purge_seq: u64,
}

impl GroupState {
    pub fn new(vbuckets: u16, views: usize) -> GroupState {
        GroupState {
            seqnos: vec![0; vbuckets as usize],
            row_counts: vec![0; views],
            purge_seq: 0,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(13 + 8 * (self.seqnos.len() + self.row_counts.len()));
        out.push(STATE_VERSION);
        out.extend_from_slice(&(self.seqnos.len() as u16).to_be_bytes());
        out.extend_from_slice(&(self.row_counts.len() as u16).to_be_bytes());
        for number in self
            .seqnos
            .iter()
            .chain(&self.row_counts)
            .chain([&self.purge_seq])
        {
            out.extend_from_slice(&number.to_be_bytes());
        }
        out
    }

    pub fn decode(raw: &[u8]) -> Option<GroupState> {
        let version = *raw.first()?;
        if version != 1 && version != STATE_VERSION {
            return None;
        }
        let vbuckets = u16::from_be_bytes(raw.get(1..3)?.try_into().ok()?) as usize;
        let views = u16::from_be_bytes(raw.get(3..5)?.try_into().ok()?) as usize;
        let number = |index: usize| -> Option<u64> {
            let at = 5 + index * 8;
            Some(u64::from_be_bytes(raw.get(at..at + 8)?.try_into().ok()?))
        };
        let purge_seq = match version {
            1 => 0,
            _ => number(vbuckets + views)?,
        };
        Some(GroupState {
            seqnos: (0..vbuckets).map(number).collect::<Option<_>>()?,
            row_counts: (vbuckets..vbuckets + views)
                .map(number)
                .collect::<Option<_>>()?,
            purge_seq,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_with_zero_bytes_round_trip_and_sort_by_raw_bytes() {
        let prefix = view_prefix(1, 2, 3);
        let encoded = settee_collate::encode_key(&serde_json::json!("k"));
        let ids: [&[u8]; 4] = [b"a", b"a\0", b"a\0b", b"ab"];
        let keys: Vec<Vec<u8>> = ids
            .iter()
            .map(|id| row_key(&prefix, &encoded, id, 0))
            .collect();
        for pair in keys.windows(2) {
            assert!(pair[0] < pair[1]);
        }
        for (id, key) in ids.iter().zip(&keys) {
            let value = row_value(encoded.len(), b"\"k\"", b"1");
            let (got, key_json, value_json) = split_row(prefix.len(), key, &value).expect("row");
            assert_eq!(&got, id);
            assert_eq!((key_json, value_json), (&b"\"k\""[..], &b"1"[..]));
        }
    }

    #[test]
    fn back_index_and_state_round_trip() {
        let entries = vec![
            BackEntry {
                view: 0,
                emit: 0,
                encoded_key: vec![1, 2, 3],
            },
            BackEntry {
                view: 2,
                emit: 1,
                encoded_key: vec![],
            },
        ];
        assert_eq!(decode_back(&encode_back(&entries)), Some(entries));
        let mut state = GroupState::new(4, 2);
        state.seqnos[3] = 77;
        state.row_counts[1] = 5;
        state.purge_seq = 3;
        assert_eq!(GroupState::decode(&state.encode()), Some(state.clone()));
        assert_eq!(decode_back(&[9]), None);
        assert_eq!(GroupState::decode(&[1, 0]), None);
        // Version 1 (before the purge log): the same numbers, purge sequence unknown (0).
        let mut v1 = state.encode();
        v1[0] = 1;
        v1.truncate(v1.len() - 8);
        let read = GroupState::decode(&v1).expect("version 1");
        assert_eq!(
            (read.seqnos, read.row_counts, read.purge_seq),
            (state.seqnos, state.row_counts, 0)
        );
    }
}
