//! One API client over several API server endpoints, so that taking down the control-plane
//! node faultline talks to does not blind it.
//!
//! A highly available control plane has one API server per control-plane node; the
//! kubeconfig names one of them (or a load balancer). [`Failover`] is a `tower` service under
//! a [`kube::Client`]: every request goes to the endpoint in use, and
//! - a request whose endpoint fails at the transport level is retried on the other endpoints
//!   (except `POST`, which may have reached the server), and the first that answers becomes
//!   the endpoint in use;
//! - a health monitor asks the endpoint in use for `/readyz` every second; after a few
//!   failures in a row (a powered-off node answers nothing: no refusal, no reset) it moves to
//!   the first other endpoint that is ready;
//! - moving away from an endpoint abandons everything still in flight on it: pending requests
//!   are retried elsewhere and open response bodies (watch streams) end with an error, so
//!   watchers relist on the new endpoint at once instead of hanging on a dead connection.
//!
//! Every switch is published ([`Failover::subscribe`]) so the observer can put it on the
//! timeline next to the gap it explains.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use kube::Client;
use kube::client::Body;
use tokio::sync::broadcast;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// The error type `kube::Client` expects from a custom service.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// When the endpoint in use counts as gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthPolicy {
    /// Time between `/readyz` checks of the endpoint in use.
    pub interval: Duration,
    /// How long a check may take before it counts as failed.
    pub timeout: Duration,
    /// Failed checks in a row before moving to another endpoint.
    pub failures: u32,
}

impl Default for HealthPolicy {
    /// One check a second, two seconds to answer, two failures: a dead endpoint is left
    /// within about four seconds, and one slow answer under load is not enough to move.
    fn default() -> Self {
        HealthPolicy {
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(2),
            failures: 2,
        }
    }
}

/// A move from one endpoint to another, as the timeline records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switch {
    /// The endpoint left.
    pub from: String,
    /// The endpoint now in use.
    pub to: String,
    /// Why the first was left.
    pub reason: String,
}

impl std::fmt::Display for Switch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "API endpoint {} left ({}); now observing and acting through {}",
            self.from, self.reason, self.to
        )
    }
}

/// Everything still in flight on an endpoint was abandoned because faultline moved away from it.
#[derive(Debug, thiserror::Error)]
#[error("request to API endpoint {endpoint} abandoned: faultline moved to another endpoint")]
pub(crate) struct Abandoned {
    /// The endpoint left.
    pub endpoint: String,
    /// When it last answered: what it sent after that was never seen, so an observer's
    /// blind spot starts here, not when the abandonment is noticed.
    pub silent_since: Instant,
}

/// When the endpoint behind `error` last answered, if the error is an abandonment (found
/// anywhere in its chain of sources, including inside I/O errors).
pub(crate) fn silent_since(error: &(dyn std::error::Error + 'static)) -> Option<Instant> {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(a) = e.downcast_ref::<Abandoned>() {
            return Some(a.silent_since);
        }
        if let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            && let Some(found) = silent_since(inner)
        {
            return Some(found);
        }
        current = e.source();
    }
    None
}

/// One endpoint with its own client (same credentials, its own URL and connections).
struct Endpoint {
    url: String,
    client: Client,
    /// The last time it answered anything (a `/readyz` check or a response).
    last_answer: Mutex<Instant>,
}

struct State {
    active: usize,
    /// Cancelled when faultline moves away from the endpoint at the same index.
    abandon: Vec<CancellationToken>,
}

