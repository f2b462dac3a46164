//! The executor's side of the undo watcher ([`pod::watcher`]): started beside the timer
//! that is the planned undo of a fault which cuts the API transport, asked to undo when
//! faultline must end the fault early, and removed when the fault is settled.

use std::time::Duration;

use crate::experiment::fault::NodeOp;

use super::self_restore::{ArmedRestore, check_token};
use crate::execute::error::ExecError;
use crate::execute::executor::Executor;
use crate::execute::plan::command_text;
use crate::execute::{pod, render};

impl Executor {
    /// Starts the undo watcher on `node` (reached through the API) for the fault armed as
    /// `token`: asked, it runs `undo` on the host and disarms the timer armed with the same
    /// token; unasked, it ends after `watch_for`, as the timer fires. Returns the watcher
    /// pod's name, which the self-restore keeps ([`ArmedRestore::watcher`]).
    pub async fn start_undo_watcher(
        &self,
        node: &str,
        undo: &NodeOp,
        watch_for: Duration,
        token: &str,
    ) -> Result<String, ExecError> {
        let access = self.access(node)?;
        check_token(node, token)?;
        let undo_text = command_text(&access, undo, self.run.as_deref())?;
        let render_err = |source| ExecError::Render {
            node: node.into(),
            source,
        };
        // The timer is disarmed after the undo, with the inventory's own template.
        let disarm = match &access.disarm_restore {
            Some(t) => render::shell(t, &[("token", token), ("pid", ""), ("node", &access.name)])
                .map_err(render_err)?,
            None => String::from(":"),
        };
        let host_command = format!("{undo_text}; {disarm}");
        let client = self.client(node).await?;
        pod::watcher::start(
            &client,
            node,
            &access.pod,
            &host_command,
            watch_for,
            run_of(token),
        )
        .await
        .map_err(|source| ExecError::Pod {
            node: node.into(),
            source,
        })
    }

    /// Asks the undo watcher of `armed` on `node` to undo now; `Ok(false)` when the
    /// restore has no watcher (its timer alone undoes the fault).
    pub async fn ask_undo(&self, node: &str, armed: &ArmedRestore) -> Result<bool, ExecError> {
        let Some(watcher) = &armed.watcher else {
            return Ok(false);
        };
        let access = self.access(node)?;
        let client = self.client(node).await?;
        pod::watcher::ask_undo(&client, &access.pod.namespace, watcher)
            .await
            .map(|()| true)
            .map_err(|source| ExecError::Pod {
                node: node.into(),
                source,
            })
    }

    /// Removes the undo watcher of `armed`, if it has one (logged, never an error: its
    /// deadline and `restore` end it otherwise).
    pub(in crate::execute) async fn remove_watcher(&self, node: &str, armed: &ArmedRestore) {
        let Some(watcher) = &armed.watcher else {
            return;
        };
        let Ok(access) = self.access(node) else {
            return;
        };
        match self.client(node).await {
            Ok(client) => pod::watcher::delete(&client, &access.pod.namespace, watcher).await,
            Err(e) => tracing::debug!(node, "could not remove the undo watcher {watcher}: {e}"),
        }
    }
}

/// The run a fault's token belongs to: the token is `<run id>-<sequence>`; the watcher pod
/// is labelled with the run, so that `restore` removes only its own run's.
pub(crate) fn run_of(token: &str) -> &str {
    token.rsplit_once('-').map_or(token, |(run, _)| run)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_token_names_its_run() {
        assert_eq!(
            crate::execute::run_of("fl20261128200455123-3"),
            "fl20261128200455123"
        );
        assert_eq!(crate::execute::run_of("plain"), "plain");
    }
}
