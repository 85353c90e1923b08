//! A Mango `_find` scattered over the nodes (docs/format/cluster-transport.md, "Mango"): each
//! node's documents come with their places in the index (`places`: `[key, id]` per document);
//! the merge orders them by place, as one node reading the whole index would, then applies
//! `skip` and `limit`. The index's key order is the caller's (`position`).

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::{Answer, Malformed};

/// What the client asked (the nodes were sent `skip` 0 and `limit` raised to `skip + limit`).
pub struct FindQuery<'a> {
    pub skip: usize,
    pub limit: usize,
    /// The plan reads the index in descending order.
    pub descending: bool,
    /// An index key's place in the index's order (empty for `_all_docs`, ordered by id alone).
    pub position: &'a dyn Fn(&Value) -> Vec<u8>,
}

/// The nodes' `execution_stats` counts, summed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Examined {
    pub keys: u64,
    pub docs: u64,
    pub quorum_docs: u64,
}

/// The merged documents and what the caller needs to finish the body.
#[derive(Debug)]
pub struct MergedFind {
    /// `{"docs":[` ... `\r\n],` ready for `"bookmark"` and what follows.
    pub head: Vec<u8>,
    /// The place of the last document taken or skipped (the next page's bookmark).
    pub last: Option<(Value, String)>,
    /// Documents in the answer.
    pub returned: u64,
    pub examined: Examined,
}

#[derive(Deserialize)]
struct FindAnswer<'a> {
    #[serde(borrow)]
    docs: Vec<&'a RawValue>,
    places: Vec<(Value, String)>,
    #[serde(default)]
    execution_stats: Option<serde_json::Map<String, Value>>,
}

/// Merges the nodes' `_find` answers.
pub fn merge_find(answers: &[Answer<'_>], query: &FindQuery<'_>) -> Result<MergedFind, Malformed> {
    let mut rows = Vec::new();
    let mut examined = Examined::default();
    for answer in answers {
        let parsed: FindAnswer<'_> = serde_json::from_slice(answer.body)
            .map_err(|error| Malformed(format!("a _find answer: {error}")))?;
        if parsed.places.len() != parsed.docs.len() {
            return Err(Malformed(
                "a _find answer without a place for each document".into(),
            ));
        }
        if let Some(stats) = &parsed.execution_stats {
            let count = |name: &str| stats.get(name).and_then(Value::as_u64).unwrap_or(0);
            examined.keys += count("total_keys_examined");
            examined.docs += count("total_docs_examined");
            examined.quorum_docs += count("total_quorum_docs_examined");
        }
        for (doc, (key, id)) in parsed.docs.into_iter().zip(parsed.places) {
            rows.push(((query.position)(&key), key, id, doc));
        }
    }
    rows.sort_by(|a, b| crate::by_place((&a.0, &a.2), (&b.0, &b.2), query.descending));
    rows.truncate(query.skip.saturating_add(query.limit));
    let last = rows.last().map(|(_, key, id, _)| (key.clone(), id.clone()));
    let mut head = b"{\"docs\":[".to_vec();
    let mut returned = 0;
    for (_, _, _, doc) in rows.iter().skip(query.skip) {
        head.extend_from_slice(if returned == 0 { b"\r\n" } else { b",\r\n" });
        head.extend_from_slice(doc.get().as_bytes());
        returned += 1;
    }
    head.extend_from_slice(b"\r\n],");
    Ok(MergedFind {
        head,
        last,
        returned,
        examined,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn by_number(key: &Value) -> Vec<u8> {
        key[0].as_u64().unwrap_or(0).to_be_bytes().to_vec()
    }

    #[test]
    fn documents_merge_by_place_with_skip_limit_and_the_last_place() {
        let a = br#"{"docs":[{"_id":"a","n":1},{"_id":"c","n":3}],"bookmark":"x","execution_stats":{"total_keys_examined":2,"total_docs_examined":2},"places":[[[1],"a"],[[3],"c"]]}"#;
        let b = br#"{"docs":[{"_id":"b","n":2},{"_id":"d","n":3}],"bookmark":"y","execution_stats":{"total_keys_examined":5,"total_docs_examined":4},"places":[[[2],"b"],[[3],"d"]]}"#;
        let answers = [
            Answer {
                vbuckets: &[0],
                body: a,
            },
            Answer {
                vbuckets: &[1],
                body: b,
            },
        ];
        let query = FindQuery {
            skip: 1,
            limit: 2,
            descending: false,
            position: &by_number,
        };
        let merged = merge_find(&answers, &query).expect("merges");
        let mut body = merged.head.clone();
        body.extend_from_slice(b"\"bookmark\":null}");
        let value: Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(value["docs"], json!([{"_id":"b","n":2},{"_id":"c","n":3}]));
        assert_eq!(merged.last, Some((json!([3]), "c".to_owned())));
        assert_eq!(merged.returned, 2);
        assert_eq!(
            merged.examined,
            Examined {
                keys: 7,
                docs: 6,
                quorum_docs: 0
            }
        );
        let descending = FindQuery {
            skip: 0,
            limit: 3,
            descending: true,
            position: &by_number,
        };
        let merged = merge_find(&answers, &descending).expect("merges");
        assert_eq!(merged.last, Some((json!([2]), "b".to_owned())));
        let missing = [Answer {
            vbuckets: &[0],
            body: br#"{"docs":[{"_id":"a"}],"places":[]}"#,
        }];
        assert!(merge_find(&missing, &query).is_err());
    }
}
