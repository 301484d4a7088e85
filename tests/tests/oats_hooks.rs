//! Lifecycle hooks in the real sandbox: deterministic order, the environment contract,
//! compensation of a failed required spawn, quarantine when compensation cannot be proven,
//! the retry rule, and the refusals that happen before anything is created.

mod oats_support;

use std::path::{Path, PathBuf};

use oats_support::{Bench, manifest, write_manifest};
use serde_json::{Value, json};
use sf_oats::hooks::{
    E_HOOK_ENVIRONMENT_CONTRACT, E_REQUIRED_HOOK_FAILED, INSTANCE_FILE, LifecycleContext,
    QUARANTINE_FILE, RetireOutcome, SpawnOutcome,
};
use sf_oats::{HookEvent, Oats, RunContext};

/// Registers (and trusts) a copy of the hooks fixture as `id`, with `edit` applied to its
/// manifest.
fn capability(bench: &Bench, oats: &Oats, id: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let dir = bench.fixture("hooks", id);
    let mut value = manifest(&dir);
    value["capability"] = json!(id);
    edit(&mut value);
    write_manifest(&dir, &value);
    oats.register(&dir).unwrap();
    oats.trust(id, None).unwrap();
    dir
}

fn settings(pairs: &[(&str, Value)]) -> LifecycleContext {
    let mut context = LifecycleContext::default();
    for (id, value) in pairs {
        let run = RunContext {
            settings: value.as_object().unwrap().clone(),
            ..RunContext::default()
        };
        context.capabilities.insert((*id).to_owned(), run);
    }
    context
}

fn order(hooks: &[sf_oats::hooks::HookResult]) -> Vec<String> {
    hooks
        .iter()
        .map(|h| format!("{}:{}", h.capability, h.event.as_str()))
        .collect()
}

fn home(bench: &Bench, name: &str) -> PathBuf {
    bench.root.join(name)
}

fn not_required(value: &mut Value) {
    value["hooks"]["spawn"]["required"] = json!(false);
}

fn no_retire(value: &mut Value) {
    value["hooks"].as_object_mut().unwrap().remove("retire");
}

#[test]
fn spawn_runs_in_id_order_and_retire_reverses_it() {
    let bench = Bench::new();
    let oats = bench.oats();
    capability(&bench, &oats, "acme.zed", |_| {});
    capability(&bench, &oats, "acme.alpha", |_| {});
    let home = home(&bench, "instance-1");
    let context = settings(&[
        ("acme.alpha", json!({"spawnEnv": {"ACME_SESSION": "s-1"}})),
        (
            "acme.zed",
            json!({"spawnEnv": {"ACME_REGION": "eu-west"}, "warn": "slow disk"}),
        ),
    ]);
    let outcome = oats
        .spawn(&home, &["acme.zed", "acme.alpha"], &context)
        .unwrap();
    let SpawnOutcome::Spawned {
        env,
        hooks,
        warnings,
        ..
    } = &outcome
    else {
        panic!("{outcome:?}");
    };
    assert_eq!(order(hooks), ["acme.alpha:spawn", "acme.zed:spawn"]);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(env, [("ACME_REGION", "eu-west"), ("ACME_SESSION", "s-1")]);
    assert_eq!(warnings, &["acme.zed: slow disk"]);
    assert_eq!(hooks[0].brief.as_deref(), Some("acme.alpha is ready"));
    // What a hook sees: the event, the instance, the home (with its alias) as working dir.
    let seen = &hooks[0].meta.as_ref().unwrap()["seen"];
    assert_eq!(seen["event"], "spawn");
    assert_eq!(seen["instance"], "instance-1");
    assert_eq!(seen["home"], seen["instanceHome"]);
    assert_eq!(seen["home"], seen["cwd"]);
    assert!(home.join(INSTANCE_FILE).is_file());
    assert_eq!(outcome.to_json()["outcome"], "spawned");

    let retired = oats
        .retire(&home, false, &LifecycleContext::default())
        .unwrap();
    let RetireOutcome::Retired { hooks } = &retired else {
        panic!("{retired:?}");
    };
    assert_eq!(order(hooks), ["acme.zed:retire", "acme.alpha:retire"]);
    // Each retire hook got its capability's spawn meta as OATS_META.
    assert_eq!(
        hooks[1].meta.as_ref().unwrap()["saw"]["created"],
        "acme.alpha"
    );
    assert!(!home.exists());
}

