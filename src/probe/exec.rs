//! Exec probes: a command in a pod's container, through the API server and the pod's
//! kubelet, the path `kubectl exec` takes.
//!
//! While a node's kubelet is gone, the API server cannot reach it to open the stream
//! ("error dialing backend"), so `kubectl exec` and `kubectl logs` fail for every pod on
//! that node even though the pods are still listed as Running. The probe makes that
//! window, and its end, part of the timeline. Built on kube's `ws` support, over the same
//! client (and API failover) as the observer.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::Api;
use kube::api::AttachParams;

use super::TryResult;
use crate::execute::pod::{ExitOf, exit_code};
use crate::timeline::format_secs;

/// One exec probe: the pod (fixed when probes start) and the command run in it.
pub(crate) struct ExecProbe {
    pods: Api<Pod>,
    pod: String,
    container: Option<String>,
    command: Vec<String>,
}

impl ExecProbe {
    /// A probe of `command` in `pod` (its `container`, or the default one).
    pub(crate) fn new(
        pods: Api<Pod>,
        pod: String,
        container: Option<String>,
        command: Vec<String>,
    ) -> ExecProbe {
        ExecProbe {
            pods,
            pod,
            container,
            command,
        }
    }

    /// One try: Up when the command ran and exited 0. A command still running at the
    /// timeout is abandoned (its stream closed), so tries never pile up.
    pub(crate) async fn attempt(&self, timeout: Duration) -> TryResult {
        let deadline = tokio::time::Instant::now() + timeout;
        let timed_out =
            || TryResult::new(false, format!("timed out after {}", format_secs(timeout)));
        // stderr is kept for the timeline; nothing is attached to stdin or a terminal.
        let mut params = AttachParams::default()
            .stdin(false)
            .stdout(false)
            .stderr(true);
        if let Some(c) = &self.container {
            params = params.container(c.clone());
        }
        let opened = tokio::time::timeout_at(
            deadline,
            self.pods.exec(&self.pod, self.command.clone(), &params),
        );
        let mut process = match opened.await {
            Err(_) => return timed_out(),
            Ok(Err(e)) => return TryResult::new(false, format!("pod {}: {e}", self.pod)),
            Ok(Ok(p)) => p,
        };
        let stderr_reader = process.stderr();
        let status_future = process.take_status();
        let finished = tokio::time::timeout_at(deadline, async move {
            let stderr = match stderr_reader {
                Some(reader) => super::read_capped(reader).await,
                None => String::new(),
            };
            let status = match status_future {
                Some(status) => status.await,
                None => None,
            };
            (status, stderr)
        });
        let Ok((status, stderr)) = finished.await else {
            process.abort();
            return timed_out();
        };
        let joined = process.join().await;
        match (status, joined) {
            (None, Err(e)) => TryResult::new(false, format!("pod {}: {e}", self.pod)),
            (status, _) => verdict(status.as_ref(), &stderr),
        }
    }
}

/// Up or Down from the status the API server sends at the end of an exec stream: Success
/// is exit 0; a non-zero exit names its code (and the command's stderr); anything else says
/// what the API server said.
pub(crate) fn verdict(status: Option<&Status>, stderr: &str) -> TryResult {
    match exit_code(status) {
        ExitOf::NoStatus => TryResult::new(false, "the exec stream ended without a status"),
        ExitOf::Code(0) => TryResult::new(true, "exit 0"),
        ExitOf::Code(code) if stderr.trim().is_empty() => {
            TryResult::new(false, format!("exit {code}"))
        }
        ExitOf::Code(code) => TryResult::new(false, format!("exit {code}: {}", stderr.trim())),
        ExitOf::Refused(said) => TryResult::new(false, said),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A status as the API server sends it at the end of an exec stream.
    fn status(json: &str) -> Status {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn success_is_up() {
        let s = status(r#"{"metadata": {}, "status": "Success"}"#);
        assert_eq!(verdict(Some(&s), ""), TryResult::new(true, "exit 0"));
    }

    #[test]
    fn a_non_zero_exit_is_down_with_its_code_and_stderr() {
        let s = status(
            r#"{"metadata": {}, "status": "Failure",
                "message": "command terminated with non-zero exit code: error executing command [false], exit code 1",
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": "1"}]}}"#,
        );
        assert_eq!(verdict(Some(&s), ""), TryResult::new(false, "exit 1"));
        assert_eq!(
            verdict(Some(&s), "no such file\n"),
            TryResult::new(false, "exit 1: no such file")
        );
    }

    #[test]
    fn other_failures_say_what_the_api_server_said() {
        let s = status(
            r#"{"metadata": {}, "status": "Failure",
                "message": "error dialing backend: dial tcp 172.18.0.3:10250: connect: connection refused"}"#,
        );
        assert_eq!(
            verdict(Some(&s), "").detail,
            "error dialing backend: dial tcp 172.18.0.3:10250: connect: connection refused"
        );
        assert!(!verdict(None, "").up);
    }
}
