//! `faultline inventory kind|k3d`: writes an inventory read from a running cluster.

use super::{EXIT_ERROR, InventoryCommand};

/// Discovers the cluster and writes its inventory; placeholder until discovery lands.
pub async fn inventory(_which: InventoryCommand) -> i32 {
    eprintln!("faultline inventory: not implemented yet");
    EXIT_ERROR
}
