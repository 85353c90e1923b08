//! Database endpoints: create, info, delete, `_security`, `_revs_limit`, `_compact`,
//! `_view_cleanup`, `_purge`, `_ensure_full_commit`.

use hyper::{Method, StatusCode};
use serde_json::json;
use settee_engine::{CreateOutcome, EngineError, Keyspace, ManifestChange};

use crate::auth::{default_security, require, require_admin, Operation};
use crate::couch_doc::parse_rev;
use crate::error::{ApiError, ApiResult};
use crate::request::Req;
use crate::response::{json, ok_true, with_header, HttpResponse};
use crate::router::not_allowed;
use crate::HttpState;

pub use settee_http_core::names::{is_system_db, validate_db_name};

/// The database behind `/{db}`: a bucket's `_default._default` under the bucket's name, or
/// another collection under its door name `bucket$scope$collection`
/// (`docs/format/collections.md`); otherwise CouchDB's 404.
pub fn keyspace(state: &HttpState, db: &str) -> ApiResult<Keyspace> {
    if let Some(bucket) = state.engine.bucket(db) {
        return Ok(Keyspace::default_of(bucket));
    }
    let door = settee_manifest::split_door_name(db).ok_or_else(ApiError::db_not_found)?;
    let bucket = state
        .engine
        .bucket(door.bucket)
        .ok_or_else(ApiError::db_not_found)?;
    let collection = bucket
        .manifest()
        .find(&door.scope, &door.collection)
        .map(|collection| collection.id)
        .ok_or_else(ApiError::db_not_found)?;
    Ok(Keyspace::new(bucket, collection))
}

/// Every database name in sorted order: each bucket's, and the door name of each of its
/// collections but `_default._default`.
pub fn all_db_names(state: &HttpState) -> Vec<String> {
    let mut names = Vec::new();
    for name in state.engine.bucket_names() {
        if let Some(bucket) = state.engine.bucket(&name) {
            let manifest = bucket.manifest();
            for scope in manifest.scopes() {
                for collection in &scope.collections {
                    if collection.id != 0 {
                        names.push(settee_manifest::door_name(
                            &name,
                            &scope.name,
                            &collection.name,
                        ));
                    }
                }
            }
        }
        names.push(name);
    }
    names.sort_unstable();
    names
}

/// The database, after checking the user may do `operation` there. Authorisation is the
/// bucket's: its `_security` object governs every collection.
pub fn open(
    state: &HttpState,
    req: &Req,
    db: &str,
    operation: Operation<'_>,
) -> ApiResult<Keyspace> {
    let keyspace = keyspace(state, db)?;
    require(keyspace.bucket(), &req.user, operation)?;
    Ok(keyspace)
}

/// `GET /{db}`; `node` is this node's name (in `update_seq`); `only`: the vbuckets whose
/// documents are counted (a request another node scattered here, settee-http-scatter).
pub fn db_info(
    keyspace: &Keyspace,
    node: &str,
    only: Option<&[bool]>,
) -> ApiResult<serde_json::Value> {
    let bucket = keyspace.bucket();
    let (live, deleted) = match only {
        Some(only) => keyspace.doc_counts_only(only)?,
        None => keyspace.doc_counts()?,
    };
    // As CouchDB: file = bytes on disk (garbage included), active = the live part of them
    // (active <= file), external = the documents' records uncompressed. The disk sizes are the
    // bucket's: its collections share its files.
    let sizes = bucket.disk_sizes().unwrap_or_else(|error| {
        tracing::warn!(%error, db = bucket.name(), "cannot size the database");
        Default::default()
    });
    let external = keyspace.record_bytes()?;
    Ok(json!({
        "db_name": keyspace.name(),
        "purge_seq": keyspace.purge_seq()?.to_string(),
        "update_seq": crate::changes_api::couch_seq(
            node,
            keyspace,
            &keyspace.high_seqnos()?,
        ),
        "sizes": {"file": sizes.file, "external": external, "active": sizes.active},
        "props": if bucket.is_partitioned() { json!({"partitioned": true}) } else { json!({}) },
        "doc_del_count": deleted,
        "doc_count": live,
        "disk_format_version": 8,
        "compact_running": bucket.is_compacting(),
        "cluster": {"q": bucket.vbuckets(), "n": 1, "w": 1, "r": 1},
        "instance_start_time": "0",
    }))
}

