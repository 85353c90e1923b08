//! `settee serve`: opens the engine in the data directory and runs the front doors until
//! SIGINT/SIGTERM.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use settee_auth::ServerAdmin;
use settee_engine::{Engine, EngineOptions};
use settee_http::{HttpConfig, HttpState};

use crate::config::{timeout, ServeArgs, Settings};
use crate::fd_limit;
use crate::secrets;

/// How long a cluster node waits for its first serving lease before it opens its doors.
const LEASE_AT_START: Duration = Duration::from_secs(2);

/// How many times a node that carries on from its stored log tries, a second apart, to put its
/// `_users` in a cluster map that has none (it waits for a Raft leader).
const ACCOUNTS_ATTEMPTS: u32 = 60;

/// Databases CouchDB 3 expects on a single node.
const SYSTEM_DBS: [&str; 2] = ["_users", "_replicator"];

/// Blocking threads for everything but the HTTP door's streamed answers (tokio's default cap).
const BLOCKING_THREADS_BASE: usize = 512;

/// Reads the settings, raises the open-files limit, then runs the node on a runtime sized for
/// them: a streamed answer (`_all_docs`, `_find`, a view) is written by a blocking thread that
/// waits while its client does not read, at most one per HTTP connection, so the blocking pool
/// holds one thread per allowed HTTP connection on top of tokio's default 512. With the default
/// cap, 512 clients that ask for a long answer and never read took every blocking thread, and
/// every other request that needed one waited for them (issue 18).
pub fn main(args: ServeArgs) -> anyhow::Result<()> {
    let (settings, open_files) = prepare(args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(settings.connections.http_max_connections + BLOCKING_THREADS_BASE)
        .build()?;
    runtime.block_on(run(settings, open_files))
}

/// The settings, with the connection maxima fitted to the open-files limit (also returned).
fn prepare(args: ServeArgs) -> anyhow::Result<(Settings, u64)> {
    let mut settings = args.settings()?;
    let open_files = fd_limit::raise();
    let (http_max_connections, kv_max_connections) = fd_limit::clamp(
        open_files,
        settings.connections.http_max_connections,
        settings.connections.kv_max_connections,
    );
    if (http_max_connections, kv_max_connections)
        != (
            settings.connections.http_max_connections,
            settings.connections.kv_max_connections,
        )
    {
        tracing::info!(
            open_files,
            http_max_connections,
            kv_max_connections,
            "connection maxima lowered to fit the open-files limit"
        );
    }
    settings.connections.http_max_connections = http_max_connections;
    settings.connections.kv_max_connections = kv_max_connections;
    Ok((settings, open_files))
}

async fn run(mut settings: Settings, open_files: u64) -> anyhow::Result<()> {
    // First, so a bad certificate or key stops the node before it opens anything.
    let certificates = match &settings.tls {
        Some(tls) => Some(
            settee_tls::Certificates::load(tls.files.clone())
                .map_err(|error| anyhow::anyhow!("TLS: {error}"))?,
        ),
        None => None,
    };
    secrets::prepare_data_dir(&settings.data_dir)?;
    let cluster_id = match &settings.cluster {
        Some(cluster) => Some(crate::cluster::node_id(&settings.data_dir, cluster)?),
        None => None,
    };
    if let (Some(cluster), Some(id)) = (&settings.cluster, cluster_id) {
        // In a cluster, a node is named as `/_membership` names it, unless it was given a name.
        if settings.node_name == settee_http::config::NODE_NAME_DEFAULT {
            settings.node_name = crate::cluster::member_name(id, &cluster.addr.to_string());
        }
    }
    let mut admins: Vec<ServerAdmin> = settings
        .admins
        .iter()
        .map(|(name, password)| ServerAdmin::with_password(name, password))
        .collect();
    if admins.is_empty() {
        let hasher = settee_auth::Users::new(Vec::new(), settings.pbkdf2_iterations);
        admins.push(secrets::generated_admin(&settings.data_dir, &hasher)?);
    }
    if let Some(cluster) = &settings.cluster {
        // Other nodes log in to the KV port with the cluster secret (replica.md).
        let password = settee_auth::node_password(&cluster.secret);
        admins.insert(
            0,
            ServerAdmin::with_password(settee_auth::NODE_USER, &password),
        );
    }
    let config = http_config(&settings, &settings.data_dir)?;
    // Bound first, so `_config`'s `[chttpd] port` is the port the node listens on.
    let listener = tokio::net::TcpListener::bind(settings.http_addr)
        .await
        .with_context(|| format!("binding {}", settings.http_addr))?;
    let local = listener.local_addr()?;
    let node_config = Arc::new(crate::node_config::open(
        &settings,
        &config.server_uuid,
        local,
    )?);
    let mut engine_options = EngineOptions::default();
    engine_options.store.row_cache_bytes = settings.doc_cache_size;
    // One set of document limits for both doors, enforced by the engine on every write. The
    // engine's size limit is the larger of `--max-document-size` and a saved `[couchdb]
    // max_document_size`: the HTTP door applies the `_config` value to its writes at once
    // (`Req::settings`), but the engine's limit is also where readers (views, feeds,
    // replication) stop reading a document, so lowering it must never hide stored ones.
    engine_options.limits = settee_engine::DocLimits {
        doc_bytes_max: settings
            .max_document_size
            .max(node_config.settings().max_document_size_bytes),
        json_depth_max: settings.max_json_depth,
    };
    let engine = Arc::new(
        Engine::open(&settings.data_dir.join("db"), engine_options)
            .context("opening the storage engine")?,
    );
    let metrics = node_metrics(&engine);
    let (shutdown_sender, shutdown_receiver) = tokio::sync::watch::channel(false);
    let secret = secrets::secret_file(&settings.data_dir.join("cookie_secret"), 32)?;
    let users = Arc::new(
        settee_auth::Users::new(admins, settings.pbkdf2_iterations)
            .with_lockout(settings.auth_lockout),
    );
    let server_uuid = config.server_uuid.clone();
    let mut views_config = settee_views::ViewsConfig::default();
    views_config.js.timeout_ms = settings.js_timeout_ms;
    views_config.js.memory_bytes_max = settings.js_memory;
    let views = settee_views::Views::new(engine.clone(), views_config)
        .map_err(|error| anyhow::anyhow!("starting the view indexer: {error}"))?;
    let state = Arc::new(
        HttpState::new(
            engine.clone(),
            config,
            users.clone(),
            secret,
            shutdown_receiver.clone(),
            views,
            node_config,
        )
        .with_metrics(metrics.clone()),
    );
    for db in SYSTEM_DBS {
        if engine.bucket(db).is_none() {
            settee_http::db_api::create_db(&state, db, 16, false)
                .await
                .map_err(|error| anyhow::anyhow!("creating {db}: {error}"))?;
        }
    }
    state.configure_accounts(true).await;
    let kv_listener = tokio::net::TcpListener::bind(settings.kv_addr)
        .await
        .with_context(|| format!("binding the KV port {}", settings.kv_addr))?;
    let mgmt_listener = tokio::net::TcpListener::bind(settings.mgmt_addr)
        .await
        .with_context(|| format!("binding the management port {}", settings.mgmt_addr))?;
    let tls_listeners = match &settings.tls {
        Some(tls) => Some((
            tokio::net::TcpListener::bind(tls.https_addr)
                .await
                .with_context(|| format!("binding the HTTPS port {}", tls.https_addr))?,
            tokio::net::TcpListener::bind(tls.kv_tls_addr)
                .await
                .with_context(|| format!("binding the KV TLS port {}", tls.kv_tls_addr))?,
            tokio::net::TcpListener::bind(tls.mgmt_tls_addr)
                .await
                .with_context(|| {
                    format!("binding the management TLS port {}", tls.mgmt_tls_addr)
                })?,
        )),
        None => None,
    };
    let tls_addrs = match &tls_listeners {
        Some((https, kv, mgmt)) => {
            Some((https.local_addr()?, kv.local_addr()?, mgmt.local_addr()?))
        }
        None => None,
    };
    let kv_state = Arc::new(
        settee_kv::KvState::new(
            engine.clone(),
            users,
            settee_kv::KvConfig {
                kv_addr: kv_listener.local_addr()?,
                mgmt_addr: mgmt_listener.local_addr()?,
                capi_addr: Some(local),
                kv_tls_addr: tls_addrs.map(|(_, kv, _)| kv),
                capi_tls_addr: tls_addrs.map(|(https, _, _)| https),
                mgmt_tls_addr: tls_addrs.map(|(_, _, mgmt)| mgmt),
                max_value_bytes: settee_kv::MAX_VALUE_BYTES_DEFAULT,
                allow_plain: settings.kv_allow_plain,
                server_uuid,
                slow_op_after: settee_kv::SLOW_OP_AFTER_DEFAULT,
                bulk_lane: (settings.kv_bulk_busy_share < 1.0).then(|| settee_kv::BulkLaneConfig {
                    busy_share: settings.kv_bulk_busy_share.max(0.0),
                    ..Default::default()
                }),
                limits: settee_kv::KvLimits {
                    max_connections: settings.connections.kv_max_connections,
                    auth_timeout: timeout(settings.connections.kv_auth_timeout_ms),
                    partial_frame_timeout: timeout(
                        settings.connections.kv_partial_frame_timeout_ms,
                    ),
                    idle_timeout: timeout(settings.connections.kv_idle_timeout_ms),
                    send_queue_stuck_timeout: timeout(
                        settings.connections.kv_send_queue_stuck_timeout_ms,
                    ),
                    output_bytes_max: settings.connections.kv_max_send_queue_size,
                    node_output_bytes_max: settings.connections.kv_max_send_queue_total,
                },
            },
            metrics,
        )
        .context("starting the KV door's worker pool")?,
    );
    // The KV door's per-opcode latencies in the CouchDB door's `_prometheus` too (the web
    // console reads both doors there); weak, so the metrics never keep the door alive.
    let kv_door = Arc::downgrade(&kv_state);
    state.metrics.set_kv_latency_reader(move || {
        kv_door
            .upgrade()
            .map(|kv| kv.opcode_latencies())
            .unwrap_or_default()
    });
    state.metrics.set_data_dir(settings.data_dir.clone());
    let replica = crate::replica::start(&settings, &engine)?;
    let cluster = match (&settings.cluster, cluster_id) {
        (Some(cluster), Some(id)) => {
            // No vbucket is served as an active before this node has proven contact with the
            // cluster's leadership (cluster_lease.rs): its stored map may miss a failover.
            engine.lease().enforce();
            let throttle = Arc::new(settee_move_files::Throttle::new(
                cluster.rebalance_throttle_mbps,
            ));
            let move_target = Arc::new(crate::cluster_move_target::MoveTarget::new(
                engine.clone(),
                state.views.clone(),
                settee_move_files::Staging::open(&settings.data_dir.join("moves"))?,
                throttle.clone(),
            ));
            let started = crate::cluster::start(
                cluster,
                id,
                &engine,
                &state,
                local,
                kv_state.config.kv_addr,
                kv_state.config.mgmt_addr,
                tls_ports(tls_addrs),
                move_target.clone(),
                wait_for(shutdown_receiver.clone()),
            )
            .await?;
            // Replica vbuckets follow the map (cluster_replicas.rs).
            let replicas = Arc::new(crate::cluster_replicas::ClusterReplicas::new(
                engine.clone(),
                id,
                cluster.secret.clone(),
                settings.node_name.clone(),
            ));
            // Buckets of the map opened and the KV door routed before the doors serve.
            let (buckets, follower) = crate::cluster_buckets::ClusterBuckets::start(
                started.node.clone(),
                &state,
                &kv_state,
                replicas.clone(),
                wait_for(shutdown_receiver.clone()),
            )
            .await;
            crate::cluster_manifests::route_through(&engine, &buckets);
            replicas.set_views(state.views.clone());
            move_target.set_followed(buckets.followed());
            let map = started.node.map();
            move_target.forget_unlisted(|id| {
                map.rebalance
                    .as_ref()
                    .is_some_and(|rebalance| rebalance.moves.iter().any(|step| step.id == id))
            });
            // The accounts of the node that formed the cluster are the cluster's.
            if !started.joined && !buckets.provide_accounts().await {
                let buckets = buckets.clone();
                tokio::spawn(async move {
                    for _ in 0..ACCOUNTS_ATTEMPTS {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        if buckets.provide_accounts().await {
                            return;
                        }
                    }
                });
            }
            // Validation functions hold on every node (cluster_designs.rs).
            let designs = crate::cluster_designs::ClusterDesigns::new(
                started.node.clone(),
                crate::cluster_forward::Forwarder {
                    node: started.node.clone(),
                    transport: started.transport.clone(),
                },
                engine.clone(),
            );
            engine.set_designs_listener(Arc::new(crate::cluster_designs::DesignsThroughMap(
                Arc::downgrade(&designs),
            )));
            let gatherer = designs.keep(wait_for(shutdown_receiver.clone()));
            let lease = crate::cluster_lease::keep(
                started.node.clone(),
                engine.clone(),
                buckets.followed(),
                wait_for(shutdown_receiver.clone()),
            );
            // This node's share of a rebalance's moves (cluster_moves.rs).
            let files = cluster.rebalance_files.then(|| {
                Arc::new(crate::cluster_move_source::MoveSource::new(
                    engine.clone(),
                    state.views.clone(),
                    started.transport.clone(),
                    throttle,
                    settings.data_dir.join("exports"),
                ))
            });
            let moves = crate::cluster_moves::keep(
                started.node.clone(),
                engine.clone(),
                files,
                wait_for(shutdown_receiver.clone()),
            );
            // A node in contact with its cluster opens its doors with a lease in hand, so its
            // first requests are not refused; one that cannot reach the leadership opens
            // after the wait and answers as unleased until it can.
            engine.lease().wait_held(LEASE_AT_START).await;
            let _ = state.cluster.set(Arc::new(crate::cluster::View {
                node: started.node.clone(),
                buckets: crate::cluster_buckets::HttpBuckets(buckets.clone()),
                forwarder: crate::cluster_forward::Forwarder {
                    node: started.node.clone(),
                    transport: started.transport.clone(),
                },
                lease: engine.lease().clone(),
                engine: engine.clone(),
            }));
            let _ = state.scatter.set(settee_http_scatter::hook);
            let _ = kv_state
                .bucket_admin
                .set(Arc::new(crate::cluster_buckets::KvBuckets(buckets)));
            Some((
                started,
                (follower, lease, gatherer, designs, moves),
                replicas,
            ))
        }
        _ => None,
    };
    println!(
        "settee {} listening on http://{local} (data in {})",
        env!("CARGO_PKG_VERSION"),
        settings.data_dir.display()
    );
    println!(
        "settee connections: at most {} http and {} kv (open files limit {open_files})",
        settings.connections.http_max_connections, settings.connections.kv_max_connections
    );
    println!(
        "settee couchbase kv on {} and management on http://{}",
        kv_state.config.kv_addr, kv_state.config.mgmt_addr
    );
    if let Some((https, kv, mgmt)) = tls_addrs {
        println!(
            "settee tls: https on https://{https}, couchbase kv tls on {kv} and management on https://{mgmt}"
        );
    }
    // The TLS relay's own loopback listener: its connections are TLS ones (PLAIN allowed).
    let kv_relayed_listener = match tls_addrs {
        Some(_) => Some(
            tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
                .await
                .context("binding the KV TLS relay's loopback port")?,
        ),
        None => None,
    };
    let kv_state_for_tls = kv_state.clone();
    let mgmt_state_for_tls = kv_state.clone();
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
    let mut tls_servers = Vec::new();
    if let (
        Some((https_listener, kv_tls_listener, mgmt_tls_listener)),
        Some(certificates),
        Some(relayed),
    ) = (tls_listeners, certificates.clone(), kv_relayed_listener)
    {
        let mgmt_certificates = certificates.clone();
        tls_servers.push(tokio::spawn(settee_kv::mgmt::serve_with(
            mgmt_tls_listener,
            mgmt_state_for_tls,
            wait_for(shutdown_receiver.clone()),
            move |stream| {
                let certificates = mgmt_certificates.clone();
                async move { certificates.accept(stream).await }
            },
        )));
        let relayed_addr = relayed.local_addr()?;
        tls_servers.push(tokio::spawn(settee_kv::serve_tls_relayed(
            relayed,
            kv_state_for_tls.clone(),
            wait_for(shutdown_receiver.clone()),
        )));
        tls_servers.push(tokio::spawn(settee_http::serve_with(
            https_listener,
            state.clone(),
            wait_for(shutdown_receiver.clone()),
            crate::tls::Https(certificates.clone()),
        )));
        tls_servers.push(tokio::spawn(settee_tls::relay::serve(
            kv_tls_listener,
            certificates,
            relayed_addr,
            settings.connections.kv_max_connections,
            wait_for(shutdown_receiver.clone()),
        )));
    }
    let reloader = tokio::spawn(crate::tls::reload_on_hangup(
        certificates,
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
    let _ = reloader.await;
    for tls_server in tls_servers {
        let _ = tls_server.await;
    }
    if let Some((cluster, (follower, lease, gatherer, _designs, moves), replicas)) = cluster {
        let _ = follower.await;
        let _ = moves.await;
        let _ = lease.await;
        let _ = gatherer.await;
        replicas.stop().await;
        cluster.stop().await;
    }
    if let Some(replica) = replica {
        replica.stop().await;
    }
    Ok(())
}

/// The node's metrics, with the storage engine's figures read from the store at each
/// scrape (a weak reference: the metrics never keep the store open past the engine).
fn node_metrics(engine: &Arc<Engine>) -> Arc<settee_metrics::NodeMetrics> {
    let metrics = Arc::new(settee_metrics::NodeMetrics::default());
    let store = Arc::downgrade(engine.store());
    metrics.set_store_reader(move || {
        let Some(stats) = store.upgrade().map(|store| store.stats()) else {
            return settee_metrics::StoreSample::default();
        };
        settee_metrics::StoreSample {
            compaction_pending_bytes: stats.compaction_pending_bytes,
            memtable_bytes: stats.memtable_bytes,
            block_cache_usage_bytes: stats.block_cache_usage_bytes,
            block_cache_capacity_bytes: stats.block_cache_capacity_bytes,
            block_cache_hits: stats.block_cache_hits,
            block_cache_misses: stats.block_cache_misses,
            sst_files_bytes: stats.sst_files_bytes,
            background_jobs_running: stats.background_jobs_running,
        }
    });
    metrics
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
    let uuid = secrets::public_file(&data_dir.join("server_uuid"), 16)?;
    // Every node of a cluster shows the cluster's uuid (CouchDB asks the same of its nodes).
    let server_uuid = match &settings.cluster {
        Some(cluster) => settee_auth::cluster_uuid(&cluster.secret),
        None => settee_engine::hex(&uuid),
    };
    Ok(HttpConfig {
        max_document_size_bytes: settings.max_document_size,
        max_request_size_bytes: settings.max_request_size,
        max_docs_per_bulk: settings.max_docs_per_bulk,
        max_json_depth: settings.max_json_depth,
        changes_filter_timeout_ms: settings.changes_filter_timeout_ms,
        server_uuid,
        max_connections: settings.connections.http_max_connections,
        idle_timeout: timeout(settings.connections.http_idle_timeout_ms),
        header_timeout: timeout(settings.connections.http_header_timeout_ms),
        body_timeout: timeout(settings.connections.http_body_timeout_ms),
        cors: settings.cors.clone(),
        node_name: settings.node_name.clone(),
        backup_dir: Some(backup_checkpoints(data_dir)?),
        ..HttpConfig::default()
    })
}

/// The directory of backup checkpoints, emptied at start: a checkpoint no client released
/// (`settee backup` killed) would pin its files forever (`docs/format/backup.md`).
fn backup_checkpoints(data_dir: &Path) -> anyhow::Result<std::path::PathBuf> {
    let dir = data_dir.join("backup-checkpoints");
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => anyhow::bail!("cannot clear {}: {error}", dir.display()),
    }
    Ok(dir)
}

/// The TLS ports a cluster node records in the map (https, kv, mgmt; 0: none), so that every
/// node's configs advertise them (kvSSL, capiSSL, mgmtSSL).
fn tls_ports(
    addrs: Option<(
        std::net::SocketAddr,
        std::net::SocketAddr,
        std::net::SocketAddr,
    )>,
) -> settee_cluster::map::TlsPorts {
    addrs.map_or_else(Default::default, |(https, kv, mgmt)| {
        settee_cluster::map::TlsPorts {
            kv: kv.port(),
            https: https.port(),
            mgmt: mgmt.port(),
        }
    })
}
