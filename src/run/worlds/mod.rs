//! The worlds the run's loop drives, each behind the `World` seam (`crate::run::world`):
//! the real cluster (`cluster`), a recorded run replayed on a paused clock (`rehearse`)
//! and, in tests only, a scripted world that can fail, hang or be slow at any call
//! (`scripted`).

pub(crate) mod cluster;
pub mod rehearse;
#[cfg(test)]
pub(crate) mod scripted;
