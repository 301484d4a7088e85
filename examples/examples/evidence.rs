//! Put, get and find Evidence records in the built-in SQLite EvidenceStore.
//!
//! The program opens a store in a private temporary directory, puts a record (a payload in a
//! named format, filed under a pins digest, written by an attempt), gets it back by its id
//! (the store re-hashes the bytes on every read), finds every record filed under the pins,
//! and puts the identical record again to show that it returns the same id and writes
//! nothing. Records are write-once and content-addressed: the id is the `sha256:` of the
//! record's exact bytes.
//!
//! Run it with `cargo run -p sf-examples --example evidence`. Everything it makes lives in the
//! temporary directory and is removed when it ends.

use std::error::Error;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use sf_host::canonical::Digest;
use sf_host::contracts::{AttemptId, EvidenceRecord, EvidenceStore};
use sf_host::evidence::SqliteEvidenceStore;

fn main() -> Result<(), Box<dyn Error>> {
    // The database's directory must be private to this user (mode 0700, canonical path) and
    // sit in a directory no one else can write: /tmp itself will not do, so it is one level
    // down in a private temporary directory.
    let workdir = tempfile::Builder::new().prefix("sf-evidence-").tempdir()?;
    fs::set_permissions(workdir.path(), fs::Permissions::from_mode(0o700))?;
    let dir = workdir.path().canonicalize()?.join("evidence");
    fs::create_dir(&dir)?;
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))?;
    let store = SqliteEvidenceStore::open(&dir.join("evidence.db"))?;
    println!("store        {}", store.path().display());

    // The pins name what the evidence is about; sf files each check run under the digest of
    // the Candidate, base and frozen records it ran against. Any digest will do here.
    let pins = Digest::of(b"an example pins document");
    let attempt = AttemptId {
        product: "example-product".into(),
        epoch: 1,
    };
    let deadline = || Instant::now() + Duration::from_secs(10);

    let first = EvidenceRecord::new(
        pins.clone(),
        attempt.clone(),
        "example-note/1",
        b"the check passed",
    )?;
    let second = EvidenceRecord::new(
        pins.clone(),
        attempt,
        "example-note/1",
        b"the guardrail held",
    )?;
    let first_id = store.put(&first, deadline())?;
    let second_id = store.put(&second, deadline())?;
    println!("put          {first_id}");
    println!("put          {second_id}");

    let got = store.get(&first_id, deadline())?;
    println!(
        "get          {} format={} attempt={} payload={:?}",
        got.id(),
        got.format(),
        got.attempt(),
        String::from_utf8_lossy(got.payload())
    );
    println!("same bytes   {}", got == first);

    let found = store.find(&pins, deadline())?;
    println!("find         {} records under {pins}", found.len());
    for id in &found {
        println!("  {id}");
    }

    // Putting an identical record again is always safe: same id, nothing written.
    let again = store.put(&first, deadline())?;
    println!("put again    {again} (same id: {})", again == first_id);
    println!("records      {}", store.count()?);

    // An id with no record is `missing`, never an empty answer.
    let absent = Digest::of(b"no such record");
    match store.get(&absent, deadline()) {
        Ok(_) => return Err("a record appeared from nowhere".into()),
        Err(error) => println!("get absent   {}: {error}", error.code()),
    }
    Ok(())
}
