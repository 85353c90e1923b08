//! CouchDB partitioned databases (`PUT /db?partitioned=true`): every document id but the
//! reserved ones is `partition:id`, and `/db/_partition/{p}/...` asks one partition
//! (`docs/format/partitions.md`). Documents keep their place (the vbucket of the whole id, so
//! the KV door finds them where the SDKs look): a partition's documents are the id range
//! `p:` .. `p;` of every vbucket, read as one merged scan.

use hyper::Method;
use serde_json::json;
use settee_auth::Operation;
use settee_engine::{Keyspace, ScanRange};

use crate::db_api::open;
use crate::doc_api::is_reserved_id;
use crate::error::{ApiError, ApiResult};
use crate::request::Req;
use crate::response::{json, HttpResponse};
use crate::router::not_allowed;
use crate::HttpState;

pub use settee_engine::partition::{id_bounds, partition_of};

/// CouchDB's checks of a partition name, with its reasons.
pub fn validate_partition(partition: &str) -> ApiResult<()> {
    if partition.is_empty() {
        return Err(ApiError::IllegalPartition(
            "Partition must not be empty".into(),
        ));
    }
    if partition.starts_with('_') {
        return Err(ApiError::IllegalPartition(
            "Partition must not start with an underscore".into(),
        ));
    }
    if partition.contains(':') {
        return Err(ApiError::IllegalPartition(
            "Partition must not contain a colon".into(),
        ));
    }
    Ok(())
}

/// A new document's id in a partitioned database (after the checks every id gets): reserved
/// ids are free, the others must be `partition:id` with both parts valid.
pub fn validate_partitioned_id(keyspace: &Keyspace, id: &str) -> ApiResult<()> {
    if !keyspace.bucket().is_partitioned() || is_reserved_id(id) {
        return Ok(());
    }
    let Some((partition, rest)) = id.split_once(':') else {
        return Err(ApiError::IllegalDocId(
            "Doc id must be of form partition:id".into(),
        ));
    };
    validate_partition(partition)?;
    if rest.is_empty() {
        return Err(ApiError::IllegalDocId(
            "Document id must not be empty".into(),
        ));
    }
    Ok(())
}

/// Whether writes may grow documents in each partition of one request, under
/// `[couchdb] max_partition_size` (CouchDB's rule: a partition already at or past the limit
/// takes deletes, shrinking updates and replicated revisions, nothing that grows it). Each
/// partition's size is counted once per request, by a scan, only when a limit is set.
pub struct PartitionRoom {
    max: Option<u64>,
    full: std::collections::HashMap<String, bool>,
}

impl PartitionRoom {
    pub fn new(req: &Req, keyspace: &Keyspace) -> PartitionRoom {
        PartitionRoom {
            max: req
                .settings
                .max_partition_size
                .filter(|_| keyspace.bucket().is_partitioned()),
            full: std::collections::HashMap::new(),
        }
    }

    /// Refuses (403 `partition_overflow`) a new edit of `id` with `body` that grows a full
    /// partition's document.
    pub fn admits(
        &mut self,
        keyspace: &Keyspace,
        id: &str,
        body: &[u8],
        deleted: bool,
        new_edits: bool,
    ) -> ApiResult<()> {
        let Some(max) = self.max else {
            return Ok(());
        };
        let Some(partition) =
            partition_of(id).filter(|_| new_edits && !deleted && !is_reserved_id(id))
        else {
            return Ok(());
        };
        if !self.full.contains_key(partition) {
            let full = partition_sizes(keyspace, partition)?.external >= max;
            self.full.insert(partition.to_string(), full);
        }
        if !self.full[partition] {
            return Ok(());
        }
        let current = keyspace
            .read_record_or_skip(id.as_bytes())?
            .and_then(|record| {
                record
                    .winner()
                    .filter(|leaf| !leaf.deleted)
                    .map(|leaf| leaf.body.len())
            });
        match current {
            Some(len) if body.len() <= len => Ok(()),
            _ => Err(ApiError::PartitionOverflow(id.to_string())),
        }
    }
}

/// A partition's counts and sizes (see [`info`]).
#[derive(Default)]
struct PartitionSizes {
    live: u64,
    deleted: u64,
    external: u64,
    active: u64,
}

fn partition_sizes(keyspace: &Keyspace, partition: &str) -> ApiResult<PartitionSizes> {
    let (low, high) = id_bounds(partition);
    let range = ScanRange {
        collection: keyspace.collection(),
        start: Some(low.into_bytes()),
        end: Some(high.into_bytes()),
        inclusive_end: false,
        descending: false,
    };
    let mut sizes = PartitionSizes::default();
    for item in keyspace.scan_docs(range) {
        let (_, record) = item?;
        let Some(winner) = record.winner() else {
            continue;
        };
        let bytes = record.encoded_len() as u64;
        sizes.active += bytes;
        if winner.deleted {
            sizes.deleted += 1;
        } else {
            sizes.live += 1;
            sizes.external += bytes;
        }
    }
    Ok(sizes)
}

