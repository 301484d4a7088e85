//! Bad input: malformed or mismatched acceptance, recipe, environment and pins,
//! inputs over the snapshot limits, and protected paths the profile can read are typed errors
//! before anything starts or is stored. And the records round-trip exactly.

mod collector_support;

use std::path::PathBuf;

use collector_support::*;
use sf_host::assurance::{Acceptance, EnvironmentRecord, Recipe, RepositoryPins, SliceRecord};
use sf_host::canonical::{self, Digest};
use sf_host::collector::RepositoryCollector;
use sf_host::snapshot::{SnapshotFile, snapshot_digest};

fn text(value: &canonical::Value) -> String {
    String::from_utf8(canonical::encode(value).unwrap()).unwrap()
}

#[test]
fn records_round_trip_and_digest_their_canonical_bytes() {
    let scenario = Scenario::real();
    let acceptance_bytes = scenario.acceptance.to_bytes().unwrap();
    assert_eq!(
        Acceptance::from_json(&acceptance_bytes).unwrap(),
        scenario.acceptance
    );
    assert_eq!(
        scenario.acceptance.digest().unwrap(),
        Digest::of(&acceptance_bytes)
    );
    // Any white space or key order reads the same record with the same digest.
    let pretty = text(&scenario.acceptance.to_value()).replace(",\"", ", \"");
    assert_eq!(
        Acceptance::from_json(pretty.as_bytes())
            .unwrap()
            .digest()
            .unwrap(),
        Digest::of(&acceptance_bytes)
    );
    assert_eq!(
        Recipe::from_json(&scenario.recipe.to_bytes().unwrap()).unwrap(),
        scenario.recipe
    );
    assert_eq!(
        EnvironmentRecord::from_json(&scenario.environment.to_bytes().unwrap()).unwrap(),
        scenario.environment
    );
    let request = scenario.request(SUM_FIXED);
    let pins = collector_support::pins(&request);
    assert_eq!(
        RepositoryPins::from_json(&pins.to_bytes().unwrap()).unwrap(),
        pins
    );
    let slice = &request.slice.record;
    assert_eq!(
        SliceRecord::from_json(&slice.to_bytes().unwrap()).unwrap(),
        *slice
    );
    for (record, protocol) in [
        (
            text(&scenario.acceptance.to_value()),
            "sf-repository-acceptance/2",
        ),
        (text(&slice.to_value()), "sf-slice/1"),
        (text(&scenario.recipe.to_value()), "sf-repository-recipe/2"),
        (
            text(&scenario.environment.to_value()),
            "sf-confined-environment/1",
        ),
        (text(&pins.to_value()), "sf-repository-pins/2"),
    ] {
        assert!(
            record.contains(&format!("\"protocol\":\"{protocol}\"")),
            "{record}"
        );
    }
}

/// `mutate` applied to the acceptance's JSON text must be refused, naming `field`.
fn refused_acceptance(scenario: &Scenario, mutate: impl Fn(String) -> String, field: &str) {
    let json = mutate(text(&scenario.acceptance.to_value()));
    let error = Acceptance::from_json(json.as_bytes()).unwrap_err();
    assert_eq!(error.code(), "invalid-input");
    assert!(
        error.to_string().contains(field),
        "{field:?} not in {error}"
    );
}

