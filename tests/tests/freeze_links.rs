//! A symbolic link planted at any path `sf slice freeze` writes (the frozen directory, each
//! frozen record, the state directory, the snapshot store, a snapshot's name) makes the
//! freeze fail naming the path, and nothing is written where the link points.

mod land_support;

use land_support::*;

#[test]
fn a_link_at_any_path_freeze_writes_is_refused_and_nothing_is_written_outside() {
    let work = Work::unfrozen();
    // What a snapshot of the `numbers` input is stored under (from a freeze elsewhere).
    work.author_slice("reference", &[]);
    let reference = work.freeze("reference");
    let numbers = reference.result()["inputs"]["numbers"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_owned();
    let outside = work.dir.join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("recipe.json"), "outside bytes").unwrap();
    for (link, target_is_dir) in [
        ("frozen", true),
        ("frozen/recipe.json", false),
        ("frozen/slice.json", false),
        ("state", true),
        ("state/snapshots", true),
        (&*format!("state/snapshots/{numbers}"), false),
    ] {
        let slice = work.author_slice("linked", &[]);
        let at = slice.join(link);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        if link.starts_with("state") {
            // The state directory and the store are private, as freeze makes them.
            for dir in ["state", "state/snapshots"] {
                if slice.join(dir) != at && at.starts_with(slice.join(dir)) {
                    std::fs::set_permissions(
                        slice.join(dir),
                        std::os::unix::fs::PermissionsExt::from_mode(0o700),
                    )
                    .unwrap();
                }
            }
        }
        let target = if target_is_dir {
            outside.clone()
        } else {
            outside.join("recipe.json")
        };
        std::os::unix::fs::symlink(&target, &at).unwrap();
        let before = sf_tests::tree_hash(&outside);
        let refused = work.freeze("linked");
        assert_eq!(refused.json["ok"], false, "{link}: {}", refused.json);
        let message = refused.json["error"]["message"].as_str().unwrap();
        assert!(message.contains(link), "{link}: {message}");
        assert_eq!(
            sf_tests::tree_hash(&outside),
            before,
            "{link}: something was written through the link"
        );
        assert_eq!(
            std::fs::read(outside.join("recipe.json")).unwrap(),
            b"outside bytes"
        );
        std::fs::remove_dir_all(&slice).unwrap();
    }
}
