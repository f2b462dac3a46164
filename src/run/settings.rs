//! Everything about a run that does not come from the experiment file: the inventory,
//! how to observe, the interlocks' settings and the self-restore margin.

use std::path::PathBuf;
use std::time::Duration;

use crate::inventory::Inventory;
use crate::observe::ObserveMode;

/// Default extra time a self-restore waits beyond the run's planned end, so it never
/// fires during a healthy run.
pub const DEFAULT_RESTORE_MARGIN: Duration = Duration::from_secs(120);

/// Everything about a run that does not come from the experiment file.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// How to reach the cluster and its nodes.
    pub inventory: Inventory,
    /// Watches or polling.
    pub observe_mode: ObserveMode,
    /// Contexts the run may use (from the CLI; the inventory's list is added).
    pub allowed_contexts: Vec<String>,
    /// The fault journal.
    pub journal_path: PathBuf,
    /// Start even though the journal holds unrestored faults for this cluster.
    pub ignore_journal: bool,
    /// Keep observing after an expectation has already failed.
    pub keep_going: bool,
    /// How long after the run's planned end a self-restore armed on a node fires if
    /// faultline has not undone the fault itself (because it was killed).
    pub restore_margin: Duration,
}

impl RunSettings {
    /// Settings with the defaults: watches, no extra allowed contexts, the journal
    /// respected, stop at the first failed expectation, the default restore margin.
    pub fn new(inventory: Inventory, journal_path: PathBuf) -> Self {
        RunSettings {
            inventory,
            observe_mode: ObserveMode::Watch,
            allowed_contexts: Vec::new(),
            journal_path,
            ignore_journal: false,
            keep_going: false,
            restore_margin: DEFAULT_RESTORE_MARGIN,
        }
    }
}
