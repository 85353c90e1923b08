use super::*;

fn answer<'a>(vbuckets: &'a [u16], body: &'a str) -> Answer<'a> {
    Answer {
        vbuckets,
        body: body.as_bytes(),
    }
}

fn vector(seqnos: &[u64]) -> SeqVector {
    SeqVector::from_seqnos(seqnos.to_vec())
}

fn no_seq(_: &[(&[u16], &str)]) -> String {
    unreachable!("no node gave an update_seq")
}

#[test]
fn all_docs_rows_are_merged_in_key_order_with_skip_limit_and_summed_counts() {
    let a = r#"{"total_rows":3,"offset":1,"rows":[
{"id":"a","key":"a","value":{"rev":"1-x"},"doc":{"z":1,"a":2.50}},
{"id":"c","key":"c","value":{"rev":"1-x"}}]}"#;
    let b = r#"{"total_rows":2,"offset":0,"rows":[{"id":"b","key":"b","value":{"rev":"1-y"}},
{"id":"d","key":"d","value":{"rev":"1-y"}}]}"#;
    let answers = [answer(&[0, 2], a), answer(&[1, 3], b)];
    let query = AllDocsQuery {
        skip: 1,
        limit: Some(2),
        ..AllDocsQuery::default()
    };
    let merged = merge_all_docs(&answers, &query, no_seq).expect("merged");
    let merged = String::from_utf8(merged).expect("utf-8");
    assert_eq!(
        merged,
        "{\"total_rows\":5,\"offset\":2,\"rows\":[\r\n\
         {\"id\":\"b\",\"key\":\"b\",\"value\":{\"rev\":\"1-y\"}},\r\n\
         {\"id\":\"c\",\"key\":\"c\",\"value\":{\"rev\":\"1-x\"}}\r\n]}"
    );
    let all = merge_all_docs(&answers, &AllDocsQuery::default(), no_seq).expect("merged");
    let all = String::from_utf8(all).expect("utf-8");
    assert!(
        all.contains(r#""doc":{"z":1,"a":2.50}"#),
        "a document keeps its bytes: {all}"
    );
    let descending = AllDocsQuery {
        descending: true,
        ..AllDocsQuery::default()
    };
    let rows: serde_json::Value =
        serde_json::from_slice(&merge_all_docs(&answers, &descending, no_seq).expect("merged"))
            .expect("json");
    let ids: Vec<&str> = rows["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| row["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["d", "c", "b", "a"]);
}

#[test]
fn keyed_rows_come_from_the_node_of_each_key_in_the_keys_order() {
    let a = r#"{"total_rows":1,"offset":null,"rows":[{"key":"x","error":"not_found"},
{"id":"z","key":"z","value":{"rev":"1-a"}}]}"#;
    let b = r#"{"total_rows":4,"offset":null,"rows":[{"id":"y","key":"y","value":{"rev":"2-b"}}]}"#;
    let answers = [answer(&[0], a), answer(&[1], b)];
    let query = AllDocsQuery {
        key_answers: Some(vec![0, 1, 0]),
        ..AllDocsQuery::default()
    };
    let merged: serde_json::Value =
        serde_json::from_slice(&merge_all_docs(&answers, &query, no_seq).expect("merged"))
            .expect("json");
    assert_eq!(merged["offset"], serde_json::Value::Null);
    assert_eq!(merged["total_rows"], 5);
    let keys: Vec<&str> = merged["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| row["key"].as_str().expect("key"))
        .collect();
    assert_eq!(keys, ["x", "y", "z"]);
}

