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
    let (cert, key) = self_signed().context("generating a self-signed certificate")?;
    write_private(&key_path, key.serialize_pem().as_bytes())?;
    // The certificate is public, but the data directory holds only owner-only files (SPEC S4).
    write_private(&cert_path, cert.pem().as_bytes())?;
    tracing::info!(cert = %cert_path.display(), "created a self-signed TLS certificate; clients can trust it with this file");
    Ok((cert_path, key_path))
}

/// A certificate for localhost, 127.0.0.1 and ::1. Its subject names it as this instance's own
/// (a random suffix): a client trusting the certificates of several instances in one bundle
/// (Node's `NODE_EXTRA_CA_CERTS`) looks issuers up by subject, and finds the wrong one when
/// every instance's is the same.
fn self_signed() -> Result<(rcgen::Certificate, rcgen::KeyPair), rcgen::Error> {
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    let mut params = rcgen::CertificateParams::new(names)?;
    let suffix: String = (0..4).map(|_| format!("{:02x}", rand::random::<u8>())).collect();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(rcgen::DnType::CommonName, format!("Payrail self-signed {suffix}"));
    let key = rcgen::KeyPair::generate()?;
    Ok((params.self_signed(&key)?, key))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The subject's common name, read from the certificate's DER (it is the only place the
    /// prefix appears).
    fn common_name(cert: &rcgen::Certificate) -> String {
        let der = cert.der().to_vec();
        let prefix = b"Payrail self-signed ";
        let at = der.windows(prefix.len()).position(|w| w == prefix).expect("the subject names Payrail");
        String::from_utf8(der[at..at + prefix.len() + 8].to_vec()).unwrap()
    }

    #[test]
    fn t1_each_self_signed_certificate_has_a_subject_of_its_own() {
        let (one, _) = self_signed().unwrap();
        let (two, _) = self_signed().unwrap();
        assert_ne!(common_name(&one), common_name(&two));
    }
}
