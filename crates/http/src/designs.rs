//! A design document wherever it lives. In a cluster a design document is a document of one
//! vbucket, so a node that is not that vbucket's active reads it from its active node (a
//! forwarded `GET` as the client's user) or takes the copy the front node of a scattered
//! request carried (docs/format/cluster-transport.md); elsewhere it is read from this node.

use serde_json::{Map, Value};
use settee_engine::Keyspace;

use crate::doc_api::read_doc;
use crate::error::{ApiError, ApiResult};
use crate::location::encode_segment;
use crate::request::Req;
use crate::HttpState;

/// A live design document: its id, winning revision and body (without `_id` and `_rev`).
pub struct DesignDoc {
    pub id: String,
    pub rev: String,
    pub body: Map<String, Value>,
}

impl DesignDoc {
    /// Its JSON with `_id` and `_rev`, as a front node carries it.
    pub fn to_json(&self) -> Vec<u8> {
        let mut members = self.body.clone();
        members.insert("_id".into(), Value::String(self.id.clone()));
        members.insert("_rev".into(), Value::String(self.rev.clone()));
        Value::Object(members).to_string().into_bytes()
    }

    /// A carried copy (JSON with `_id` and `_rev`), when it is `id`.
    pub fn carried(json: &[u8], id: &str) -> Option<DesignDoc> {
        let Ok(Value::Object(mut body)) = serde_json::from_slice::<Value>(json) else {
            return None;
        };
        if body.remove("_id").as_ref().and_then(Value::as_str) != Some(id) {
            return None;
        }
        let rev = match body.remove("_rev") {
            Some(Value::String(rev)) => rev,
            _ => String::new(),
        };
        Some(DesignDoc {
            id: id.to_owned(),
            rev,
            body,
        })
    }
}

/// This node's copy of `_design/{name}` (404 `missing` or `deleted` as CouchDB answers).
pub fn read_local(keyspace: &Keyspace, name: &str) -> ApiResult<DesignDoc> {
    let id = format!("_design/{name}");
    let record = read_doc(keyspace, &id)?.ok_or_else(ApiError::missing)?;
    let leaf = record
        .winner()
        .filter(|leaf| !leaf.deleted)
        .ok_or_else(ApiError::deleted)?;
    let body: Map<String, Value> = serde_json::from_slice(&leaf.body)
        .map_err(|error| ApiError::Internal(format!("design document: {error}")))?;
    Ok(DesignDoc {
        id,
        rev: leaf.rev.to_string(),
        body,
    })
}

/// `_design/{name}` of database `db`: the copy `req` carries, else this node's when its
/// vbucket is active here (or `db` is not in a cluster map), else its active node's.
pub async fn read(
    state: &HttpState,
    req: &Req,
    keyspace: &Keyspace,
    db: &str,
    name: &str,
) -> ApiResult<DesignDoc> {
    let id = format!("_design/{name}");
    if let Some(carried) = req
        .design
        .as_deref()
        .and_then(|json| DesignDoc::carried(json, &id))
    {
        return Ok(carried);
    }
    let Some(cluster) = state
        .cluster
        .get()
        .filter(|cluster| !cluster.serves_here(db, &id))
    else {
        return read_local(keyspace, name);
    };
    let target = format!("/{}/_design/{}", encode_segment(db), encode_segment(name));
    let mut request = crate::forward::request_as(req, "GET", target, Vec::new());
    request.headers = vec![("accept".into(), b"application/json".to_vec())];
    let reply = cluster.forward(db, &id, request).await?;
    let answer: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
    match reply.status {
        200 => DesignDoc::carried(&reply.body, &id).ok_or_else(|| {
            ApiError::ServiceUnavailable("a design document that does not parse".into())
        }),
        404 if answer["reason"] == "deleted" => Err(ApiError::deleted()),
        404 => Err(ApiError::missing()),
        401 => Err(ApiError::Unauthorized(
            answer["reason"]
                .as_str()
                .unwrap_or("unauthorized")
                .to_owned(),
        )),
        403 => Err(ApiError::Forbidden(
            answer["reason"].as_str().unwrap_or("forbidden").to_owned(),
        )),
        status => Err(ApiError::ServiceUnavailable(format!(
            "the design document's node answered {status}"
        ))),
    }
}
