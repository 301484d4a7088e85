//! Collect evidence for two Candidates in the sandbox and judge it.
//!
//! The program makes a private temporary directory holding an owned repository of a tiny shell
//! program with a bug (`sum.sh` skips the first number), freezes a Slice (two fixture inputs,
//! a harness holding the check, the acceptance with the expected sums as digests only, the
//! recipe and the environment read from the sandbox-exec Executor, all bound by the Slice
//! record's digest), seals two Candidates for it (one fixes the bug, one does not), and for
//! each takes the fence, runs every process check once in the sandbox with the repository
//! collector, stores one record per run in a SQLite evidence file, and prints the judge's
//! Verdict: Verified, then Failed.
//!
//! Run it with `cargo build -p sf-sandbox-exec --bins && cargo run -p sf-examples --example
//! collect_and_judge` (the Executor starts `sf-sandbox-launcher`, which it looks for beside the
//! example's executable and one directory up). It needs a root-owned `git` at `/usr/bin/git` or
//! `/usr/local/bin/git`, and a kernel with user namespaces and Landlock. Everything it makes
//! lives in the temporary directory and is removed when it ends.

use std::error::Error;
use std::time::{Duration, Instant};

use sf_examples::sum::{SUM_FIXED, SUM_NOT_FIXED, SumWorld};
use sf_host::assurance::{JudgeRequest, judge};
use sf_host::canonical;

fn main() -> Result<(), Box<dyn Error>> {
    let world = SumWorld::new()?;
    println!("repository   {}", world.identity.path);
    println!("slice        {}", world.slice_digest);
    println!("acceptance   {}", world.frozen.acceptance);
    println!("recipe       {}", world.frozen.recipe);
    println!("environment  {}", world.frozen.environment);
    println!("collector    {}", world.slice.recipe.collector_closure);

    for (name, sum) in [("a fix", SUM_FIXED), ("not a fix", SUM_NOT_FIXED)] {
        let sealed = world.seal(sum)?;
        println!("\nCandidate    {} ({name})", sealed.digest);
        let (pins, attempt, result) = world.collect(sealed, &mut |check, state, evidence| {
            println!(
                "  {check:<16} {state:<12} {}",
                evidence.map_or("-".into(), ToString::to_string)
            );
        })?;
        println!("attempt      {attempt}");
        if !result.may_judge() {
            println!("no Verdict may be issued for this attempt");
            continue;
        }
        let verdict = judge(
            &JudgeRequest {
                pins: &pins,
                acceptance: &world.slice.acceptance,
                recipe: &world.slice.recipe,
                environment: &world.slice.environment,
                attempt: &attempt,
            },
            world.store.as_ref(),
            Instant::now() + Duration::from_secs(60),
        )?;
        println!("verdict      {}", verdict.outcome.as_str());
        println!(
            "{}",
            String::from_utf8(canonical::encode(&verdict.to_value())?)?
        );
    }
    println!("\nrecords      {}", world.store.count()?);
    Ok(())
}
