//! The machine's figures the web console charts beside the process's: CPU time per core
//! (`/proc/stat`), memory (`/proc/meminfo`) and the data directory's filesystem (`statvfs`).
//! Shown by `/_node/{node}/_system` as `system_stats`, with Couchbase's names
//! (`/pools/default`'s `systemStats`: `mem_total`, `mem_free`, `cpu_cores_available`) where
//! it has one.

use std::path::Path;

use serde_json::{json, Value};

/// Busy and total CPU time of one core since boot, in the kernel's clock ticks (USER_HZ); a
/// reader takes the difference of two samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoreTicks {
    pub busy: u64,
    pub total: u64,
}

/// One reading; empty or zero where `/proc` or the filesystem could not be read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostSample {
    pub cores: Vec<CoreTicks>,
    pub memory_total_bytes: u64,
    /// `MemAvailable`: what could be given to programs without swapping.
    pub memory_available_bytes: u64,
    pub disk_total_bytes: u64,
    /// Bytes an unprivileged process may still write (`f_bavail`).
    pub disk_free_bytes: u64,
}

impl HostSample {
    /// The machine now; `data_dir`'s filesystem for the disk figures.
    pub fn read(data_dir: Option<&Path>) -> HostSample {
        let cores = std::fs::read_to_string("/proc/stat")
            .map(|text| parse_stat(&text))
            .unwrap_or_default();
        let (memory_total_bytes, memory_available_bytes) = std::fs::read_to_string("/proc/meminfo")
            .map(|text| parse_meminfo(&text))
            .unwrap_or_default();
        let (disk_total_bytes, disk_free_bytes) = data_dir.and_then(filesystem).unwrap_or_default();
        HostSample {
            cores,
            memory_total_bytes,
            memory_available_bytes,
            disk_total_bytes,
            disk_free_bytes,
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "cpu_cores_available": self.cores.len(),
            "cpu_cores": self.cores.iter()
                .map(|core| json!({"busy_ticks": core.busy, "total_ticks": core.total}))
                .collect::<Vec<_>>(),
            "mem_total": self.memory_total_bytes,
            "mem_free": self.memory_available_bytes,
            "disk_total": self.disk_total_bytes,
            "disk_free": self.disk_free_bytes,
        })
    }
}

/// `cpuN user nice system idle iowait irq softirq steal ...` lines; idle and iowait are the
/// idle time, guest time is already inside user and nice.
fn parse_stat(text: &str) -> Vec<CoreTicks> {
    text.lines()
        .filter(|line| {
            line.strip_prefix("cpu")
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
        })
        .map(|line| {
            let fields: Vec<u64> = line
                .split_whitespace()
                .skip(1)
                .take(8)
                .map(|field| field.parse().unwrap_or(0))
                .collect();
            let total: u64 = fields.iter().sum();
            let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
            CoreTicks {
                busy: total.saturating_sub(idle),
                total,
            }
        })
        .collect()
}

fn parse_meminfo(text: &str) -> (u64, u64) {
    let kib = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |value| value * 1024)
    };
    (kib("MemTotal"), kib("MemAvailable"))
}

/// (total, available) bytes of the filesystem holding `path`.
fn filesystem(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut stats = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `name` is a NUL-terminated path and `stats` a buffer of the right type, which
    // statvfs fills when it returns 0.
    let status = unsafe { libc::statvfs(name.as_ptr(), stats.as_mut_ptr()) };
    if status != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it wrote the whole structure.
    let stats = unsafe { stats.assume_init() };
    // The field types differ between targets (u32 or u64); settee runs on 64-bit Linux.
    #[allow(clippy::useless_conversion)]
    let (blocks, available, block) = (
        u64::from(stats.f_blocks),
        u64::from(stats.f_bavail),
        u64::from(stats.f_frsize),
    );
    Some((
        blocks.saturating_mul(block),
        available.saturating_mul(block),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cores_are_read_from_their_lines_and_idle_time_is_not_busy() {
        let stat = "cpu  10 0 10 100 0 0 0 0 0 0\n\
                    cpu0 4 1 5 50 10 0 0 0 0 0\n\
                    cpu1 6 0 4 40 0 0 0 0 0 0\n\
                    intr 1 2 3\n";
        assert_eq!(
            parse_stat(stat),
            vec![
                CoreTicks {
                    busy: 10,
                    total: 70
                },
                CoreTicks {
                    busy: 10,
                    total: 50
                }
            ]
        );
    }

    #[test]
    fn memory_is_read_in_bytes() {
        let meminfo = "MemTotal:       2048 kB\nMemFree:  10 kB\nMemAvailable:   1024 kB\n";
        assert_eq!(parse_meminfo(meminfo), (2048 * 1024, 1024 * 1024));
    }

    #[test]
    fn this_machine_has_cores_memory_and_a_filesystem() {
        let sample = HostSample::read(Some(Path::new(".")));
        assert!(!sample.cores.is_empty());
        assert!(sample.memory_total_bytes >= sample.memory_available_bytes);
        assert!(sample.memory_total_bytes > 0);
        assert!(sample.disk_total_bytes >= sample.disk_free_bytes && sample.disk_total_bytes > 0);
    }
}