pub async fn database(state: &HttpState, req: &mut Req, db: &str) -> ApiResult<HttpResponse> {
    match req.method {
        Method::GET | Method::HEAD => {
            let keyspace = open(state, req, db, Operation::ReadDb)?;
            Ok(json(
                StatusCode::OK,
                &db_info(&keyspace, &state.config.node_name, req.vbuckets.as_deref())?,
            ))
        }
        Method::PUT => create(state, req, db).await,
        Method::DELETE => {
            require_admin(&req.user)?;
            if req.has_param("rev") {
                return Err(ApiError::BadRequest(
                    "You tried to DELETE a database with a ?=rev parameter. Did you mean to DELETE a document instead?".into(),
                ));
            }
            if let Some(cluster) = state.cluster.get().filter(|_| !db.starts_with('_')) {
                if cluster.delete_db(db).await? {
                    return Ok(ok_true(StatusCode::OK));
                }
            }
            if state.engine.delete_bucket(db).await? {
                return Ok(ok_true(StatusCode::OK));
            }
            drop_collection(state, db).await
        }
        Method::POST => crate::doc_api::post(state, req, db).await,
        _ => Err(not_allowed("DELETE,GET,HEAD,POST,PUT")),
    }
}

async fn create(state: &HttpState, req: &Req, db: &str) -> ApiResult<HttpResponse> {
    require_admin(&req.user)?;
    validate_db_name(db)?;
    let partitioned = match req.param("partitioned") {
        None | Some("false") => false,
        Some("true") if is_system_db(db) => {
            return Err(ApiError::BadRequest(
                "Cannot partition a system database".into(),
            ))
        }
        Some("true") => true,
        Some(_) => {
            return Err(ApiError::BadRequest(
                "Invalid `partitioned` parameter".into(),
            ))
        }
    };
    if create_collection(state, db).await? {
        return Ok(created(req, db));
    }
    let vbuckets = match req.u64_param("q")? {
        None => state.config.default_vbuckets,
        Some(q) if (1..=u64::from(settee_engine::vbucket::VBUCKETS_MAX)).contains(&q) => q as u16,
        Some(_) => {
            return Err(ApiError::BadRequest(format!(
                "q must be between 1 and {}",
                settee_engine::vbucket::VBUCKETS_MAX
            )))
        }
    };
    match state.cluster.get().filter(|_| !is_system_db(db)) {
        Some(cluster) => {
            if state.engine.bucket(db).is_some() {
                // A database this node had before it joined the cluster.
                return Err(ApiError::FileExists);
            }
            let replicas = match req.u64_param("n")? {
                None => None,
                Some(n @ 1..=4) => Some(n as u8 - 1),
                Some(_) => return Err(ApiError::BadRequest("n must be between 1 and 4".into())),
            };
            if partitioned {
                return Err(ApiError::NotImplemented(
                    "partitioned databases are not served by a cluster yet".into(),
                ));
            }
            cluster.create_db(db, vbuckets, replicas).await?;
        }
        None => create_db(state, db, vbuckets, partitioned).await?,
    }
    Ok(created(req, db))
}

fn created(req: &Req, db: &str) -> HttpResponse {
    with_header(
        ok_true(StatusCode::CREATED),
        "location",
        &crate::location::absolute_uri(req, &[db]),
    )
}

/// `PUT /bucket$scope$collection` of an existing bucket creates the collection, and its scope
/// if needed (`docs/format/collections.md`, door names). `false` when `db` names no existing
/// bucket's collection: then it is a new database's name.
async fn create_collection(state: &HttpState, db: &str) -> ApiResult<bool> {
    let Some(door) = settee_manifest::split_door_name(db) else {
        return Ok(false);
    };
    let Some(bucket) = state.engine.bucket(door.bucket) else {
        return Ok(false);
    };
    // Whether the scope and the collection exist is the manifest's to say where the change is
    // planned (in a cluster, on the committed manifest: this node's copy may be a change
    // behind), not this node's copy's.
    if bucket
        .manifest()
        .find(&door.scope, &door.collection)
        .is_none()
        || state.cluster.get().is_some()
    {
        let scope = ManifestChange::CreateScope {
            name: door.scope.to_string(),
        };
        match state.engine.change_manifest(&bucket, scope).await {
            Ok(_) | Err(EngineError::ScopeExists(_)) => {}
            Err(error) => return Err(collection_error(db, error)),
        }
    }
    let change = ManifestChange::CreateCollection {
        scope: door.scope.to_string(),
        name: door.collection.to_string(),
        max_ttl: None,
    };
    match state.engine.change_manifest(&bucket, change).await {
        Ok(_) => Ok(true),
        Err(EngineError::CollectionExists(_)) => Err(ApiError::FileExists),
        Err(error) => Err(collection_error(db, error)),
    }
}

