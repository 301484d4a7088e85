//! The ObjectStore through sf's configuration: git-cli resolved from `sf.toml` through its
//! typetag registration (statically linked) passes the conformance suite, and plugins check
//! their own configuration sections. git-cli's own crate runs the suite against the linked
//! backend and the loaded plugin library (plugins/git-cli/tests/conformance.rs), the example
//! plugin's crate against its library.

use sf_host::plugin::{Config, ConfigOrigin, PluginObjectStoreFactory, PluginPath, load};
use sf_test_support::object_store::{PrivateDirHarness, SymbolicRefs};
use sf_tests::plugins::built;

/// git-cli resolved from `[object_store] type = "git-cli"` through its typetag registration.
fn configured_git_cli() -> PrivateDirHarness {
    // This test links sf-tests' registration of sf-git-cli, which makes "git-cli" a
    // compiled-in tag here: the configuration resolves to the static backend without any
    // plugin path.
    let _linked = sf_tests::linked::LinkedGitCli::default();
    assert!(
        sf_host::plugin::compiled_object_store_tags().contains(&"git-cli"),
        "git-cli is registered with typetag"
    );
    let config = Config::parse(
        "[object_store]\ntype = \"git-cli\"\n",
        ConfigOrigin::File("test.toml".into()),
    )
    .unwrap();
    let factory = config
        .object_store(&PluginPath::new([]))
        .unwrap_or_else(|error| panic!("{error}"));
    PrivateDirHarness::new(factory, SymbolicRefs::LooseFiles)
}

mod git_cli_resolved_from_configuration {
    sf_sdk::object_store_conformance!(super::configured_git_cli);
}

#[test]
fn plugin_configuration_is_checked_by_the_plugin() {
    let plugin = load(&built().git_cli).unwrap();
    let mut config = serde_json::Map::new();
    config.insert("gti".into(), serde_json::Value::from("/usr/bin/git"));
    let error = PluginObjectStoreFactory::new(&plugin, "git-cli", &config).unwrap_err();
    assert_eq!(error.code(), "plugin-refused", "{error}");
    assert!(error.to_string().contains("gti"), "{error}");
    let dynamic = Config::parse(
        "[object_store]\ntype = \"example-memory\"\nsize = 1\n",
        ConfigOrigin::File("test.toml".into()),
    )
    .unwrap()
    .object_store(&PluginPath::new([built().dir.clone()]))
    .err()
    .expect("an unknown field is refused");
    // Through sf.toml, a field the plugin refuses is the configuration's fault.
    assert_eq!(dynamic.code(), "config-invalid", "{dynamic}");
    assert!(
        dynamic.to_string().contains("(invalid-config)"),
        "{dynamic}"
    );
}
