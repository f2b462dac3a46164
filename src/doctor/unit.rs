//! The unit that runs the kubelet: it exists under the name the profile's commands use, and
//! its `Restart=` does not undo a stop.

use std::collections::BTreeMap;

use super::{CHECK_TIMEOUT, CheckKind, Finding, Status};
use crate::execute::{ExecError, Executor, NodeOp};
use crate::experiment::fault::CommandKey;
use crate::inventory::NodeAccess;

/// The systemd properties of the unit behind the kubelet, from `commands.kubeletUnit`.
pub(super) async fn finding(executor: &Executor, node: &NodeAccess) -> Finding {
    let name = node.name.as_str();
    let Some(template) = node.commands.get(CommandKey::KubeletUnit) else {
        return Finding::node(
            name,
            CheckKind::KubeletUnit,
            Status::Skip,
            match node.profile {
                Some(p) => format!("profile {p} names no kubelet unit (commands.kubeletUnit)"),
                None => "no commands.kubeletUnit to ask the service manager with".into(),
            },
        );
    };
    let text = match crate::execute::render::shell(
        template,
        &[("node", &node.name), ("address", &node.address)],
    ) {
        Ok(t) => t,
        Err(e) => {
            return Finding::node(name, CheckKind::KubeletUnit, Status::Fail, e.to_string());
        }
    };
    match executor
        .perform(name, &NodeOp::Run(text.clone()), CHECK_TIMEOUT)
        .await
    {
        Ok(out) => judge_unit(
            name,
            &text,
            &out.output,
            node.commands
                .get(CommandKey::KubeletStop)
                .map(String::as_str),
        ),
        Err(ExecError::CommandFailed { output, .. }) => judge_unit(
            name,
            &text,
            &output,
            node.commands
                .get(CommandKey::KubeletStop)
                .map(String::as_str),
        ),
        Err(e) => Finding::node(name, CheckKind::KubeletUnit, Status::Fail, e.to_string()),
    }
}

/// What `systemctl show -p Id,LoadState,ActiveState,Restart UNIT` printed, judged: the unit
/// must exist, and its `Restart=` must not undo the stop command (systemd does not restart
/// a unit stopped with `systemctl stop`; it does restart one whose process is killed).
pub(crate) fn judge_unit(node: &str, asked: &str, output: &str, stop: Option<&str>) -> Finding {
    let props: BTreeMap<&str, &str> = output
        .lines()
        .filter_map(|l| l.trim().split_once('='))
        .collect();
    let f = |status, detail: String| Finding::node(node, CheckKind::KubeletUnit, status, detail);
    let Some(load) = props.get("LoadState").copied() else {
        return f(
            Status::Fail,
            format!(
                "`{asked}` printed no LoadState=: {}",
                output.trim().lines().next().unwrap_or("(nothing)")
            ),
        );
    };
    let unit = props.get("Id").copied().unwrap_or("the unit");
    if load != "loaded" {
        return f(
            Status::Fail,
            format!(
                "{unit} is {load} (LoadState={load}, from `{asked}`): the profile's kubelet \
                 commands name a unit this node does not have; kubeadm, kind and OpenShift \
                 run `kubelet`, k3s `k3s` / `k3s-agent`, RKE2 `rke2-server` / `rke2-agent`: \
                 choose the node's profile or set commands.kubelet*"
            ),
        );
    }
    let active = props.get("ActiveState").copied().unwrap_or("unknown");
    let restart = props.get("Restart").copied().unwrap_or("no");
    let stops_through_systemd = stop.is_some_and(|s| s.contains("systemctl stop"));
    let restarts_on_exit = matches!(
        restart,
        "always" | "on-failure" | "on-abnormal" | "on-abort" | "on-watchdog"
    );
    if restarts_on_exit && !stops_through_systemd {
        let stop = stop.unwrap_or("(none)");
        let status = if restart == "always" {
            Status::Fail
        } else {
            Status::Warn
        };
        return f(
            status,
            format!(
                "{unit} has Restart={restart} and commands.kubeletStop (`{stop}`) does not \
                 stop it through systemd, so the service manager {} it again and the fault \
                 undoes itself; stop it with `systemctl stop`",
                if restart == "always" {
                    "starts"
                } else {
                    "may start"
                }
            ),
        );
    }
    let mut detail = format!("{unit} loaded, {active}, Restart={restart}");
    if restarts_on_exit {
        detail.push_str(" (not applied to a `systemctl stop`)");
    }
    if active != "active" {
        return f(
            Status::Warn,
            format!("{detail}: not running before any fault"),
        );
    }
    f(Status::Pass, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unit_that_is_missing_or_restarts_itself_fails() {
        let j = |out: &str, stop: &str| {
            judge_unit("n1", "systemctl show -p … kubelet", out, Some(stop))
        };
        let ok = j(
            "Id=kubelet.service\nLoadState=loaded\nActiveState=active\nRestart=always\n",
            "systemctl stop kubelet",
        );
        assert_eq!(ok.status, Status::Pass, "{}", ok.detail);
        assert!(ok.detail.contains("not applied to a `systemctl stop`"));
        let missing = j(
            "Id=rke2-agent.service\nLoadState=not-found\nActiveState=inactive\nRestart=no\n",
            "systemctl stop rke2-agent",
        );
        assert_eq!(missing.status, Status::Fail);
        assert!(
            missing.detail.contains("rke2-agent.service is not-found"),
            "{}",
            missing.detail
        );
        let kills = j(
            "Id=kubelet.service\nLoadState=loaded\nActiveState=active\nRestart=always\n",
            "pkill kubelet",
        );
        assert_eq!(kills.status, Status::Fail);
        assert!(kills.detail.contains("Restart=always"), "{}", kills.detail);
        let maybe = j(
            "Id=kubelet.service\nLoadState=loaded\nActiveState=active\nRestart=on-failure\n",
            "pkill kubelet",
        );
        assert_eq!(maybe.status, Status::Warn);
        let down = j(
            "Id=kubelet.service\nLoadState=loaded\nActiveState=inactive\nRestart=no\n",
            "systemctl stop kubelet",
        );
        assert_eq!(down.status, Status::Warn);
        let garbage = j("Unit not found", "systemctl stop kubelet");
        assert_eq!(garbage.status, Status::Fail);
    }
}
