//! Connecting to PostgreSQL, over TLS (rustls) where DATABASE_URL asks for it.
//!
//! `sslmode` follows libpq, since that is what managed databases document:
//! - `disable`: plain TCP;
//! - `allow`: read as `prefer` (libpq's tries plain TCP first; here TLS is taken when offered);
//! - `prefer` (the default): TLS when the server offers it, without checking its certificate;
//! - `require`: TLS always, without checking the certificate (libpq's meaning);
//! - `verify-ca`: TLS, and the certificate must chain to a trusted root;
//! - `verify-full`: as `verify-ca`, and the certificate must name the host connected to.
//!
//! Trusted roots are the system's plus, with `sslrootcert=/path/ca.pem`, the certificates in
//! that file (a private CA, a self-signed server). Both parameters are read here and removed
//! before the rest of the URL goes to the driver, which knows neither verification mode.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::url_parts::UrlParts;
use super::DbError;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Plain connections only.
    Disable,
    /// TLS when the server offers it, the certificate not checked (`allow` reads as this).
    Prefer,
    /// TLS always, the certificate not checked.
    Require,
    /// TLS with a certificate chain to a trusted root; the name not checked.
    VerifyCa,
    /// TLS with a trusted chain and the host's name in the certificate.
    VerifyFull,
}

impl SslMode {
    fn parse(raw: &str) -> Result<SslMode, DbError> {
        Ok(match raw {
            "disable" => SslMode::Disable,
            "allow" | "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(DbError::Config(format!(
                    "sslmode={other} is not one of disable, allow (read as prefer), prefer, require, verify-ca, verify-full"
                )))
            }
        })
    }

    fn driver_mode(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => "require",
        }
    }
}

/// Where and how to connect.
pub struct Target {
    /// The connection settings, `sslmode` mapped to what the driver understands.
    pub config: tokio_postgres::Config,
    /// The TLS connector that carries out `mode`.
    pub tls: MakeRustlsConnect,
    /// The `sslmode` asked for.
    pub mode: SslMode,
}

