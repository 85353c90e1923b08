//! The byte format (docs/format/revtree.md): golden bytes and every rejection.

use settee_revtree::{DecodeError, RevId, RevTree};

fn rev(text: &str) -> RevId {
    RevId::parse(text).expect("valid rev")
}

/// The example from docs/format/revtree.md: 1-a with children 2-b and 2-c (deleted).
const EXAMPLE: [u8; 15] = [
    0x01, 0x03, // version, node count
    0x00, 0x00, 0x01, 0x01, b'a', // root, live, pos 1, "a"
    0x01, 0x00, 0x01, b'b', // parent 0, live, "b"
    0x01, 0x01, 0x01, b'c', // parent 0, deleted, "c"
];

fn example_tree() -> RevTree {
    let mut tree = RevTree::new();
    tree.edit(None, rev("1-a"), false).expect("edit");
    tree.edit(Some(&rev("1-a")), rev("2-b"), false)
        .expect("edit");
    tree.merge_path(&[rev("2-c"), rev("1-a")], true);
    tree
}

fn encode(tree: &RevTree) -> Vec<u8> {
    let mut out = Vec::new();
    tree.encode(&mut out);
    out
}

#[test]
fn golden_example_encodes_and_decodes() {
    let tree = example_tree();
    assert_eq!(encode(&tree), EXAMPLE);
    assert_eq!(RevTree::decode(&EXAMPLE), Ok(tree));
}

#[test]
fn empty_tree_is_two_bytes() {
    assert_eq!(encode(&RevTree::new()), [0x01, 0x00]);
    assert_eq!(RevTree::decode(&[0x01, 0x00]), Ok(RevTree::new()));
}

#[test]
fn encode_appends() {
    let mut out = vec![0xff];
    RevTree::new().encode(&mut out);
    assert_eq!(out, [0xff, 0x01, 0x00]);
}

#[test]
fn stemmed_roots_carry_their_generation() {
    let mut tree = RevTree::new();
    tree.merge_path(&[rev("300-x"), rev("299-w")], false);
    let bytes = encode(&tree);
    // 299 = 0b10_0101011 -> LEB128 0xab 0x02
    assert_eq!(
        bytes,
        [0x01, 0x02, 0x00, 0x00, 0xab, 0x02, 0x01, b'w', 0x01, 0x00, 0x01, b'x']
    );
    assert_eq!(RevTree::decode(&bytes), Ok(tree));
}

#[test]
fn long_hashes_and_large_generations_round_trip() {
    let mut tree = RevTree::new();
    let hash = "\u{e9}".repeat(127) + "x"; // 255 bytes of UTF-8
    tree.merge_path(
        &[RevId::new(u64::from(u32::MAX), hash), rev("4294967294-y")],
        false,
    );
    let bytes = encode(&tree);
    assert_eq!(RevTree::decode(&bytes), Ok(tree));
}

#[test]
fn generations_past_u32_round_trip_up_to_u64_max() {
    // 30733d8 refused these at decode (and silently dropped them at merge, storing an empty
    // tree); CouchDB's positions are unbounded, so the format carries the whole u64.
    let mut tree = RevTree::new();
    tree.merge_path(&[rev("4294967296-aa")], false);
    tree.merge_path(
        &[RevId::new(u64::MAX, "z"), RevId::new(u64::MAX - 1, "y")],
        true,
    );
    assert_eq!(tree.len(), 3);
    let bytes = encode(&tree);
    assert_eq!(RevTree::decode(&bytes), Ok(tree));
    // 2^32 as a root: 01 01 | 00 00 80 80 80 80 10 | 02 "aa"
    let mut single = RevTree::new();
    single.merge_path(&[rev("4294967296-aa")], false);
    assert_eq!(
        encode(&single),
        [0x01, 0x01, 0x00, 0x00, 0x80, 0x80, 0x80, 0x80, 0x10, 0x02, b'a', b'a']
    );
}

#[test]
fn every_truncation_is_rejected() {
    for len in 0..EXAMPLE.len() {
        assert!(RevTree::decode(&EXAMPLE[..len]).is_err(), "prefix of {len}");
    }
}

#[test]
fn trailing_bytes_are_rejected() {
    let mut bytes = EXAMPLE.to_vec();
    bytes.push(0);
    assert_eq!(RevTree::decode(&bytes), Err(DecodeError::TrailingBytes(1)));
}

