//! What the benchmark programs share: bubblewrap's minimal profile (the reference a sandbox's
//! start-up is measured against), medians, and how busy the machine was.

use std::time::Duration;

/// Bubblewrap's arguments for a minimal sandbox around a program: every namespace, `/usr`
/// read-only with the merged-`/usr` links, a fresh `/proc`, a minimal `/dev` and a `/tmp`.
/// The program and its arguments follow.
pub const BWRAP_MINIMAL: &[&str] = &[
    "--unshare-all",
    "--die-with-parent",
    "--ro-bind",
    "/usr",
    "/usr",
    "--symlink",
    "usr/lib",
    "/lib",
    "--symlink",
    "usr/lib64",
    "/lib64",
    "--symlink",
    "usr/bin",
    "/bin",
    "--symlink",
    "usr/sbin",
    "/sbin",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--tmpfs",
    "/tmp",
];

/// The median of `samples` (the upper one of an even count); zero for none.
pub fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

/// The one-minute load average, as the kernel prints it (`?` when it cannot be read).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split(' ').next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_the_middle_sample() {
        let ms = Duration::from_millis;
        assert_eq!(median(vec![ms(3), ms(1), ms(2)]), ms(2));
        assert_eq!(median(vec![ms(4), ms(1), ms(3), ms(2)]), ms(3));
        assert_eq!(median(Vec::new()), Duration::ZERO);
    }
}
