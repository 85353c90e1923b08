//! One run: the load-generator threads, their connections, and the three moments every
//! connection waits for (all connected, go or abort, all loaded), so that connecting and loading
//! are never part of the measured time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use settee_kv_codec::opcode;
use tokio::sync::{oneshot, Barrier};

use super::client::{Client, Handshake, Negotiated, HANDSHAKE_TIMEOUT};
use super::keys::Keys;
use super::load::{drive, Counts, Plan, Work};
use super::{KvArgs, KvReport, VBUCKETS_DEFAULT};
use crate::cpu::process_cpu_seconds;

/// Everything the connection tasks share; read-only once the threads start, except the abort
/// flag and the first handshake error.
struct Shared {
    handshake: Handshake,
    plan: Plan,
    connections: usize,
    pipeline: usize,
    get_ratio: f64,
    load: bool,
    warmup: Duration,
    duration: Duration,
    /// Every connection has connected (or failed to).
    connected: Barrier,
    /// `abort` is decided: tasks read it only after this.
    go: Barrier,
    /// Every connection has finished its share of the load phase.
    loaded: Barrier,
    abort: AtomicBool,
    /// The first connection's handshake failure; a mutex because any task may write it.
    handshake_error: Mutex<Option<anyhow::Error>>,
}

/// What one connection counted.
struct Outcome {
    load: Counts,
    measure: Counts,
    failed: bool,
}