#[test]
fn a_failing_required_spawn_is_compensated_in_reverse() {
    let bench = Bench::new();
    let oats = bench.oats();
    capability(&bench, &oats, "acme.one", not_required);
    capability(&bench, &oats, "acme.two", |_| {});
    let home = home(&bench, "instance-2");
    let context = settings(&[("acme.two", json!({"spawn": "fail"}))]);
    let outcome = oats
        .spawn(&home, &["acme.one", "acme.two"], &context)
        .unwrap();
    let SpawnOutcome::RolledBack {
        code,
        failure,
        hooks,
    } = &outcome
    else {
        panic!("{outcome:?}");
    };
    assert_eq!(*code, E_REQUIRED_HOOK_FAILED);
    assert!(failure.contains("(declared required)"), "{failure}");
    assert!(failure.contains("spawn rolled back"), "{failure}");
    assert!(!failure.contains("INCOMPLETE"), "{failure}");
    assert_eq!(
        order(hooks),
        [
            "acme.one:spawn",
            "acme.two:spawn",
            "acme.two:retire",
            "acme.one:retire"
        ]
    );
    // The failed hook's meta reached its retire hook.
    assert_eq!(
        hooks[2].meta.as_ref().unwrap()["saw"]["created"],
        "acme.two"
    );
    assert!(!home.exists(), "a clean rollback leaves no home");

    // A non-required failure only warns.
    let context = settings(&[("acme.one", json!({"spawn": "fail"}))]);
    let outcome = oats
        .spawn(&home, &["acme.one", "acme.two"], &context)
        .unwrap();
    let SpawnOutcome::Spawned { warnings, .. } = &outcome else {
        panic!("{outcome:?}");
    };
    assert!(
        warnings[0].starts_with("acme.one: the spawn hook failed: exited 1"),
        "{warnings:?}"
    );
}

#[test]
fn the_environment_contract_is_enforced_and_compensated() {
    let bench = Bench::new();
    let oats = bench.oats();
    capability(&bench, &oats, "acme.one", not_required);
    capability(&bench, &oats, "acme.two", not_required);
    let home = home(&bench, "instance-3");
    // Two capabilities claiming one name, even with equal values: every attempted hook is
    // compensated in reverse.
    let same = json!({"spawnEnv": {"ACME_SESSION": "x"}});
    let context = settings(&[("acme.one", same.clone()), ("acme.two", same)]);
    let outcome = oats
        .spawn(&home, &["acme.one", "acme.two"], &context)
        .unwrap();
    let SpawnOutcome::RolledBack {
        code,
        hooks,
        failure,
    } = &outcome
    else {
        panic!("{outcome:?}");
    };
    assert_eq!(*code, E_HOOK_ENVIRONMENT_CONTRACT);
    assert!(
        failure.contains("already contributed by acme.one"),
        "{failure}"
    );
    assert_eq!(
        order(hooks),
        [
            "acme.one:spawn",
            "acme.two:spawn",
            "acme.two:retire",
            "acme.one:retire"
        ]
    );
    assert!(!home.exists());

    let cases = [
        (json!([]), "not an object"),
        (json!(null), "not an object"),
        (json!({"ACME_SESSION": 7}), "not a string"),
        (json!({"ACME_SESSION": "a\nb"}), "NUL, CR or LF"),
        (json!({"ACME_SESSION": "a\rb"}), "NUL, CR or LF"),
        (json!({"ACME_SESSION": "a\u{0}b"}), "NUL, CR or LF"),
        (json!({"ACME_SESSION": "x".repeat(8193)}), "8192"),
        (
            json!({"ACME_OTHER": "x"}),
            "trusted environment declaration",
        ),
        (json!({"PATH": "/evil"}), "bootstrap"),
        (json!({"OATS_INSTANCE": "x"}), "core launch name"),
        (json!({"NODE_OPTIONS": "--require x"}), "bootstrap"),
        (json!({"JAVA_TOOL_OPTIONS": "x"}), "bootstrap"),
        (json!({"DOTNET_STARTUP_HOOKS": "x"}), "bootstrap"),
        (json!({"GLIBC_TUNABLES": "x"}), "bootstrap"),
        (json!({"ELECTRON_RUN_AS_NODE": "1"}), "bootstrap"),
        (json!({"bad-name": "x"}), "portable"),
        (json!({"OTHER_X": "x"}), "vendor prefix"),
    ];
    for (env, needle) in cases {
        let context = settings(&[("acme.one", json!({"spawnEnv": env}))]);
        let outcome = oats.spawn(&home, &["acme.one"], &context).unwrap();
        let SpawnOutcome::RolledBack { code, failure, .. } = &outcome else {
            panic!("{env}: {outcome:?}");
        };
        assert_eq!(*code, E_HOOK_ENVIRONMENT_CONTRACT, "{env}");
        assert!(failure.contains(needle), "{env}: {failure}");
        assert!(!home.exists(), "{env}: the home was left");
    }

    // A vendor the environment grammar refuses cannot contribute at all.
    capability(&bench, &oats, "acme/slash", |value| {
        value.as_object_mut().unwrap().remove("environment");
        not_required(value);
    });
    let context = settings(&[("acme/slash", json!({"spawnEnv": {"ACME_SESSION": "x"}}))]);
    let outcome = oats.spawn(&home, &["acme/slash"], &context).unwrap();
    assert!(
        matches!(&outcome, SpawnOutcome::RolledBack { code, .. } if *code == E_HOOK_ENVIRONMENT_CONTRACT),
        "{outcome:?}"
    );
}