#[test]
fn malformed_acceptances_are_refused() {
    let scenario = Scenario::real();
    let s = &scenario;
    refused_acceptance(
        s,
        |j| j.replace("sf-repository-acceptance/2", "sf-repository-acceptance/1"),
        "acceptance.protocol",
    );
    refused_acceptance(
        s,
        |j| j.replacen("{\"checks\"", "{\"verified\":true,\"checks\"", 1),
        "acceptance.verified",
    );
    refused_acceptance(
        s,
        |j| {
            j.replacen(
                "\"entry\":{\"from\":\"tree\",\"path\":\"check.sh\"},",
                "",
                1,
            )
        },
        "entry",
    );
    refused_acceptance(
        s,
        |j| j.replacen("\"from\":\"tree\"", "\"from\":\"input\"", 1),
        "entry.from",
    );
    refused_acceptance(
        s,
        |j| j.replacen("\"entryInScope\":false", "\"entryInScope\":true", 1),
        "entryInScope",
    );
    refused_acceptance(
        s,
        |j| j.replacen("\"entryInScope\":false", "\"entryInScope\":0", 1),
        "entryInScope",
    );
    refused_acceptance(
        s,
        |j| j.replacen("\"kind\":\"process\"", "\"kind\":\"shell\"", 1),
        "kind",
    );
    refused_acceptance(
        s,
        |j| j.replacen("\"phase\":\"before\"", "\"phase\":\"during\"", 1),
        "phase",
    );
    refused_acceptance(
        s,
        |j| j.replacen("\"exitCode\":1", "\"exitCode\":256", 1),
        "exitCode",
    );
    refused_acceptance(
        s,
        |j| j.replacen("\"exitCode\":1", "\"exitCode\":\"1\"", 1),
        "exitCode",
    );
    refused_acceptance(
        s,
        |j| j.replacen("\"path\":\"check.sh\"", "\"path\":\"../check.sh\"", 1),
        "entry",
    );
    refused_acceptance(
        s,
        |j| j.replacen("\"id\":\"bug-fixed\"", "\"id\":\"bug-shown\"", 1),
        "distinct",
    );
    refused_acceptance(
        s,
        |j| j.replacen("\"stage\":\"base\"", "\"stage\":\"candidate\"", 1),
        "before check runs on stage base",
    );
    refused_acceptance(
        s,
        |j| j.replacen("\"stage\":\"candidate\"", "\"stage\":\"base\"", 1),
        "after check runs on stage candidate",
    );
    refused_acceptance(
        s,
        |j| j.replacen("\"phase\":\"guardrail\"", "\"phase\":\"before\"", 1),
        "phase order",
    );
    refused_acceptance(
        s,
        |j| j.replacen("\"input\":\"sha256:", "\"input\":\"sha1:", 1),
        "input",
    );
    refused_acceptance(
        s,
        |j| j.replacen("\"args\":[]", "\"args\":[\"a\\u0000b\"]", 1),
        "args",
    );
    refused_acceptance(
        s,
        |j| j.replacen("\"prompt\":\"", "\"prompt\":\"\",\"x\":\"", 1),
        "prompt",
    );
    refused_acceptance(s, |j| j.replacen("{", "{\"checks\":[],", 1), "duplicate");
    let only_review = r#"{"protocol":"sf-repository-acceptance/2","checks":[{"kind":"review","id":"r","prompt":"p"}]}"#;
    assert!(
        Acceptance::from_json(only_review.as_bytes())
            .unwrap_err()
            .to_string()
            .contains("at least one process check")
    );
    assert!(
        Acceptance::from_json(b"{\"protocol\":\"sf-repository-acceptance/1\",\"checks\":[]}")
            .is_err()
    );
    assert!(Acceptance::from_json(b"[]").is_err());
    assert!(Acceptance::from_json(b"{\"checks\":1.5}").is_err());
}

#[test]
fn malformed_recipes_environments_and_pins_are_refused() {
    let scenario = Scenario::real();
    let recipe = text(&scenario.recipe.to_value());
    let timeout = format!("\"timeoutMs\":{}", scenario.recipe.timeout_ms);
    for (bad, field) in [
        (recipe.replace(&timeout, "\"timeoutMs\":0"), "timeoutMs"),
        (
            recipe.replace(&timeout, "\"timeoutMs\":3600001"),
            "timeoutMs",
        ),
        (
            recipe.replace("\"outputLimit\":65536", "\"outputLimit\":8388609"),
            "outputLimit",
        ),
        (
            recipe.replace("\"runtime\":\"/bin/sh\"", "\"runtime\":\"bin/sh\""),
            "runtime",
        ),
        (
            recipe.replace("\"runtime\":\"/bin/sh\"", "\"runtime\":\"/bin/../bin/sh\""),
            "runtime",
        ),
        (
            recipe.replace("{\"closure\"", "{\"name\":\"x\",\"closure\""),
            "collector.name",
        ),
        (
            recipe.replace("sf-repository-recipe/2", "sf-recipe/1"),
            "protocol",
        ),
        (
            recipe.replace("sf-repository-recipe/2", "sf-repository-recipe/1"),
            "freeze the Slice again",
        ),
        (
            recipe.replace("\"fully-enforced\"", "\"Fully Enforced\""),
            "enforcement",
        ),
    ] {
        let error = Recipe::from_json(bad.as_bytes()).unwrap_err();
        assert!(error.to_string().contains(field), "{field}: {error}");
    }
    let environment = text(&scenario.environment.to_value());
    for (bad, field) in [
        (environment.replace("linux/x86_64", ""), "platform"),
        (
            environment.replace("\"sf\":\"", "\"sf\":\"with space "),
            "sf",
        ),
        (
            environment.replacen("\"profile\":\"sha256:", "\"profile\":\"sha256:0", 1),
            "profile",
        ),
    ] {
        let error = EnvironmentRecord::from_json(bad.as_bytes()).unwrap_err();
        assert!(error.to_string().contains(field), "{field}: {error}");
    }
    let pins = text(&collector_support::pins(&scenario.request(SUM_FIXED)).to_value());
    for (bad, field) in [
        (pins.replace("\"revision\":1", "\"revision\":0"), "revision"),
        (
            pins.replacen("\"commit\":\"", "\"commit\":\"0", 1),
            "commit",
        ),
        (
            pins.replace("sf-repository-pins/2", "sf-repository-pins/0"),
            "protocol",
        ),
        (pins.replacen("{", "{\"extra\":null,", 1), "pins.extra"),
        (
            pins.replace("\"productId\":\"product-1\"", "\"productId\":\"-bad\""),
            "productId",
        ),
    ] {
        let error = RepositoryPins::from_json(bad.as_bytes()).unwrap_err();
        assert!(error.to_string().contains(field), "{field}: {error}");
    }
}

