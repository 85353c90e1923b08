//! Checking acknowledged writes: every key must be stored, live, with the body written for it.

use std::path::Path;

use anyhow::{bail, Context};
use hyper::Method;

use super::legit::Setup;
use super::Endpoints;

/// Keys per `_all_docs` request.
const BATCH_KEYS: usize = 500;

/// The keys of an `--acked` file, one per line.
pub(crate) fn read_keys(path: &Path) -> anyhow::Result<Vec<String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text
        .lines()
        .filter(|line| !line.is_empty())
        .map(str::to_string)
        .collect())
}

/// The keys among `keys` that are not stored as written (missing, deleted, or another body).
pub(crate) async fn missing(endpoints: &Endpoints, keys: &[String]) -> anyhow::Result<Vec<String>> {
    let mut setup = Setup::open(endpoints).await?;
    let path = format!("{}/_all_docs?include_docs=true", setup.db_path());
    let mut missing = Vec::new();
    for batch in keys.chunks(BATCH_KEYS) {
        let body = serde_json::to_vec(&serde_json::json!({ "keys": batch }))?;
        let answer = setup.expect_ok(Method::POST, &path, body).await?;
        missing.extend(absent_keys(batch, &answer)?);
    }
    Ok(missing)
}

/// Reads one `_all_docs?include_docs=true` answer for `batch` (rows in the order of the keys).
fn absent_keys(batch: &[String], answer: &[u8]) -> anyhow::Result<Vec<String>> {
    let answer: serde_json::Value =
        serde_json::from_slice(answer).context("_all_docs answered something other than JSON")?;
    let Some(rows) = answer.get("rows").and_then(|rows| rows.as_array()) else {
        bail!("_all_docs answered without rows: {answer}");
    };
    if rows.len() != batch.len() {
        bail!(
            "_all_docs answered {} rows for {} keys",
            rows.len(),
            batch.len()
        );
    }
    Ok(batch
        .iter()
        .zip(rows)
        .filter(|(key, row)| {
            let stored = row.pointer("/doc/w").and_then(|w| w.as_str()) == Some(key.as_str());
            let deleted = row.pointer("/value/deleted") == Some(&serde_json::Value::Bool(true));
            !stored || deleted
        })
        .map(|(key, _)| key.clone())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_counts_only_with_its_own_body() {
        let batch: Vec<String> = ["a", "b", "c", "d"].iter().map(|k| k.to_string()).collect();
        let answer = br#"{"total_rows":3,"rows":[
            {"id":"a","key":"a","value":{"rev":"1-x"},"doc":{"_id":"a","w":"a"}},
            {"key":"b","error":"not_found"},
            {"id":"c","key":"c","value":{"rev":"2-y","deleted":true},"doc":null},
            {"id":"d","key":"d","value":{"rev":"1-z"},"doc":{"_id":"d","w":"other"}}]}"#;
        assert_eq!(
            absent_keys(&batch, answer).expect("parses"),
            ["b", "c", "d"]
        );
        assert!(absent_keys(&batch, br#"{"rows":[]}"#).is_err());
        assert!(absent_keys(&batch, b"nope").is_err());
    }
}
