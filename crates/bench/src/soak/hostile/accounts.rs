//! Hostile use of accounts: wrong passwords on both doors, and a member who keeps using
//! its connections after losing its access.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use hyper::Method;
use settee_kv_codec::{datatype, opcode, status};

use super::*;

/// Creates the account whose password the failed logins guess at.
pub(crate) async fn prepare(setup: &mut Setup) -> anyhow::Result<()> {
    ensure_user(setup, VICTIM_USER).await
}

/// Creates `_users` account `name` with [`ACCOUNT_PASSWORD`] (replacing an older one).
async fn ensure_user(setup: &mut Setup, name: &str) -> anyhow::Result<()> {
    let path = format!("/_users/org.couchdb.user:{name}");
    let (status, answer) = setup.request(Method::GET, &path, Bytes::new()).await?;
    let mut doc = serde_json::json!({
        "name": name, "password": ACCOUNT_PASSWORD, "roles": [], "type": "user"
    });
    if status.is_success() {
        let current: serde_json::Value = serde_json::from_slice(&answer)?;
        doc["_rev"] = current["_rev"].clone();
    }
    setup
        .expect_ok(Method::PUT, &path, serde_json::to_vec(&doc)?)
        .await?;
    Ok(())
}

async fn delete_user(setup: &mut Setup, name: &str) -> anyhow::Result<()> {
    let path = format!("/_users/org.couchdb.user:{name}");
    let answer = setup.expect_ok(Method::GET, &path, Bytes::new()).await?;
    let current: serde_json::Value = serde_json::from_slice(&answer)?;
    let Some(rev) = current["_rev"].as_str() else {
        bail!("{path} has no _rev");
    };
    setup
        .expect_ok(Method::DELETE, &format!("{path}?rev={rev}"), Bytes::new())
        .await?;
    Ok(())
}

pub(super) async fn set_members(setup: &mut Setup, names: &[&str]) -> anyhow::Result<()> {
    let path = format!("{}/_security", setup.db_path());
    let body = serde_json::json!({"admins": {"names": [], "roles": []},
                                  "members": {"names": names, "roles": []}});
    setup
        .expect_ok(Method::PUT, &path, serde_json::to_vec(&body)?)
        .await?;
    Ok(())
}

/// Wrong passwords over HTTP Basic and `_session`, for a real user and for made-up names,
/// twenty times a second.
pub(super) async fn failed_logins_http(endpoints: Arc<Endpoints>, counters: Arc<Counters>) {
    const NAME: &str = "failed logins http";
    let mut connection: Option<Connection> = None;
    let db_path = endpoints.http.db_path.clone();
    let mut attempt = 0u64;
    loop {
        counters.add(NAME, Outcome::Attempt);
        let user = if attempt.is_multiple_of(2) {
            VICTIM_USER.to_string()
        } else {
            format!("ghost-{}", rand::random::<u32>())
        };
        let status = if attempt % 4 < 2 {
            let authorization = basic(&user, "wrong-password");
            let path = format!("{db_path}/{}", preloaded_id(0));
            exchange_with(
                &endpoints,
                &mut connection,
                Method::GET,
                &path,
                Vec::new(),
                As::Basic(&authorization),
            )
            .await
        } else {
            let body = serde_json::to_vec(&serde_json::json!({"name": user, "password": "wrong"}))
                .unwrap_or_default();
            exchange_with(
                &endpoints,
                &mut connection,
                Method::POST,
                "/_session",
                body,
                As::Anonymous,
            )
            .await
        };
        count_http_status(&counters, NAME, status);
        attempt += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Wrong SCRAM passwords over the KV door, ten times a second, each on a new connection.
pub(super) async fn failed_logins_kv(endpoints: Arc<Endpoints>, counters: Arc<Counters>) {
    const NAME: &str = "failed logins kv";
    loop {
        counters.add(NAME, Outcome::Attempt);
        let handshake = handshake_as(&endpoints, VICTIM_USER, "wrong-password");
        match tokio::time::timeout(ANSWER_TIMEOUT, Client::connect(&handshake)).await {
            Ok(Ok(_)) => counters.add(NAME, Outcome::Accepted),
            Ok(Err(_)) => counters.add(NAME, Outcome::Refused),
            Err(_) => counters.add(NAME, Outcome::Closed),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A member connects on both doors, then loses its access (removed from `_security` in even
/// rounds, its account deleted in odd ones) and keeps reading and writing on the same
/// connections: every success after that is counted as accepted.
pub(super) async fn revoked_user(endpoints: Arc<Endpoints>, counters: Arc<Counters>, round: usize) {
    const NAME: &str = "revoked user";
    if let Err(error) = revoke_and_hammer(&endpoints, &counters, round).await {
        eprintln!("soak: the revoked-user client could not run: {error:#}");
        counters.add(NAME, Outcome::Closed);
    }
}

async fn revoke_and_hammer(
    endpoints: &Arc<Endpoints>,
    counters: &Counters,
    round: usize,
) -> anyhow::Result<()> {
    const NAME: &str = "revoked user";
    let mut setup = Setup::open(endpoints).await?;
    ensure_user(&mut setup, REVOKED_USER).await?;
    set_members(&mut setup, &[REVOKED_USER]).await?;
    let (mut kv, _) = tokio::time::timeout(
        ANSWER_TIMEOUT,
        Client::connect(&handshake_as(endpoints, REVOKED_USER, ACCOUNT_PASSWORD)),
    )
    .await
    .context("the member's KV handshake timed out")??;
    let authorization = basic(REVOKED_USER, ACCOUNT_PASSWORD);
    let mut connection: Option<Connection> = None;
    let read_path = format!("{}/{}", endpoints.http.db_path, preloaded_id(2));
    let before = exchange_with(
        endpoints,
        &mut connection,
        Method::GET,
        &read_path,
        Vec::new(),
        As::Basic(&authorization),
    )
    .await;
    if before != Some(200) {
        bail!("the member could not read before the revocation: {before:?}");
    }
    if round.is_multiple_of(2) {
        set_members(&mut setup, &["somebody-else"]).await?;
    } else {
        delete_user(&mut setup, REVOKED_USER).await?;
    }
    let mut sequence = 0u64;
    loop {
        counters.add(NAME, Outcome::Attempt);
        let key = format!("revoked-{round}-{sequence}");
        sequence += 1;
        let write = kv
            .call_with(
                opcode::SET,
                datatype::JSON,
                &[0; 8],
                key.as_bytes(),
                b"{\"x\":1}",
            )
            .await;
        let read = kv.call(opcode::GET, preloaded_id(3).as_bytes(), &[]).await;
        let http = exchange_with(
            endpoints,
            &mut connection,
            Method::GET,
            &read_path,
            Vec::new(),
            As::Basic(&authorization),
        )
        .await;
        let kv_accepted = [write, read]
            .into_iter()
            .any(|reply| matches!(reply, Ok(reply) if reply.status == status::SUCCESS));
        if kv_accepted || http.is_some_and(|code| (200..300).contains(&code)) {
            counters.add(NAME, Outcome::Accepted);
        } else {
            counters.add(NAME, Outcome::Refused);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