#[test]
fn incomplete_compensation_quarantines_and_only_a_proven_retry_clears_it() {
    let bench = Bench::new();
    let oats = bench.oats();
    capability(&bench, &oats, "acme.one", not_required);
    capability(&bench, &oats, "acme.two", |_| {});
    let home = home(&bench, "instance-4");
    let context = settings(&[
        ("acme.one", json!({"retire": "not-retired"})),
        ("acme.two", json!({"spawn": "fail", "retire": "fail"})),
    ]);
    let outcome = oats
        .spawn(&home, &["acme.one", "acme.two"], &context)
        .unwrap();
    let SpawnOutcome::Quarantined {
        code,
        failure,
        outstanding,
        marker,
        ..
    } = &outcome
    else {
        panic!("{outcome:?}");
    };
    assert_eq!(*code, E_REQUIRED_HOOK_FAILED);
    assert!(failure.contains("rollback INCOMPLETE"), "{failure}");
    let ids: Vec<&str> = outstanding.iter().map(|o| o.capability.as_str()).collect();
    assert_eq!(ids, ["acme.two", "acme.one"]);
    assert_eq!(outstanding[0].meta["created"], "acme.two");
    assert!(home.is_dir(), "a quarantined home is kept");
    let written: Value = serde_json::from_slice(&std::fs::read(marker).unwrap()).unwrap();
    assert_eq!(written["outstanding"][0]["capability"], "acme.two");
    assert_eq!(written["outstanding"][0]["hook"], "retire");
    assert_eq!(marker, &home.join(QUARANTINE_FILE));

    // A retry where one hook is still failing keeps the quarantine with what remains.
    let retry = settings(&[
        ("acme.one", json!({"retire": "nothing-to-delete"})),
        ("acme.two", json!({"retire": "fail"})),
    ]);
    let outcome = oats.retire(&home, false, &retry).unwrap();
    let RetireOutcome::StillQuarantined { hooks, outstanding } = &outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(order(hooks), ["acme.two:retire", "acme.one:retire"]);
    assert_eq!(outstanding.len(), 1);
    assert_eq!(outstanding[0].capability, "acme.two");
    assert!(home.join(QUARANTINE_FILE).is_file());

    // Only when every outstanding hook runs and proves its cleanup is the home removed; the
    // retried hook gets the original spawn meta.
    let retry = settings(&[("acme.two", json!({"retire": "ok"}))]);
    let outcome = oats.retire(&home, false, &retry).unwrap();
    let RetireOutcome::Cleared { hooks } = &outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(order(hooks), ["acme.two:retire"]);
    assert_eq!(
        hooks[0].meta.as_ref().unwrap()["saw"]["created"],
        "acme.two"
    );
    assert!(!home.exists());
}