/// `DELETE /bucket$scope$collection` drops the collection: gone at once, its data purged in
/// the background.
async fn drop_collection(state: &HttpState, db: &str) -> ApiResult<HttpResponse> {
    // By name: the manifest the change is planned on says whether it exists (in a cluster,
    // the committed one; this node's copy may be a change behind).
    let door = settee_manifest::split_door_name(db).ok_or_else(ApiError::db_not_found)?;
    let bucket = state
        .engine
        .bucket(door.bucket)
        .ok_or_else(ApiError::db_not_found)?;
    let drop = ManifestChange::DropCollection {
        scope: door.scope.to_string(),
        name: door.collection.to_string(),
    };
    match state.engine.change_manifest(&bucket, drop).await {
        Ok(_) => Ok(ok_true(StatusCode::OK)),
        Err(EngineError::UnknownCollection { .. } | EngineError::UnknownScope { .. }) => {
            Err(ApiError::db_not_found())
        }
        Err(error) => Err(collection_error(db, error)),
    }
}

/// A refused manifest change as CouchDB refuses a database name (400 `illegal_database_name`),
/// except what is not the name's fault.
fn collection_error(db: &str, error: EngineError) -> ApiError {
    match error {
        EngineError::InvalidName(reason) | EngineError::LimitReached(reason) => {
            ApiError::IllegalDatabaseName(format!("Name: '{db}'. {reason}"))
        }
        other => other.into(),
    }
}

/// Creates a database with CouchDB 3's default (admin-only) security.
pub async fn create_db(
    state: &HttpState,
    db: &str,
    vbuckets: u16,
    partitioned: bool,
) -> ApiResult<()> {
    match state
        .engine
        .create_bucket_with(db, vbuckets, partitioned)
        .await?
    {
        CreateOutcome::Exists => Err(ApiError::FileExists),
        CreateOutcome::Created => {
            if let Some(bucket) = state.engine.bucket(db) {
                bucket.set_security(default_security()).await?;
            }
            if settee_auth::is_users_db(db) {
                // As CouchDB's accounts cache does when its database appears: `_design/_auth`
                // in the new database and in the configured accounts database.
                for accounts in [db.to_string(), settee_auth::authentication_db()] {
                    settee_http_core::auth_db::ensure_auth_ddoc(&state.engine, &accounts).await?;
                }
            }
            Ok(())
        }
    }
}

pub async fn security(state: &HttpState, req: &mut Req, db: &str) -> ApiResult<HttpResponse> {
    match req.method {
        Method::GET | Method::HEAD => {
            let keyspace = open(state, req, db, Operation::ReadSecurity)?;
            Ok(json(StatusCode::OK, &keyspace.bucket().security()))
        }
        Method::PUT => {
            let bucket = open(state, req, db, Operation::WriteSecurity)?
                .bucket()
                .clone();
            let body = req.json_body_within(&state.config).await?;
            validate_security(&body)?;
            bucket.set_security(body).await?;
            Ok(ok_true(StatusCode::OK))
        }
        _ => Err(not_allowed("GET,HEAD,PUT")),
    }
}

/// A security object as CouchDB takes it: an object whose `admins` and `members` hold
/// lists of strings as `names` and `roles`. Any other shape of those is refused as CouchDB's
/// shards refuse it (500 `no_majority`).
fn validate_security(body: &serde_json::Value) -> ApiResult<()> {
    let Some(object) = body.as_object() else {
        return Err(ApiError::BadRequest(
            "Security object must be a JSON object".into(),
        ));
    };
    for section in ["admins", "members"] {
        let Some(value) = object.get(section) else {
            continue;
        };
        if !value.is_object() {
            return Err(ApiError::NoMajority);
        }
        for field in ["names", "roles"] {
            if let Some(list) = value.get(field) {
                let ok = list
                    .as_array()
                    .is_some_and(|items| items.iter().all(|item| item.is_string()));
                if !ok {
                    return Err(ApiError::NoMajority);
                }
            }
        }
    }
    Ok(())
}

pub async fn revs_limit(state: &HttpState, req: &mut Req, db: &str) -> ApiResult<HttpResponse> {
    match req.method {
        Method::GET | Method::HEAD => {
            let keyspace = open(state, req, db, Operation::ReadDb)?;
            Ok(json(StatusCode::OK, &json!(keyspace.bucket().revs_limit())))
        }
        Method::PUT => {
            let bucket = open(state, req, db, Operation::AdminDb)?.bucket().clone();
            let body = req.json_body_within(&state.config).await?;
            let limit = body
                .as_u64()
                .filter(|limit| (1..=u64::from(u32::MAX)).contains(limit))
                .ok_or_else(|| ApiError::BadRequest("Rev limit has to be an integer".into()))?;
            bucket.set_revs_limit(limit as u32).await?;
            Ok(ok_true(StatusCode::OK))
        }
        _ => Err(not_allowed("GET,HEAD,PUT")),
    }
}