struct Shared {
    endpoints: Vec<Endpoint>,
    state: Mutex<State>,
    switches: broadcast::Sender<Switch>,
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The lock guards two plain fields and no code under it panics; a poisoned lock
        // still holds a consistent state.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn active(&self) -> usize {
        self.state().active
    }

    fn token(&self, index: usize) -> CancellationToken {
        self.state().abandon[index].clone()
    }

    fn answered(&self, index: usize) {
        *self.endpoints[index]
            .last_answer
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    fn abandoned(&self, index: usize) -> Abandoned {
        let endpoint = &self.endpoints[index];
        Abandoned {
            endpoint: endpoint.url.clone(),
            silent_since: *endpoint
                .last_answer
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        }
    }

    /// The endpoint in use and its token, read together so no switch falls in between.
    fn current(&self) -> (usize, CancellationToken) {
        let state = self.state();
        (state.active, state.abandon[state.active].clone())
    }

    /// Moves to `to` if `from` is still in use (a concurrent switch wins otherwise) and
    /// abandons everything in flight anywhere else (a retry may be on a third endpoint).
    fn switch(&self, from: usize, to: usize, reason: String) -> bool {
        let left: Vec<CancellationToken> = {
            let mut state = self.state();
            if state.active != from || from == to {
                return false;
            }
            state.active = to;
            (0..self.endpoints.len())
                .filter(|&i| i != to)
                .map(|i| std::mem::replace(&mut state.abandon[i], CancellationToken::new()))
                .collect()
        };
        for token in left {
            token.cancel();
        }
        let switch = Switch {
            from: self.endpoints[from].url.clone(),
            to: self.endpoints[to].url.clone(),
            reason,
        };
        tracing::warn!("{switch}");
        // Nobody subscribed is fine: the switch still happened.
        let _ = self.switches.send(switch);
        true
    }
}

/// Handle on a failover client: which endpoint is in use, and the switches as they happen.
#[derive(Clone)]
pub struct Failover {
    shared: Arc<Shared>,
}

impl Failover {
    /// A client that spreads over `endpoints` (URL and a client for it; the first is used
    /// first) and its handle. Starts the health monitor on the current tokio runtime; the
    /// monitor ends when the client and every handle are dropped.
    pub fn client(
        endpoints: Vec<(String, Client)>,
        default_namespace: &str,
        policy: HealthPolicy,
    ) -> (Client, Failover) {
        assert!(!endpoints.is_empty(), "a failover client needs an endpoint");
        let (switches, _) = broadcast::channel(64);
        let abandon = endpoints.iter().map(|_| CancellationToken::new()).collect();
        let shared = Arc::new(Shared {
            endpoints: endpoints
                .into_iter()
                .map(|(url, client)| Endpoint {
                    url,
                    client,
                    last_answer: Mutex::new(Instant::now()),
                })
                .collect(),
            state: Mutex::new(State { active: 0, abandon }),
            switches,
        });
        tokio::spawn(monitor(Arc::downgrade(&shared), policy));
        let service = FailoverService {
            shared: shared.clone(),
        };
        (
            Client::new(service, default_namespace.to_string()),
            Failover { shared },
        )
    }

    /// Switches from now on (not the past ones).
    pub fn subscribe(&self) -> broadcast::Receiver<Switch> {
        self.shared.switches.subscribe()
    }

    /// The endpoint in use.
    pub fn active(&self) -> String {
        self.shared.endpoints[self.shared.active()].url.clone()
    }

    /// Every endpoint, in the order they are tried.
    pub fn endpoints(&self) -> Vec<String> {
        self.shared
            .endpoints
            .iter()
            .map(|e| e.url.clone())
            .collect()
    }
}

/// Asks the endpoint in use for `/readyz` every `policy.interval`; after `policy.failures`
/// failures in a row, moves to the first other endpoint that is ready.
async fn monitor(shared: Weak<Shared>, policy: HealthPolicy) {
    let mut failures = 0u32;
    loop {
        tokio::time::sleep(policy.interval).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let active = shared.active();
        let error = match ready(&shared.endpoints[active].client, policy.timeout).await {
            Ok(()) => {
                shared.answered(active);
                failures = 0;
                continue;
            }
            Err(e) => e,
        };
        failures += 1;
        if failures < policy.failures {
            continue;
        }
        let n = shared.endpoints.len();
        for candidate in (1..n).map(|k| (active + k) % n) {
            if ready(&shared.endpoints[candidate].client, policy.timeout)
                .await
                .is_ok()
            {
                shared.answered(candidate);
                let reason = format!("{failures} health checks in a row failed, the last: {error}");
                // Won or lost to a concurrent switch: either way a new endpoint is in use.
                shared.switch(active, candidate, reason);
                failures = 0;
                break;
            }
        }
    }
}