#[test]
fn update_seqs_are_merged_by_the_caller_from_each_nodes_vbuckets() {
    let a = r#"{"total_rows":0,"offset":0,"update_seq":"5-x","rows":[]}"#;
    let answers = [answer(&[0], a)];
    let mut seen = Vec::new();
    let merged = merge_all_docs(&answers, &AllDocsQuery::default(), |seqs| {
        seen = seqs
            .iter()
            .map(|(vbuckets, text)| (vbuckets.to_vec(), text.to_string()))
            .collect();
        "merged".into()
    })
    .expect("merged");
    assert_eq!(seen, [(vec![0u16], "5-x".to_string())]);
    assert!(String::from_utf8_lossy(&merged).contains(r#""update_seq":"merged""#));
}

#[test]
fn change_rows_carry_every_nodes_position_and_resume_where_the_limit_cut() {
    let since = vector(&[1, 0, 0, 4]);
    // Node A answers for vbuckets 0 and 1, node B for 2 and 3; each row's seq is the node's
    // own position (other components as `since` gave them).
    let a_rows = [vector(&[2, 0, 0, 4]), vector(&[2, 1, 0, 4])];
    let b_rows = [vector(&[1, 0, 3, 5])];
    let a = format!(
        "{{\"results\":[\n{{\"seq\":\"{}\",\"id\":\"p\",\"changes\":[{{\"rev\":\"1-a\"}}]}},\n\
         {{\"seq\":\"{}\",\"id\":\"q\",\"changes\":[{{\"rev\":\"1-a\"}}]}}\n],\n\
         \"last_seq\":\"{}\",\"pending\":0}}\n",
        a_rows[0].encode(),
        a_rows[1].encode(),
        vector(&[7, 1, 0, 4]).encode()
    );
    let b = format!(
        "{{\"results\":[\n{{\"seq\":\"{}\",\"id\":\"r\",\"changes\":[{{\"rev\":\"1-b\"}}]}}\n],\n\
         \"last_seq\":\"{}\",\"pending\":2}}\n",
        b_rows[0].encode(),
        vector(&[1, 0, 3, 5]).encode()
    );
    let answers = [answer(&[0, 1], &a), answer(&[2, 3], &b)];
    let merged = merge_changes(&answers, &since, None, 4).expect("merged");
    assert_eq!(merged.last, vector(&[7, 1, 3, 5]), "each node's last_seq");
    assert_eq!(merged.pending, 2);
    let body: serde_json::Value = serde_json::from_slice(&merged.finish("LAST")).expect("json");
    let seqs: Vec<SeqVector> = body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|row| decode_seq(row["seq"].as_str().expect("seq"), 4).expect("decodes"))
        .collect();
    assert_eq!(
        seqs,
        [
            vector(&[2, 0, 0, 4]),
            vector(&[2, 1, 0, 4]),
            vector(&[2, 1, 3, 5])
        ]
    );
    assert_eq!(body["last_seq"], "LAST");
    let cut = merge_changes(&answers, &since, Some(2), 4).expect("merged");
    assert_eq!(
        cut.last,
        vector(&[2, 1, 0, 4]),
        "where the last row left off"
    );
    assert_eq!(cut.pending, 3, "B's pending and its row the limit cut");
}

/// A node's descending answer: `(id, seq, cas)` per row, newest first.
fn descending_answer(rows: &[(&str, SeqVector, u64)]) -> String {
    let results: Vec<String> = rows
        .iter()
        .map(|(id, seq, _)| {
            format!(
                "{{\"seq\":\"{}\",\"id\":\"{id}\",\"changes\":[]}}",
                seq.encode()
            )
        })
        .collect();
    let cas: Vec<String> = rows.iter().map(|(_, _, cas)| cas.to_string()).collect();
    format!(
        "{{\"results\":[\n{}\n],\n\"last_seq\":\"0\",\"pending\":0,\"cas\":[{}]}}\n",
        results.join(",\n"),
        cas.join(",")
    )
}

#[test]
fn descending_rows_merge_newest_first_and_each_seq_replays_the_rows_before_it() {
    let since = vector(&[0, 0, 0, 0]);
    // A holds vbuckets 0 and 1 (vb 0: seqnos 1, 2; vb 1: seqno 1), B holds 2 (seqno 1) and 3
    // (empty). Each row's seq is its node's resume point as the engine gives it.
    let a = descending_answer(&[
        ("a1", vector(&[2, 1, 0, 0]), 50),
        ("a2", vector(&[1, 1, 0, 0]), 30),
        ("a3", vector(&[1, 0, 0, 0]), 10),
    ]);
    let b = descending_answer(&[("b1", vector(&[0, 0, 1, 0]), 40)]);
    let answers = [answer(&[0, 1], &a), answer(&[2, 3], &b)];
    let merged = merge_changes_descending(&answers, &since, None, 4).expect("merged");
    assert_eq!(merged.last, vector(&[1, 0, 0, 0]), "the last row's seq");
    let body: serde_json::Value = serde_json::from_slice(&merged.finish("L")).expect("json");
    let rows: Vec<(String, SeqVector)> = body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|row| {
            let seq = decode_seq(row["seq"].as_str().expect("seq"), 4).expect("decodes");
            (row["id"].as_str().expect("id").to_owned(), seq)
        })
        .collect();
    let ids: Vec<&str> = rows.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["a1", "b1", "a2", "a3"], "highest CAS first");
    // Following the feed forward from a row's seq gives exactly the rows before it.
    let entries = [("a1", 0, 2), ("a2", 1, 1), ("a3", 0, 1), ("b1", 2, 1)];
    for (index, (_, seq)) in rows.iter().enumerate() {
        let mut replayed: Vec<&str> = entries
            .iter()
            .filter(|(_, vbucket, seqno)| *seqno > seq.get(*vbucket))
            .map(|(id, _, _)| *id)
            .collect();
        replayed.sort_unstable();
        let mut before = ids[..index].to_vec();
        before.sort_unstable();
        assert_eq!(replayed, before, "row {index}");
    }
    let one = merge_changes_descending(&answers, &since, Some(1), 4).expect("merged");
    assert_eq!(
        one.rows.len(),
        1,
        "limit=1 is the newest change of the bucket"
    );
    assert!(String::from_utf8_lossy(&one.rows[0]).contains("\"a1\""));
    let bad = [answer(
        &[0, 1],
        "{\"results\":[],\"last_seq\":\"0\",\"cas\":[1]}",
    )];
    assert!(merge_changes_descending(&bad, &since, None, 4).is_err());
}

