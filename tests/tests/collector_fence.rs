//! The attempt fence across processes: one holder at a time per Candidate of a Product (an
//! flock the kernel drops when the holder dies), holds on other Candidates beside it, epochs
//! that only grow and survive every process, and a hold that, once ended, stops every further
//! run and put.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};

use sf_host::canonical::Digest;
use sf_host::fence::Fence;

/// The Candidate the children hold.
fn candidate_a() -> Digest {
    Digest::of(b"candidate a")
}

const CHILD_ENV: &str = "SF_FENCE_TEST_CHILD_ROOT";

/// Run as a child (this test binary re-executed): takes the fence, prints its epoch, and
/// waits for its standard input to close (or to be killed).
#[test]
fn fence_child() {
    let Some(root) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let fence = Fence::open(std::path::Path::new(&root), "product-1").unwrap();
    match fence.acquire(&candidate_a()) {
        Ok(hold) => {
            println!("HELD {}", hold.attempt().epoch);
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
            hold.assert_active().unwrap();
        }
        Err(error) => println!("REFUSED {}", error.code()),
    }
}

// Every caller waits for the child it gets back.
#[allow(clippy::zombie_processes)]
fn spawn_child(root: &std::path::Path) -> (std::process::Child, String) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "fence_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child printed no verdict");
        }
        // libtest prints "test fence_child ... " on the same line first.
        if let Some(at) = line.find("HELD ").or_else(|| line.find("REFUSED ")) {
            let said = line[at..].trim().to_owned();
            // Keep reading, so the child never writes into a closed pipe.
            std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
            return (child, said);
        }
    }
}

#[test]
fn one_holder_across_processes_and_epochs_only_grow() {
    let (_dir, parent) = sf_tests::private_dir();
    let root = parent.join("fence");
    let fence = Fence::open(&root, "product-1").unwrap();

    // A child holds Candidate a: this process is refused it, and so is a second child; this
    // process holds Candidate b beside it, with the Product's next epoch.
    let (mut holder, said) = spawn_child(&root);
    assert_eq!(said, "HELD 1");
    assert_eq!(fence.acquire(&candidate_a()).unwrap_err().code(), "busy");
    let (mut second, said) = spawn_child(&root);
    assert_eq!(said, "REFUSED busy");
    second.wait().unwrap();
    let beside = fence.acquire(&Digest::of(b"candidate b")).unwrap();
    assert_eq!(beside.attempt().epoch, 2);
    beside.release();

    // The holder is killed: the kernel drops its lock; its epoch is never handed out again.
    holder.kill().unwrap();
    holder.wait().unwrap();
    let hold = fence.acquire(&candidate_a()).unwrap();
    assert_eq!(hold.attempt().epoch, 3);
    let (mut refused, said) = spawn_child(&root);
    assert_eq!(said, "REFUSED busy");
    refused.wait().unwrap();

    // Released here: a child takes the next epoch, and this hold stays ended.
    hold.release();
    assert_eq!(hold.assert_active().unwrap_err().code(), "released");
    let (mut next, said) = spawn_child(&root);
    assert_eq!(said, "HELD 4");
    drop(next.stdin.take());
    assert!(next.wait().unwrap().success());
    assert_eq!(fence.last_epoch().unwrap(), 4);
}
