//! A counting allocator for measuring where a run's memory goes (issue 29), built only with
//! the `heap-samples` feature: RSS says how much the process holds, not what its own code
//! had allocated at each moment, and a peak shorter than a sampling period never shows in
//! it.
//!
//! Every allocation goes to the system allocator and is counted: the bytes live now, the
//! highest live since the last sample, and the highest ever. With `FAULTLINE_HEAP_SAMPLES`
//! naming a file, a thread writes one line every 10 ms, `EPOCH_SECONDS LIVE_MAX_KB
//! PEAK_KB` (the highest live since the previous line, and since the start): the format of
//! `ci/bench-scale`'s RSS samples, so `examples/rss_phases` cuts them at the run's phases
//! the same way.
//!
//! ```text
//! cargo build --release --features heap-samples
//! FAULTLINE_HEAP_SAMPLES=heap.txt target/release/faultline run ...
//! target/release/examples/rss_phases reports/NAME.json heap.txt
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The environment variable naming the file the samples are written to.
pub const SAMPLES_ENV: &str = "FAULTLINE_HEAP_SAMPLES";

/// How often the live bytes are written.
const PERIOD: Duration = Duration::from_millis(10);

static LIVE: AtomicUsize = AtomicUsize::new(0);
static WINDOW_MAX: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting what is live; install it with `#[global_allocator]`.
pub struct Counting;

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    WINDOW_MAX.fetch_max(now, Ordering::Relaxed);
    PEAK.fetch_max(now, Ordering::Relaxed);
}

fn shrank(by: usize) {
    LIVE.fetch_sub(by, Ordering::Relaxed);
}

// SAFETY: every call is forwarded unchanged to `System`; only counters are updated beside.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                shrank(layout.size() - new_size);
            }
        }
        p
    }
}

/// Bytes allocated and not yet freed.
pub fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// The most bytes ever live at once.
pub fn peak_bytes() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// Forgets the highest live so far: [`peak_bytes`] then says the highest since this call.
pub fn reset_peak() {
    PEAK.store(live_bytes(), Ordering::Relaxed);
}

/// Starts the sampling thread when `FAULTLINE_HEAP_SAMPLES` names a file; says on stderr
/// why not when the file cannot be created.
pub fn start_from_env() {
    let Some(path) = std::env::var_os(SAMPLES_ENV) else {
        return;
    };
    let file = match std::fs::File::create(&path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("faultline: {SAMPLES_ENV}: {}: {e}", path.to_string_lossy());
            return;
        }
    };
    let spawned = std::thread::Builder::new()
        .name("heap-samples".into())
        .spawn(move || sample_forever(file));
    if let Err(e) = spawned {
        eprintln!("faultline: {SAMPLES_ENV}: cannot start its thread: {e}");
    }
}

fn sample_forever(mut file: std::fs::File) {
    loop {
        let window = WINDOW_MAX.swap(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let line = format!("{at:.6} {} {}\n", window / 1024, peak_bytes() / 1024);
        if file.write_all(line.as_bytes()).is_err() {
            return;
        }
        std::thread::sleep(PERIOD);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_what_is_live_through_alloc_realloc_and_free() {
        // The test binary's own allocator is the system's, so only these calls move the
        // counters.
        let big = Layout::from_size_align(4096, 8).expect("layout");
        let before = live_bytes();
        // SAFETY: a non-zero size; the pointer is freed below with its current layout.
        let p = unsafe { Counting.alloc(big) };
        assert!(!p.is_null());
        assert_eq!(live_bytes(), before + 4096);
        assert!(peak_bytes() >= before + 4096);
        // SAFETY: `p` came from `Counting` with `big`.
        let p = unsafe { Counting.realloc(p, big, 1024) };
        assert!(!p.is_null());
        assert_eq!(live_bytes(), before + 1024);
        let small = Layout::from_size_align(1024, 8).expect("layout");
        // SAFETY: `p` is live with the layout `small`.
        unsafe { Counting.dealloc(p, small) };
        assert_eq!(live_bytes(), before);
        assert!(peak_bytes() >= before + 4096, "the peak stays");
    }
}