#[test]
fn database_information_sums_the_nodes_counts_and_merges_their_sequences() {
    let a = r#"{"db_name":"db","doc_count":3,"doc_del_count":1,"sizes":{"file":10,"external":4,"active":8},"update_seq":"A","cluster":{"q":4},"compact_running":false,"purge_seq":"2"}"#;
    let b = r#"{"db_name":"db","doc_count":5,"doc_del_count":0,"sizes":{"file":20,"external":6,"active":9},"update_seq":"B","compact_running":true,"purge_seq":"3"}"#;
    let merged = merge_db_info(&[answer(&[0, 1], a), answer(&[2, 3], b)], |seqs| {
        Ok(seqs
            .iter()
            .map(|(_, seq)| *seq)
            .collect::<Vec<_>>()
            .join("+"))
    })
    .expect("merged");
    let merged: serde_json::Value = serde_json::from_slice(&merged).expect("json");
    assert_eq!(
        merged,
        serde_json::json!({"db_name": "db", "doc_count": 8, "doc_del_count": 1,
            "sizes": {"file": 30, "external": 10, "active": 17}, "update_seq": "A+B",
            "cluster": {"q": 4}, "compact_running": true, "purge_seq": "5"})
    );
}

#[test]
fn answers_that_are_not_their_shape_are_refused() {
    let since = vector(&[0, 0]);
    let bad = [answer(&[0], "{\"rows\":3}")];
    assert!(merge_all_docs(&bad, &AllDocsQuery::default(), no_seq).is_err());
    assert!(merge_changes(&bad, &since, None, 2).is_err());
    let bad_seq = [answer(
        &[0],
        "{\"results\":[{\"seq\":\"nonsense\",\"id\":\"a\"}],\"last_seq\":\"0\"}",
    )];
    assert!(merge_changes(&bad_seq, &since, None, 2).is_err());
}

mod split {
    use crate::split::*;
    use serde_json::{json, Value};

    fn group_by_first_letter(id: &Value) -> Option<usize> {
        match id.as_str().and_then(|id| id.chars().next()) {
            Some('a') => Some(0),
            Some('x') => None,
            Some(_) => Some(1),
            None => Some(0),
        }
    }

    fn parse(bytes: &Option<Vec<u8>>) -> Value {
        serde_json::from_slice(bytes.as_deref().expect("a share")).expect("json")
    }

