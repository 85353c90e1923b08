//! The server's resident memory, sampled from `/proc/PID/status` on a thread of its own, with
//! the peak kept per phase (0 = baseline, 1 = hostile).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Often enough to catch a burst of buffered replies, cheap enough to be invisible.
const SAMPLE_INTERVAL: Duration = Duration::from_millis(200);

struct State {
    phase: AtomicUsize,
    peaks: [AtomicU64; 2],
    stop: AtomicBool,
}

pub(crate) struct Sampler {
    state: Arc<State>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    pub(crate) fn start(pid: u32) -> Sampler {
        let state = Arc::new(State {
            phase: AtomicUsize::new(0),
            peaks: [AtomicU64::new(0), AtomicU64::new(0)],
            stop: AtomicBool::new(false),
        });
        let thread_state = state.clone();
        let thread = std::thread::spawn(move || {
            let path = format!("/proc/{pid}/status");
            while !thread_state.stop.load(Ordering::Relaxed) {
                if let Some(rss) = std::fs::read_to_string(&path)
                    .ok()
                    .and_then(|status| vm_rss_bytes(&status))
                {
                    let phase = thread_state.phase.load(Ordering::Relaxed).min(1);
                    thread_state.peaks[phase].fetch_max(rss, Ordering::Relaxed);
                }
                std::thread::sleep(SAMPLE_INTERVAL);
            }
        });
        Sampler {
            state,
            thread: Some(thread),
        }
    }

    pub(crate) fn set_phase(&self, phase: usize) {
        self.state.phase.store(phase, Ordering::Relaxed);
    }

    /// Stops sampling; the peaks of the baseline and the hostile phase, in bytes.
    pub(crate) fn stop(mut self) -> [u64; 2] {
        self.state.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        [
            self.state.peaks[0].load(Ordering::Relaxed),
            self.state.peaks[1].load(Ordering::Relaxed),
        ]
    }
}

/// `VmRSS:   123456 kB` of a `/proc/PID/status` text, in bytes.
fn vm_rss_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kilobytes: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kilobytes * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_vm_rss() {
        let status = "Name:\tsettee\nVmPeak:\t  900 kB\nVmRSS:\t   1234 kB\nThreads:\t4\n";
        assert_eq!(vm_rss_bytes(status), Some(1234 * 1024));
        assert_eq!(vm_rss_bytes("Name:\tx\n"), None);
    }

    #[test]
    fn samples_this_process() {
        let sampler = Sampler::start(std::process::id());
        std::thread::sleep(SAMPLE_INTERVAL * 2);
        let [baseline, hostile] = sampler.stop();
        assert!(baseline > 0);
        assert_eq!(hostile, 0);
    }
}
