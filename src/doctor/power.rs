//! The out-of-band power driver answers `power.status`, or what is missing.

use super::needs::Needs;
use super::{CHECK_TIMEOUT, CheckKind, Finding, Status};
use crate::execute::{Executor, PowerAction, PowerState};
use crate::experiment::fault::PowerKey;
use crate::inventory::NodeAccess;

/// The power driver, asked for the power state; or what is missing.
pub(super) async fn finding(
    executor: &Executor,
    node: &NodeAccess,
    needs: &Needs,
) -> Option<Finding> {
    let name = node.name.as_str();
    let f = |status, detail: String| Some(Finding::node(name, CheckKind::Power, status, detail));
    if !node.power.has(PowerKey::Status) {
        return if node.power.has(PowerKey::On) {
            f(
                Status::Warn,
                "power.on is configured but no power.status: the driver cannot be checked \
                 without turning something on"
                    .into(),
            )
        } else if needs.power.contains(&PowerAction::On) {
            // Already a failure from the missing power.on.
            None
        } else {
            f(
                Status::Skip,
                "no power driver configured (no power action needs one)".into(),
            )
        };
    }
    let shown = executor.describe_power(name, crate::execute::PowerAction::Status);
    match executor.power_state(name, CHECK_TIMEOUT).await {
        Ok(PowerState::On) => f(Status::Pass, format!("answers `on` ({shown})")),
        Ok(PowerState::Off) => f(
            Status::Warn,
            format!("answers `off` ({shown}): the node is powered off now"),
        ),
        Ok(PowerState::Unknown(text)) => f(
            Status::Fail,
            format!("answered `{text}`, neither on nor off ({shown})"),
        ),
        Err(e) => f(
            Status::Fail,
            format!("the power driver does not answer: {e}"),
        ),
    }
}
