use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::*;

fn inventory(transport: &str) -> Inventory {
    Inventory::parse(
        &format!(
            "cluster: {{name: c}}\nprofile: kind\ntransport: {transport}\nnodes: [{{name: w}}]\n"
        ),
        Path::new("t.yaml"),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn shipped(name: &str) -> Experiment {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("experiments")
        .join(name);
    crate::experiment::load(&path).unwrap_or_else(|d| panic!("{d}"))
}

fn experiment(steps: &str) -> Experiment {
    let yaml = format!(
        "name: t\ndescription: t\nnamespace: default\ntargets:\n  victim: {{names: [w]}}\nsteps:\n{steps}\nexpect:\n  - name: back\n    node: victim\n    eventually: Ready\n"
    );
    crate::experiment::parse(&yaml, Path::new("t.yaml")).unwrap_or_else(|d| panic!("{d}"))
}

/// A fault that waits for another step, undone at a fixed time: through the API that undo
/// is a timer armed before the fault, which may then fire first and undo nothing.
#[test]
fn a_fault_that_waits_is_refused_when_its_undo_is_at_a_fixed_time() {
    let exp = experiment(
        "  - {name: cordon, at: 0s, do: cordon, target: victim}\n\
         \x20 - {name: stop, after: cordon, do: kubelet-stop, target: victim}\n\
         \x20 - {name: start, at: 60s, do: kubelet-start, target: victim}",
    );
    let refused = refusals(&exp, &inventory("pod"));
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].step, "stop");
    assert!(
        refused[0].reason.contains("after step `cordon`"),
        "{refused:?}"
    );
    assert!(
        refused[0].reason.contains("give this step `at:`"),
        "{refused:?}"
    );
    assert_eq!(refusals(&exp, &inventory("ssh")), vec![]);
}

/// At run time, an undo already due when its fault is armed refuses the fault: the timer
/// armed "2 s from now" would fire before it.
#[test]
fn a_fault_armed_after_its_undo_was_due_is_not_injected() {
    let exp = experiment(
        "  - {name: stop, at: 0s, do: kubelet-stop, target: victim}\n\
         \x20 - {name: start, at: 30s, do: kubelet-start, target: victim}",
    );
    let due = BTreeMap::from([(1, 30_000)]);
    assert_eq!(
        restore_after(&exp, 0, true, &due, 10_000),
        Ok(Some(Duration::from_secs(22)))
    );
    let late = restore_after(&exp, 0, true, &due, 31_000)
        .unwrap_err()
        .to_string();
    assert!(
        late.contains("its undo `start` was due at +30.0s"),
        "{late}"
    );
    assert_eq!(restore_after(&exp, 0, false, &due, 31_000), Ok(None));
}

#[test]
fn undos_at_a_fixed_time_are_carried_through_the_api() {
    for name in [
        "kubelet-stop-within-toleration.yaml",
        "kubelet-stop-past-toleration.yaml",
        "partition.yaml",
    ] {
        assert_eq!(
            refusals(&shipped(name), &inventory("pod")),
            vec![],
            "{name}"
        );
    }
}

#[test]
fn an_undo_after_another_step_is_refused_with_the_reason() {
    let exp = shipped("node-deleted.yaml");
    let refused = refusals(&exp, &inventory("pod"));
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].step, "start kubelet");
    let why = &refused[0].reason;
    assert!(why.contains("waits for step `delete node`"), "{why}");
    assert!(
        why.contains("step `stop kubelet` (kubelet-stop) cuts that path"),
        "{why}"
    );
    assert!(why.contains("give it `at:`"), "{why}");
    // Over SSH or docker exec the same experiment is carried out as written.
    assert_eq!(refusals(&exp, &inventory("exec")), vec![]);
}

#[test]
fn an_undo_on_a_condition_and_a_command_while_cut_off_are_refused() {
    let exp = experiment(
        "  - {name: cut, at: 0s, do: partition, target: victim}\n  - {name: look, at: 5s, do: run, command: 'true', target: victim}\n  - {name: heal, when: {node: victim, is: Unknown}, do: heal, target: victim}",
    );
    let refused = refusals(&exp, &inventory("pod"));
    let steps: Vec<&str> = refused.iter().map(|r| r.step.as_str()).collect();
    assert_eq!(steps, ["heal", "look"], "{refused:?}");
    assert!(refused[0].reason.contains("waits on `when:`"));
    assert!(
        refused[1]
            .reason
            .contains("while step `cut` (partition) has cut that path")
    );
}

#[test]
fn the_restore_of_a_cut_fault_is_its_undo_step_offset_plus_the_margin() {
    let exp = shipped("partition.yaml");
    let due: BTreeMap<usize, i64> = [(0, 1_000), (1, 31_000)].into();
    assert_eq!(
        restore_after(&exp, 0, true, &due, 1_500),
        Ok(Some(Duration::from_millis(29_500) + MARGIN))
    );
    // A fault that does not cut the transport keeps the run's own restore deadline.
    assert_eq!(restore_after(&exp, 0, false, &due, 1_500), Ok(None));
    // No undo at a fixed time: the same.
    assert_eq!(
        restore_after(&exp, 0, true, &BTreeMap::new(), 1_500),
        Ok(None)
    );
}

#[test]
fn only_the_undo_of_a_cutting_fault_is_confirmed_instead_of_carried() {
    let api = Executor::new(inventory("pod"));
    assert!(undone_on_host(&api, "w", &Action::KubeletStart));
    assert!(undone_on_host(&api, "w", &Action::Heal));
    assert!(!undone_on_host(&api, "w", &Action::KubeletStop));
    assert!(cuts_transport(&api, "w", &Action::KubeletStop));
    assert!(!cuts_transport(&api, "w", &Action::Cordon));
    let exec = Executor::new(inventory("exec"));
    assert!(!undone_on_host(&exec, "w", &Action::KubeletStart));
    assert!(!cuts_transport(&exec, "w", &Action::KubeletStop));
}