    #[test]
    fn bulk_docs_are_split_by_id_with_ids_made_for_those_without() {
        let body =
            br#"{"new_edits":false,"docs":[{"_id":"a1","n":1.50},{"n":2},{"_id":"b1"},{},7,{"_id":"x"}]}"#;
        let mut made = 0;
        let body = assign_ids(body, "docs", "_id", || {
            made += 1;
            format!("b-made-{made}")
        })
        .expect("ids");
        assert_eq!(
            item_ids(&body, "docs", "_id").expect("ids"),
            [
                json!("a1"),
                json!("b-made-1"),
                json!("b1"),
                json!("b-made-2"),
                Value::Null,
                json!("x")
            ]
        );
        let shares = split_list(&body, "docs", "_id", 2, group_by_first_letter).expect("split");
        let first = String::from_utf8(shares[0].clone().expect("a share")).expect("utf-8");
        assert_eq!(
            first, r#"{"new_edits":false,"docs":[{"_id":"a1","n":1.50},7]}"#,
            "documents as written; other members in every share"
        );
        assert_eq!(
            parse(&shares[1]),
            json!({"new_edits": false, "docs": [
                {"_id": "b-made-1", "n": 2}, {"_id": "b1"}, {"_id": "b-made-2"}
            ]}),
            "x is in no group this time"
        );
        let only_x = split_list(
            br#"{"docs":[{"_id":"x"}]}"#,
            "docs",
            "_id",
            2,
            group_by_first_letter,
        )
        .expect("split");
        assert_eq!(only_x, [None, None]);
        assert!(split_list(b"[1]", "docs", "_id", 2, group_by_first_letter).is_err());
        assert!(split_list(br#"{"docs":3}"#, "docs", "_id", 2, group_by_first_letter).is_err());
        assert!(assign_ids(br#"{"doc":[]}"#, "docs", "_id", String::new).is_err());
    }

    #[test]
    fn answers_are_put_back_in_the_request_order() {
        let zero = br#"[{"id":"a1","ok":true},{"id":"a2","ok":true}]"#;
        let one = br#"[{"id":"b1","error":"conflict"}]"#;
        let merged =
            merge_in_order(&[Some(&zero[..]), Some(&one[..])], &[0, 1, 0], None).expect("merged");
        let ids: Vec<Value> = serde_json::from_slice::<Vec<Value>>(&merged)
            .expect("json")
            .into_iter()
            .map(|row| row["id"].clone())
            .collect();
        assert_eq!(ids, [json!("a1"), json!("b1"), json!("a2")]);
        assert!(merge_in_order(&[Some(&zero[..]), Some(&one[..])], &[1, 1], None).is_err());
        let results = br#"{"results":[{"id":"b1","docs":[]}]}"#;
        let merged =
            merge_in_order(&[None, Some(&results[..])], &[1], Some("results")).expect("merged");
        assert_eq!(
            serde_json::from_slice::<Value>(&merged).expect("json"),
            json!({"results": [{"id": "b1", "docs": []}]})
        );
        let failed =
            merge_concatenated(&[Some(&one[..]), None, Some(&b"[]"[..])], None).expect("merged");
        assert_eq!(
            serde_json::from_slice::<Value>(&failed).expect("json"),
            json!([{"id": "b1", "error": "conflict"}])
        );
    }

    #[test]
    fn revs_diff_is_split_and_merged_by_member() {
        let body = br#"{"a1":["1-x"],"b1":["2-y"],"a2":[]}"#;
        assert_eq!(
            object_keys(body).expect("keys"),
            [json!("a1"), json!("b1"), json!("a2")]
        );
        let shares = split_object(body, 2, group_by_first_letter).expect("split");
        assert_eq!(parse(&shares[0]), json!({"a1": ["1-x"], "a2": []}));
        assert_eq!(parse(&shares[1]), json!({"b1": ["2-y"]}));
        let merged = merge_objects(
            &[
                Some(&br#"{"a1":{"missing":["1-x"]}}"#[..]),
                Some(&br#"{}"#[..]),
                Some(&br#"{"b1":{"missing":["2-y"]}}"#[..]),
            ],
            None,
        )
        .expect("merged");
        assert_eq!(
            serde_json::from_slice::<Value>(&merged).expect("json"),
            json!({"a1": {"missing": ["1-x"]}, "b1": {"missing": ["2-y"]}})
        );
    }

    #[test]
    fn missing_revs_and_purge_merge_their_inner_object() {
        let merged = merge_objects(
            &[
                Some(&br#"{"purge_seq":null,"purged":{"a":["1-x"]}}"#[..]),
                None,
                Some(&br#"{"purge_seq":null,"purged":{"b":[]}}"#[..]),
            ],
            Some("purged"),
        )
        .expect("merged");
        assert_eq!(
            serde_json::from_slice::<Value>(&merged).expect("json"),
            json!({"a": ["1-x"], "b": []})
        );
        let without = merge_objects(&[Some(&br#"{"purged":{}}"#[..])], Some("missing_revs"));
        assert!(
            without.is_err(),
            "an answer without the member is malformed"
        );
    }
}

#[test]
fn design_info_sums_every_nodes_index() {
    let a = br#"{"name":"d","view_index":{"signature":"s","language":"javascript","sizes":{"file":10,"active":4,"external":4},"update_seq":7,"updates_pending":{"minimum":1,"preferred":1,"total":1},"purge_seq":0,"updater_running":false,"compact_running":true,"waiting_clients":0,"waiting_commit":false,"collator_versions":["x"]}}"#;
    let b = br#"{"name":"d","view_index":{"signature":"s","language":"javascript","sizes":{"file":5,"active":2,"external":3},"update_seq":3,"updates_pending":{"minimum":0,"preferred":0,"total":0},"purge_seq":0,"updater_running":false,"compact_running":false,"waiting_clients":2,"waiting_commit":false,"collator_versions":["x"]}}"#;
    let merged = crate::views::merge_design_info(&[&a[..], &b[..]]).expect("merged");
    let merged: serde_json::Value = serde_json::from_slice(&merged).expect("json");
    assert_eq!(
        merged,
        serde_json::json!({"name": "d", "view_index": {"signature": "s", "language": "javascript",
            "sizes": {"file": 15, "active": 6, "external": 7}, "update_seq": 10,
            "updates_pending": {"minimum": 1, "preferred": 1, "total": 1}, "purge_seq": 0,
            "updater_running": false, "compact_running": true, "waiting_clients": 2,
            "waiting_commit": false, "collator_versions": ["x"]}})
    );
    assert!(crate::views::merge_design_info(&[&b"{\"name\":\"d\"}"[..]]).is_err());
    assert!(crate::views::merge_design_info(&[]).is_err());
}
