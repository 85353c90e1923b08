//! Sub-document lookups and edits on random JSON documents with random paths, against a
//! straightforward reference over `serde_json::Value`: the same statuses, the same values, the
//! same resulting documents — with and without the structural index.
use proptest::prelude::*;
use serde_json::{Map, Value};
use settee_engine::subdoc::json::{apply, count, resolve_all, resolve_all_indexed, Edit};
use settee_engine::subdoc::path::{self, Component};
use settee_engine::subdoc::{index, Status};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-1000i64..1000).prop_map(Value::from),
        "[a-z \\\\\"é]{0,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[a-c.`\\\\\"é]{1,2}", inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Component generator biased towards names and positions that exist.
fn component() -> impl Strategy<Value = (bool, String, i64)> {
    // Names with a quote, backslash or non-ASCII byte are stored escaped in the JSON text.
    (any::<bool>(), "[a-c.`\\\\\"é]{1,2}", -1i64..4)
}

fn render(components: &[(bool, String, i64)]) -> String {
    let mut out = String::new();
    for (is_key, name, position) in components {
        if *is_key {
            if !out.is_empty() {
                out.push('.');
            }
            if name.contains(['.', '`', '[', ']']) {
                out.push('`');
                out.push_str(&name.replace('`', "``"));
                out.push('`');
            } else {
                out.push_str(name);
            }
        } else {
            out.push_str(&format!("[{position}]"));
        }
    }
    out
}

fn reference_get<'a>(doc: &'a Value, path: &[Component<'_>]) -> Result<&'a Value, Status> {
    let mut current = doc;
    for component in path {
        current = match (component, current) {
            (Component::Key(name), Value::Object(map)) => map
                .get(std::str::from_utf8(name).unwrap_or("\u{0}"))
                .ok_or(Status::PathEnoent)?,
            (Component::Index(-1), Value::Array(items)) => {
                items.last().ok_or(Status::PathEnoent)?
            }
            (Component::Index(i), Value::Array(items)) => {
                items.get(*i as usize).ok_or(Status::PathEnoent)?
            }
            _ => return Err(Status::PathMismatch),
        };
    }
    Ok(current)
}

fn reference_parent<'a>(
    doc: &'a mut Value,
    path: &[Component<'_>],
) -> Result<&'a mut Value, Status> {
    let mut current = doc;
    for component in path {
        current = match (component, current) {
            (Component::Key(name), Value::Object(map)) => map
                .get_mut(std::str::from_utf8(name).unwrap_or("\u{0}"))
                .ok_or(Status::PathEnoent)?,
            (Component::Index(-1), Value::Array(items)) => {
                items.last_mut().ok_or(Status::PathEnoent)?
            }
            (Component::Index(i), Value::Array(items)) => {
                items.get_mut(*i as usize).ok_or(Status::PathEnoent)?
            }
            _ => return Err(Status::PathMismatch),
        };
    }
    Ok(current)
}

