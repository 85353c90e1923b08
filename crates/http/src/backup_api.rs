//! The node's side of `settee backup` (`docs/format/backup.md`): a checkpoint of the store made
//! on request, its files served one by one, released when the client is done. Server admins
//! only.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use hyper::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Response, StatusCode};
use serde_json::json;
use tokio::io::AsyncReadExt;

use crate::auth::require_admin;
use crate::error::{ApiError, ApiResult};
use crate::request::Req;
use crate::response::{channel_body, json, ok_true, HttpResponse};
use crate::router::not_allowed;
use crate::HttpState;

/// Checkpoints that may exist at once: each pins the SST files it links.
const CHECKPOINTS_MAX: usize = 4;
/// Bytes read from a file per body chunk.
const CHUNK_BYTES: usize = 256 << 10;

fn checkpoints_dir(state: &HttpState) -> ApiResult<&Path> {
    state
        .config
        .backup_dir
        .as_deref()
        .ok_or_else(|| ApiError::NotImplemented("this node has no backup directory".into()))
}

/// 32 lowercase hex digits, as the node makes them.
fn valid_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}

/// A plain file name of a checkpoint directory.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.contains('\\')
        && !name.contains('\0')
}

/// `/_node/{node}/_backup[/ID[/NAME]]`.
pub async fn backup(state: &HttpState, req: &mut Req, rest: &[&str]) -> ApiResult<HttpResponse> {
    require_admin(&req.user)?;
    let dir = checkpoints_dir(state)?.to_path_buf();
    match (rest, &req.method) {
        ([], &Method::POST) => create(state, dir).await,
        ([], _) => Err(not_allowed("POST")),
        ([id], &Method::DELETE) if valid_id(id) => release(dir.join(id)).await,
        ([_], _) => Err(ApiError::missing()),
        ([id, name], &Method::GET) if valid_id(id) && valid_name(name) => {
            serve_file(dir.join(id).join(name)).await
        }
        ([_, _], &Method::GET) => Err(ApiError::missing()),
        ([_, _], _) => Err(not_allowed("GET")),
        _ => Err(ApiError::missing()),
    }
}

async fn create(state: &HttpState, dir: PathBuf) -> ApiResult<HttpResponse> {
    let internal =
        |error: std::io::Error| ApiError::Internal(format!("backup checkpoints: {error}"));
    tokio::fs::create_dir_all(&dir).await.map_err(internal)?;
    let mut existing = 0;
    let mut entries = tokio::fs::read_dir(&dir).await.map_err(internal)?;
    while entries.next_entry().await.map_err(internal)?.is_some() {
        existing += 1;
    }
    if existing >= CHECKPOINTS_MAX {
        return Err(ApiError::ServiceUnavailable(format!(
            "{existing} backups are in progress; release one (DELETE) first"
        )));
    }
    let id = settee_engine::hex(&rand::random::<[u8; 16]>());
    let path = dir.join(&id);
    let engine = state.engine.clone();
    let files = tokio::task::spawn_blocking(move || engine.checkpoint(&path))
        .await
        .map_err(|error| ApiError::Internal(format!("checkpoint task: {error}")))??;
    let files: Vec<serde_json::Value> = files
        .into_iter()
        .map(|(name, size)| json!({"name": name, "size": size}))
        .collect();
    Ok(json(
        StatusCode::CREATED,
        &json!({"id": id, "files": files}),
    ))
}

async fn release(path: PathBuf) -> ApiResult<HttpResponse> {
    match tokio::fs::remove_dir_all(&path).await {
        Ok(()) => Ok(ok_true(StatusCode::OK)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Err(ApiError::missing()),
        Err(error) => Err(ApiError::Internal(format!("releasing a backup: {error}"))),
    }
}

async fn serve_file(path: PathBuf) -> ApiResult<HttpResponse> {
    let mut file = match tokio::fs::File::open(&path).await {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(ApiError::missing())
        }
        Err(error) => {
            return Err(ApiError::Internal(format!(
                "opening a backup file: {error}"
            )))
        }
    };
    let size = file
        .metadata()
        .await
        .map_err(|error| ApiError::Internal(format!("sizing a backup file: {error}")))?
        .len();
    let (sender, receiver) = tokio::sync::mpsc::channel::<Bytes>(2);
    tokio::spawn(async move {
        let mut left = size;
        while left > 0 {
            let mut chunk = vec![0u8; CHUNK_BYTES.min(left as usize)];
            if file.read_exact(&mut chunk).await.is_err() {
                // A short body: the client sees fewer bytes than Content-Length and fails.
                return;
            }
            left -= chunk.len() as u64;
            if sender.send(Bytes::from(chunk)).await.is_err() {
                return;
            }
        }
    });
    let mut response = Response::new(channel_body(receiver));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    headers.insert(CONTENT_LENGTH, HeaderValue::from(size));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_cannot_leave_the_checkpoint_directory() {
        assert!(valid_id("0123456789abcdef0123456789abcdef"));
        for id in [
            "",
            "..",
            "0123456789ABCDEF0123456789abcdef",
            "0123456789abcdef0123456789abcde/",
        ] {
            assert!(!valid_id(id), "{id}");
        }
        assert!(valid_name("000012.sst"));
        assert!(valid_name("MANIFEST-000005"));
        for name in ["", ".", "..", "a/b", "..\\x", "a\0"] {
            assert!(!valid_name(name), "{name:?}");
        }
    }
}