/// Why an endpoint failed a health check; the last one is the reason given for a switch.
#[derive(Debug, thiserror::Error)]
enum NotReady {
    /// The request could not be built.
    #[error(transparent)]
    Request(#[from] http::Error),
    /// No answer within the check's timeout.
    #[error("no answer to /readyz within {}s", .0.as_secs_f32())]
    Silent(Duration),
    /// The client could not send it or read the answer.
    #[error(transparent)]
    Client(#[from] kube::Error),
    /// The endpoint answered, but not with success.
    #[error("/readyz answered {0}")]
    Status(http::StatusCode),
}

/// Whether an endpoint answers `/readyz` with success within `timeout`.
async fn ready(client: &Client, timeout: Duration) -> Result<(), NotReady> {
    let request = Request::get("/readyz").body(Body::empty())?;
    match tokio::time::timeout(timeout, client.send(request)).await {
        Err(_) => Err(NotReady::Silent(timeout)),
        Ok(Err(e)) => Err(e.into()),
        Ok(Ok(response)) if response.status().is_success() => Ok(()),
        Ok(Ok(response)) => Err(NotReady::Status(response.status())),
    }
}

/// The `tower` service under the failover client.
#[derive(Clone)]
struct FailoverService {
    shared: Arc<Shared>,
}

impl tower_service::Service<Request<Body>> for FailoverService {
    type Response = Response<Abandonable>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        Box::pin(send(self.shared.clone(), request))
    }
}

/// Sends on the endpoint in use; on a transport failure, retries (if it may) on the endpoint
/// in use if a switch happened meanwhile, else on the next untried one, and the first that
/// answers becomes the endpoint in use. A response is only handed out from the endpoint in
/// use, so every open body is abandoned by the next switch.
async fn send(
    shared: Arc<Shared>,
    request: Request<Body>,
) -> Result<Response<Abandonable>, BoxError> {
    let n = shared.endpoints.len();
    let (first, first_token) = shared.current();
    let (mut index, mut token) = (first, first_token);
    let mut tried = vec![false; n];
    let mut request = Some(request);
    let mut first_error: Option<String> = None;
    let mut last_error: Option<kube::Error> = None;
    while let Some(this) = request.take() {
        // The copy for the next endpoint; none for requests that must not be sent twice.
        request = retry_copy(&this);
        tried[index] = true;
        let outcome = tokio::select! {
            biased;
            () = token.cancelled() => Err(kube::Error::Service(Box::new(shared.abandoned(index)))),
            r = shared.endpoints[index].client.send(this) => r,
        };
        match outcome {
            Ok(response) if !token.is_cancelled() => {
                shared.answered(index);
                if index != first {
                    let why = first_error
                        .take()
                        .unwrap_or_else(|| "a request failed".to_string());
                    shared.switch(first, index, format!("a request failed: {why}"));
                }
                if shared.current().0 == index {
                    return Ok(response.map(|body| Abandonable {
                        body,
                        abandoned: Box::pin(token.cancelled_owned()),
                        shared: shared.clone(),
                        index,
                        ended: false,
                    }));
                }
                // Another switch won meanwhile: not from here.
                last_error = Some(kube::Error::Service(Box::new(shared.abandoned(index))));
            }
            Ok(_) => {
                last_error = Some(kube::Error::Service(Box::new(shared.abandoned(index))));
            }
            Err(e) => {
                first_error.get_or_insert_with(|| e.to_string());
                last_error = Some(e);
            }
        }
        let (active, active_token) = shared.current();
        let next = if tried[active] {
            (1..n).map(|k| (index + k) % n).find(|&i| !tried[i])
        } else {
            Some(active)
        };
        let Some(next) = next else { break };
        index = next;
        token = if next == active {
            active_token
        } else {
            shared.token(next)
        };
    }
    Err(match last_error {
        Some(e) => Box::new(e),
        None => "no API endpoint to send to".into(),
    })
}

/// A copy of `request` for another endpoint, unless it must not be sent twice: a `POST`
/// that failed may still have reached the server (creating something twice), and a
/// streamed body cannot be replayed. Everything faultline sends otherwise is idempotent
/// (reads, server-side apply, deletes, merge patches of labels and taints).
fn retry_copy(request: &Request<Body>) -> Option<Request<Body>> {
    if request.method() == Method::POST {
        return None;
    }
    let body = request.body().try_clone()?;
    let mut copy = Request::builder()
        .method(request.method().clone())
        .uri(request.uri().clone())
        .version(request.version())
        .body(body)
        .ok()?;
    *copy.headers_mut() = request.headers().clone();
    Some(copy)
}

/// A response body that ends with an error as soon as faultline moves away from the
/// endpoint it comes from: a watch on a dead connection would otherwise wait for minutes.
pub(crate) struct Abandonable {
    body: Body,
    abandoned: Pin<Box<WaitForCancellationFutureOwned>>,
    shared: Arc<Shared>,
    index: usize,
    /// The abandonment was reported: the body is over.
    ended: bool,
}

impl HttpBody for Abandonable {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        if self.abandoned.as_mut().poll(cx).is_ready() {
            self.ended = true;
            return Poll::Ready(Some(Err(Box::new(self.shared.abandoned(self.index)))));
        }
        Pin::new(&mut self.body)
            .poll_frame(cx)
            .map_err(|e| Box::new(e) as BoxError)
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    //! Transport-level behaviour against tiny local HTTP servers (no Kubernetes API is
    //! involved: these are the endpoints' sockets, not their API).
    use super::*;
    use http_body_util::BodyExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// How a test endpoint behaves.
    #[derive(Clone, Copy)]
    enum Behaviour {
        /// Answers every request at once: `/stream` with an open-ended chunked body,
        /// anything else with `200 ok`.
        Healthy,
        /// Accepts connections and reads requests but never answers (a dead node behind
        /// a live socket, as far as a client can tell).
        Silent,
    }