#[test]
fn protected_paths_the_profile_can_read_are_refused() {
    let scenario = Scenario::real();
    let new = |paths: Vec<PathBuf>| {
        RepositoryCollector::new(scenario.store.clone(), scenario.executor.clone(), paths)
    };
    for readable in [
        "/usr/lib/sf-answer-key",
        "/usr/bin",
        "/bin/sh",
        "/usr",
        "/lib/../usr/lib/x",
        "/dev/null",
    ] {
        let mut paths = scenario.protected();
        paths.push(PathBuf::from(readable));
        let error = new(paths).unwrap_err();
        assert_eq!(error.code(), "invalid-input", "{readable}");
        assert!(error.to_string().contains(readable), "{error}");
    }
    // A name that leads into a readable directory through a link.
    let alias = scenario.root.join("alias");
    std::os::unix::fs::symlink("/usr/lib", &alias).unwrap();
    assert!(new(vec![alias.join("x")]).is_err());
    assert!(new(vec![]).is_err());
    assert!(new(vec![PathBuf::from("relative/path")]).is_err());
    assert!(
        new((0..257)
            .map(|n| scenario.root.join(format!("p{n}")))
            .collect())
        .is_err()
    );
    assert!(new(scenario.protected()).is_ok());
}

#[test]
fn inputs_that_are_missing_mismatched_or_over_the_limits_are_refused() {
    let scenario = Scenario::real();
    let collector = scenario.collector();
    let good = scenario.request(SUM_FIXED);
    let hold = scenario.fence.acquire(&good.sealed.digest).unwrap();

    let mut request = good.clone();
    request.slice.inputs.clear();
    let error = collector
        .collect(&request, proceed(), &hold, &cancel())
        .unwrap_err();
    assert!(
        error.to_string().contains("does not hold this input"),
        "{error}"
    );

    let mut request = good.clone();
    let (_, files) = request.slice.inputs.iter_mut().next().unwrap();
    files[0].content.push(b'9');
    let error = collector
        .collect(&request, proceed(), &hold, &cancel())
        .unwrap_err();
    assert!(
        error.to_string().contains("do not give its digest"),
        "{error}"
    );

    // The snapshot store refuses inputs over its limits before writing anything.
    let many: Vec<SnapshotFile> = (0..257)
        .map(|n| SnapshotFile::regular(format!("f{n}"), vec![]))
        .collect();
    let error = scenario
        .snapshots
        .put(&many, &snapshot_digest(&many).unwrap())
        .unwrap_err();
    assert_eq!(error.code(), "invalid-input");
    let big = vec![SnapshotFile::regular(
        "big",
        vec![b'x'; 15 * 1024 * 1024 + 1],
    )];
    let error = scenario
        .snapshots
        .put(&big, &snapshot_digest(&big).unwrap())
        .unwrap_err();
    assert_eq!(error.code(), "invalid-input");
    // And the collector refuses an input the executor could not take.
    let mut request = good.clone();
    let huge = vec![SnapshotFile::regular("huge", vec![0; 16 * 1024 * 1024 + 1])];
    let (_, files) = request.slice.inputs.iter_mut().next().unwrap();
    *files = huge;
    assert_eq!(
        collector
            .collect(&request, proceed(), &hold, &cancel())
            .unwrap_err()
            .code(),
        "invalid-input"
    );

    assert_eq!(scenario.records(), 0, "nothing was stored");
}
