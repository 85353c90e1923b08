//! CPU-heavy requests (sub-document operations on large documents) run on a bounded pool of
//! threads, one per core, instead of on the runtime's workers: a client hammering heavy
//! requests then occupies the pool, never the threads that answer everyone's cheap GETs.
//! The pool's threads run at a lower scheduling priority (nice 10), so when both kinds of
//! work compete for the cores the cheap requests win; alone, heavy work still gets every core.
//!
//! Each connection holds a semaphore in front of the pool: one permit without
//! UnorderedExecution (its heavy requests run one after another, in order, as on Couchbase),
//! one per pool thread with it (they run in parallel on all cores). A connection therefore
//! never has more jobs waiting in the pool than it has permits, and connections take turns.

use std::sync::Arc;

use tokio::sync::{oneshot, Semaphore};

/// Nice value of the pool's threads (Linux: per thread).
const HEAVY_NICE: i32 = 10;

pub(crate) struct HeavyPool {
    pool: rayon::ThreadPool,
    threads: usize,
}

impl HeavyPool {
    pub(crate) fn new(threads: usize) -> std::io::Result<HeavyPool> {
        let threads = threads.max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|index| format!("settee-heavy-{index}"))
            .start_handler(|_| lower_priority())
            .build()
            .map_err(std::io::Error::other)?;
        Ok(HeavyPool { pool, threads })
    }

    /// One pool thread per core.
    pub(crate) fn for_this_machine() -> std::io::Result<HeavyPool> {
        HeavyPool::new(std::thread::available_parallelism().map_or(2, usize::from))
    }

    /// Permits for one connection's heavy requests.
    pub(crate) fn permits(&self, unordered: bool) -> Arc<Semaphore> {
        Arc::new(Semaphore::new(if unordered { self.threads } else { 1 }))
    }

    /// Runs `job` on the pool once `permits` lets this connection; `None` if the job panicked.
    pub(crate) async fn run<R: Send + 'static>(
        &self,
        permits: &Semaphore,
        job: impl FnOnce() -> R + Send + 'static,
    ) -> Option<R> {
        let _permit = permits.acquire().await.ok()?;
        let (done, result) = oneshot::channel();
        self.pool.spawn(move || {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            if let Ok(value) = outcome {
                let _ = done.send(value);
            }
        });
        result.await.ok()
    }
}

fn lower_priority() {
    // SAFETY: setpriority with PRIO_PROCESS and who = 0 changes only the calling thread on
    // Linux (threads are processes to the scheduler); it touches no memory.
    #[cfg(target_os = "linux")]
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, HEAVY_NICE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ordered_permits_run_one_job_at_a_time_unordered_ones_in_parallel() {
        let pool = Arc::new(HeavyPool::new(2).expect("pool"));
        for (unordered, expected_peak) in [(false, 1), (true, 2)] {
            let permits = pool.permits(unordered);
            let running = Arc::new(AtomicUsize::new(0));
            let peak = Arc::new(AtomicUsize::new(0));
            let mut jobs = Vec::new();
            for _ in 0..8 {
                let (pool, permits) = (pool.clone(), permits.clone());
                let (running, peak) = (running.clone(), peak.clone());
                jobs.push(tokio::spawn(async move {
                    pool.run(&permits, move || {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        running.fetch_sub(1, Ordering::SeqCst);
                        7
                    })
                    .await
                }));
            }
            for job in jobs {
                assert_eq!(job.await.expect("join"), Some(7));
            }
            assert_eq!(peak.load(Ordering::SeqCst), expected_peak);
        }
    }

    #[tokio::test]
    async fn a_panicking_job_is_none_and_the_pool_survives() {
        let pool = HeavyPool::new(1).expect("pool");
        let permits = pool.permits(false);
        let failed: Option<u8> = pool.run(&permits, || panic!("boom")).await;
        assert_eq!(failed, None);
        assert_eq!(pool.run(&permits, || 3).await, Some(3));
    }
}
