//! TLS: the server certificate (loaded, or self-signed on first start) and the rustls config
//! (SPEC T1: TLS 1.2 and 1.3, HTTP/1.1).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::TlsSource;

pub const SELF_SIGNED_CERT: &str = "tls-cert.pem";
pub const SELF_SIGNED_KEY: &str = "tls-key.pem";

/// The rustls config, and the certificate file in use (logged, and handy for clients).
pub fn server_config(source: &TlsSource, data_dir: &Path) -> anyhow::Result<(Arc<ServerConfig>, PathBuf)> {
    let (cert_path, key_path) = match source {
        TlsSource::Files { cert, key } => (cert.clone(), key.clone()),
        TlsSource::SelfSigned => ensure_self_signed(data_dir)?,
    };
    let certs = CertificateDer::pem_file_iter(&cert_path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading TLS certificate {}", cert_path.display()))?;
    anyhow::ensure!(!certs.is_empty(), "no certificate in {}", cert_path.display());
    let key = PrivateKeyDer::from_pem_file(&key_path).with_context(|| format!("reading TLS private key {}", key_path.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("TLS certificate and key do not form a usable pair")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((Arc::new(config), cert_path))
}

/// Creates a self-signed certificate for localhost, 127.0.0.1 and ::1 unless one exists.
fn ensure_self_signed(data_dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let cert_path = data_dir.join(SELF_SIGNED_CERT);
    let key_path = data_dir.join(SELF_SIGNED_KEY);
    if cert_path.exists() && key_path.exists() {
        crate::base::private_fs::tighten_file(&cert_path)?;
        crate::base::private_fs::tighten_file(&key_path)?;
        return Ok((cert_path, key_path));
    }
    crate::base::private_fs::ensure_private_dir(data_dir).with_context(|| format!("creating data directory {}", data_dir.display()))?;
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    let certified = rcgen::generate_simple_self_signed(names).context("generating a self-signed certificate")?;
    write_private(&key_path, certified.signing_key.serialize_pem().as_bytes())?;
    // The certificate is public, but the data directory holds only owner-only files (SPEC S4).
    write_private(&cert_path, certified.cert.pem().as_bytes())?;
    tracing::info!(cert = %cert_path.display(), "created a self-signed TLS certificate; clients can trust it with this file");
    Ok((cert_path, key_path))
}

/// Writes a file only its owner can read.
fn write_private(path: &Path, contents: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut file = crate::base::private_fs::options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(contents)?;
    Ok(())
}