pub async fn compact(state: &HttpState, req: &mut Req, db: &str) -> ApiResult<HttpResponse> {
    if req.method != Method::POST {
        return Err(not_allowed("POST"));
    }
    let bucket = open(state, req, db, Operation::AdminDb)?.bucket().clone();
    req.require_json_content_type()?;
    // CouchDB answers 202 at once and compacts in the background (compact_running is true
    // from here on).
    let name = bucket.name().to_string();
    let compaction = bucket.start_compaction();
    tokio::spawn(async move {
        if let Err(error) = compaction.await {
            tracing::warn!(%error, db = name, "compaction failed");
        }
    });
    Ok(ok_true(StatusCode::ACCEPTED))
}

/// `POST /{db}/_compact/{ddoc}`: CouchDB compacts the design document's view files; settee
/// compacts the key range of its view group, in the background (202 at once, `_info`'s
/// `compact_running` meanwhile). A missing design document is 404 as in CouchDB.
pub async fn compact_views(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    ddoc: &str,
) -> ApiResult<HttpResponse> {
    if req.method != Method::POST {
        return Err(not_allowed("POST"));
    }
    let keyspace = open(state, req, db, Operation::AdminDb)?;
    req.require_json_content_type()?;
    // In a cluster the design document may live on another node (or come with a scattered
    // request, which every node answers for its own index).
    let carried = match state.cluster.get() {
        Some(_) => Some(
            crate::designs::read(state, req, &keyspace, db, ddoc)
                .await
                .map_err(|error| match error {
                    ApiError::NotFound(_) => ApiError::missing(),
                    other => other,
                })?
                .to_json(),
        ),
        None => {
            let id = format!("_design/{ddoc}");
            let live = crate::doc_api::read_doc(&keyspace, &id)?
                .is_some_and(|record| record.winner().is_some_and(|winner| !winner.deleted));
            if !live {
                return Err(ApiError::missing());
            }
            None
        }
    };
    // A design document without views has no index to compact: 202 all the same.
    let found = crate::view_api::design_views(state, &keyspace, ddoc, carried.as_deref()).await;
    if let Ok(found) = found {
        tokio::task::spawn_blocking(move || found.group.compact());
    }
    Ok(ok_true(StatusCode::ACCEPTED))
}

pub async fn view_cleanup(state: &HttpState, req: &mut Req, db: &str) -> ApiResult<HttpResponse> {
    if req.method != Method::POST {
        return Err(not_allowed("POST"));
    }
    let keyspace = open(state, req, db, Operation::AdminDb)?;
    req.require_json_content_type()?;
    crate::view_api::view_cleanup(state, &keyspace, req.design.as_deref()).await
}

pub async fn purge(state: &HttpState, req: &mut Req, db: &str) -> ApiResult<HttpResponse> {
    if req.method != Method::POST {
        return Err(not_allowed("POST"));
    }
    let keyspace = open(state, req, db, Operation::AdminDb)?;
    let body = req.json_body_within(&state.config).await?;
    let Some(requests) = body.as_object() else {
        return Err(ApiError::BadRequest(
            "Request body must be a JSON object".into(),
        ));
    };
    if requests.len() > state.config.max_docs_per_bulk {
        return Err(ApiError::RequestTooLarge);
    }
    for id in requests.keys() {
        crate::partition_api::validate_partitioned_id(&keyspace, id)?;
    }
    let mut purged = serde_json::Map::new();
    for (id, revs) in requests {
        let revs = revs
            .as_array()
            .ok_or_else(|| ApiError::BadRequest("revs must be a list".into()))?
            .iter()
            .map(|rev| parse_rev(rev.as_str().unwrap_or("")))
            .collect::<ApiResult<Vec<_>>>()?;
        let done = keyspace.purge(id.as_bytes(), &revs).await?;
        purged.insert(
            id.clone(),
            json!(done.iter().map(|rev| rev.to_string()).collect::<Vec<_>>()),
        );
    }
    Ok(json(
        StatusCode::CREATED,
        &json!({"purge_seq": null, "purged": purged}),
    ))
}

pub async fn ensure_full_commit(
    state: &HttpState,
    req: &mut Req,
    db: &str,
) -> ApiResult<HttpResponse> {
    if req.method != Method::POST {
        return Err(not_allowed("POST"));
    }
    open(state, req, db, Operation::ReadDb)?;
    // Every acknowledged write is already fsynced: nothing to flush.
    Ok(json(
        StatusCode::CREATED,
        &json!({"ok": true, "instance_start_time": "0"}),
    ))
}
