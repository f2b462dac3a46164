//! Authenticated SSH connections kept for the rest of a run, so that a step's command
//! starts when the step is due instead of one TCP and SSH handshake later (a few hundred
//! milliseconds per node, more through jump hosts).
//!
//! A connection is taken out for one command at a time and put back only when that
//! command ended normally and was not one that takes the machine down; anything else (a
//! drop, a cut session, a reboot) leaves it out, to be closed. A kept connection can still
//! go stale while it waits (the node rebooted, sshd restarted): the transport then opens a
//! fresh one (`ssh::run`). At most one idle connection is kept per node and login, which is
//! all a step needs: two commands on one node at once (a proof beside the fault) simply
//! open a second one, closed afterwards.

use std::collections::HashMap;
use std::sync::Mutex;

/// The idle connections of one executor (shared by its clones), by
/// [`super::SshTarget::pool_key`]. Generic over the connection (the transport's
/// `ssh::Connection`), so the pool knows nothing of SSH and SSH imports the pool alone.
pub(in crate::execute) struct SessionPool<Connection> {
    idle: Mutex<HashMap<String, Connection>>,
}

impl<Connection> Default for SessionPool<Connection> {
    fn default() -> Self {
        SessionPool {
            idle: Mutex::new(HashMap::new()),
        }
    }
}

impl<Connection> std::fmt::Debug for SessionPool<Connection> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<String> = self
            .idle
            .lock()
            .map(|idle| idle.keys().cloned().collect())
            .unwrap_or_default();
        f.debug_struct("SessionPool").field("idle", &keys).finish()
    }
}

impl<Connection> SessionPool<Connection> {
    /// The idle connection for `key`, taken out of the pool.
    pub(super) fn take(&self, key: &str) -> Option<Connection> {
        self.idle.lock().ok()?.remove(key)
    }

    /// Whether an idle connection waits for `key`.
    pub(super) fn has(&self, key: &str) -> bool {
        self.idle
            .lock()
            .map(|idle| idle.contains_key(key))
            .unwrap_or(false)
    }

    /// Keeps `connection` for the next command on `key`; when one is kept already, the
    /// surplus is closed (outside the lock: closing joins a jump host's pump thread).
    pub(super) fn put(&self, key: String, connection: Connection) {
        let surplus = match self.idle.lock() {
            Ok(mut idle) if !idle.contains_key(&key) => {
                idle.insert(key, connection);
                None
            }
            _ => Some(connection),
        };
        drop(surplus);
    }
}
