//! Prometheus instant queries for abort conditions: asked every `every` through
//! Prometheus' HTTP API (`GET /api/v1/query?query=…`), each answer reduced to the value
//! that decides (the largest series for `above`, the smallest for `below`) and put on the
//! timeline when it differs from the last one.
//!
//! "No data" is an answer too, and it trips the condition: no series, a `NaN`, an error
//! from Prometheus, or Prometheus not answering at all. A guard that cannot see is not a
//! guard that sees everything fine.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper::body::Bytes;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use thiserror::Error;

use super::ProbeSink;
use super::http::HttpSetupError;
use crate::experiment::model::{AbortKind, AbortSpec, Threshold};
use crate::inventory::PrometheusAccess;
use crate::sanitize::clean;
use crate::timeline::Event;

/// Largest answer read from Prometheus: a query with more series than this is not a
/// threshold, and its answer is cut (and so is no data).
const MAX_ANSWER: usize = 1 << 20;
/// Longest detail kept on the timeline.
const MAX_DETAIL: usize = 200;

/// One series of an instant query's answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    /// Its labels, `{job="x", instance="y"}` order.
    pub labels: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
}

/// What one ask says: the deciding value (`None`: no data) and why, in words.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    /// The value that decides, or no data.
    pub value: Option<f64>,
    /// The deciding series, or why there was no data.
    pub detail: String,
}

/// A client of one Prometheus server's HTTP API.
pub(crate) struct Prometheus {
    base: String,
    timeout: Duration,
    client: Client<HttpsConnector<HttpConnector>, Empty<Bytes>>,
}

impl Prometheus {
    /// A client for the server the inventory names.
    pub(crate) fn new(access: &PrometheusAccess) -> Result<Prometheus, HttpSetupError> {
        Ok(Prometheus {
            base: access.url.trim_end_matches('/').to_string(),
            timeout: access.timeout,
            client: super::http::client(access.insecure, access.ca_file.as_deref())?,
        })
    }

    /// Asks `query` now; `Err` says why there is no answer.
    pub(crate) async fn instant(&self, query: &str) -> Result<Vec<Series>, QueryError> {
        let url = format!("{}/api/v1/query?query={}", self.base, encode(query));
        let request = Request::get(url.as_str())
            .header(hyper::header::USER_AGENT, "faultline-abort")
            .body(Empty::new())
            .map_err(QueryError::Request)?;
        let ask = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| QueryError::Transport(super::http::error_chain(&e)))?;
            let status = response.status();
            let body = http_body_util::Limited::new(response.into_body(), MAX_ANSWER)
                .collect()
                .await
                .map_err(|e| QueryError::Reading(e.to_string()))?
                .to_bytes();
            Ok::<_, QueryError>((status, body))
        };
        let (status, body) = tokio::time::timeout(self.timeout, ask)
            .await
            .map_err(|_| QueryError::NoAnswer(self.timeout))??;
        parse(status.as_u16(), &body)
    }
}

/// Why a query gave no answer; said in the abort condition's detail.
#[derive(Debug, Error)]
pub(crate) enum QueryError {
    /// The request could not be built (a bug).
    #[error("bad request: {0}")]
    Request(hyper::http::Error),
    /// The connection failed: the error and its causes.
    #[error("{0}")]
    Transport(String),
    /// The answer could not be read whole.
    #[error("reading the answer: {0}")]
    Reading(String),
    /// No answer within the inventory's timeout.
    #[error("no answer within {}", crate::timeline::format_secs(*.0))]
    NoAnswer(Duration),
    /// The answer is not Prometheus JSON; `start` is its first bytes.
    #[error("HTTP {status}, not a Prometheus answer: {start}")]
    NotPrometheus {
        /// The HTTP status.
        status: u16,
        /// The answer's first 120 bytes.
        start: String,
    },
    /// Prometheus answered with an error.
    #[error("HTTP {status}: Prometheus says {kind} ({reason})")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// Its `errorType`.
        kind: String,
        /// Its `error`.
        reason: String,
    },
    /// The query answers something other than numbers per series.
    #[error("the query answers a {0}, not a number per series; use an instant vector or a scalar")]
    NotNumbers(String),
}

