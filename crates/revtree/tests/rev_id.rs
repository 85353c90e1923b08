//! Parsing, printing and ordering revision ids.

use std::cmp::Ordering;

use settee_revtree::{Leaf, RevId, REV_HASH_BYTES_MAX, REV_POS_MAX};

#[test]
fn parse_splits_at_the_first_dash() {
    assert_eq!(RevId::parse("1-abc"), Some(RevId::new(1, "abc")));
    assert_eq!(RevId::parse("12-a-b-c"), Some(RevId::new(12, "a-b-c")));
    assert_eq!(RevId::parse("4294967296-x"), Some(RevId::new(1 << 32, "x")));
    assert_eq!(
        RevId::parse("18446744073709551615-x"),
        Some(RevId::new(REV_POS_MAX, "x"))
    );
}

#[test]
fn parse_rejects_malformed_ids() {
    for text in [
        "",
        "1",
        "1-",
        "-abc",
        "0-x",
        "x-y",
        "01-x",
        "+1-x",
        " 1-x",
        "1a-x",
        "18446744073709551616-x",
        "99999999999999999999-x",
        "99999999999999999999999-x",
        "000000000000000000001-x",
    ] {
        assert_eq!(RevId::parse(text), None, "{text:?}");
    }
}

#[test]
fn parse_bounds_the_hash_length() {
    let longest = format!("1-{}", "h".repeat(REV_HASH_BYTES_MAX));
    assert!(RevId::parse(&longest).is_some());
    let too_long = format!("1-{}", "h".repeat(REV_HASH_BYTES_MAX + 1));
    assert_eq!(RevId::parse(&too_long), None);
}

#[test]
fn display_is_the_inverse_of_parse() {
    for text in [
        "1-967a00dff5e02add41819138abb3284d",
        "7-x-y",
        "3-\u{e9}t\u{e9}",
        "10-a",
        "909-b",
        "18446744073709551615-c",
    ] {
        let rev = RevId::parse(text).expect("valid");
        assert_eq!(rev.to_string(), text);
        // Display honours no width or fill: it is the id's text.
        assert_eq!(format!("{rev:>40}"), text);
    }
}

#[test]
fn validity_bounds() {
    assert!(RevId::new(1, "a").is_valid());
    assert!(!RevId::new(0, "a").is_valid());
    assert!(RevId::new(REV_POS_MAX, "a").is_valid());
    assert_eq!(RevId::new(REV_POS_MAX, "a").child_pos(), None);
    assert_eq!(RevId::new(7, "a").child_pos(), Some(8));
    assert_eq!(RevId::next_pos(None), Some(1));
    assert!(!RevId::new(1, "").is_valid());
}

#[test]
fn winner_order_prefers_live_then_pos_then_hash() {
    let leaf = |text: &str, deleted: bool| Leaf {
        rev: RevId::parse(text).expect("valid"),
        deleted,
    };
    // A live leaf beats a deleted one even with a lower generation.
    assert_eq!(
        leaf("1-a", false).winner_order(&leaf("9-z", true)),
        Ordering::Less
    );
    assert_eq!(
        leaf("3-a", false).winner_order(&leaf("2-z", false)),
        Ordering::Less
    );
    // Same generation: the greater hash wins, compared bytewise ("b" > "B" > "A").
    assert_eq!(
        leaf("2-b", false).winner_order(&leaf("2-B", false)),
        Ordering::Less
    );
    // Numeric, not textual, generation order: 10 beats 9.
    assert_eq!(
        leaf("10-a", false).winner_order(&leaf("9-z", false)),
        Ordering::Less
    );
}