#[test]
fn without_a_retire_hook_the_home_stays_quarantined_until_forced() {
    let bench = Bench::new();
    let oats = bench.oats();
    capability(&bench, &oats, "acme.lone", no_retire);
    let home = home(&bench, "instance-5");
    let context = settings(&[("acme.lone", json!({"spawn": "fail"}))]);
    let outcome = oats.spawn(&home, &["acme.lone"], &context).unwrap();
    let SpawnOutcome::Quarantined { outstanding, .. } = &outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(outstanding.len(), 1);
    assert_eq!(outstanding[0].hook, None);
    assert!(outstanding[0].reason.contains("no retire hook"));

    // A retry that can rerun no outstanding hook fails closed.
    let error = oats
        .retire(&home, false, &LifecycleContext::default())
        .unwrap_err();
    assert_eq!(error.code(), "rollback-incomplete");
    assert!(error.message.contains("declares no retire hook"), "{error}");
    assert!(home.join(QUARANTINE_FILE).is_file());

    // force removes the home and says what the operator now owns.
    let outcome = oats
        .retire(&home, true, &LifecycleContext::default())
        .unwrap();
    let RetireOutcome::Forced { outstanding } = &outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(outstanding[0].capability, "acme.lone");
    assert!(!home.exists());

    // A failing required hook that left no meta and has no retire hook owes nothing.
    let context = settings(&[("acme.lone", json!({"spawn": "fail-quiet"}))]);
    let outcome = oats.spawn(&home, &["acme.lone"], &context).unwrap();
    assert!(
        matches!(outcome, SpawnOutcome::RolledBack { .. }),
        "{outcome:?}"
    );
    assert!(!home.exists());
}

#[test]
fn refusals_before_anything_is_created() {
    let bench = Bench::new();
    let oats = bench.oats();
    let dir = capability(&bench, &oats, "acme.one", |_| {});
    // Untrusted with a required hook: refused before the home exists.
    std::fs::write(dir.join("extra.txt"), "x").unwrap();
    oats.register(&dir).unwrap();
    let home = home(&bench, "instance-6");
    let error = oats
        .spawn(&home, &["acme.one"], &LifecycleContext::default())
        .unwrap_err();
    assert_eq!(error.code(), "E_REQUIRED_HOOK_UNTRUSTED");
    assert!(error.message.contains("sf oats trust acme.one"), "{error}");
    assert!(!home.exists());
    // An untrusted advisory hook does not block; its hooks do not run.
    capability(&bench, &oats, "acme.two", not_required);
    let dir_two = bench.root.join("acme.two");
    std::fs::write(dir_two.join("extra.txt"), "x").unwrap();
    oats.register(&dir_two).unwrap();
    let outcome = oats
        .spawn(&home, &["acme.two"], &LifecycleContext::default())
        .unwrap();
    let SpawnOutcome::Spawned {
        hooks, warnings, ..
    } = &outcome
    else {
        panic!("{outcome:?}");
    };
    assert!(hooks.is_empty());
    assert!(
        warnings[0].contains("executable surface disabled"),
        "{warnings:?}"
    );
    // An existing home is not spawned over.
    let error = oats
        .spawn(&home, &["acme.two"], &LifecycleContext::default())
        .unwrap_err();
    assert_eq!(error.code(), "home-unavailable");
    // Its retire hook was never owed (its spawn hook did not run), so retiring does not
    // block on it.
    let outcome = oats
        .retire(&home, false, &LifecycleContext::default())
        .unwrap();
    assert!(
        matches!(&outcome, RetireOutcome::Retired { hooks } if hooks.is_empty()),
        "{outcome:?}"
    );
    assert!(!home.exists());
    // A directory that is neither spawned nor quarantined is never deleted.
    let stranger = bench.root.join("stranger");
    std::fs::create_dir(&stranger).unwrap();
    std::fs::write(stranger.join("keep.txt"), "mine").unwrap();
    let error = oats
        .retire(&stranger, false, &LifecycleContext::default())
        .unwrap_err();
    assert_eq!(error.code(), "E_UNIDENTIFIED_INSTANCE_HOME");
    assert!(stranger.join("keep.txt").is_file());
    // A corrupt marker is not guessed at.
    std::fs::write(stranger.join(QUARANTINE_FILE), "{}").unwrap();
    let error = oats
        .retire(&stranger, false, &LifecycleContext::default())
        .unwrap_err();
    assert_eq!(error.code(), "home-corrupt");
    assert!(stranger.join("keep.txt").is_file());
    // force clears an unusable marker, removing the home.
    let outcome = oats
        .retire(&stranger, true, &LifecycleContext::default())
        .unwrap();
    assert!(
        matches!(outcome, RetireOutcome::Forced { .. }),
        "{outcome:?}"
    );
    assert!(!stranger.exists());
}

