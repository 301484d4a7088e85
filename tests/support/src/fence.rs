//! Killing a fence holder: the AttemptFence conformance suite's
//! [`kill_a_holder`](sf_sdk::conformance::fence::Harness::kill_a_holder) for any backend, by
//! re-executing the running test binary as the holder.
//!
//! The test crate defines a child test (named by the caller) that does nothing unless
//! [`HOLDER_ENV`] is set; when it is, it builds the fence from that variable (whatever the
//! backend needs to find the same fence), acquires the Product named by [`PRODUCT_ENV`],
//! calls [`announce_and_wait`], and is killed there.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};

/// Set in the holder's environment: how the child finds the fence (a directory, a
/// configuration), as the test crate encodes it.
pub const HOLDER_ENV: &str = "SF_TEST_FENCE_HOLDER";
/// Set in the holder's environment: the Product whose fence it takes.
pub const PRODUCT_ENV: &str = "SF_TEST_FENCE_PRODUCT";

/// In the child: prints the epoch held and waits to be killed.
pub fn announce_and_wait(epoch: u64) -> ! {
    println!("HELD {epoch}");
    loop {
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}

/// Runs the child test `child_test` of this test binary with [`HOLDER_ENV`] = `fence` and
/// [`PRODUCT_ENV`] = `product`, waits for it to say the epoch it holds, kills it with SIGKILL,
/// reaps it, and returns that epoch. Panics when the child says anything else or exits first.
pub fn kill_a_holder(child_test: &str, fence: &str, product: &str) -> u64 {
    let mut child = Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", child_test, "--nocapture", "--test-threads", "1"])
        .env(HOLDER_ENV, fence)
        .env(PRODUCT_ENV, product)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the holder");
    let mut reader = BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    let epoch = loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.kill();
            let status = child.wait();
            panic!("the holder exited without holding ({status:?})");
        }
        // libtest prints "test NAME ... " on the same line first.
        if let Some(at) = line.find("HELD ") {
            break line[at + 5..].trim().parse::<u64>().expect("HELD <epoch>");
        }
    };
    child.kill().expect("SIGKILL the holder");
    child.wait().expect("reap the holder");
    epoch
}