pub(super) async fn run(args: &KvArgs) -> anyhow::Result<KvReport> {
    let handshake = Handshake {
        address: args.addr.clone(),
        credentials: args.user.clone().zip(args.password.clone()),
        mechanism: args.sasl_mechanism,
        bucket: args.bucket.clone(),
        unordered: args.unordered,
        collection: args.collection.clone(),
    };
    // One connection first, alone: it shows whether the server is there and what it accepts,
    // and gives the vbucket count every request needs.
    let (probe, negotiated) = tokio::time::timeout(HANDSHAKE_TIMEOUT, Client::connect(&handshake))
        .await
        .context("the handshake timed out")??;
    drop(probe);
    let vbuckets = resolve_vbuckets(args.vbuckets, &negotiated);
    let features: Vec<String> = negotiated
        .features
        .iter()
        .map(|code| format!("0x{code:02x}"))
        .collect();
    eprintln!(
        "bench kv: {vbuckets} vbuckets ({}), HELLO features accepted: [{}]",
        if negotiated.vbuckets.is_some() {
            "the server's cluster map"
        } else {
            "no cluster map"
        },
        features.join(" ")
    );
    if args.unordered
        && !negotiated
            .features
            .contains(&settee_kv_codec::feature::UNORDERED_EXECUTION)
    {
        eprintln!("bench kv: the server did not accept UnorderedExecution");
    }

    let active: Vec<bool> = match (&negotiated.active_here, args.active_only) {
        (_, false) => Vec::new(),
        (Some(active), true) if active.iter().any(|here| *here) => active.clone(),
        (_, true) => anyhow::bail!("--active-only: the server's map names no vbucket active on it"),
    };
    let parties = args.connections + 1;
    let shared = Arc::new(Shared {
        handshake,
        plan: Plan::new(
            Keys::new_in(args.keys, vbuckets, &negotiated.collection_prefix, |vb| {
                active.get(usize::from(vb)).copied().unwrap_or(true)
            }),
            crate::docs::doc_body(args.value_size_bytes),
        )
        .with_durability(args.durability),
        connections: args.connections,
        pipeline: args.pipeline,
        get_ratio: args.get_ratio,
        load: !args.no_load,
        warmup: Duration::from_secs(args.warmup_secs),
        duration: Duration::from_secs(args.duration_secs),
        connected: Barrier::new(parties),
        go: Barrier::new(parties),
        loaded: Barrier::new(parties),
        abort: AtomicBool::new(false),
        handshake_error: Mutex::new(None),
    });
    let threads = start_threads(&shared, args.threads)?;

    shared.connected.wait().await;
    let handshake_error = shared.handshake_error.lock().take();
    shared
        .abort
        .store(handshake_error.is_some(), Ordering::SeqCst);
    shared.go.wait().await;
    if let Some(error) = handshake_error {
        for thread in threads {
            let _ = thread.await;
        }
        return Err(error.context("a connection's handshake failed"));
    }
    if shared.load {
        eprintln!(
            "bench kv: loading {} keys of {} bytes over {} connections",
            args.keys,
            shared.plan.value.len(),
            args.connections
        );
    }
    let load_started = Instant::now();
    shared.loaded.wait().await;
    let load_seconds = load_started.elapsed().as_secs_f64();

    let measure_from = Instant::now() + shared.warmup;
    if args.duration_secs > 0 {
        eprintln!(
            "bench kv: {} connections x {} in flight, {:.0}% GET, {} s warm-up, {} s measured",
            args.connections,
            args.pipeline,
            100.0 * args.get_ratio,
            args.warmup_secs,
            args.duration_secs
        );
    }
    tokio::time::sleep_until(measure_from.into()).await;
    let cpu_before = process_cpu_seconds();
    let mut load = Counts::new();
    let mut measure = Counts::new();
    let mut failed_connections = 0;
    for thread in threads {
        for outcome in thread.await.context("a load-generator thread panicked")? {
            load.merge(&outcome.load);
            measure.merge(&outcome.measure);
            failed_connections += usize::from(outcome.failed);
        }
    }
    let seconds = measure_from.elapsed().as_secs_f64();
    let client_cpu_seconds = process_cpu_seconds() - cpu_before;

    let mut phases = Vec::new();
    if shared.load {
        phases.push(load.set.into_report("load", load_seconds));
    }
    let mut failures: Vec<(&'static str, u16, u64)> = load
        .failures
        .iter()
        .chain(&measure.failures)
        .map(|(&(op, status), &count)| (opcode::name(op), status, count))
        .collect();
    failures.sort();
    let mut replies = 0;
    if args.duration_secs > 0 {
        replies = measure.get.ops + measure.get.errors + measure.set.ops + measure.set.errors;
        if args.get_ratio > 0.0 {
            phases.push(measure.get.into_report("get", seconds));
        }
        if args.get_ratio < 1.0 {
            phases.push(measure.set.into_report("set", seconds));
        }
    }
    Ok(KvReport {
        phases,
        vbuckets,
        features: negotiated.features,
        client_cpu_seconds,
        client_cpu_us_per_op: if replies > 0 {
            client_cpu_seconds * 1e6 / replies as f64
        } else {
            0.0
        },
        failed_connections,
        failures,
    })
}

/// The server's vbucket map wins over the flag (a request for the wrong vbucket would be
/// refused with NOT_MY_VBUCKET); without either, Couchbase's default.
fn resolve_vbuckets(flag: Option<u16>, negotiated: &Negotiated) -> u16 {
    match (negotiated.vbuckets, flag) {
        (Some(from_server), Some(from_flag)) if from_server != from_flag => {
            eprintln!(
                "bench kv: the server's cluster map has {from_server} vbuckets; using that, not --vbuckets {from_flag}"
            );
            from_server
        }
        (Some(from_server), _) => from_server,
        (None, Some(from_flag)) => from_flag,
        (None, None) => VBUCKETS_DEFAULT,
    }
}

/// Starts `threads` OS threads, each a single-threaded runtime running connections
/// `t`, `t + threads`, ...; each thread's outcomes arrive on its channel.
fn start_threads(
    shared: &Arc<Shared>,
    threads: usize,
) -> anyhow::Result<Vec<oneshot::Receiver<Vec<Outcome>>>> {
    let mut receivers = Vec::with_capacity(threads);
    for thread in 0..threads {
        let (sender, receiver) = oneshot::channel();
        let shared = Arc::clone(shared);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("building a load-generator runtime")?;
        std::thread::Builder::new()
            .name(format!("bench-kv-{thread}"))
            .spawn(move || {
                let outcomes = runtime.block_on(async move {
                    let mut tasks = tokio::task::JoinSet::new();
                    for index in (thread..shared.connections).step_by(threads) {
                        tasks.spawn(connection(index, Arc::clone(&shared)));
                    }
                    let mut outcomes = Vec::new();
                    while let Some(joined) = tasks.join_next().await {
                        if let Ok(outcome) = joined {
                            outcomes.push(outcome);
                        }
                    }
                    outcomes
                });
                let _ = sender.send(outcomes);
            })
            .context("starting a load-generator thread")?;
        receivers.push(receiver);
    }
    Ok(receivers)
}

/// One connection's whole life. It passes every barrier whatever happens to it, so one failed
/// connection never leaves the others waiting.
async fn connection(index: usize, shared: Arc<Shared>) -> Outcome {
    let mut outcome = Outcome {
        load: Counts::new(),
        measure: Counts::new(),
        failed: false,
    };
    let mut client =
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, Client::connect(&shared.handshake)).await {
            Ok(Ok((client, _))) => Some(client),
            Ok(Err(error)) => {
                shared.handshake_error.lock().get_or_insert(error);
                None
            }
            Err(_elapsed) => {
                shared
                    .handshake_error
                    .lock()
                    .get_or_insert(anyhow::anyhow!("the handshake timed out"));
                None
            }
        };
    shared.connected.wait().await;
    shared.go.wait().await;
    if shared.abort.load(Ordering::SeqCst) {
        return outcome;
    }

    if let (true, Some(open)) = (shared.load, client.as_mut()) {
        let mut work = Work::Load {
            next: index,
            step: shared.connections,
        };
        let started = Instant::now();
        let result = drive(
            open,
            &shared.plan,
            &mut work,
            shared.pipeline,
            started,
            &mut outcome.load,
        )
        .await;
        if let Err(error) = result {
            eprintln!("bench kv: connection {index} failed while loading: {error:#}");
            outcome.failed = true;
            client = None;
        }
    }
    shared.loaded.wait().await;

    let counting_from = Instant::now() + shared.warmup;
    if let (false, Some(open)) = (shared.duration.is_zero(), client.as_mut()) {
        let mut work = Work::Mix {
            get_ratio: shared.get_ratio,
            rng: SmallRng::from_rng(&mut rand::rng()),
            deadline: counting_from + shared.duration,
        };
        let result = drive(
            open,
            &shared.plan,
            &mut work,
            shared.pipeline,
            counting_from,
            &mut outcome.measure,
        )
        .await;
        if let Err(error) = result {
            eprintln!("bench kv: connection {index} failed: {error:#}");
            outcome.failed = true;
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_vbucket_map_wins() {
        let from_server = Negotiated {
            vbuckets: Some(64),
            ..Negotiated::default()
        };
        assert_eq!(resolve_vbuckets(Some(1024), &from_server), 64);
        assert_eq!(resolve_vbuckets(None, &from_server), 64);
        assert_eq!(resolve_vbuckets(Some(8), &Negotiated::default()), 8);
        assert_eq!(resolve_vbuckets(None, &Negotiated::default()), 1024);
    }
}
