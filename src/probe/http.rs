//! HTTP probes: a GET whose status decides Up (the expected one, or any 2xx).
//!
//! Built on the HTTP/TLS stack kube already brings (hyper 1, hyper-util's client with no idle connections kept,
//! hyper-rustls with the ring provider), so probes add no second stack. TLS trusts the
//! system roots by default, a given CA file instead, or nothing at all (`insecure`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Empty;
use hyper::body::Bytes;
use hyper::{Request, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use thiserror::Error;

use crate::timeline::format_secs;

use super::TryResult;

/// One HTTP probe: its URL, what counts as Up, and a client reused across tries.
pub(crate) struct HttpProbe {
    uri: Uri,
    expect_status: Option<u16>,
    client: Client<HttpsConnector<HttpConnector>, Empty<Bytes>>,
}

impl HttpProbe {
    /// Prepares the client; `Err` says why TLS could not be set up.
    pub(crate) fn new(
        url: &str,
        expect_status: Option<u16>,
        insecure: bool,
        ca_file: Option<&Path>,
    ) -> Result<HttpProbe, HttpSetupError> {
        let uri: Uri = url.parse().map_err(|source| HttpSetupError::Url {
            url: url.to_string(),
            source,
        })?;
        let client = client(insecure, ca_file)?;
        Ok(HttpProbe {
            uri,
            expect_status,
            client,
        })
    }

    /// One GET under `timeout`.
    pub(crate) async fn attempt(&self, timeout: Duration) -> TryResult {
        let request = match Request::get(self.uri.clone())
            .header(hyper::header::USER_AGENT, "faultline-probe")
            .body(Empty::new())
        {
            Ok(r) => r,
            Err(e) => return TryResult::new(false, format!("bad request: {e}")),
        };
        match tokio::time::timeout(timeout, self.client.request(request)).await {
            Err(_) => TryResult::new(false, format!("timed out after {}", format_secs(timeout))),
            Ok(Err(e)) => TryResult::new(false, error_chain(&e)),
            Ok(Ok(response)) => {
                let status = response.status();
                let up = match self.expect_status {
                    Some(code) => status.as_u16() == code,
                    None => status.is_success(),
                };
                TryResult::new(up, format!("HTTP {}", status.as_u16()))
            }
        }
    }
}

/// Why an HTTP(S) client (a probe's, or Prometheus') could not be set up.
#[derive(Debug, Error)]
pub(crate) enum HttpSetupError {
    /// The probe's URL is no URL.
    #[error("`{url}`: {source}")]
    Url {
        /// The URL as filled in.
        url: String,
        /// Why.
        source: hyper::http::uri::InvalidUri,
    },
    /// rustls refused its own defaults (a broken build).
    #[error("TLS setup: {0}")]
    Tls(rustls::Error),
    /// The system's trusted roots could not be loaded.
    #[error("no system TLS roots: {0}")]
    NoSystemRoots(std::io::Error),
    /// The CA file could not be read as PEM.
    #[error("CA file {}: {source}", path.display())]
    CaPem {
        /// The file.
        path: PathBuf,
        /// Why.
        source: rustls_pki_types::pem::Error,
    },
    /// A certificate in the CA file is unusable as a root.
    #[error("CA file {}: {source}", path.display())]
    CaCert {
        /// The file.
        path: PathBuf,
        /// Why.
        source: rustls::Error,
    },
    /// The CA file holds no certificate.
    #[error("CA file {} holds no certificate", .0.display())]
    NoCertificate(PathBuf),
}

/// An HTTP(S) client on kube's stack: TLS trusting the system roots, a given CA file
/// instead, or nothing at all (`insecure`); no connection is kept between requests.
pub(crate) fn client(
    insecure: bool,
    ca_file: Option<&Path>,
) -> Result<Client<HttpsConnector<HttpConnector>, Empty<Bytes>>, HttpSetupError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    let builder = if insecure || ca_file.is_some() {
        let config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(HttpSetupError::Tls)?;
        let config = if insecure {
            config
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCert(
                    provider.signature_verification_algorithms,
                )))
                .with_no_client_auth()
        } else {
            config
                .with_root_certificates(ca_roots(ca_file.unwrap_or(Path::new("")))?)
                .with_no_client_auth()
        };
        builder.with_tls_config(config)
    } else {
        builder
            .with_provider_and_native_roots(provider)
            .map_err(HttpSetupError::NoSystemRoots)?
    };
    let connector = builder.https_or_http().enable_http1().build();
    // A new connection for every try, as `curl` in seed 002 makes: a kept-alive
    // connection would stay pinned to one backend (one conntrack entry through a
    // Service), and a probe through a Service would never see the dead node's pods.
    Ok(Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build(connector))
}

/// The error and its causes, `: `-joined (hyper's top-level message alone says little).
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// The certificates of a PEM file as the only trusted roots.
fn ca_roots(path: &Path) -> Result<RootCertStore, HttpSetupError> {
    let pem = |source| HttpSetupError::CaPem {
        path: path.to_path_buf(),
        source,
    };
    let mut roots = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path).map_err(pem)?;
    for cert in certs {
        let cert = cert.map_err(pem)?;
        roots.add(cert).map_err(|source| HttpSetupError::CaCert {
            path: path.to_path_buf(),
            source,
        })?;
    }
    if roots.is_empty() {
        return Err(HttpSetupError::NoCertificate(path.to_path_buf()));
    }
    Ok(roots)
}

/// `insecure: true`: any certificate is accepted, but handshake signatures are still
/// checked, so the connection is at least with whoever holds the presented key.
#[derive(Debug)]
struct AcceptAnyCert(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}
