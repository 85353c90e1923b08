//! `settee serve`: opens the engine in the data directory and runs the front doors until
//! SIGINT/SIGTERM.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rand::RngCore;
use settee_engine::{Engine, EngineOptions};
use settee_http::{HttpConfig, HttpState};

use crate::config::{ServeArgs, Settings};

/// Databases CouchDB 3 expects on a single node.
const SYSTEM_DBS: [&str; 2] = ["_users", "_replicator"];

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let mut settings = args.settings()?;
    std::fs::create_dir_all(&settings.data_dir)
        .with_context(|| format!("creating data directory {}", settings.data_dir.display()))?;
    if settings.admins.is_empty() {
        settings.admins.push(generated_admin(&settings.data_dir)?);
    }
    let mut engine_options = EngineOptions::default();
    engine_options.store.row_cache_bytes = settings.doc_cache_size;
    // One set of document limits for both doors, enforced by the engine on every write.
    engine_options.limits = settee_engine::DocLimits {
        doc_bytes_max: settings.max_document_size,
        json_depth_max: settings.max_json_depth,
    };
    let engine = Arc::new(
        Engine::open(&settings.data_dir.join("db"), engine_options)
            .context("opening the storage engine")?,
    );
    let config = http_config(&settings, &settings.data_dir)?;
    let (shutdown_sender, shutdown_receiver) = tokio::sync::watch::channel(false);
    let secret = secret_file(&settings.data_dir.join("cookie_secret"), 32)?;
    let users = Arc::new(settee_auth::Users::new(
        settings.admins.clone(),
        settings.pbkdf2_iterations,
    ));
    let server_uuid = config.server_uuid.clone();
    let mut views_config = settee_views::ViewsConfig::default();
    views_config.js.timeout_ms = settings.js_timeout_ms;
    views_config.js.memory_bytes_max = settings.js_memory;
    let views = settee_views::Views::new(engine.clone(), views_config)
        .map_err(|error| anyhow::anyhow!("starting the view indexer: {error}"))?;
    let state = Arc::new(HttpState::new(
        engine.clone(),
        config,
        users.clone(),
        secret,
        shutdown_receiver.clone(),
        views,
    ));
    for db in SYSTEM_DBS {
        if engine.bucket(db).is_none() {
            settee_http::db_api::create_db(&state, db, 16)
                .await
                .map_err(|error| anyhow::anyhow!("creating {db}: {error}"))?;
        }
    }
    let listener = tokio::net::TcpListener::bind(settings.http_addr)
        .await
        .with_context(|| format!("binding {}", settings.http_addr))?;
    let local = listener.local_addr()?;
    let kv_listener = tokio::net::TcpListener::bind(settings.kv_addr)
        .await
        .with_context(|| format!("binding the KV port {}", settings.kv_addr))?;
    let mgmt_listener = tokio::net::TcpListener::bind(settings.mgmt_addr)
        .await
        .with_context(|| format!("binding the management port {}", settings.mgmt_addr))?;
    let kv_state = Arc::new(
        settee_kv::KvState::new(
            engine.clone(),
            users,
            settee_kv::KvConfig {
                kv_addr: kv_listener.local_addr()?,
                mgmt_addr: mgmt_listener.local_addr()?,
                capi_addr: Some(local),
                max_value_bytes: settee_kv::MAX_VALUE_BYTES_DEFAULT,
                allow_plain: settings.kv_allow_plain,
                server_uuid,
                slow_op_after: settee_kv::SLOW_OP_AFTER_DEFAULT,
                bulk_lane: (settings.kv_bulk_busy_share < 1.0).then(|| settee_kv::BulkLaneConfig {
                    busy_share: settings.kv_bulk_busy_share.max(0.0),
                    ..Default::default()
                }),
            },
        )
        .context("starting the KV door's worker pool")?,
    );
    println!(
        "settee {} listening on http://{local} (data in {})",
        env!("CARGO_PKG_VERSION"),
        settings.data_dir.display()
    );
    println!(
        "settee couchbase kv on {} and management on http://{}",
        kv_state.config.kv_addr, kv_state.config.mgmt_addr
    );
    let kv_server = tokio::spawn(settee_kv::serve(
        kv_listener,
        kv_state.clone(),
        wait_for(shutdown_receiver.clone()),
    ));
    let mgmt_server = tokio::spawn(settee_kv::mgmt::serve(
        mgmt_listener,
        kv_state,
        wait_for(shutdown_receiver.clone()),
    ));
    let purger = tokio::spawn(engine.clone().run_expiry_purger(
        Duration::from_secs(settings.expiry_purge_interval_secs.max(1)),
        wait_for(shutdown_receiver.clone()),
    ));
    let local_url = match local {
        std::net::SocketAddr::V4(addr) if addr.ip().is_unspecified() => {
            format!("http://127.0.0.1:{}", addr.port())
        }
        std::net::SocketAddr::V6(addr) if addr.ip().is_unspecified() => {
            format!("http://[::1]:{}", addr.port())
        }
        addr => format!("http://{addr}"),
    };
    let replicator = settee_http::start_replicator(&state, local_url);
    let replicator_docs = tokio::spawn(settee_replicator::docs::watch(
        replicator,
        engine.clone(),
        wait_for(shutdown_receiver.clone()),
    ));
    let server = tokio::spawn(settee_http::serve(
        listener,
        state,
        wait_for(shutdown_receiver),
    ));
    shutdown_signal().await;
    println!("settee shutting down");
    let _ = shutdown_sender.send(true);
    let _ = server.await;
    let _ = kv_server.await;
    let _ = mgmt_server.await;
    let _ = purger.await;
    let _ = replicator_docs.await;
    Ok(())
}

async fn wait_for(mut receiver: tokio::sync::watch::Receiver<bool>) {
    while !*receiver.borrow() {
        if receiver.changed().await.is_err() {
            return;
        }
    }
}

async fn shutdown_signal() {
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}

fn http_config(settings: &Settings, data_dir: &Path) -> anyhow::Result<HttpConfig> {
    let uuid = secret_file(&data_dir.join("server_uuid"), 16)?;
    Ok(HttpConfig {
        max_document_size_bytes: settings.max_document_size,
        max_request_size_bytes: settings.max_request_size,
        max_docs_per_bulk: settings.max_docs_per_bulk,
        max_json_depth: settings.max_json_depth,
        server_uuid: settee_engine::hex(&uuid),
        ..HttpConfig::default()
    })
}

/// Random bytes kept in a file, created on first start.
fn secret_file(path: &Path, len: usize) -> anyhow::Result<Vec<u8>> {
    if let Ok(existing) = std::fs::read(path) {
        if existing.len() == len {
            return Ok(existing);
        }
    }
    let mut bytes = vec![0u8; len];
    rand::rng().fill_bytes(&mut bytes);
    std::fs::write(path, &bytes).with_context(|| format!("writing {}", path.display()))?;
    Ok(bytes)
}

/// Without a configured admin, a node makes one up once and says where it is: CouchDB 3 has
/// no admin party, and neither does settee.
fn generated_admin(data_dir: &Path) -> anyhow::Result<(String, String)> {
    let path = data_dir.join("admin_password");
    let password = match std::fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => text.trim().to_string(),
        _ => {
            let mut bytes = [0u8; 12];
            rand::rng().fill_bytes(&mut bytes);
            let password = settee_engine::hex(&bytes);
            std::fs::write(&path, &password)
                .with_context(|| format!("writing {}", path.display()))?;
            password
        }
    };
    println!(
        "no --admin given: server admin is admin:{password} (kept in {})",
        path.display()
    );
    Ok(("admin".to_string(), password))
}
