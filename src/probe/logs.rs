//! Logs probes: a read of a pod's container log through the API server and the pod's
//! kubelet, the path `kubectl logs` takes.
//!
//! The API server fetches a log from the node's kubelet, so while the kubelet is gone
//! `kubectl logs` fails for every pod on that node ("error dialing backend", or a timeout
//! when the node is cut off) although the pods are still listed. Seen together with the
//! exec probe, the timeline shows which of a node's debugging paths a fault takes away,
//! and when each comes back.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::LogParams;

use super::TryResult;
use crate::timeline::format_secs;

/// The most of a log one try reads: `tailLines` bounds lines, not bytes, and a container
/// that writes one endless line would otherwise be read whole at every try.
const LIMIT_BYTES: i64 = 64 * 1024;

/// One logs probe: the pod (fixed when probes start) and how much of its log each try reads.
pub(crate) struct LogsProbe {
    pods: Api<Pod>,
    pod: String,
    params: LogParams,
}

impl LogsProbe {
    /// A probe of `pod`'s log (its `container`, or the default one), `tail_lines` a try.
    pub(crate) fn new(
        pods: Api<Pod>,
        pod: String,
        container: Option<String>,
        tail_lines: u32,
    ) -> LogsProbe {
        LogsProbe {
            pods,
            pod,
            params: LogParams {
                container,
                tail_lines: Some(i64::from(tail_lines)),
                limit_bytes: Some(LIMIT_BYTES),
                ..LogParams::default()
            },
        }
    }

    /// One try: Up when the API server served the log (however short); Down with what it
    /// said otherwise. A read still going at the timeout is abandoned.
    pub(crate) async fn attempt(&self, timeout: Duration) -> TryResult {
        let read = tokio::time::timeout(timeout, self.pods.logs(&self.pod, &self.params));
        match read.await {
            Err(_) => TryResult::new(false, format!("timed out after {}", format_secs(timeout))),
            Ok(Ok(log)) => TryResult::new(true, served(&log)),
            Ok(Err(e)) => TryResult::new(false, format!("pod {}: {}", self.pod, refusal(&e))),
        }
    }
}

/// What an Up try says: how much was served.
fn served(log: &str) -> String {
    match log.lines().count() {
        0 => "log served (empty)".to_string(),
        1 => "log served (1 line)".to_string(),
        n => format!("log served ({n} lines)"),
    }
}

/// What the API server said, without kube's wrapping: its own message for a refusal.
fn refusal(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 69, item 5: the probe asked for lines only, so one huge line was read whole.
    #[tokio::test]
    async fn a_try_reads_a_bounded_number_of_bytes() {
        let client = kube::Client::try_from(kube::Config::new(
            "http://127.0.0.1:1".parse().expect("url"),
        ))
        .expect("client");
        let probe = LogsProbe::new(Api::namespaced(client, "ns"), "p".into(), None, 5);
        assert_eq!(probe.params.limit_bytes, Some(64 * 1024));
        assert_eq!(probe.params.tail_lines, Some(5));
    }

    #[test]
    fn a_served_log_says_how_much_came() {
        assert_eq!(served(""), "log served (empty)");
        assert_eq!(served("one\n"), "log served (1 line)");
        assert_eq!(served("a\nb\nc"), "log served (3 lines)");
    }
}
