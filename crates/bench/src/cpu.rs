//! The load generator's own CPU time. Client and server usually share the machine's cores, so a
//! benchmark that does not say what the client cost cannot say what the server got.

/// User plus system CPU seconds used so far by every thread of this process.
pub(crate) fn process_cpu_seconds() -> f64 {
    // SAFETY: `getrusage` only writes into the zeroed struct it is handed; RUSAGE_SELF is always
    // a valid target, so the call cannot fail (and a failure would leave zeroes, not garbage).
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |time: libc::timeval| time.tv_sec as f64 + time.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_with_work() {
        let before = process_cpu_seconds();
        let mut sum = 0u64;
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(30) {
            sum = sum.wrapping_add(std::hint::black_box(1));
        }
        assert!(sum > 0);
        assert!(process_cpu_seconds() > before);
    }
}