#[test]
fn retirement_is_blocked_by_unproven_cleanup_and_scaffold_refuses_env() {
    let bench = Bench::new();
    let oats = bench.oats();
    capability(&bench, &oats, "acme.one", |_| {});
    let home: &Path = &home(&bench, "instance-8");
    let outcome = oats
        .spawn(home, &["acme.one"], &LifecycleContext::default())
        .unwrap();
    assert!(
        matches!(outcome, SpawnOutcome::Spawned { .. }),
        "{outcome:?}"
    );
    let blocked = settings(&[("acme.one", json!({"retire": "not-retired"}))]);
    let outcome = oats.retire(home, false, &blocked).unwrap();
    let RetireOutcome::Blocked { problems, .. } = &outcome else {
        panic!("{outcome:?}");
    };
    assert!(problems[0].contains("incomplete cleanup"), "{problems:?}");
    assert!(home.join(INSTANCE_FILE).is_file(), "the evidence is kept");
    let outcome = oats
        .retire(home, false, &LifecycleContext::default())
        .unwrap();
    assert!(
        matches!(outcome, RetireOutcome::Retired { .. }),
        "{outcome:?}"
    );
    assert!(!home.exists());

    std::fs::create_dir(home).unwrap();
    let results = oats
        .scaffold(home, &["acme.one"], &LifecycleContext::default())
        .unwrap();
    assert_eq!(results.len(), 1);
    assert!(results[0].succeeded, "{results:?}");
    assert_eq!(results[0].event, HookEvent::SoulScaffold);
    assert_eq!(results[0].meta.as_ref().unwrap()["scaffolded"], "acme.one");
    let with_env = settings(&[("acme.one", json!({"scaffold": "env"}))]);
    let results = oats.scaffold(home, &["acme.one"], &with_env).unwrap();
    assert!(!results[0].succeeded);
    assert!(
        results[0].message.contains("supported only for spawn"),
        "{results:?}"
    );
}

#[test]
fn an_environment_failure_with_failing_compensation_quarantines() {
    let bench = Bench::new();
    let oats = bench.oats();
    capability(&bench, &oats, "acme.one", not_required);
    let home = home(&bench, "instance-9");
    let context = settings(&[(
        "acme.one",
        json!({"spawnEnv": {"PATH": "/evil"}, "retire": "fail"}),
    )]);
    let outcome = oats.spawn(&home, &["acme.one"], &context).unwrap();
    let SpawnOutcome::Quarantined {
        code, outstanding, ..
    } = &outcome
    else {
        panic!("{outcome:?}");
    };
    assert_eq!(*code, E_HOOK_ENVIRONMENT_CONTRACT);
    assert_eq!(outstanding[0].capability, "acme.one");
    assert!(home.join(QUARANTINE_FILE).is_file());
    // The retry reruns the outstanding retire hook; once it proves cleanup, the home goes.
    let retry = settings(&[("acme.one", json!({"retire": "ok"}))]);
    let outcome = oats.retire(&home, false, &retry).unwrap();
    assert!(
        matches!(outcome, RetireOutcome::Cleared { .. }),
        "{outcome:?}"
    );
    assert!(!home.exists());
}
