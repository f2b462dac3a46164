//! Which API server endpoints faultline may use: the kubeconfig's, the inventory's extra
//! ones, and those the cluster publishes for the `kubernetes` Service (one per API server,
//! kept current by the API servers' own lease reconciler).

use std::time::Duration;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::ListParams;
use kube::{Api, Client};

use super::failover::{Failover, HealthPolicy};
use super::{ClusterError, client_for, load_config};

/// How long discovery may take before faultline goes on with the endpoints it knows.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(5);
/// Connect timeout of each endpoint when there are several: a powered-off node answers
/// nothing, and the next endpoint should not wait kube's default 30 s for that.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The inventory's say on API endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiEndpoints {
    /// Endpoints to fail over to besides the kubeconfig's (`https://host:port`).
    pub extra: Vec<String>,
    /// Whether to also use the endpoints the cluster publishes for the `kubernetes` Service.
    pub discover: bool,
}

impl Default for ApiEndpoints {
    /// Discovery on, nothing extra: failover works on any cluster whose API servers are
    /// reachable at their advertised addresses.
    fn default() -> Self {
        ApiEndpoints {
            extra: Vec::new(),
            discover: true,
        }
    }
}

/// A client and, when there is more than one endpoint, its failover handle.
#[derive(Clone)]
pub struct Connection {
    /// The client every part of a run uses.
    pub client: Client,
    /// `None` with a single endpoint: nothing to fail over to.
    pub failover: Option<Failover>,
    /// The kubeconfig's (or the in-cluster) API server URL: the endpoint used first, which
    /// a run must not take down when there is nothing to fail over to.
    pub primary_url: String,
}

/// Connects like [`super::connect`], over every endpoint `endpoints` allows, the
/// kubeconfig's first.
pub async fn connect_with_failover(
    kubeconfig: &[std::path::PathBuf],
    context: Option<&str>,
    endpoints: &ApiEndpoints,
) -> Result<Connection, ClusterError> {
    let config = load_config(kubeconfig, context).await?;
    let primary = normalize(&config.cluster_url.to_string());
    // With several endpoints none may hold a request for kube's default 30 s connect timeout.
    let mut quick = config.clone();
    quick.connect_timeout = Some(
        config
            .connect_timeout
            .map_or(CONNECT_TIMEOUT, |t| t.min(CONNECT_TIMEOUT)),
    );
    // The client discovery uses is the primary endpoint's client if there is failover.
    let mut primary_client = None;
    let mut discovered = Vec::new();
    if endpoints.discover {
        let client = client_for(quick.clone())?;
        match tokio::time::timeout(DISCOVERY_TIMEOUT, discover(&client)).await {
            Ok(Ok(urls)) => discovered = urls,
            Ok(Err(e)) => tracing::info!("API endpoint discovery: {e}"),
            Err(_) => tracing::info!("API endpoint discovery: no answer within 5s"),
        }
        primary_client = Some(client);
    }
    let urls = merge(&primary, &endpoints.extra, &discovered);
    if urls.len() == 1 {
        return Ok(Connection {
            client: client_for(config)?,
            failover: None,
            primary_url: primary,
        });
    }
    let mut clients = Vec::with_capacity(urls.len());
    let primary_client = match primary_client {
        Some(c) => c,
        None => client_for(quick.clone())?,
    };
    clients.push((primary.clone(), primary_client));
    for url in urls.into_iter().skip(1) {
        let mut c = quick.clone();
        c.cluster_url = url.parse().map_err(|e| ClusterError::Endpoint {
            url: url.clone(),
            message: format!("{e}"),
        })?;
        clients.push((url, client_for(c)?));
    }
    let (client, failover) =
        Failover::client(clients, &config.default_namespace, HealthPolicy::default());
    Ok(Connection {
        client,
        failover: Some(failover),
        primary_url: primary,
    })
}

/// The endpoints published for the `kubernetes` Service in `default`.
async fn discover(client: &Client) -> Result<Vec<String>, kube::Error> {
    let slices = Api::<EndpointSlice>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels("kubernetes.io/service-name=kubernetes"))
        .await?;
    Ok(endpoint_urls(&slices.items))
}

/// `https://address:port` for every ready address of the slices' `https` port.
pub(crate) fn endpoint_urls(slices: &[EndpointSlice]) -> Vec<String> {
    let mut out = Vec::new();
    for slice in slices {
        let ports = slice.ports.as_deref().unwrap_or_default();
        let Some(port) = ports
            .iter()
            .find(|p| p.name.as_deref() == Some("https"))
            .or(ports.first())
            .and_then(|p| p.port)
        else {
            continue;
        };
        for endpoint in &slice.endpoints {
            let ready = endpoint
                .conditions
                .as_ref()
                .and_then(|c| c.ready)
                .unwrap_or(true);
            if !ready {
                continue;
            }
            for address in &endpoint.addresses {
                let host = if address.contains(':') {
                    format!("[{address}]")
                } else {
                    address.clone()
                };
                out.push(format!("https://{host}:{port}"));
            }
        }
    }
    out
}

/// The kubeconfig's endpoint first, then the inventory's, then the discovered ones; each once.
pub(crate) fn merge(primary: &str, extra: &[String], discovered: &[String]) -> Vec<String> {
    let mut out = vec![normalize(primary)];
    for url in extra.iter().chain(discovered) {
        let url = normalize(url);
        if !out.contains(&url) {
            out.push(url);
        }
    }
    out
}

/// One spelling per endpoint: scheme and host in lower case (a path, as behind a proxy,
/// keeps its case), no trailing slash.
fn normalize(url: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    let authority_end = url
        .find("://")
        .map(|i| i + 3)
        .and_then(|start| url[start..].find('/').map(|p| start + p))
        .unwrap_or(url.len());
    format!(
        "{}{}",
        url[..authority_end].to_ascii_lowercase(),
        &url[authority_end..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(json: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(json).expect("an EndpointSlice")
    }

    #[test]
    fn discovered_endpoints_are_the_ready_addresses_of_the_https_port() {
        let s = slice(serde_json::json!({
            "metadata": {"name": "kubernetes", "namespace": "default"},
            "addressType": "IPv4",
            "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}],
            "endpoints": [
                {"addresses": ["10.0.0.1"], "conditions": {"ready": true}},
                {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
                {"addresses": ["10.0.0.3"]}
            ]
        }));
        assert_eq!(
            endpoint_urls(&[s]),
            ["https://10.0.0.1:6443", "https://10.0.0.3:6443"]
        );
    }

    #[test]
    fn ipv6_addresses_are_bracketed() {
        let s = slice(serde_json::json!({
            "metadata": {"name": "kubernetes"},
            "addressType": "IPv6",
            "ports": [{"name": "https", "port": 443}],
            "endpoints": [{"addresses": ["fd00::1"]}]
        }));
        assert_eq!(endpoint_urls(&[s]), ["https://[fd00::1]:443"]);
    }

    #[test]
    fn the_kubeconfig_endpoint_comes_first_and_each_endpoint_once() {
        let merged = merge(
            "https://10.0.0.1:6443/",
            &[
                "https://LB.example:6443".to_string(),
                "https://Proxy.example/k8s/clusters/C-AbC".to_string(),
            ],
            &[
                "https://10.0.0.1:6443".to_string(),
                "https://10.0.0.2:6443".to_string(),
                "https://lb.example:6443/".to_string(),
            ],
        );
        assert_eq!(
            merged,
            [
                "https://10.0.0.1:6443",
                "https://lb.example:6443",
                "https://proxy.example/k8s/clusters/C-AbC",
                "https://10.0.0.2:6443"
            ]
        );
    }
}