/// Splits `sslmode` and `sslrootcert` out of a URL (`postgres://...?a=b`, its parts read as
/// libpq reads them: a `?` in the password is the password's) or a key-value string
/// (`host=... sslmode=...`); answers the rest for the driver.
pub(super) fn split_tls_params(url: &str) -> Result<(String, SslMode, Option<String>), DbError> {
    let mut mode = SslMode::Prefer;
    let mut root = None;
    let mut take = |key: &str, value: &str| -> Result<bool, DbError> {
        match key {
            "sslmode" => mode = SslMode::parse(value)?,
            "sslrootcert" => root = Some(percent_decode(value)),
            _ => return Ok(false),
        }
        Ok(true)
    };
    let rest = if let Some(parts) = UrlParts::parse(url)? {
        let mut kept = Vec::new();
        for pair in parts.pairs() {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if !take(k, v)? {
                kept.push(pair);
            }
        }
        parts.with_pairs(&kept)
    } else {
        let mut kept = Vec::new();
        for token in url.split_whitespace() {
            let (k, v) = token.split_once('=').unwrap_or((token, ""));
            if !take(k.trim(), v.trim().trim_matches('\''))? {
                kept.push(token);
            }
        }
        kept.join(" ")
    };
    Ok((rest, mode, root))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
            if let Ok(b) = u8::from_str_radix(hex, 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads DATABASE_URL into a driver config and a TLS connector for its `sslmode`.
pub fn target(url: &str) -> Result<Target, DbError> {
    let (rest, mode, root) = split_tls_params(url)?;
    let driver_mode = format!("sslmode={}", mode.driver_mode());
    let with_mode = match UrlParts::parse(&rest)? {
        Some(parts) => {
            let mut pairs: Vec<&str> = parts.pairs().collect();
            pairs.push(&driver_mode);
            parts.with_pairs(&pairs)
        }
        None => format!("{rest} {driver_mode}"),
    };
    let config: tokio_postgres::Config =
        with_mode.parse().map_err(|e: tokio_postgres::Error| {
            // The parser's own words ("invalid value for option `port`") are its source.
            DbError::Config(match std::error::Error::source(&e) {
                Some(why) => format!("{e}: {why}"),
                None => e.to_string(),
            })
        })?;
    let tls = MakeRustlsConnect::new(client_config(mode, root.as_deref())?);
    Ok(Target { config, tls, mode })
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn client_config(mode: SslMode, root: Option<&str>) -> Result<ClientConfig, DbError> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| DbError::Config(format!("TLS: {e}")))?;
    let verifier: Arc<dyn ServerCertVerifier> = match mode {
        SslMode::Disable | SslMode::Prefer | SslMode::Require => Arc::new(AnyCertificate(provider)),
        SslMode::VerifyCa | SslMode::VerifyFull => {
            let roots = Arc::new(roots(root)?);
            let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| DbError::Config(format!("TLS roots: {e}")))?;
            if mode == SslMode::VerifyCa {
                Arc::new(ChainOnly(webpki))
            } else {
                webpki
            }
        }
    };
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

fn roots(root: Option<&str>) -> Result<RootCertStore, DbError> {
    let mut store = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for cert in native.certs {
        let _ = store.add(cert);
    }
    if let Some(path) = root {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(Path::new(path))
            .and_then(|it| it.collect::<Result<_, _>>())
            .map_err(|e| DbError::Config(format!("sslrootcert={path}: {e}")))?;
        if certs.is_empty() {
            return Err(DbError::Config(format!(
                "sslrootcert={path}: no certificate in it"
            )));
        }
        for cert in certs {
            store
                .add(cert)
                .map_err(|e| DbError::Config(format!("sslrootcert={path}: {e}")))?;
        }
    }
    if store.is_empty() {
        return Err(DbError::Config(
            "sslmode=verify-ca/verify-full: no trusted root (no system roots, no sslrootcert)"
                .into(),
        ));
    }
    Ok(store)
}

/// `require` and `prefer`: encrypted, the certificate not checked (libpq's meaning). The
/// handshake's signatures are still verified, so the peer holds the certificate's key.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
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
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain must be trusted; the name in the certificate is not checked.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_parameters_are_taken_out_of_the_url() {
        let (rest, mode, root) =
            split_tls_params("postgres://u:p@db:5432/x?sslmode=verify-full&application_name=a&sslrootcert=%2Fetc%2Fca.pem")
                .unwrap();
        assert_eq!(rest, "postgres://u:p@db:5432/x?application_name=a");
        assert_eq!(mode, SslMode::VerifyFull);
        assert_eq!(root.as_deref(), Some("/etc/ca.pem"));
        let (rest, mode, root) = split_tls_params("postgres://db/x").unwrap();
        assert_eq!(
            (rest.as_str(), mode, root),
            ("postgres://db/x", SslMode::Prefer, None)
        );
        let (rest, mode, _) = split_tls_params("host=db user=u sslmode=require").unwrap();
        assert_eq!((rest.as_str(), mode), ("host=db user=u", SslMode::Require));
        assert!(split_tls_params("postgres://db/x?sslmode=sometimes").is_err());
    }

    /// A `?` in the password is the password's, as libpq reads it: the query (and its
    /// `sslmode`) is found only after the hosts and the database.
    #[test]
    fn a_question_mark_in_the_password_neither_hides_nor_breaks_the_query() {
        let url = "postgres://postgres:pa?SECRET2@127.0.0.1:25432/postgres?sslmode=require";
        let (rest, mode, _) = split_tls_params(url).unwrap();
        assert_eq!(
            rest,
            "postgres://postgres:pa?SECRET2@127.0.0.1:25432/postgres"
        );
        assert_eq!(mode, SslMode::Require);
        let t = target(url).unwrap();
        assert_eq!(t.mode, SslMode::Require);
        assert_eq!(
            t.config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Require
        );
        assert_eq!(t.config.get_password(), Some(&b"pa?SECRET2"[..]));
        assert_eq!(t.config.get_dbname(), Some("postgres"));
        let t = target("postgres://postgres:pa?SECRET2@127.0.0.1:25432/postgres").unwrap();
        assert_eq!(t.config.get_dbname(), Some("postgres"));
        assert_eq!(
            t.config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Prefer
        );
        let t = target("postgres://u:p%40ss@h/db?sslmode=disable&application_name=a").unwrap();
        assert_eq!(t.config.get_password(), Some(&b"p@ss"[..]));
        assert_eq!(t.config.get_application_name(), Some("a"));
        assert_eq!(
            t.config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Disable
        );
        assert!(target("postgres://postgres:p@ssS3cret@127.0.0.1:25432/nodb").is_err());
    }

    #[test]
    fn every_mode_builds_a_connector() {
        for url in [
            "postgres://db/x?sslmode=disable",
            "postgres://db/x",
            "postgres://db/x?sslmode=require",
            "host=db sslmode=require",
        ] {
            let t = target(url).unwrap();
            assert!(t.config.get_hosts().len() == 1, "{url}");
        }
        assert!(
            target("postgres://db/x?sslmode=verify-full&sslrootcert=/nonexistent.pem").is_err()
        );
    }
}
