//! The CPU time the calling thread has used: what a live judgement costs faultline itself,
//! apart from the time it waits for a core on a busy machine (which its wall time holds).

/// The calling thread's CPU time, µs; 0 where the clock cannot be read.
pub(crate) fn now_micros() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes the one `timespec` it is given and reads nothing else;
    // CLOCK_THREAD_CPUTIME_ID is served by Linux and macOS.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    if rc != 0 {
        return 0;
    }
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(t.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000).saturating_add(nanos / 1_000)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_clock_moves_with_work_done_on_this_thread() {
        let before = super::now_micros();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        std::hint::black_box(x);
        let after = super::now_micros();
        assert!(after > before, "{before} -> {after}");
    }
}
