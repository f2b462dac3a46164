//! PodDisruptionBudgets that hold a drain: which budget refused an eviction (the API's
//! 429 names it; otherwise the budgets whose selector matches the pod), and how a held
//! drain is said on the step's line, in the record and in the error of a failed step.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// The prefix of the cause the eviction API gives when a budget refuses (Kubernetes'
/// `checkAndDecrement`: "The disruption budget web-pdb needs 1 healthy pods and has 1
/// currently", or "… is still being processed by the server").
const CAUSE_PREFIX: &str = "The disruption budget ";

/// The budget the eviction API's refusal names, from the causes of its 429 status.
pub(crate) fn budget_named_by(status: &kube::core::Status) -> Option<String> {
    status
        .details
        .as_ref()?
        .causes
        .iter()
        .find_map(|c| budget_in_cause(&c.message))
}

/// The budget's name in one cause message of a refused eviction.
pub(crate) fn budget_in_cause(message: &str) -> Option<String> {
    let rest = message.strip_prefix(CAUSE_PREFIX)?;
    let name = rest.split_whitespace().next()?;
    (!name.is_empty()).then(|| name.to_string())
}

/// Whether a label selector selects these labels (`matchLabels` and `matchExpressions`
/// with `In`, `NotIn`, `Exists`, `DoesNotExist`). An empty selector selects every pod (a
/// policy/v1 budget); an operator faultline does not know selects nothing.
pub(crate) fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let equal = selector
        .match_labels
        .as_ref()
        .is_none_or(|m| m.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let expressions = selector.match_expressions.as_deref().unwrap_or(&[]);
    equal
        && expressions.iter().all(|e| {
            let value = labels.get(&e.key);
            let values = e.values.as_deref().unwrap_or(&[]);
            match e.operator.as_str() {
                "In" => value.is_some_and(|v| values.contains(v)),
                "NotIn" => value.is_none_or(|v| !values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => false,
            }
        })
}

/// The budgets (of the pod's namespace) whose selector selects the pod, as
/// `namespace/name`. A budget without a selector selects nothing.
pub(crate) fn budgets_selecting(budgets: &[PodDisruptionBudget], pod: &Pod) -> Vec<String> {
    let empty = BTreeMap::new();
    let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    let ns = pod.metadata.namespace.as_deref().unwrap_or("");
    budgets
        .iter()
        .filter(|b| b.metadata.namespace.as_deref().unwrap_or("") == ns)
        .filter(|b| {
            b.spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .is_some_and(|s| selects(s, labels))
        })
        .map(|b| format!("{ns}/{}", b.metadata.name.as_deref().unwrap_or("")))
        .collect()
}

/// What a budget's status says about the disruptions it allows ("1 healthy of 1 desired,
/// disruptions allowed 0").
pub(crate) fn budget_state(budget: &PodDisruptionBudget) -> Option<String> {
    let s = budget.status.as_ref()?;
    Some(format!(
        "{} healthy of {} desired, disruptions allowed {}",
        s.current_healthy, s.desired_healthy, s.disruptions_allowed
    ))
}

/// One pod whose eviction a PodDisruptionBudget refused during a drain.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PdbHold {
    /// The pod, `namespace/name`.
    pub pod: String,
    /// The budgets that hold it, `namespace/name` (the one the API named, or those whose
    /// selector matches the pod).
    pub budgets: Vec<String>,
    /// The budgets' state when first refused ("1 healthy of 1 desired, disruptions
    /// allowed 0"), when read.
    pub state: Option<String>,
    /// When the first refusal came, after the drain began.
    pub since: Duration,
    /// How long the budget held the pod: until its eviction was accepted, or until the
    /// drain's timeout.
    pub held: Duration,
    /// Whether the pod was evicted in the end.
    pub evicted: bool,
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

impl PdbHold {
    /// The budgets, or "a PodDisruptionBudget" when none could be named.
    fn by(&self) -> String {
        if self.budgets.is_empty() {
            "a PodDisruptionBudget".to_string()
        } else {
            format!("PodDisruptionBudget {}", self.budgets.join(", "))
        }
    }

    /// One hold, said: "web-abc held 30.0 s (from +0.1 s) by PodDisruptionBudget
    /// faultline-lab/web-pdb (1 healthy of 1 desired, disruptions allowed 0); evicted
    /// after it allowed" or "…; still held at the 60 s timeout".
    pub(crate) fn describe(&self, timeout: Duration) -> String {
        let state = self
            .state
            .as_ref()
            .map(|s| format!(" ({s})"))
            .unwrap_or_default();
        let end = if self.evicted {
            "evicted after it allowed".to_string()
        } else {
            format!("still held at the {} timeout", whole_secs(timeout))
        };
        format!(
            "{} held {} (from +{}) by {}{state}; {end}",
            self.pod,
            secs(self.held),
            secs(self.since),
            self.by()
        )
    }
}

fn whole_secs(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        secs(d)
    }
}