#[test]
fn unknown_version_is_rejected() {
    assert_eq!(
        RevTree::decode(&[0x02, 0x00]),
        Err(DecodeError::UnknownVersion(2))
    );
}

#[test]
fn bad_parents_are_rejected() {
    // A node naming itself (index 0 -> field 1) as parent: a cycle.
    let self_parent = [0x01, 0x01, 0x01, 0x00, 0x01, b'a'];
    assert_eq!(
        RevTree::decode(&self_parent),
        Err(DecodeError::BadParent { index: 0 })
    );
    // Node 0 naming node 1, which comes later.
    let forward = [
        0x01, 0x02, 0x02, 0x00, 0x01, b'a', 0x00, 0x00, 0x01, 0x01, b'b',
    ];
    assert_eq!(
        RevTree::decode(&forward),
        Err(DecodeError::BadParent { index: 0 })
    );
    // A huge parent index.
    let huge = [
        0x01, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00, 0x01, b'a',
    ];
    assert_eq!(
        RevTree::decode(&huge),
        Err(DecodeError::BadParent { index: 0 })
    );
}

#[test]
fn unsorted_and_duplicate_nodes_are_rejected() {
    let unsorted = [
        0x01, 0x02, 0x00, 0x00, 0x01, 0x01, b'b', 0x00, 0x00, 0x01, 0x01, b'a',
    ];
    assert_eq!(
        RevTree::decode(&unsorted),
        Err(DecodeError::NotSorted { index: 1 })
    );
    let duplicate = [
        0x01, 0x02, 0x00, 0x00, 0x01, 0x01, b'a', 0x00, 0x00, 0x01, 0x01, b'a',
    ];
    assert_eq!(
        RevTree::decode(&duplicate),
        Err(DecodeError::NotSorted { index: 1 })
    );
    // A child (pos 2) written before a root of generation 5.
    let child_after_later_root = [
        0x01, 0x03, 0x00, 0x00, 0x01, 0x01, b'a', 0x00, 0x00, 0x05, 0x01, b'e', 0x01, 0x00, 0x01,
        b'b',
    ];
    assert_eq!(
        RevTree::decode(&child_after_later_root),
        Err(DecodeError::NotSorted { index: 2 })
    );
}

#[test]
fn bad_fields_are_rejected() {
    let flags = [0x01, 0x01, 0x00, 0x02, 0x01, 0x01, b'a'];
    assert_eq!(
        RevTree::decode(&flags),
        Err(DecodeError::BadFlags { index: 0 })
    );
    let pos_zero = [0x01, 0x01, 0x00, 0x00, 0x00, 0x01, b'a'];
    assert_eq!(
        RevTree::decode(&pos_zero),
        Err(DecodeError::BadPosition { index: 0 })
    );
    // A root at u64::MAX is fine; a child of it would be at 2^64: refused, not wrapped to 0.
    let child_past_the_end = [
        0x01, 0x02, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x01,
        b'a', 0x01, 0x00, 0x01, b'b',
    ];
    assert_eq!(
        RevTree::decode(&child_past_the_end),
        Err(DecodeError::BadPosition { index: 1 })
    );
    let empty_hash = [0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00];
    assert_eq!(
        RevTree::decode(&empty_hash),
        Err(DecodeError::BadHash { index: 0 })
    );
    let not_utf8 = [0x01, 0x01, 0x00, 0x00, 0x01, 0x01, 0xff];
    assert_eq!(
        RevTree::decode(&not_utf8),
        Err(DecodeError::BadHash { index: 0 })
    );
}

#[test]
fn non_minimal_and_oversized_varints_are_rejected() {
    // pos 1 written as two bytes.
    let overlong = [0x01, 0x01, 0x00, 0x00, 0x81, 0x00, 0x01, b'a'];
    assert_eq!(
        RevTree::decode(&overlong),
        Err(DecodeError::BadVarint { offset: 4 })
    );
    // Eleven continuation bytes.
    let mut oversized = vec![0x01];
    oversized.extend([0xff; 10]);
    oversized.push(0x01);
    assert_eq!(
        RevTree::decode(&oversized),
        Err(DecodeError::BadVarint { offset: 1 })
    );
}

#[test]
fn node_count_beyond_the_input_is_rejected_before_allocating() {
    let bytes = [0x01, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00];
    assert_eq!(
        RevTree::decode(&bytes),
        Err(DecodeError::BadNodeCount(u64::from(u32::MAX)))
    );
}
