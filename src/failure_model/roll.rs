//! A roll's nodes one after the other (`roll:`, issue 46): node k's step is issued once
//! node k-1 is back (Ready again) plus the roll's `settle`, so each node's windows are the
//! model's windows for one node, counted from that node's own predicted issue, and its
//! issue is the one before's predicted return plus `settle`. Pure, as the rest of the
//! model.

use std::time::Duration;

use serde::Serialize;

use super::{
    ControllerSettings, ModelNode, ModelPod, Outage, Prediction, Rule, Transition, Window, predict,
};

/// What a roll's action (or sequence of actions) does to each node, as far as the model
/// can tell: it decides whether and when the node is back, and so the next node's issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum RollFault {
    /// The node is silenced and nothing in the roll brings it back (a `kubelet-stop`, a
    /// `power-off` alone): it is never Ready again, so the roll goes no further.
    Silences,
    /// The node goes silent for a while nothing knows in advance and comes back by itself
    /// (a reboot's boot): Unknown, tainted, evicted only if it is still silent by then.
    ComesBack,
    /// The node stays Ready (a kubelet restart, a cordon, a drain): nothing to predict but
    /// the next node's issue.
    StaysReady,
}

/// One roll as the model takes it.
#[derive(Debug, Clone)]
pub struct RollInput<'a> {
    /// The batches in roll order (one node each unless `maxUnavailable` is more).
    pub batches: &'a [Vec<String>],
    /// When the first batch's step is issued (offset from the start of the run).
    pub from: Duration,
    /// The roll's `settle`: how long after a batch is back the next one's step is issued.
    pub settle: Duration,
    /// What the roll does to each node.
    pub fault: RollFault,
}

/// The model's word on one node of a roll.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RollNode {
    /// The node.
    pub node: String,
    /// Its place in the roll, from 1 (the nodes of one batch share it).
    pub batch: usize,
    /// When its step is issued: the batch before's predicted return plus `settle` at the
    /// earliest; `never` when the roll cannot get to it.
    pub issued: Window,
    /// Whether the windows hold only if the node is still silent by then (a reboot whose
    /// boot time the model does not know).
    pub if_still_silent: bool,
    /// The node's transitions (Unknown, tainted, Ready again) and those of the pods given
    /// for it, counted from its own issue.
    pub predictions: Vec<Prediction>,
}

/// How long after its step a node that comes back by itself counts as back at the
/// earliest: the run's interlock waits until its kubelet renewed its Lease twice after the
/// step (or the node is seen turning Ready, which comes later), one renew interval apart.
pub fn back_at_the_earliest(settings: &ControllerSettings) -> Duration {
    settings.renew_interval()
}

/// A window moved by an issue window: its earliest by the issue's earliest, its latest by
/// the issue's latest (open when either is).
fn delayed(w: Window, by: Window) -> Window {
    match (w, by) {
        (Window::Never, _) | (_, Window::Never) => Window::Never,
        (
            Window::Between { earliest, latest },
            Window::Between {
                earliest: from,
                latest: to,
            },
        ) => Window::Between {
            earliest: earliest + from,
            latest: latest.zip(to).map(|(l, t)| l + t),
        },
    }
}

/// Opens a window's upper end: what depends on a boot time nothing knows.
fn open(w: Window) -> Window {
    match w {
        Window::Between { earliest, .. } => Window::Between {
            earliest,
            latest: None,
        },
        Window::Never => Window::Never,
    }
}

/// Each node of the roll, in roll order, with its predicted issue and windows. `nodes` is
/// the whole cluster (zones and readiness decide the eviction rate); `pods` the pods on
/// the roll's nodes whose windows are wanted.
pub fn predict_roll(
    settings: &ControllerSettings,
    nodes: &[ModelNode],
    pods: &[ModelPod],
    roll: &RollInput<'_>,
) -> Vec<RollNode> {
    let mut out = Vec::new();
    let mut issue = Window::Between {
        earliest: roll.from,
        latest: Some(roll.from),
    };
    for (i, batch) in roll.batches.iter().enumerate() {
        // The batch's windows counted from its issue at zero, then moved by the issue.
        let relative: Vec<(String, Vec<Prediction>)> = match roll.fault {
            RollFault::StaysReady => batch
                .iter()
                .map(|n| {
                    let stays = |transition| Prediction {
                        subject: n.clone(),
                        transition,
                        window: Window::Never,
                        rule: Rule::StaysReady,
                    };
                    (
                        n.clone(),
                        vec![
                            stays(Transition::NodeUnknown),
                            stays(Transition::NodeTainted),
                        ],
                    )
                })
                .collect(),
            RollFault::Silences | RollFault::ComesBack => {
                let outages: Vec<Outage> = batch
                    .iter()
                    .map(|n| Outage {
                        node: n.clone(),
                        from: Duration::ZERO,
                        held_by: Duration::ZERO,
                        until: None,
                        out_of_service: None,
                        deleted: None,
                        restarts: false,
                    })
                    .collect();
                let all = predict(settings, nodes, pods, &outages);
                batch
                    .iter()
                    .map(|n| {
                        let mine = all
                            .iter()
                            .filter(|p| {
                                p.subject == *n
                                    || pods.iter().any(|m| m.node == *n && m.name == p.subject)
                            })
                            .cloned()
                            .map(|mut p| {
                                if roll.fault == RollFault::ComesBack {
                                    p.window = open(p.window);
                                }
                                p
                            })
                            .collect();
                        (n.clone(), mine)
                    })
                    .collect()
            }
        };
        let back = match roll.fault {
            RollFault::Silences => Window::Never,
            RollFault::ComesBack => Window::Between {
                earliest: back_at_the_earliest(settings),
                latest: None,
            },
            RollFault::StaysReady => Window::Between {
                earliest: Duration::ZERO,
                latest: Some(Duration::ZERO),
            },
        };
        let back_rule = match roll.fault {
            RollFault::Silences => Rule::NotBroughtBack,
            RollFault::ComesBack => Rule::BackAfterRenewals,
            RollFault::StaysReady => Rule::StaysReady,
        };
        for (node, mut predictions) in relative {
            // A node the roll never gets to: nothing happens to it.
            if issue == Window::Never {
                predictions.clear();
            }
            if issue != Window::Never {
                predictions.push(Prediction {
                    subject: node.clone(),
                    transition: Transition::NodeReady,
                    window: back,
                    rule: back_rule.clone(),
                });
            }
            for p in &mut predictions {
                p.window = delayed(p.window, issue);
            }
            out.push(RollNode {
                node,
                batch: i + 1,
                issued: issue,
                if_still_silent: roll.fault == RollFault::ComesBack,
                predictions,
            });
        }
        issue = delayed(
            back,
            delayed(
                Window::Between {
                    earliest: roll.settle,
                    latest: Some(roll.settle),
                },
                issue,
            ),
        );
    }
    out
}