    async fn endpoint(behaviour: Behaviour) -> (String, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    loop {
                        let mut head = Vec::new();
                        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                            match socket.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => head.extend_from_slice(&buf[..n]),
                            }
                        }
                        if let Behaviour::Silent = behaviour {
                            continue;
                        }
                        let text = String::from_utf8_lossy(&head);
                        let reply: Vec<u8> = if text.starts_with("GET /stream") {
                            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\none\r\n"
                                .to_vec()
                        } else if text.starts_with("GET /api/v1/nodes?") {
                            // An open watch with one event, as an API server sends it.
                            let event = concat!(
                                r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"Node","#,
                                r#""metadata":{"name":"n1","resourceVersion":"1"}}}"#,
                                "\n"
                            );
                            format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n",
                                event.len()
                            )
                            .into_bytes()
                        } else {
                            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_vec()
                        };
                        if socket.write_all(&reply).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (url, task)
    }

    fn client_for(url: &str) -> Client {
        let mut config = kube::Config::new(url.parse().unwrap());
        config.connect_timeout = Some(Duration::from_secs(1));
        Client::try_from(config).unwrap()
    }

    fn quick() -> HealthPolicy {
        HealthPolicy {
            interval: Duration::from_millis(50),
            timeout: Duration::from_millis(200),
            failures: 2,
        }
    }

    /// A failover client over `urls`, in that order.
    fn over(urls: &[&String], policy: HealthPolicy) -> (Client, Failover) {
        let endpoints = urls
            .iter()
            .map(|u| (u.to_string(), client_for(u)))
            .collect();
        Failover::client(endpoints, "default", policy)
    }

    fn get(path: &str) -> Request<Body> {
        Request::get(path).body(Body::empty()).unwrap()
    }

    /// A closed port: connections are refused.
    async fn refused() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        url
    }

    #[tokio::test]
    async fn a_refused_request_is_retried_on_the_next_endpoint_which_stays_in_use() {
        let dead = refused().await;
        let (alive, _server) = endpoint(Behaviour::Healthy).await;
        let (client, failover) = over(&[&dead, &alive], quick());
        let mut switches = failover.subscribe();
        let response = client
            .send(get("/version"))
            .await
            .expect("answered by the live endpoint");
        assert_eq!(response.status(), 200);
        assert_eq!(failover.active(), alive);
        let switch = switches.try_recv().expect("the switch is published");
        assert_eq!(
            (switch.from.as_str(), switch.to.as_str()),
            (dead.as_str(), alive.as_str())
        );
        assert!(
            switch.reason.contains("request failed"),
            "{}",
            switch.reason
        );
    }

    #[tokio::test]
    async fn a_post_is_not_sent_twice() {
        let dead = refused().await;
        let (alive, _server) = endpoint(Behaviour::Healthy).await;
        let (client, failover) = over(
            &[&dead, &alive],
            // The monitor's first check fails too (at once, beside the POST): with two
            // failures to leave, it and the POST's own failure could move the client under
            // a loaded machine, which is not what this test is about.
            HealthPolicy {
                interval: Duration::from_secs(3600),
                failures: 3,
                ..quick()
            },
        );
        let post = Request::post("/api/v1/namespaces/x/pods")
            .body(Body::from(b"{}".to_vec()))
            .unwrap();
        assert!(client.send(post).await.is_err());
        assert_eq!(
            failover.active(),
            dead,
            "a failed POST does not move by itself"
        );
    }

    #[tokio::test]
    async fn a_silent_endpoint_is_left_and_its_open_streams_end() {
        let (silent, _s1) = endpoint(Behaviour::Silent).await;
        let (alive, _s2) = endpoint(Behaviour::Healthy).await;
        // Both answer at first: the stream is opened on the first endpoint.
        let (first, first_server) = endpoint(Behaviour::Healthy).await;
        let (client, failover) = over(&[&first, &silent, &alive], quick());
        let mut switches = failover.subscribe();
        let mut stream = client.send(get("/stream")).await.unwrap().into_body();
        let frame = stream.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "one");
        // The first endpoint stops answering without closing anything.
        first_server.abort();
        let rest = tokio::time::timeout(Duration::from_secs(5), stream.frame())
            .await
            .expect("the open stream ends once faultline moves away");
        let error = rest.expect("an error, not a clean end").unwrap_err();
        assert!(error.to_string().contains("abandoned"), "{error}");
        let switch = switches.recv().await.unwrap();
        assert_eq!(switch.from, first);
        assert_eq!(switch.to, alive, "the silent endpoint is skipped");
        assert!(switch.reason.contains("health checks"), "{}", switch.reason);
        let answer = client.send(get("/version")).await.unwrap();
        assert_eq!(answer.status(), 200);
        assert_eq!(failover.active(), alive);
    }

    #[tokio::test]
    async fn an_abandoned_watch_says_since_when_its_endpoint_was_silent() {
        use futures::StreamExt;
        use k8s_openapi::api::core::v1::Node;
        use kube::api::{Api, WatchEvent, WatchParams};

        let (first, first_server) = endpoint(Behaviour::Healthy).await;
        let (alive, _s) = endpoint(Behaviour::Healthy).await;
        let (client, _failover) = over(&[&first, &alive], quick());
        let started = Instant::now();
        let mut watch = Api::<Node>::all(client)
            .watch(&WatchParams::default(), "0")
            .await
            .expect("the watch opens")
            .boxed();
        match watch.next().await {
            Some(Ok(WatchEvent::Added(node))) => {
                assert_eq!(node.metadata.name.as_deref(), Some("n1"))
            }
            other => panic!("expected the ADDED event, got {other:?}"),
        }
        let last_heard = Instant::now();
        first_server.abort();
        let error = tokio::time::timeout(Duration::from_secs(5), watch.next())
            .await
            .expect("the watch ends once faultline moves away")
            .expect("an item")
            .expect_err("an error");
        let since = silent_since(&error).unwrap_or_else(|| panic!("no abandonment in {error:?}"));
        assert!(
            since >= started && since <= last_heard + Duration::from_millis(100),
            "{since:?}"
        );
        assert!(silent_since(&kube::Error::LinesCodecMaxLineLengthExceeded).is_none());
    }

    #[tokio::test]
    async fn a_request_hanging_on_a_left_endpoint_is_retried_on_the_one_now_in_use() {
        // A and B accept and never answer; C answers. The monitor leaves A for C (B fails
        // its check); the request hanging on A must follow to C, not try B and hang there.
        let (a, _sa) = endpoint(Behaviour::Silent).await;
        let (b, _sb) = endpoint(Behaviour::Silent).await;
        let (c, _sc) = endpoint(Behaviour::Healthy).await;
        let (client, failover) = over(&[&a, &b, &c], quick());
        let response = tokio::time::timeout(Duration::from_secs(5), client.send(get("/version")))
            .await
            .expect("the request does not hang on a silent endpoint")
            .expect("answered");
        assert_eq!(response.status(), 200);
        assert_eq!(failover.active(), c);
    }
}
