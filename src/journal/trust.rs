//! Which journal entries `restore` carries out: only undos a run itself writes.
//!
//! A journal is data, and `restore` runs what it says as root on nodes and through the
//! API with the actor's powers. A run only ever journals a fault's inverse as the fault
//! table names it (a kubelet start for a kubelet stop, an uncordon for a cordon or drain,
//! a power-on for a power-off): so an entry whose undo is not its fault's inverse, or names
//! a fault faultline does not make, was not written by a run, and is refused and reported
//! instead of carried out. The one undo that is free text is a `run` step's own `undo:`
//! command; it is carried out only where the journal is this user's alone (no one else
//! could have written it), or where the command is one the experiments `restore` was
//! given declare (in-cluster, where the journal lies on a volume any pod of the namespace
//! can mount: the chart passes the pinned experiments).

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::{Entry, Undo};
use crate::experiment::fault::{ActionKind, Inverse, Via};
use crate::experiment::model::Action;

/// Which `run` undo commands are trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Commands {
    /// Any: the journal is private to this user.
    Any,
    /// Only these (the `undo:` commands of the experiments given), else none.
    Declared(BTreeSet<String>),
}

/// Why an entry is not carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Untrusted {
    /// No fault of faultline's has this name.
    #[error("refused: `{0}` is no fault faultline makes, so no run wrote this entry")]
    UnknownFault(String),
    /// The undo is not the fault's inverse.
    #[error(
        "refused: its undo ({undo}) is not what a run journals for `{fault}`, so no run \
         wrote this entry"
    )]
    NotItsUndo {
        /// The fault.
        fault: String,
        /// The undo found.
        undo: String,
    },
    /// A `run` undo from a journal others can write, not declared by the experiments given.
    #[error(
        "refused: its undo is the shell command `{command}`, and this journal can be written \
         by others than this user; pass the experiments that declare it (`--experiments`) to \
         carry it out"
    )]
    UndeclaredCommand {
        /// The command.
        command: String,
    },
}

/// How a fault of kind `kind` is journaled when its inverse is `inverse` run as `via`.
fn undo_shape(inverse: &Action) -> Option<Undo> {
    let kind = ActionKind::of(inverse);
    Some(match &kind.info().via {
        Via::Power(crate::execute::PowerAction::On) => Undo::PowerOn,
        Via::NodeApi | Via::ClusterApi => Undo::Api(inverse.clone()),
        Via::Node(op) => Undo::Node(op.clone()),
        Via::StepCommand | Via::Power(_) => return None,
    })
}

/// `Ok` when `entry` is an undo a run writes for its fault, under `commands`.
pub(crate) fn check(entry: &Entry, commands: &Commands) -> Result<(), Untrusted> {
    let kind = ActionKind::named(&entry.fault)
        .ok_or_else(|| Untrusted::UnknownFault(entry.fault.clone()))?;
    let not_its = || Untrusted::NotItsUndo {
        fault: entry.fault.clone(),
        undo: serde_json::to_string(&entry.undo).unwrap_or_else(|_| format!("{:?}", entry.undo)),
    };
    let info = kind.info();
    let fits = match (&info.inverse, &entry.undo) {
        (Inverse::Action(inverse), undo) => undo_shape(inverse).as_ref() == Some(undo),
        (Inverse::UntaintSame, Undo::Api(Action::Untaint(_))) => true,
        (Inverse::StepUndo, Undo::Node(crate::execute::NodeOp::Run(command))) => {
            return match commands {
                Commands::Any => Ok(()),
                Commands::Declared(declared) if declared.contains(command) => Ok(()),
                Commands::Declared(_) => Err(Untrusted::UndeclaredCommand {
                    command: command.clone(),
                }),
            };
        }
        // A reboot cut off between its stop and its start (kind, k3d) is powered on.
        (Inverse::None, Undo::PowerOn) => kind == ActionKind::Reboot,
        _ => false,
    };
    if fits { Ok(()) } else { Err(not_its()) }
}

/// The `undo:` commands of `experiments`' `run` steps: what a journal on a shared volume
/// may ask `restore` to run.
pub(crate) fn declared_commands<'a>(
    experiments: impl IntoIterator<Item = &'a crate::experiment::model::Experiment>,
) -> BTreeSet<String> {
    experiments
        .into_iter()
        .flat_map(|e| e.steps.iter())
        .filter_map(|s| match &s.action {
            Action::Run {
                undo: Some(undo), ..
            } => Some(undo.clone()),
            _ => None,
        })
        .collect()
}

/// Whether the journal at `path` can have been written by this user alone: it and its
/// directory are owned by this user (or root) and writable by no group or other.
pub(crate) fn private_to_this_user(path: &Path) -> bool {
    let euid = super::effective_uid();
    let private = |p: &Path| {
        std::fs::metadata(p)
            .is_ok_and(|m| (m.uid() == euid || m.uid() == 0) && m.mode() & 0o022 == 0)
    };
    let dir = super::parent_dir(path);
    private(dir) && (!path.exists() || private(path))
}
