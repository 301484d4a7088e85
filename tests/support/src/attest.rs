//! An independent DSSE verifier for sf's attestations: Python's `securesystemslib` (the DSSE
//! envelope and Ed25519 keys of the in-toto and TUF projects, over pyca/cryptography), from a
//! venv under the target directory that `.ci/attest-venv` makes from PyPI (pinned
//! requirements in `tests/support/attest/requirements.txt`). CI runs the script first; a test
//! run alone runs it too. It never skips: a venv that cannot be made fails the test.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The venv (`<target>/attest-venv`), made once per test process.
pub fn venv() -> &'static Path {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| crate::py_venv::made("attest-venv", "attest-venv"))
}

/// The verifier's program: reads a DSSE envelope (JSON) on stdin, and a public key as
/// OpenSSH writes it (`ssh-ed25519 AAAA…`) in argv[1]; verifies the envelope with
/// securesystemslib's `Envelope.verify` against that one key (threshold 1); prints the
/// payload on success and exits 0, else prints why and exits 1.
const VERIFIER: &str = r#"
import base64, json, struct, sys
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey
from securesystemslib.exceptions import VerificationError

def raw_ed25519(openssh):
    kind, blob = openssh.split()[:2]
    data = base64.b64decode(blob)
    fields = []
    while data:
        (n,) = struct.unpack(">I", data[:4])
        fields.append(data[4:4 + n])
        data = data[4 + n:]
    assert kind == "ssh-ed25519" and fields[0] == b"ssh-ed25519", kind
    return fields[1]

envelope = Envelope.from_dict(json.loads(sys.stdin.buffer.read()))
keyid = next(iter(envelope.signatures))
key = SSlibKey(keyid, "ed25519", "ed25519", {"public": raw_ed25519(sys.argv[1]).hex()})
try:
    envelope.verify([key], 1)
except VerificationError as error:
    print("refused:", error)
    sys.exit(1)
sys.stdout.buffer.write(envelope.pae())
"#;

/// What the independent verifier said of an envelope.
#[derive(Debug)]
pub struct Verdict {
    /// Whether it verified.
    pub verified: bool,
    /// What it printed: the envelope's pre-authentication encoding when it verified, why not
    /// otherwise.
    pub stdout: Vec<u8>,
    /// Its stderr.
    pub stderr: String,
}

/// Verifies `envelope` with securesystemslib against the one key `public` (OpenSSH form).
pub fn verify_with_securesystemslib(envelope: &[u8], public: &str) -> Verdict {
    let public = std::ffi::OsStr::new(public);
    let output = crate::py_venv::run(venv(), VERIFIER, &[public], envelope);
    Verdict {
        verified: output.status.success(),
        stdout: output.stdout,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The program that signs: reads a payload on stdin and an OpenSSH private key's path in
/// argv[1]; prints the raw Ed25519 signature of the payload's DSSE pre-authentication
/// encoding (pyca/cryptography reading the key, securesystemslib's PAE).
const SIGNER: &str = r#"
import sys
from cryptography.hazmat.primitives.serialization import load_ssh_private_key
from securesystemslib.dsse import Envelope

payload = sys.stdin.buffer.read()
key = load_ssh_private_key(open(sys.argv[1], "rb").read(), password=None)
pae = Envelope(payload, "application/vnd.in-toto+json", {}).pae()
sys.stdout.buffer.write(key.sign(pae))
"#;

/// The raw Ed25519 signature, by the OpenSSH private key at `key`, of the DSSE encoding of
/// an in-toto `payload`, made by pyca/cryptography: how a test forges what sf never signs.
pub fn sign_with_cryptography(payload: &[u8], key: &Path) -> Vec<u8> {
    let output = crate::py_venv::run(venv(), SIGNER, &[key.as_os_str()], payload);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(output.stdout.len(), 64, "{output:?}");
    output.stdout
}