/// The drain's holds, one per pod, for the step's output: "drain of kind-worker held
/// 30.0 s by PodDisruptionBudget faultline-lab/web-pdb: …".
pub(crate) fn describe_holds(node: &str, holds: &[PdbHold], timeout: Duration) -> String {
    let longest = holds.iter().map(|h| h.held).max().unwrap_or_default();
    let mut budgets: Vec<String> = holds.iter().flat_map(|h| h.budgets.clone()).collect();
    budgets.sort();
    budgets.dedup();
    let by = if budgets.is_empty() {
        "a PodDisruptionBudget".to_string()
    } else {
        format!("PodDisruptionBudget {}", budgets.join(", "))
    };
    let each: Vec<String> = holds.iter().map(|h| h.describe(timeout)).collect();
    format!(
        "drain of {node} held {} by {by}: {}",
        secs(longest),
        each.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::load;

    fn budgets() -> Vec<PodDisruptionBudget> {
        let list: k8s_openapi::List<PodDisruptionBudget> = load("pdb/pdbs-faultline-lab.json");
        list.items
    }

    fn web_pod() -> Pod {
        load("pdb/pod-web.json")
    }

    #[test]
    fn the_budget_whose_selector_matches_the_pod_holds_it() {
        assert_eq!(
            budgets_selecting(&budgets(), &web_pod()),
            vec!["faultline-lab/web-pdb".to_string()]
        );
    }

    #[test]
    fn a_budget_of_another_namespace_or_selector_holds_nothing() {
        let mut pod = web_pod();
        pod.metadata.namespace = Some("elsewhere".into());
        assert!(budgets_selecting(&budgets(), &pod).is_empty());
        let mut pod = web_pod();
        pod.metadata.labels = Some([("app".to_string(), "db".to_string())].into());
        assert!(budgets_selecting(&budgets(), &pod).is_empty());
    }

    #[test]
    fn selector_expressions_are_judged() {
        let selector: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "edge"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "zone", "operator": "NotIn", "values": ["b"]},
                {"key": "app", "operator": "Exists"}
            ]
        }))
        .unwrap();
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(selects(
            &selector,
            &labels(&[("app", "web"), ("tier", "front")])
        ));
        assert!(!selects(
            &selector,
            &labels(&[("app", "web"), ("tier", "back")])
        ));
        assert!(!selects(
            &selector,
            &labels(&[("app", "web"), ("tier", "edge"), ("canary", "1")])
        ));
        assert!(!selects(
            &selector,
            &labels(&[("app", "web"), ("tier", "edge"), ("zone", "b")])
        ));
        assert!(selects(&LabelSelector::default(), &labels(&[])));
    }

    #[test]
    fn the_refusal_of_the_eviction_api_names_the_budget() {
        let status: kube::core::Status = load("pdb/eviction-429.json");
        assert_eq!(status.code, 429);
        assert_eq!(budget_named_by(&status).as_deref(), Some("web-pdb"));
        assert_eq!(
            budget_in_cause("The disruption budget web-pdb is still being processed by the server"),
            Some("web-pdb".into())
        );
        assert_eq!(budget_in_cause("something else"), None);
    }

    #[test]
    fn a_budgets_state_is_read_from_its_status() {
        let b = budgets();
        let web = b
            .iter()
            .find(|b| b.metadata.name.as_deref() == Some("web-pdb"))
            .unwrap();
        assert_eq!(
            budget_state(web).as_deref(),
            Some("1 healthy of 1 desired, disruptions allowed 0")
        );
    }

    #[test]
    fn a_hold_is_said_with_the_budget_and_the_time() {
        let hold = PdbHold {
            pod: "faultline-lab/web-abc".into(),
            budgets: vec!["faultline-lab/web-pdb".into()],
            state: Some("1 healthy of 1 desired, disruptions allowed 0".into()),
            since: Duration::from_millis(120),
            held: Duration::from_millis(30_040),
            evicted: true,
        };
        assert_eq!(
            describe_holds(
                "kind-worker",
                std::slice::from_ref(&hold),
                Duration::from_secs(60)
            ),
            "drain of kind-worker held 30.0 s by PodDisruptionBudget faultline-lab/web-pdb: \
             faultline-lab/web-abc held 30.0 s (from +0.1 s) by PodDisruptionBudget \
             faultline-lab/web-pdb (1 healthy of 1 desired, disruptions allowed 0); evicted \
             after it allowed"
        );
        let still = PdbHold {
            evicted: false,
            state: None,
            budgets: vec![],
            ..hold
        };
        assert_eq!(
            still.describe(Duration::from_secs(60)),
            "faultline-lab/web-abc held 30.0 s (from +0.1 s) by a PodDisruptionBudget; still \
             held at the 60 s timeout"
        );
    }
}
