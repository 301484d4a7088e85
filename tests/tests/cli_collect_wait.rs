//! `sf collect --wait`: a collection that finds its Candidate's fence held waits its turn
//! instead of failing `busy`. The test holds the Slice's file fence itself (the real fence,
//! as another collector of the Candidate would), so the order is certain: another Candidate
//! of the repository collects at once beside the hold; without `--wait` the collection is
//! refused at once, naming `--wait`; with a wait shorter than the hold it
//! is refused after it, saying how long it waited; with a longer one it runs once the hold is
//! released, on the next epoch, and says how long it waited.

mod land_support;

use std::time::{Duration, Instant};

use land_support::{SUM_FIXED, SUM_NOT_FIXED, Work};
use sf_host::fence::Fence;
use sf_tests::plugins::Envelope;

fn collect(work: &Work, candidate: &str, wait: Option<&str>) -> std::process::Command {
    let mut args = vec!["collect"];
    args.extend(land_support::on(candidate));
    args.extend(wait);
    work.command(&args)
}

#[test]
fn a_collection_waits_its_turn_at_its_candidates_fence_only_when_asked() {
    let work = Work::new();
    let candidate = work.seal("slice", SUM_FIXED);
    let identity: serde_json::Value =
        serde_json::from_slice(&std::fs::read(work.dir.join("identity.json")).unwrap()).unwrap();
    let product = identity["productId"].as_str().unwrap().to_owned();
    let fence = Fence::open(&work.dir.join("slice/state/fence"), &product).unwrap();
    let hold = fence
        .acquire(&sf_host::canonical::Digest::parse(&candidate).unwrap())
        .unwrap();

    // Another Candidate of the repository is not in the way: it collects at once, with the
    // Product's next epoch.
    let other = work.seal("slice", SUM_NOT_FIXED);
    let beside = Envelope::parse(collect(&work, &other, None).output().unwrap());
    assert_eq!(beside.result()["waitedMs"], 0, "{:?}", beside.json);
    assert_eq!(
        beside.result()["attempt"]["epoch"],
        hold.attempt().epoch + 1,
        "{:?}",
        beside.json
    );

    let refused = Envelope::parse(collect(&work, &candidate, None).output().unwrap());
    assert_eq!(refused.json["error"]["code"], "busy", "{:?}", refused.json);
    let message = refused.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("--wait"), "{message}");

    let started = Instant::now();
    let gave_up = Envelope::parse(
        collect(&work, &candidate, Some("--wait=1s"))
            .output()
            .unwrap(),
    );
    assert_eq!(gave_up.json["error"]["code"], "busy", "{:?}", gave_up.json);
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert!(
        gave_up.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("waited"),
        "{:?}",
        gave_up.json
    );

    let waiting = collect(&work, &candidate, Some("--wait=60s"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let held_epoch = hold.attempt().epoch;
    drop(hold);
    let collected = Envelope::parse(waiting.wait_with_output().unwrap());
    let result = collected.result();
    assert!(result["waitedMs"].as_u64().unwrap() >= 1000, "{result}");
    assert_eq!(result["attempt"]["epoch"], held_epoch + 2, "{result}");
    assert_eq!(result["mayJudge"], true, "{result}");
    // Nothing held it since: a collection that waits for nothing does not wait.
    let again = Envelope::parse(collect(&work, &candidate, Some("--wait")).output().unwrap());
    assert_eq!(again.result()["waitedMs"], 0, "{:?}", again.json);
    let bad = Envelope::parse(
        collect(&work, &candidate, Some("--wait=soon"))
            .output()
            .unwrap(),
    );
    assert_eq!(bad.json["error"]["code"], "invalid-input", "{:?}", bad.json);
}
