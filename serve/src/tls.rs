//! The TLS configuration `[serve] tls_cert` and `tls_key` name: the PEM certificate chain and
//! its private key, read and matched at start, so that a bad file stops the server with one
//! line before it listens instead of failing every handshake after. The key is a private
//! file ([`crate::private_file`]): whoever reads it can pose as the server.

use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls_pki_types::pem::{self, PemObject as _};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sf_host::plugin::serve_config::TlsFiles;
use tokio_rustls::TlsAcceptor;

/// The largest certificate or key file read, in bytes: a chain is a few KiB.
const MAX_PEM_BYTES: u64 = 1 << 20;

/// What the accepted connections speak inside TLS (ALPN): HTTP/1.1 only, as the server does.
const ALPN_HTTP1: &[u8] = b"http/1.1";

/// The acceptor of `files`; the error names the file at fault, what is wrong and the fix.
pub fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, String> {
    let chain = certificates(&files.cert)?;
    let key = private_key(&files.key)?;
    let config = server_config(chain, key, files)?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The certificate chain of the PEM file `path`, the server's own certificate first.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let named = format!("[serve] tls_cert {}", path.display());
    let file = std::fs::File::open(path).map_err(|error| {
        format!("{named}: cannot be read ({error}); give the PEM file of the certificate chain")
    })?;
    let bytes = crate::private_file::read_at_most(file, &named, MAX_PEM_BYTES)?;
    let chain = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| {
            format!(
                "{named}: not readable as PEM ({error}); give the certificate chain as PEM \
                 \"-----BEGIN CERTIFICATE-----\" blocks"
            )
        })?;
    if chain.is_empty() {
        return Err(format!(
            "{named}: holds no certificate (no \"-----BEGIN CERTIFICATE-----\" block); give \
             the PEM certificate chain, the server's own certificate first"
        ));
    }
    Ok(chain)
}

/// The private key of the PEM file `path` (PKCS#8, PKCS#1 or SEC1), a private file.
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let named = format!("[serve] tls_key {}", path.display());
    let bytes = crate::private_file::read(
        path,
        &named,
        "give the PEM file of the certificate's private key, mode 0600",
        MAX_PEM_BYTES,
    )?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|error| match error {
        pem::Error::NoItemsFound => format!(
            "{named}: holds no private key (no \"-----BEGIN PRIVATE KEY-----\", RSA or EC \
             PRIVATE KEY block); give the PEM private key of tls_cert's certificate"
        ),
        other => format!(
            "{named}: not readable as PEM ({other}); give the PEM private key of tls_cert's \
             certificate"
        ),
    })
}

/// The server's configuration: `ring`'s algorithms, rustls's safe protocol versions (TLS 1.2
/// and 1.3), no client certificates (clients prove who they are with bearer tokens), and
/// the key checked to be the one of the chain's first certificate.
fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    files: &TlsFiles,
) -> Result<ServerConfig, String> {
    let mut config = ServerConfig::builder_with_provider(ring_provider())
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("TLS cannot be set up: {error}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|error| unusable(&error, files))?;
    config.alpn_protocols = vec![ALPN_HTTP1.to_vec()];
    Ok(config)
}

/// `ring`'s algorithms. rustls 0.23.48 deprecated this provider because it has no
/// post-quantum key exchange (X25519MLKEM768), which only the aws-lc-rs provider has; that one
/// needs cmake and nasm to build, which this project's builds do not have. X25519 and the NIST
/// curves remain; moving to aws-lc-rs is a change of this one function.
#[allow(deprecated)]
fn ring_provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// What a refused certificate and key say: a mismatch, or which of the two cannot be used.
fn unusable(error: &rustls::Error, files: &TlsFiles) -> String {
    let (cert, key) = (files.cert.display(), files.key.display());
    match error {
        rustls::Error::InconsistentKeys(_) => format!(
            "[serve] tls_key {key} is not the key of tls_cert {cert} (its first certificate's \
             public key differs); give the key the certificate was made for, or the \
             certificate of this key"
        ),
        rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented => {
            format!(
                "[serve] tls_cert {cert}: its first certificate cannot be used ({error}); give \
                 the server's own X.509 certificate first"
            )
        }
        _ => format!(
            "[serve] tls_key {key}: cannot be used with tls_cert {cert} ({error}); give an \
             RSA, ECDSA (P-256, P-384) or Ed25519 key"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    /// `cert` and `key` written to private files in a new directory.
    fn files(cert: &str, key: &str) -> (tempfile::TempDir, TlsFiles) {
        let dir = tempfile::tempdir().unwrap();
        let files = TlsFiles {
            cert: dir.path().join("cert.pem"),
            key: dir.path().join("key.pem"),
        };
        std::fs::write(&files.cert, cert).unwrap();
        std::fs::write(&files.key, key).unwrap();
        std::fs::set_permissions(&files.key, std::fs::Permissions::from_mode(0o600)).unwrap();
        (dir, files)
    }

    fn refusal(cert: &str, key: &str) -> String {
        let (_dir, files) = files(cert, key);
        match acceptor(&files) {
            Ok(_) => panic!("{cert:?} and {key:?} were accepted"),
            Err(error) => error,
        }
    }

    const BAD_BASE64: &str = "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";

    #[test]
    fn a_file_without_a_certificate_or_a_key_or_of_bad_pem_is_named() {
        let error = refusal("not a certificate\n", "");
        assert!(
            error.contains("tls_cert") && error.contains("holds no certificate"),
            "{error}"
        );
        let error = refusal(BAD_BASE64, "");
        assert!(
            error.contains("tls_cert") && error.contains("not readable as PEM"),
            "{error}"
        );
        let certificate = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let error = refusal(certificate, "no key here\n");
        assert!(
            error.contains("tls_key") && error.contains("holds no private key"),
            "{error}"
        );
        let unterminated = "-----BEGIN PRIVATE KEY-----\nAAAA\n";
        let error = refusal(certificate, unterminated);
        assert!(
            error.contains("tls_key") && error.contains("not readable as PEM"),
            "{error}"
        );
    }

    #[test]
    fn a_missing_file_is_named_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let files = TlsFiles {
            cert: dir.path().join("cert.pem"),
            key: dir.path().join("key.pem"),
        };
        let error = acceptor(&files).err().unwrap();
        assert!(error.starts_with("[serve] tls_cert "), "{error}");
        assert!(
            error.contains("give the PEM file of the certificate chain"),
            "{error}"
        );
    }
}
