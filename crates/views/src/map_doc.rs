//! The metadata members CouchDB adds to a document before its map functions see it
//! (`couch_index_updater` opens documents with `conflicts`, `deleted_conflicts` and, for
//! design documents with `options.local_seq`, `local_seq`; attachments come as stubs):
//! `_conflicts`, `_deleted_conflicts`, `_local_seq`, then `_attachments`, after the body's
//! members as `couch_doc:to_json_obj` orders them.

use base64::Engine as _;
use serde_json::{json, Map, Value};
use settee_engine::record::DocRecord;

/// Appends the metadata members to `json`, a document object as [`crate::group`] builds it.
/// `record` is given when the winner has attachments or other leaves exist.
pub(crate) fn add_meta(json: &mut String, record: Option<&DocRecord>, local_seq: Option<u64>) {
    let mut members = Map::new();
    if let Some(record) = record {
        let others = record.leaves.iter().skip(1);
        let conflicts: Vec<Value> = others
            .clone()
            .filter(|leaf| !leaf.deleted)
            .map(|leaf| json!(leaf.rev.to_string()))
            .collect();
        let deleted: Vec<Value> = others
            .filter(|leaf| leaf.deleted)
            .map(|leaf| json!(leaf.rev.to_string()))
            .collect();
        if !conflicts.is_empty() {
            members.insert("_conflicts".into(), Value::Array(conflicts));
        }
        if !deleted.is_empty() {
            members.insert("_deleted_conflicts".into(), Value::Array(deleted));
        }
    }
    if let Some(seq) = local_seq {
        members.insert("_local_seq".into(), json!(seq));
    }
    if let Some(winner) = record.and_then(DocRecord::winner) {
        if !winner.attachments.is_empty() {
            let stubs: Map<String, Value> = winner
                .attachments
                .iter()
                .map(|meta| {
                    let digest = base64::engine::general_purpose::STANDARD.encode(meta.md5);
                    (
                        meta.name.clone(),
                        json!({
                            "content_type": meta.content_type,
                            "revpos": meta.revpos,
                            "digest": format!("md5-{digest}"),
                            "length": meta.identity_length(),
                            "stub": true,
                        }),
                    )
                })
                .collect();
            members.insert("_attachments".into(), Value::Object(stubs));
        }
    }
    if members.is_empty() || !json.ends_with('}') {
        return;
    }
    json.pop();
    for (name, value) in members {
        if !json.ends_with('{') {
            json.push(',');
        }
        json.push_str(&Value::String(name).to_string());
        json.push(':');
        json.push_str(&value.to_string());
    }
    json.push('}');
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use settee_engine::record::{AttachmentMeta, Leaf};
    use settee_engine::RevId;
    use settee_revtree::RevTree;

    use super::*;

    fn leaf(rev: &str, deleted: bool, attachments: Vec<AttachmentMeta>) -> Leaf {
        Leaf {
            rev: RevId::parse(rev).expect("rev"),
            deleted,
            json: true,
            body: Bytes::from_static(b"{}"),
            attachments,
        }
    }

    #[test]
    fn members_follow_the_body_in_couchdbs_order() {
        let record = DocRecord {
            cas: 1,
            seqno: 9,
            expiry: 0,
            item_flags: 0,
            tree: RevTree::new(),
            leaves: vec![
                leaf(
                    "2-b",
                    false,
                    vec![AttachmentMeta {
                        name: "a.txt".into(),
                        content_type: "text/plain".into(),
                        length: 5,
                        md5: [0; 16],
                        revpos: 2,
                        encoding: Default::default(),
                    }],
                ),
                leaf("2-a", false, vec![]),
                leaf("3-c", true, vec![]),
            ],
            xattrs: Bytes::new(),
            index: Bytes::new(),
        };
        let mut json = r#"{"_id":"d","_rev":"2-b","x":1}"#.to_string();
        add_meta(&mut json, Some(&record), Some(9));
        assert_eq!(
            json,
            r#"{"_id":"d","_rev":"2-b","x":1,"_conflicts":["2-a"],"_deleted_conflicts":["3-c"],"_local_seq":9,"_attachments":{"a.txt":{"content_type":"text/plain","revpos":2,"digest":"md5-AAAAAAAAAAAAAAAAAAAAAA==","length":5,"stub":true}}}"#
        );
        let mut plain = r#"{"_id":"d","_rev":"1-a"}"#.to_string();
        add_meta(&mut plain, None, None);
        assert_eq!(plain, r#"{"_id":"d","_rev":"1-a"}"#);
    }
}
