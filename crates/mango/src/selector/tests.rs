use std::cmp::Ordering;

use super::*;
use serde_json::json;

fn doc() -> Value {
    json!({
        "_id": "doc1",
        "_rev": "1-abc",
        "name": "Bob",
        "age": 30,
        "score": 7.5,
        "debt": -7,
        "flag": true,
        "nothing": null,
        "str": "hello",
        "tags": ["a", "b", "c"],
        "nums": [1, 2, 3],
        "empty": [],
        "addr": {"city": "Omaha", "zip": "68102"},
        "a.b": "dotted",
        "$dollar": 1,
        "nested": [{"x": 1, "y": "p"}, {"x": 2, "y": "q"}],
        "map": {"k1": 1, "k2": 2}
    })
}

/// (selector, expected) against [`doc`].
const CASES: &[(&str, bool)] = &[
    // The empty selector, equality shorthand, implicit $and.
    (r#"{}"#, true),
    (r#"{"name": "Bob"}"#, true),
    (r#"{"name": "bob"}"#, false),
    (r#"{"name": {"$eq": "Bob"}}"#, true),
    (r#"{"name": "Bob", "age": 30}"#, true),
    (r#"{"name": "Bob", "age": 31}"#, false),
    (r#"{"age": 30.0}"#, true),
    (r#"{"age": "30"}"#, false),
    (r#"{"missing": null}"#, false),
    (r#"{"nothing": null}"#, true),
    // Whole values: no MongoDB-style matching of array elements, objects in member order.
    (r#"{"tags": ["a", "b", "c"]}"#, true),
    (r#"{"tags": "a"}"#, false),
    (r#"{"empty": []}"#, true),
    (
        r#"{"addr": {"$eq": {"city": "Omaha", "zip": "68102"}}}"#,
        true,
    ),
    (
        r#"{"addr": {"$eq": {"zip": "68102", "city": "Omaha"}}}"#,
        false,
    ),
    (r#"{"addr": {}}"#, false),
    // Comparisons.
    (r#"{"age": {"$gt": 29}}"#, true),
    (r#"{"age": {"$gt": 30}}"#, false),
    (r#"{"age": {"$gte": 30}}"#, true),
    (r#"{"age": {"$lt": 31}}"#, true),
    (r#"{"age": {"$lte": 29}}"#, false),
    (r#"{"age": {"$gt": 20, "$lt": 40}}"#, true),
    (r#"{"score": {"$gt": 7, "$lt": 8}}"#, true),
    (r#"{"age": {"$ne": 31}}"#, true),
    (r#"{"age": {"$ne": 30}}"#, false),
    (r#"{"missing": {"$ne": 1}}"#, false),
    (r#"{"missing": {"$lt": 1}}"#, false),
    // Comparisons collate across types: null < false < true < numbers < strings < arrays <
    // objects.
    (r#"{"name": {"$gt": 5}}"#, true),
    (r#"{"tags": {"$gt": "zzz"}}"#, true),
    (r#"{"addr": {"$gt": ["z"]}}"#, true),
    (r#"{"nothing": {"$gt": 5}}"#, false),
    (r#"{"flag": {"$lt": 0}}"#, true),
    (r#"{"flag": {"$gt": false}}"#, true),
    (r#"{"nothing": {"$lt": false}}"#, true),
    // Strings collate by ICU: case second, lowercase first; ignorable characters ignored.
    (r#"{"name": {"$gt": "bob"}}"#, true),
    (r#"{"name": {"$lt": "bz"}}"#, true),
    (r#"{"str": {"$gt": "Z"}}"#, false),
    (r#"{"name": "Bob\u200b"}"#, true),
    // _id compares in Erlang term order: bytes for strings, strings above everything.
    (r#"{"_id": {"$gt": "Z"}}"#, true),
    (r#"{"_id": {"$gt": null}}"#, true),
    (r#"{"_id": {"$lt": {}}}"#, false),
    (r#"{"_id": {"$in": ["doc1"]}}"#, true),
    // Paths: dots, escaped dots, escaped dollars, array indexes, implicit nesting.
    (r#"{"addr.city": "Omaha"}"#, true),
    (r#"{"addr": {"city": "Omaha"}}"#, true),
    (
        r#"{"addr": {"city": {"$regex": "^Om"}, "zip": {"$gt": "6"}}}"#,
        true,
    ),
    (r#"{"addr": {"$exists": true, "city": "Omaha"}}"#, true),
    (r#"{"a\\.b": "dotted"}"#, true),
    (r#"{"a.b": "dotted"}"#, false),
    (r#"{"\\$dollar": 1}"#, true),
    (r#"{"tags.1": "b"}"#, true),
    (r#"{"tags.+1": "b"}"#, true),
    (r#"{"tags.3": "b"}"#, false),
    (r#"{"tags.-1": "c"}"#, false),
    (r#"{"nested.1.y": "q"}"#, true),
    (r#"{"nested": {"1": {"y": "q"}}}"#, true),
    // $exists; a path through a scalar or out of an array matches nothing at all.
    (r#"{"missing": {"$exists": false}}"#, true),
    (r#"{"missing": {"$exists": true}}"#, false),
    (r#"{"age": {"$exists": true}}"#, true),
    (r#"{"age": {"$exists": false}}"#, false),
    (r#"{"nothing": {"$exists": true}}"#, true),
    (r#"{"missing.deeper": {"$exists": false}}"#, true),
    (r#"{"age.x": {"$exists": false}}"#, false),
    (r#"{"tags.x": {"$exists": false}}"#, false),
    (r#"{"tags.9": {"$exists": false}}"#, false),
    // $type
    (r#"{"age": {"$type": "number"}}"#, true),
    (r#"{"name": {"$type": "string"}}"#, true),
    (r#"{"nothing": {"$type": "null"}}"#, true),
    (r#"{"flag": {"$type": "boolean"}}"#, true),
    (r#"{"tags": {"$type": "array"}}"#, true),
    (r#"{"addr": {"$type": "object"}}"#, true),
    (r#"{"age": {"$type": "string"}}"#, false),
    (r#"{"missing": {"$type": "null"}}"#, false),
    // $in and $nin: on an array field, any element against any argument.
    (r#"{"name": {"$in": ["Al", "Bob"]}}"#, true),
    (r#"{"name": {"$in": ["Al"]}}"#, false),
    (r#"{"name": {"$in": []}}"#, false),
    (r#"{"age": {"$in": [30.0]}}"#, true),
    (r#"{"tags": {"$in": ["z", "c"]}}"#, true),
    (r#"{"tags": {"$in": [["a", "b", "c"]]}}"#, false),
    (r#"{"missing": {"$in": [null]}}"#, false),
    (r#"{"name": {"$nin": ["Al"]}}"#, true),
    (r#"{"name": {"$nin": ["Bob"]}}"#, false),
    (r#"{"name": {"$nin": []}}"#, true),
    (r#"{"tags": {"$nin": ["a"]}}"#, false),
    (r#"{"tags": {"$nin": ["z"]}}"#, true),
    (r#"{"missing": {"$nin": ["x"]}}"#, false),
    // $size
    (r#"{"tags": {"$size": 3}}"#, true),
    (r#"{"tags": {"$size": 2}}"#, false),
    (r#"{"empty": {"$size": 0}}"#, true),
    (r#"{"name": {"$size": 3}}"#, false),
    // $mod: integers only, with Erlang's truncating remainder.
    (r#"{"age": {"$mod": [7, 2]}}"#, true),
    (r#"{"age": {"$mod": [7, 3]}}"#, false),
    (r#"{"age": {"$mod": [-7, 2]}}"#, true),
    (r#"{"debt": {"$mod": [3, -1]}}"#, true),
    (r#"{"debt": {"$mod": [3, 2]}}"#, false),
    (r#"{"score": {"$mod": [2, 1]}}"#, false),
    (r#"{"name": {"$mod": [2, 1]}}"#, false),
    // $regex matches anywhere in strings only; $beginsWith is a case-sensitive prefix.
    (r#"{"name": {"$regex": "^B"}}"#, true),
    (r#"{"name": {"$regex": "o"}}"#, true),
    (r#"{"name": {"$regex": "^b"}}"#, false),
    (r#"{"name": {"$regex": "(?i)^bob$"}}"#, true),
    (r#"{"age": {"$regex": "3"}}"#, false),
    (r#"{"name": {"$beginsWith": "Bo"}}"#, true),
    (r#"{"name": {"$beginsWith": "bo"}}"#, false),
    (r#"{"age": {"$beginsWith": "3"}}"#, false),
    // $all: exact members, or the one array argument equal to the field.
    (r#"{"tags": {"$all": ["a", "c"]}}"#, true),
    (r#"{"tags": {"$all": ["a", "z"]}}"#, false),
    (r#"{"tags": {"$all": []}}"#, false),
    (r#"{"nums": {"$all": [1]}}"#, true),
    (r#"{"nums": {"$all": [1.0]}}"#, false),
    (r#"{"tags": {"$all": [["a", "b", "c"]]}}"#, true),
    (r#"{"nums": {"$all": [[1.0, 2, 3]]}}"#, true),
    (r#"{"name": {"$all": ["Bob"]}}"#, false),
    // $elemMatch, $allMatch, $keyMapMatch
    (r#"{"nums": {"$elemMatch": {"$gt": 2}}}"#, true),
    (r#"{"nums": {"$elemMatch": {"$gt": 3}}}"#, false),
    (r#"{"nums": {"$elemMatch": {"$gt": 1, "$lt": 3}}}"#, true),
    (r#"{"nested": {"$elemMatch": {"x": 2, "y": "q"}}}"#, true),
    (r#"{"nested": {"$elemMatch": {"x": 1, "y": "q"}}}"#, false),
    (r#"{"empty": {"$elemMatch": {"$exists": true}}}"#, false),
    (r#"{"name": {"$elemMatch": {"$eq": "Bob"}}}"#, false),
    (r#"{"nums": {"$allMatch": {"$gt": 0}}}"#, true),
    (r#"{"nums": {"$allMatch": {"$gt": 1}}}"#, false),
    (r#"{"empty": {"$allMatch": {"$gt": 0}}}"#, false),
    (
        r#"{"nested": {"$allMatch": {"x": {"$type": "number"}}}}"#,
        true,
    ),
    (r#"{"map": {"$keyMapMatch": {"$eq": "k2"}}}"#, true),
    (r#"{"map": {"$keyMapMatch": {"$regex": "^k"}}}"#, true),
    (r#"{"map": {"$keyMapMatch": {"$eq": "k3"}}}"#, false),
    (r#"{"tags": {"$keyMapMatch": {"$eq": "a"}}}"#, false),
    // Combination operators.
    (r#"{"$and": [{"name": "Bob"}, {"age": 30}]}"#, true),
    (r#"{"$and": [{"name": "Bob"}, {"age": 31}]}"#, false),
    (r#"{"$and": []}"#, true),
    (r#"{"$or": [{"name": "Al"}, {"age": 30}]}"#, true),
    (r#"{"$or": [{"name": "Al"}, {"age": 31}]}"#, false),
    (r#"{"$or": []}"#, true),
    (r#"{"$nor": [{"name": "Al"}, {"age": 31}]}"#, true),
    (r#"{"$nor": [{"name": "Bob"}]}"#, false),
    (r#"{"$nor": []}"#, true),
    (r#"{"$not": {"name": "Al"}}"#, true),
    (r#"{"$not": {"name": "Bob"}}"#, false),
    (
        r#"{"name": {"$or": [{"$eq": "Al"}, {"$regex": "b$"}]}}"#,
        true,
    ),
    (r#"{"name": {"$and": [{"$gt": "A"}, {"$lt": "C"}]}}"#, true),
    (
        r#"{"$or": [{"missing": {"$exists": false}}, {"age": 1}]}"#,
        true,
    ),
    // Negations are pushed down to conditions, which need the field to exist.
    (r#"{"$not": {"missing": 1}}"#, false),
    (r#"{"$not": {"missing": {"$exists": true}}}"#, true),
    (r#"{"$nor": [{"missing": 1}]}"#, false),
    (r#"{"missing": {"$not": {"$eq": 1}}}"#, false),
    (r#"{"missing": {"$not": {"$regex": "x"}}}"#, false),
    (r#"{"name": {"$not": {"$regex": "^A"}}}"#, true),
    (r#"{"age": {"$not": {"$regex": "^A"}}}"#, true),
    (r#"{"age": {"$not": {"$gt": 40}}}"#, true),
    (r#"{"tags": {"$not": {"$size": 3}}}"#, false),
    (r#"{"tags": {"$not": {"$in": ["z"]}}}"#, true),
    (r#"{"$not": {"$not": {"name": "Bob"}}}"#, true),
    (
        r#"{"$not": {"$and": [{"name": "Bob"}, {"age": 31}]}}"#,
        true,
    ),
    (
        r#"{"$not": {"$or": [{"name": "Al"}, {"missing": 1}]}}"#,
        false,
    ),
    (r#"{"$not": {"$nor": [{"name": "Bob"}]}}"#, true),
    (r#"{"tags": {"$not": {"$elemMatch": {"$eq": "z"}}}}"#, true),
    // Inside $elemMatch negations are not pushed down (a plain $not), and $nor fails.
    (r#"{"nested": {"$elemMatch": {"$not": {"z": 1}}}}"#, true),
    (r#"{"nums": {"$elemMatch": {"$nor": [{"$eq": 5}]}}}"#, false),
    (
        r#"{"nums": {"$elemMatch": {"$or": [{"$eq": 1}, {"$nor": []}]}}}"#,
        true,
    ),
    // $text is trusted to a text index; an empty path in $and is the document itself.
    (r#"{"$text": "anything"}"#, true),
    (r#"{"$and": [{"$gt": 1}]}"#, true),
];

#[test]
fn selector_cases() {
    let doc = doc();
    let mut failures = Vec::new();
    for (text, expected) in CASES {
        let selector: Value = serde_json::from_str(text).expect("case is JSON");
        if let Err(e) = validate(&selector) {
            failures.push(format!("{text}: invalid: {e}"));
        } else if matches(&selector, &doc) != *expected {
            failures.push(format!("{text}: expected {expected}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn compiled_selector_matches_like_the_one_shot_form() {
    let selector = Selector::parse(&json!({"age": {"$gte": 18}})).expect("valid");
    assert!(selector.matches(&json!({"age": 18})));
    assert!(!selector.matches(&json!({"age": 17})));
    assert!(!selector.matches(&json!({})));
    assert!(!selector.matches(&json!(5)));
    assert!(Selector::parse(&json!({}))
        .expect("valid")
        .matches(&json!(5)));
}

#[test]
fn invalid_selectors_name_the_problem() {
    let cases: &[(Value, &str)] = &[
        (json!(5), "Selector error: expected a JSON object"),
        (json!([{"a": 1}]), "Selector error: expected a JSON object"),
        (json!({"$foo": 1}), "Invalid operator: $foo"),
        (json!({"a": {"$foo": 1}}), "Invalid operator: $foo"),
        (json!({"a": {"$EQ": 1}}), "Invalid operator: $EQ"),
        (json!({"a": {"$in": 3}}), "Bad argument for operator $in: 3"),
        (
            json!({"a": {"$nin": {}}}),
            "Bad argument for operator $nin: {[]}",
        ),
        (
            json!({"a": {"$all": "x"}}),
            "Bad argument for operator $all: <<120>>",
        ),
        (
            json!({"a": {"$size": "x"}}),
            "Bad argument for operator $size: <<120>>",
        ),
        (
            json!({"a": {"$size": -1}}),
            "Bad argument for operator $size: -1",
        ),
        (
            json!({"a": {"$size": 1.5}}),
            "Bad argument for operator $size: 1.5",
        ),
        (
            json!({"a": {"$mod": [0, 1]}}),
            "Bad argument for operator $mod: [0,1]",
        ),
        (
            json!({"a": {"$mod": [2.0, 1]}}),
            "Bad argument for operator $mod: [2.0,1]",
        ),
        (
            json!({"a": {"$mod": [2]}}),
            "Bad argument for operator $mod: [2]",
        ),
        (
            json!({"a": {"$regex": "("}}),
            "Bad argument for operator $regex: <<40>>",
        ),
        (
            json!({"a": {"$regex": "(?=x)"}}),
            "Bad argument for operator $regex",
        ),
        (
            json!({"a": {"$regex": "a{1000}{1000}"}}),
            "Bad argument for operator $regex",
        ),
        (
            json!({"a": {"$regex": 1}}),
            "Bad argument for operator $regex: 1",
        ),
        (
            json!({"a": {"$type": "integer"}}),
            "Bad argument for operator $type",
        ),
        (
            json!({"a": {"$type": 1}}),
            "Bad argument for operator $type: 1",
        ),
        (
            json!({"a": {"$exists": "yes"}}),
            "Bad argument for operator $exists",
        ),
        (
            json!({"a": {"$beginsWith": 1}}),
            "Bad argument for operator $beginsWith: 1",
        ),
        (json!({"$and": {}}), "Bad argument for operator $and: {[]}"),
        (json!({"$or": 1}), "Bad argument for operator $or: 1"),
        (
            json!({"$nor": "x"}),
            "Bad argument for operator $nor: <<120>>",
        ),
        (json!({"$not": []}), "Bad argument for operator $not: []"),
        (
            json!({"a": {"$elemMatch": []}}),
            "Bad argument for operator $elemMatch: []",
        ),
        (
            json!({"a": {"$allMatch": 1}}),
            "Bad argument for operator $allMatch: 1",
        ),
        (
            json!({"a": {"$keyMapMatch": null}}),
            "Bad argument for operator $keyMapMatch: null",
        ),
        (
            json!({"a": {"$in": [{"k": true}]}, "b": {"$all": 1}}),
            "Bad argument for operator $all: 1",
        ),
        (json!({"$where": "x"}), "Unsupported operator: $where"),
        (
            json!({"a": {"$near": [0, 0]}}),
            "Unsupported operator: $near",
        ),
        (
            json!({"": 1}),
            "One or more conditions is missing a field name.",
        ),
        (
            json!({"$gt": 1}),
            "One or more conditions is missing a field name.",
        ),
        (
            json!({"$not": {"$eq": 1}}),
            "One or more conditions is missing a field name.",
        ),
        (json!({"a..b": 1}), "Invalid field name: a..b"),
        (json!({"a.": 1}), "Invalid field name: a."),
        (json!({"a": {".b": 1}}), "Invalid field name: .b"),
        (json!({"$text": []}), "Bad argument for operator $text: []"),
        (
            json!({"a": {"$text": "x"}}),
            "Invalid field normalization on selector: {[{<<36,100,101,102,97,117,108,116>>,",
        ),
        (
            json!({"$not": {"$text": "x"}}),
            "Bad argument for operator $not: {[{<<36,100",
        ),
        (
            json!({"$default": 1}),
            "Invalid field normalization on selector",
        ),
    ];
    for (selector, reason) in cases {
        match validate(selector) {
            Err(MangoError::BadRequest { reason: text, .. }) => {
                assert!(text.starts_with(reason), "{selector}: got {text:?}")
            }
            other => panic!("{selector}: expected 400 {reason:?}, got {other:?}"),
        }
        assert!(!matches(selector, &doc()), "{selector} must match nothing");
    }
}

#[test]
fn quoted_arguments_are_cut() {
    let huge = json!({"a": {"$in": "x".repeat(10_000)}});
    match validate(&huge) {
        Err(MangoError::BadRequest { reason, .. }) => {
            assert!(
                reason.len() < ERROR_ARGUMENT_CHARS_MAX + 100,
                "{}",
                reason.len()
            );
            assert!(reason.ends_with("..."));
        }
        other => panic!("expected a bad argument, got {other:?}"),
    }
}

#[test]
fn nesting_is_bounded() {
    let mut selector = json!(1);
    for _ in 0..SELECTOR_DEPTH_MAX {
        selector = json!({ "a": selector });
    }
    assert!(
        validate(&selector).is_ok(),
        "{SELECTOR_DEPTH_MAX} levels are allowed"
    );
    let too_deep = json!({ "a": selector });
    match validate(&too_deep) {
        Err(MangoError::BadRequest { reason, .. }) => assert!(reason.contains("nested")),
        other => panic!("expected a depth error, got {other:?}"),
    }
}

#[test]
fn valid_edge_selectors() {
    for selector in [
        json!({"a": {"$mod": [-3, 1]}}),
        json!({"a": {"$mod": [3, 18446744073709551615u64]}}),
        json!({"$text": "x"}),
        json!({"$default": {"$text": "x"}}),
        json!({"a": {"$elemMatch": {"$text": 1}}}),
        json!({"a": {"$type": "null"}}),
        json!({"a\\": 1}),
        json!({"a": {"$regex": "\\d+"}}),
    ] {
        assert!(validate(&selector).is_ok(), "{selector}");
    }
}

#[test]
fn field_names_split_on_unescaped_dots() {
    let parse = |s: &str| parse_field(s).expect("valid field name");
    assert_eq!(parse("ab"), ["ab"]);
    assert_eq!(parse("a.b.c"), ["a", "b", "c"]);
    assert_eq!(parse("a\\.b"), ["a.b"]);
    assert_eq!(parse("a.b\\.c"), ["a", "b.c"]);
    assert_eq!(parse("\\$x"), ["$x"]);
    assert_eq!(parse("a\\\\.b"), ["a.b"]);
    assert!(parse_field("a..b").is_err());
    assert!(parse_field(".a").is_err());
}

#[test]
fn array_indexes_read_like_erlang_integers() {
    assert_eq!(array_index("0"), Some(0));
    assert_eq!(array_index("007"), Some(7));
    assert_eq!(array_index("+2"), Some(2));
    assert_eq!(array_index("-0"), Some(0));
    assert_eq!(array_index("-1"), None);
    assert_eq!(array_index(""), None);
    assert_eq!(array_index("1a"), None);
    assert_eq!(array_index("99999999999999999999999999"), None);
}

#[test]
fn erlang_order_for_ids() {
    let order = TermOrder::Erlang;
    let ascending = [
        json!(-1),
        json!(2.5),
        json!(false),
        json!(null),
        json!(true),
        json!({}),
        json!({"a": 1}),
        json!([]),
        json!([1]),
        json!("B"),
        json!("a"),
    ];
    for pair in ascending.windows(2) {
        assert_eq!(
            order.compare(&pair[0], &pair[1]),
            Ordering::Less,
            "{pair:?}"
        );
    }
}

#[test]
fn deep_documents_match_without_recursion() {
    // Comparing deep values is settee-collate's test; matching them must not recurse either.
    let mut a = json!(1);
    for _ in 0..500 {
        a = Value::Array(vec![a]);
    }
    let selector = json!({"a": {"$gt": 5}});
    assert!(matches(&selector, &json!({ "a": a })));
}

#[test]
fn erlang_terms_print_like_tilde_w() {
    assert_eq!(erlang_term(&json!("ab")), "<<97,98>>");
    assert_eq!(erlang_term(&json!("")), "<<>>");
    assert_eq!(
        erlang_term(&json!([1, 2.5, null, true])),
        "[1,2.5,null,true]"
    );
    assert_eq!(erlang_term(&json!({"a": {}})), "{[{<<97>>,{[]}}]}");
    assert_eq!(erlang_term(&json!(1e21)), "1.0e21");
}
