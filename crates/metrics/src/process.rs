//! The process's own resource use, read from `/proc/self` (Linux): what Prometheus's client
//! libraries export as `process_*`.

/// One reading of the process's counters; `None` fields could not be read (not Linux, or
/// `/proc` not mounted).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessSample {
    /// User plus system CPU time since the process started.
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    pub threads: Option<u64>,
    /// Seconds since the Unix epoch at which the process started.
    pub start_time_seconds: Option<f64>,
}

impl ProcessSample {
    pub fn read() -> ProcessSample {
        let ticks = clock_ticks_per_second();
        let stat = std::fs::read_to_string("/proc/self/stat").ok();
        let fields = stat.as_deref().map(stat_fields).unwrap_or_default();
        // Numbered as in proc(5), which counts pid as 1 and comm as 2: fields[0] is field 3.
        let field = |number: usize| {
            fields
                .get(number - 3)
                .and_then(|text| text.parse::<u64>().ok())
        };
        let cpu_seconds = match (field(14), field(15), ticks) {
            (Some(user), Some(system), Some(ticks)) => Some((user + system) as f64 / ticks),
            _ => None,
        };
        let start_time_seconds = match (field(22), ticks, boot_time_seconds()) {
            (Some(start), Some(ticks), Some(boot)) => Some(boot as f64 + start as f64 / ticks),
            _ => None,
        };
        let page_bytes = page_bytes();
        ProcessSample {
            cpu_seconds,
            resident_bytes: field(24).zip(page_bytes).map(|(pages, size)| pages * size),
            virtual_bytes: field(23),
            open_fds: std::fs::read_dir("/proc/self/fd")
                .ok()
                .map(|entries| entries.count() as u64),
            threads: field(20),
            start_time_seconds,
        }
    }
}

/// The fields after the command name, which is in parentheses and may hold spaces.
fn stat_fields(stat: &str) -> Vec<&str> {
    stat.rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default()
}

fn boot_time_seconds() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|value| value.trim().parse().ok())
}

fn clock_ticks_per_second() -> Option<f64> {
    // SAFETY: sysconf reads a constant of the system and has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks > 0).then_some(ticks as f64)
}

fn page_bytes() -> Option<u64> {
    // SAFETY: as above.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|size| *size > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_name_with_spaces_and_parentheses_is_skipped() {
        let fields = stat_fields("42 (a (b) c) S 1 2 3");
        assert_eq!(fields, vec!["S", "1", "2", "3"]);
    }

    #[test]
    fn this_process_reads_its_own_use() {
        // Burn a little CPU so the reading cannot be zero ticks.
        let mut total = 0u64;
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_millis(50) {
            total = total.wrapping_add(std::hint::black_box(1));
        }
        let sample = ProcessSample::read();
        assert!(
            sample.cpu_seconds.is_some_and(|seconds| seconds > 0.0),
            "{sample:?}"
        );
        assert!(sample.resident_bytes.is_some_and(|bytes| bytes > 0));
        assert!(sample.open_fds.is_some_and(|fds| fds >= 3));
        assert!(sample.threads.is_some_and(|threads| threads >= 1));
        assert!(sample.start_time_seconds.is_some_and(|at| at > 1.0e9));
        assert!(total > 0);
    }
}