/// Percent-encodes a query parameter (everything but RFC 3986's unreserved characters).
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Reads an answer of `/api/v1/query`: a vector or a scalar, else an error that says why.
pub(crate) fn parse(status: u16, body: &[u8]) -> Result<Vec<Series>, QueryError> {
    let doc: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| QueryError::NotPrometheus {
            status,
            start: String::from_utf8_lossy(&body[..body.len().min(120)]).into_owned(),
        })?;
    if doc["status"] != "success" {
        return Err(QueryError::Refused {
            status,
            kind: doc["errorType"].as_str().unwrap_or("error").to_string(),
            reason: doc["error"]
                .as_str()
                .unwrap_or("no reason given")
                .to_string(),
        });
    }
    let data = &doc["data"];
    let sample = |v: &serde_json::Value| -> Option<f64> { v.get(1)?.as_str()?.parse().ok() };
    match data["resultType"].as_str() {
        Some("vector") => Ok(data["result"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| {
                let labels = s["metric"]
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                            .collect()
                    })
                    .unwrap_or_default();
                Some(Series {
                    labels,
                    value: sample(&s["value"])?,
                })
            })
            .collect()),
        Some("scalar") => Ok(sample(&data["result"])
            .map(|value| Series {
                labels: BTreeMap::new(),
                value,
            })
            .into_iter()
            .collect()),
        other => Err(QueryError::NotNumbers(
            other.unwrap_or("nothing").to_string(),
        )),
    }
}

/// The value that decides for `threshold`: the largest series for `above`, the smallest
/// for `below`; series whose value is not a number do not count. No series left: no data.
pub(crate) fn decide(answer: Result<Vec<Series>, QueryError>, threshold: Threshold) -> Answer {
    let series = match answer {
        Ok(s) => s,
        Err(e) => {
            return Answer {
                value: None,
                detail: short(&e.to_string()),
            };
        }
    };
    let total = series.len();
    let mut numbers: Vec<&Series> = series.iter().filter(|s| s.value.is_finite()).collect();
    numbers.sort_by(|a, b| a.value.total_cmp(&b.value));
    let deciding = match threshold {
        Threshold::Above(_) => numbers.last(),
        Threshold::Below(_) => numbers.first(),
    };
    match deciding {
        None if total == 0 => Answer {
            value: None,
            detail: "the query returned no series".into(),
        },
        None => Answer {
            value: None,
            detail: format!("none of its {total} series has a number (NaN or ±Inf)"),
        },
        Some(s) => {
            let labels: Vec<String> = s
                .labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{v}\""))
                .collect();
            let which = if total > 1 {
                let side = match threshold {
                    Threshold::Above(_) => "largest",
                    Threshold::Below(_) => "smallest",
                };
                format!(", the {side} of {total} series")
            } else {
                String::new()
            };
            Answer {
                value: Some(s.value),
                detail: short(&format!("{{{}}} {}{which}", labels.join(", "), s.value)),
            }
        }
    }
}

fn short(text: &str) -> String {
    let cleaned = clean(text);
    let mut out: String = cleaned.chars().take(MAX_DETAIL).collect();
    if cleaned.chars().count() > MAX_DETAIL {
        out.push('…');
    }
    out
}

/// Why an experiment's `prometheus` abort conditions cannot be asked; the run does not
/// start.
#[derive(Debug, Error)]
pub(crate) enum AbortQueryError {
    /// A condition asks Prometheus and the inventory names none.
    #[error(
        "the experiment's abort condition `{condition}` asks Prometheus, and the inventory \
         names none: add `prometheus: {{url: http://…:9090}}` to it"
    )]
    NoPrometheus {
        /// The condition's name.
        condition: String,
    },
    /// The Prometheus client could not be set up.
    #[error("prometheus: {0}")]
    Client(HttpSetupError),
}

