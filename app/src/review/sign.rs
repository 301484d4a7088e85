//! Signing a review with the reviewer's SSH key through `ssh-keygen -Y sign`: the key never
//! passes through sf (a passphrase is asked on the terminal, an agent's key stays in the
//! agent).

use std::io::Write as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::process::{Command, Stdio};

use sf_host::assurance::review::{MAX_SIGNATURE_BYTES, SIGNATURE_NAMESPACE};

use crate::error::AppError;

/// Where `ssh-keygen` is looked for, in this order.
const SSH_KEYGEN: &[&str] = &["/usr/bin/ssh-keygen", "/usr/local/bin/ssh-keygen"];

/// The `ssh-keygen` sf signs with: the first of [`SSH_KEYGEN`] that is a regular file owned
/// by root and writable by no one else (the reviewer's key passes through it).
fn ssh_keygen() -> Result<&'static Path, AppError> {
    SSH_KEYGEN
        .iter()
        .map(Path::new)
        .find(|path| {
            std::fs::metadata(path)
                .is_ok_and(|meta| meta.is_file() && meta.uid() == 0 && meta.mode() & 0o022 == 0)
        })
        .ok_or_else(|| {
            AppError::new(
                "unavailable",
                format!(
                    "--key: no root-owned ssh-keygen at {} (install OpenSSH's client: \
                     openssh-client)",
                    SSH_KEYGEN.join(" or ")
                ),
            )
        })
}

/// Signs `message` with `key` through `ssh-keygen -Y sign -n sf-review`.
pub(super) fn sign(key: &Path, message: &[u8]) -> Result<String, AppError> {
    let failed = |detail: String| {
        AppError::coded(
            "sign-failed",
            format!("--key {}", key.display()),
            format!("ssh-keygen -Y sign: {detail}"),
        )
    };
    let mut command = Command::new(ssh_keygen()?);
    command
        .args(["-Y", "sign", "-q", "-n", SIGNATURE_NAMESPACE, "-f"])
        .arg(key)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // An agent's key is reached through its socket, and nothing else of the environment.
    if let Some(socket) = std::env::var_os("SSH_AUTH_SOCK") {
        command.env("SSH_AUTH_SOCK", socket);
    }
    let mut child = command
        .spawn()
        .map_err(|error| failed(format!("cannot start: {error}")))?;
    let mut stdin = child.stdin.take().expect("piped");
    let written = stdin.write_all(message);
    drop(stdin);
    let output = child
        .wait_with_output()
        .map_err(|error| failed(error.to_string()))?;
    written.map_err(|error| failed(format!("writing the review: {error}")))?;
    if !output.status.success() {
        return Err(failed(format!(
            "{} ({})",
            String::from_utf8_lossy(&output.stderr).trim(),
            output.status
        )));
    }
    match String::from_utf8(output.stdout) {
        Ok(signature) if !signature.is_empty() && signature.len() <= MAX_SIGNATURE_BYTES => {
            Ok(signature)
        }
        _ => Err(failed("its output is not a signature".into())),
    }
}