/// The reference edit (no mkdir_p); returns the new document or the status.
fn reference_edit(
    doc: &Value,
    edit: Edit,
    path: &[Component<'_>],
    value: &Value,
) -> Result<Value, Status> {
    let mut doc = doc.clone();
    let Some((last, parents)) = path.split_last() else {
        return match edit {
            Edit::PushLast | Edit::PushFirst => match &mut doc {
                Value::Array(items) => {
                    if edit == Edit::PushLast {
                        items.push(value.clone());
                    } else {
                        items.insert(0, value.clone());
                    }
                    Ok(doc)
                }
                _ => Err(Status::PathMismatch),
            },
            _ => Err(Status::PathEinval),
        };
    };
    if matches!(edit, Edit::DictAdd | Edit::DictUpsert) && !matches!(last, Component::Key(_)) {
        return Err(Status::PathEinval);
    }
    let parent = reference_parent(&mut doc, parents)?;
    match (edit, last, parent) {
        (Edit::DictAdd | Edit::DictUpsert, Component::Key(name), Value::Object(map)) => {
            let name = String::from_utf8(name.to_vec()).map_err(|_| Status::PathEinval)?;
            if edit == Edit::DictAdd && map.contains_key(&name) {
                return Err(Status::PathEexists);
            }
            map.insert(name, value.clone());
        }
        (Edit::DictAdd | Edit::DictUpsert, _, _) => return Err(Status::PathMismatch),
        (Edit::Replace | Edit::Delete, Component::Key(name), Value::Object(map)) => {
            let name = std::str::from_utf8(name).unwrap_or("\u{0}");
            if !map.contains_key(name) {
                return Err(Status::PathEnoent);
            }
            if edit == Edit::Replace {
                map.insert(name.to_string(), value.clone());
            } else {
                map.shift_remove(name);
            }
        }
        (Edit::Replace | Edit::Delete, Component::Index(i), Value::Array(items)) => {
            let at = if *i == -1 {
                items.len().checked_sub(1)
            } else {
                Some(*i as usize)
            };
            let Some(at) = at.filter(|at| *at < items.len()) else {
                return Err(Status::PathEnoent);
            };
            if edit == Edit::Replace {
                items[at] = value.clone();
            } else {
                items.remove(at);
            }
        }
        (Edit::PushLast | Edit::PushFirst, _, parent) => {
            let target = reference_parent(parent, std::slice::from_ref(last))?;
            let Value::Array(items) = target else {
                return Err(Status::PathMismatch);
            };
            if edit == Edit::PushLast {
                items.push(value.clone());
            } else {
                items.insert(0, value.clone());
            }
        }
        _ => return Err(Status::PathMismatch),
    }
    Ok(doc)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, .. ProptestConfig::default() })]

    #[test]
    fn lookups_match_the_reference(
        doc in json_value(),
        paths in prop::collection::vec(prop::collection::vec(component(), 0..4), 1..6),
    ) {
        let text = serde_json::to_string(&doc).unwrap();
        let texts: Vec<String> = paths.iter().map(|p| render(p)).collect();
        let parsed: Vec<Vec<Component<'_>>> = texts
            .iter()
            .map(|t| path::parse(t.as_bytes()).unwrap())
            .collect();
        let refs: Vec<&[Component<'_>]> = parsed.iter().map(Vec::as_slice).collect();
        let found = resolve_all(text.as_bytes(), &refs);
        // A big document gets an index: the answers must not change.
        let padded = format!(r#"{{"pad":"{}","doc":{}}}"#, "x".repeat(5000), text);
        let built = index::build(padded.as_bytes()).unwrap();
        let idx = index::Index::open(&built).unwrap();
        let mut prefixed: Vec<Vec<Component<'_>>> = Vec::new();
        for components in &parsed {
            let mut with = vec![Component::Key(std::borrow::Cow::Borrowed(&b"doc"[..]))];
            with.extend(components.iter().cloned());
            prefixed.push(with);
        }
        let prefixed_refs: Vec<&[Component<'_>]> = prefixed.iter().map(Vec::as_slice).collect();
        let found_indexed = resolve_all_indexed(padded.as_bytes(), Some(&idx), &prefixed_refs);
        for (i, components) in parsed.iter().enumerate() {
            let expected = reference_get(&doc, components);
            match (&found[i], &expected) {
                (Ok(span), Ok(value)) => {
                    let got: Value = serde_json::from_slice(&text.as_bytes()[span.0..span.1]).unwrap();
                    prop_assert_eq!(&got, *value, "path {}", texts[i]);
                    match count(text.as_bytes(), *span) {
                        Ok(n) => prop_assert_eq!(n, match value { Value::Array(a) => a.len(), Value::Object(o) => o.len(), _ => usize::MAX }),
                        Err(status) => prop_assert!(status == Status::PathMismatch && !value.is_array() && !value.is_object()),
                    }
                }
                (Err(got), Err(want)) => prop_assert_eq!(got, want, "path {}", texts[i]),
                (got, want) => prop_assert!(false, "path {}: got {:?}, want {:?}", texts[i], got, want.map(|_| ())),
            }
            match (&found_indexed[i], &found[i]) {
                (Ok(a), Ok(b)) => prop_assert_eq!(&padded.as_bytes()[a.0..a.1], &text.as_bytes()[b.0..b.1]),
                (a, b) => prop_assert_eq!(a.as_ref().err(), b.as_ref().err(), "indexed path {}", texts[i]),
            }
        }
    }

    #[test]
    fn edits_match_the_reference(
        doc in json_value(),
        path_parts in prop::collection::vec(component(), 0..4),
        which in 0usize..6,
        value in json_value(),
    ) {
        let edit = [Edit::DictAdd, Edit::DictUpsert, Edit::Replace, Edit::Delete, Edit::PushLast, Edit::PushFirst][which];
        let text = serde_json::to_string(&doc).unwrap();
        let path_text = render(&path_parts);
        let components = path::parse(path_text.as_bytes()).unwrap();
        let value_text = if edit == Edit::Delete { String::new() } else { serde_json::to_string(&value).unwrap() };
        let got = apply(text.as_bytes(), edit, path_text.as_bytes(), value_text.as_bytes(), false);
        let want = reference_edit(&doc, edit, &components, &value);
        match (got, want) {
            (Ok((bytes, _)), Ok(expected)) => {
                let parsed: Value = serde_json::from_slice(&bytes).unwrap();
                prop_assert_eq!(parsed, expected, "{:?} {} on {}", edit, path_text, text);
            }
            (Err(got), Err(want)) => prop_assert_eq!(got, want, "{:?} {} on {}", edit, path_text, text),
            (got, want) => prop_assert!(false, "{:?} {} on {}: got {:?}, want {:?}", edit, path_text, text,
                got.map(|(b, _)| String::from_utf8_lossy(&b).into_owned()), want),
        }
    }
}