/// A partition query's `limit`: at most `[query_server_config] partition_query_limit` when it
/// is set, which is also the default.
pub fn query_limit(req: &Req, asked: Option<u64>) -> ApiResult<Option<u64>> {
    match (req.settings.partition_query_limit, asked) {
        (Some(max), Some(limit)) if limit > max => Err(ApiError::QueryParse(format!(
            "Limit is too large, must not exceed {max}"
        ))),
        (Some(max), None) => Ok(Some(max)),
        (_, asked) => Ok(asked),
    }
}

/// `?partition=` of a partition request must name the path's partition.
pub fn check_query_partition(req: &Req, partition: &str) -> ApiResult<()> {
    match req.param("partition") {
        Some(named) if named != partition => Err(ApiError::BadRequest(
            "Conflicting value for `partition` in query string".into(),
        )),
        _ => Ok(()),
    }
}

/// The partitioned database `db`, after the partition name's checks: requests to a
/// database that is not partitioned are refused as CouchDB refuses them.
pub fn partitioned(
    state: &HttpState,
    req: &Req,
    db: &str,
    partition: &str,
    operation: Operation<'_>,
) -> ApiResult<Keyspace> {
    let keyspace = open(state, req, db, operation)?;
    if !keyspace.bucket().is_partitioned() {
        return Err(ApiError::BadRequest("database is not partitioned".into()));
    }
    validate_partition(partition)?;
    check_query_partition(req, partition)?;
    Ok(keyspace)
}

/// `/db/_partition/...`
pub async fn route(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    rest: &[&str],
) -> ApiResult<HttpResponse> {
    match rest {
        [] | [""] | ["", ..] => Err(ApiError::BadRequest("invalid_partition_req".into())),
        [partition] => info(state, req, db, partition),
        [partition, "_all_docs"] => {
            partitioned(state, req, db, partition, Operation::ReadDb)?;
            crate::bulk_api::all_docs(
                state,
                req,
                db,
                crate::bulk_api::DocSet::Partition(partition),
            )
            .await
        }
        [partition, "_find"] => {
            partitioned(state, req, db, partition, Operation::ReadDb)?;
            Box::pin(crate::mango_api::find(state, req, db, Some(partition))).await
        }
        [partition, "_explain"] => {
            partitioned(state, req, db, partition, Operation::ReadDb)?;
            crate::mango_api::explain_find(state, req, db, Some(partition)).await
        }
        [partition, "_design", name, "_view", view] => {
            partitioned(state, req, db, partition, Operation::ReadDb)?;
            Box::pin(crate::view_api::partition_view(
                state, req, db, name, view, partition,
            ))
            .await
        }
        [partition, ..] => {
            // `/_partition//x` arrives without its empty segment: `x` is then checked as
            // the partition (CouchDB answers 400 for both).
            partitioned(state, req, db, partition, Operation::ReadDb)?;
            Err(ApiError::missing())
        }
    }
}

/// `GET /db/_partition/{p}`: the partition's document counts and sizes, counted by a scan
/// of its id range: `external` is its live documents' stored records (the database's
/// `external` counts stored records too), `active` all of them, tombstones included.
fn info(state: &HttpState, req: &Req, db: &str, partition: &str) -> ApiResult<HttpResponse> {
    if !matches!(req.method, Method::GET | Method::HEAD) {
        return Err(not_allowed("GET,HEAD"));
    }
    let keyspace = partitioned(state, req, db, partition, Operation::ReadDb)?;
    let sizes = partition_sizes(&keyspace, partition)?;
    Ok(json(
        hyper::StatusCode::OK,
        &json!({
            "db_name": keyspace.name(),
            "sizes": {"active": sizes.active, "external": sizes.external},
            "partition": partition,
            "doc_count": sizes.live,
            "doc_del_count": sizes.deleted,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_checked_as_couchdb_checks_them() {
        assert!(validate_partition("foo").is_ok());
        for (bad, reason) in [
            ("", "Partition must not be empty"),
            ("_foo", "Partition must not start with an underscore"),
            ("a:b", "Partition must not contain a colon"),
        ] {
            let Err(error) = validate_partition(bad) else {
                panic!("{bad} accepted");
            };
            assert_eq!(error.code(), "illegal_partition");
            assert_eq!(error.to_string(), reason);
        }
    }
}
