//! How the process asks glibc's allocator to behave, set once at start-up.
//!
//! glibc gives threads that allocate at the same time arenas of their own (up to eight per
//! core), and memory freed in one arena is not reused by another. faultline's threads (the
//! async runtime's workers, its blocking pool, one per reporter) each take a turn decoding
//! pages of the first lists, filing entries or writing reports, so each arena kept what its
//! thread once held: at 30,000 pods (issue 29) the process held about 140 MB for 56 MB of
//! live heap. faultline waits on the network, not on its allocator, so one arena is enough:
//! the same run then held 103 MB. A person who set the arenas themselves
//! (`MALLOC_ARENA_MAX`, or `arena_max` in `GLIBC_TUNABLES`) keeps their setting.

/// The number of arenas faultline asks for.
const ARENAS: i32 = 1;

/// Whether the environment already says how many arenas glibc may use.
fn arenas_set_by(env: impl Fn(&str) -> Option<String>) -> bool {
    env("MALLOC_ARENA_MAX").is_some()
        || env("GLIBC_TUNABLES").is_some_and(|t| t.contains("glibc.malloc.arena_max"))
}

/// Limits glibc's allocator to [`ARENAS`] arena, unless the environment set the number;
/// call first thing in `main`, before any thread starts. Does nothing on other C libraries.
pub fn limit_arenas() {
    if arenas_set_by(|name| std::env::var(name).ok()) {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only sets a tuning parameter of the allocator and reports whether
    // it took it; nothing is allocated or freed through it.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, ARENAS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn a_setting_of_the_environment_is_kept() {
        assert!(!arenas_set_by(env(&[])));
        assert!(arenas_set_by(env(&[("MALLOC_ARENA_MAX", "4")])));
        assert!(arenas_set_by(env(&[(
            "GLIBC_TUNABLES",
            "glibc.malloc.trim_threshold=1:glibc.malloc.arena_max=8"
        )])));
        assert!(!arenas_set_by(env(&[(
            "GLIBC_TUNABLES",
            "glibc.malloc.trim_threshold=1"
        )])));
    }
}