/// The queries of an experiment's abort conditions, each asked by its own task.
pub(crate) struct Queries {
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Queries {
    /// Whether every `prometheus` condition of `abort` has a Prometheus to ask: checked
    /// before a run touches anything.
    pub(crate) fn can_ask(
        abort: &AbortSpec,
        access: Option<&PrometheusAccess>,
    ) -> Result<(), AbortQueryError> {
        let first = abort
            .conditions
            .iter()
            .find(|c| matches!(c.kind, AbortKind::Query { .. }));
        match (first, access) {
            (Some(c), None) => Err(AbortQueryError::NoPrometheus {
                condition: c.name.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// Starts asking every `prometheus` condition of `abort`; `Ok(None)` when there is
    /// none, `Err` when there are some and no Prometheus to ask.
    pub(crate) fn start(
        abort: &AbortSpec,
        access: Option<&PrometheusAccess>,
        sink: ProbeSink,
    ) -> Result<Option<Queries>, AbortQueryError> {
        let asked: Vec<(String, String, Threshold, Duration)> = abort
            .conditions
            .iter()
            .filter_map(|c| match &c.kind {
                AbortKind::Query {
                    query,
                    threshold,
                    every,
                } => Some((c.name.clone(), query.clone(), *threshold, *every)),
                _ => None,
            })
            .collect();
        if asked.is_empty() {
            return Ok(None);
        }
        Self::can_ask(abort, access)?;
        let Some(access) = access else {
            return Ok(None);
        };
        let prometheus = Arc::new(Prometheus::new(access).map_err(AbortQueryError::Client)?);
        let stop = CancellationToken::new();
        let tasks = asked
            .into_iter()
            .map(|(name, query, threshold, every)| {
                let prometheus = prometheus.clone();
                let sink = sink.clone();
                let stop = stop.clone();
                tokio::spawn(async move {
                    let mut ticks = tokio::time::interval(every);
                    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
                    let mut last: Option<Answer> = None;
                    loop {
                        tokio::select! {
                            _ = stop.cancelled() => return,
                            _ = ticks.tick() => {}
                        }
                        let answer = tokio::select! {
                            _ = stop.cancelled() => return,
                            a = prometheus.instant(&query) => decide(a, threshold),
                        };
                        if last.as_ref() != Some(&answer) {
                            sink(Event::Query {
                                name: name.clone(),
                                value: answer.value,
                                detail: answer.detail.clone(),
                            });
                            last = Some(answer);
                        }
                    }
                })
            })
            .collect();
        Ok(Some(Queries { stop, tasks }))
    }

    /// Stops asking and waits for the tasks to end.
    pub(crate) async fn stop(self) {
        self.stop.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(series: &[(&str, &str)]) -> Vec<u8> {
        let result: Vec<String> = series
            .iter()
            .map(|(job, v)| {
                format!(r#"{{"metric":{{"job":"{job}"}},"value":[1700000000.1,"{v}"]}}"#)
            })
            .collect();
        format!(
            r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#,
            result.join(",")
        )
        .into_bytes()
    }

    #[test]
    fn the_largest_series_decides_above_and_the_smallest_below() {
        let body = vector(&[("a", "0.2"), ("b", "0.9"), ("c", "NaN")]);
        let series = parse(200, &body).unwrap();
        assert_eq!(series.len(), 3);
        let above = decide(Ok(series.clone()), Threshold::Above(0.5));
        assert_eq!(above.value, Some(0.9));
        assert_eq!(above.detail, "{job=\"b\"} 0.9, the largest of 3 series");
        let below = decide(Ok(series), Threshold::Below(0.5));
        assert_eq!(below.value, Some(0.2));
    }

    #[test]
    fn no_series_nan_only_errors_and_non_numbers_are_no_data() {
        let empty = decide(parse(200, &vector(&[])), Threshold::Above(1.0));
        assert_eq!(empty.value, None);
        assert_eq!(empty.detail, "the query returned no series");
        let nan = decide(parse(200, &vector(&[("a", "NaN")])), Threshold::Below(1.0));
        assert_eq!(nan.value, None);
        let bad = br#"{"status":"error","errorType":"bad_data","error":"parse error at char 3"}"#;
        let err = decide(parse(400, bad), Threshold::Above(1.0));
        assert_eq!(err.value, None);
        assert_eq!(
            err.detail,
            "HTTP 400: Prometheus says bad_data (parse error at char 3)"
        );
        let html = decide(
            parse(502, b"<html>bad gateway</html>"),
            Threshold::Above(1.0),
        );
        assert_eq!(html.value, None);
        assert!(
            html.detail.starts_with("HTTP 502, not a Prometheus answer"),
            "{html:?}"
        );
        let matrix = br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
        let err = parse(200, matrix).unwrap_err();
        assert!(matches!(&err, QueryError::NotNumbers(kind) if kind == "matrix"));
        assert!(err.to_string().contains("matrix"));
    }

    #[test]
    fn a_scalar_is_one_series_without_labels() {
        let body =
            br#"{"status":"success","data":{"resultType":"scalar","result":[1700000000,"3"]}}"#;
        let a = decide(parse(200, body), Threshold::Above(2.0));
        assert_eq!(a.value, Some(3.0));
        assert_eq!(a.detail, "{} 3");
    }

    #[test]
    fn the_query_is_percent_encoded() {
        assert_eq!(
            encode(r#"sum(rate(x{code=~"5.."}[1m])) > 0"#),
            "sum%28rate%28x%7Bcode%3D~%225..%22%7D%5B1m%5D%29%29%20%3E%200"
        );
    }
}
