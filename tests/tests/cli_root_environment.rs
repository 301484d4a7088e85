//! A whole root as a dependency environment, through the `sf` binary: a root file system (the
//! shape debootstrap makes: merged /usr, a setuid program, a sticky /tmp, device nodes under
//! /dev) added with `sf env add --root`, named by a command check, and run as the check's
//! whole root. The run sees the root's own files and the sandbox's (/sf, /proc, /dev), none of
//! the runtime's host files, no setuid bit and no entry of the root's /dev; the root is
//! read-only. A check run on such a root is judged like any other; a root changed in the
//! store is `corrupt` and runs nothing.

mod land_support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use land_support::{Public, Work, write};
use sf_host::canonical::Digest;

/// Copies the host file `path` into `root` at the same path, recreating every symbolic link
/// met on the way (with its target text), as a root made for this machine has them.
fn copy_into_root(root: &Path, path: &Path) {
    let mut host = PathBuf::from("/");
    let mut components: Vec<PathBuf> = path
        .components()
        .skip(1)
        .map(|component| PathBuf::from(component.as_os_str()))
        .collect();
    components.reverse();
    let mut hops = 0;
    while let Some(component) = components.pop() {
        let next = host.join(&component);
        let inside = root.join(next.strip_prefix("/").unwrap());
        let metadata = std::fs::symlink_metadata(&next).unwrap();
        if metadata.file_type().is_symlink() {
            hops += 1;
            assert!(hops < 40, "too many links resolving {}", path.display());
            let target = std::fs::read_link(&next).unwrap();
            if std::fs::symlink_metadata(&inside).is_err() {
                std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
                std::os::unix::fs::symlink(&target, &inside).unwrap();
            }
            let rest: Vec<PathBuf> = target
                .components()
                .filter(|component| !matches!(component, std::path::Component::RootDir))
                .map(|component| PathBuf::from(component.as_os_str()))
                .collect();
            if target.is_absolute() {
                host = PathBuf::from("/");
            }
            components.extend(rest.into_iter().rev());
        } else if component == Path::new("..") {
            host.pop();
        } else if metadata.is_dir() {
            std::fs::create_dir_all(&inside).unwrap();
            host = next;
        } else {
            std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
            std::fs::copy(&next, &inside).unwrap();
            host = next;
        }
    }
}

/// The shared libraries `ldd` lists for `program`, and its ELF interpreter.
fn libraries(program: &Path) -> Vec<PathBuf> {
    let output = std::process::Command::new("ldd")
        .arg(program)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "ldd {}: {output:?}",
        program.display()
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .split_whitespace()
        .filter(|word| word.starts_with('/'))
        .map(PathBuf::from)
        .collect()
}

/// A small root of this machine's programs, laid out as debootstrap lays out a Debian root:
/// `/bin/sh` and `/bin/cat` with their libraries (through the merged-/usr links), an
/// `/etc/os-release` of its own, a setuid `cat`, a sticky `/tmp`, and entries under `dev/`,
/// `proc/` and `sf/` that a root environment never keeps.
fn small_root(public: &Public) -> PathBuf {
    let root = public.path().join("root");
    std::fs::create_dir(&root).unwrap();
    for program in ["/bin/sh", "/bin/cat"] {
        copy_into_root(&root, Path::new(program));
        for library in libraries(Path::new(program)) {
            copy_into_root(&root, &library);
        }
    }
    write(
        &root.join("etc/os-release"),
        "ID=sf-test-root\nNAME=\"a root made by the test\"\n",
    );
    let cat = std::fs::canonicalize(root.join("bin/cat")).unwrap();
    std::fs::set_permissions(&cat, std::fs::Permissions::from_mode(0o4755)).unwrap();
    std::fs::create_dir(root.join("tmp")).unwrap();
    std::fs::set_permissions(root.join("tmp"), std::fs::Permissions::from_mode(0o1777)).unwrap();
    write(&root.join("dev/marker"), "never copied\n");
    write(&root.join("sf/marker"), "never copied\n");
    std::fs::create_dir(root.join("proc")).unwrap();
    root
}

/// Freezes the Slice `name` (the sample project's scope) with one command check, `argv` run
/// from `cwd` in the environment `environment`, expected to exit 0 printing `stdout`; seals
/// the fix of the sample project for it and returns what the judge says of it.
fn judged_with(
    work: &Work,
    name: &str,
    argv: &[&str],
    cwd: &str,
    environment: &str,
    stdout: &str,
) -> (String, serde_json::Value) {
    let slice = work.author_slice(name, &[]);
    write(
        &slice.join("slice.json"),
        r#"{"id":"rooted","revision":1,"scope":["sum.sh","tests"],"protected":["tests/numbers.sh"]}"#,
    );
    write(
        &slice.join("acceptance.json"),
        &serde_json::json!({
            "protocol": "sf-repository-acceptance/3",
            "checks": [{
                "kind": "command", "id": "in-the-root", "phase": "guardrail",
                "stage": "candidate", "argv": argv, "cwd": {"from": cwd, "path": ""},
                "env": {}, "environment": environment, "results": null, "input": "numbers",
                "expectation": {"exitCode": 0,
                                "stdoutDigest": Digest::of(stdout.as_bytes()).to_string()},
            }],
        })
        .to_string(),
    );
    work.sf(&[
        "slice",
        "freeze",
        "--dir",
        name,
        "--identity",
        "identity.json",
    ])
    .result();
    let candidate = work.seal(name, land_support::SUM_FIXED);
    let judged = work.collect_and_judge(&candidate, name);
    (candidate, judged)
}

/// What the check prints when every promise holds, one line each.
const SEEN: &str = "ID=sf-test-root\nno host runtime\nno setuid\nown dev\nown sf\nread-only\n";

#[test]
fn a_whole_root_environment_is_the_runs_root() {
    let public = Public::new();
    let root = small_root(&public);
    let work = Work::new().with_public(&public);

    // Without --root, the setuid program and the sticky directory are refused, as always.
    let refused = work.sf(&["env", "add", "plain", root.to_str().unwrap()]);
    assert_eq!(refused.error_code(), "invalid-input", "{refused:?}");

    // The host's own root is never an environment.
    let host = work.sf(&["env", "add", "--root", "host", "/"]);
    assert_eq!(host.error_code(), "invalid-input", "{host:?}");

    let added = work.sf(&["env", "add", "--root", "small-root", root.to_str().unwrap()]);
    let result = added.result();
    assert_eq!(result["at"], "/", "{result}");
    let digest = result["digest"].as_str().unwrap().to_owned();
    let stored = public.stored_tree(&digest);
    for left_out in ["dev", "proc", "sf"] {
        assert!(
            std::fs::symlink_metadata(stored.join(left_out)).is_err(),
            "{left_out} is not copied"
        );
    }
    assert!(stored.join("tmp").is_dir());

    // The root has no `head`: the script reads the first line itself.
    let script = "head() { read -r line; echo \"$line\"; }\n\
        cat /etc/os-release | head\n\
        [ -e /usr/bin/python3 ] || [ -e /usr/bin/git ] || echo no host runtime\n\
        [ -u /usr/bin/cat ] || echo no setuid\n\
        [ -e /dev/marker ] || [ ! -c /dev/null ] || echo own dev\n\
        [ -e /sf/marker ] || [ ! -d /sf/scratch ] || echo own sf\n\
        (echo x > /etc/written) 2>/dev/null || echo read-only\n";
    let (candidate, judged) = judged_with(
        &work,
        "root-slice",
        &["sh", "-c", script],
        "scratch",
        "small-root",
        SEEN,
    );
    assert_eq!(judged["outcome"], "verified", "{judged}");

    // The stored root changes: nothing runs on it.
    let stored_release = stored.join("etc/os-release");
    std::fs::set_permissions(&stored_release, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&stored_release, "ID=changed\n").unwrap();
    std::fs::set_permissions(&stored_release, std::fs::Permissions::from_mode(0o444)).unwrap();
    let refused = work.sf(&[
        "collect",
        "--identity",
        "identity.json",
        "--candidate",
        &candidate,
        "--slice",
        "root-slice",
    ]);
    assert_eq!(refused.error_code(), "corrupt", "{refused:?}");
}

/// The Debian release the root is made of: the one this machine kind runs.
const DEBIAN_SUITE: &str = "bookworm";
/// Debian's own mirror, when apt names none.
const DEBIAN_MIRROR: &str = "http://deb.debian.org/debian";

/// The mirror apt itself uses for the main archive (the first `URIs:` of a deb822 source
/// ending in `/debian`, or the first `deb` line of sources.list), so the test reaches Debian
/// wherever the machine's apt does; [`DEBIAN_MIRROR`] otherwise.
fn debian_mirror() -> String {
    let deb822 = std::fs::read_to_string("/etc/apt/sources.list.d/debian.sources")
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.strip_prefix("URIs:"))
        .flat_map(str::split_whitespace)
        .find(|uri| uri.trim_end_matches('/').ends_with("/debian"))
        .map(str::to_owned);
    let classic = || {
        std::fs::read_to_string("/etc/apt/sources.list")
            .unwrap_or_default()
            .lines()
            .map(str::split_whitespace)
            .filter_map(|mut words| {
                (words.next() == Some("deb"))
                    .then(|| words.next())
                    .flatten()
            })
            .find(|uri| uri.starts_with("http"))
            .map(str::to_owned)
    };
    deb822
        .or_else(classic)
        .unwrap_or_else(|| DEBIAN_MIRROR.to_owned())
}

#[test]
fn a_debian_root_made_by_debootstrap_is_a_checks_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "debootstrap makes a root as root; the README's test command runs as root"
    );
    let debootstrap = ["/usr/sbin/debootstrap", "/usr/bin/debootstrap"]
        .into_iter()
        .find(|path| Path::new(path).exists())
        .expect("debootstrap is installed (.ci/run installs Debian's debootstrap package)");
    let public = Public::new();
    let root = public.path().join("debian");
    let mirror = debian_mirror();
    let output = std::process::Command::new(debootstrap)
        .args(["--variant=minbase", DEBIAN_SUITE])
        .arg(&root)
        .arg(&mirror)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "debootstrap from {mirror}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let work = Work::new().with_public(&public);
    let added = work.sf(&["env", "add", "--root", "debian", root.to_str().unwrap()]);
    assert_eq!(added.result()["at"], "/");

    // Debian's own programs, reading Debian's own files, and none of the host's.
    let version = std::fs::read_to_string(root.join("etc/debian_version")).unwrap();
    let expected = format!("{version}perl ran\ninstall ok installed\nno host git\n");
    let script = "cat /etc/debian_version\n\
        perl -e 'print qq(perl ran\\n)'\n\
        dpkg-query -W -f '${Status}\\n' dash\n\
        [ -e /usr/local/bin/git ] || echo no host git\n";
    let (_, judged) = judged_with(
        &work,
        "debian-slice",
        &["sh", "-c", script],
        "tree",
        "debian",
        &expected,
    );
    assert_eq!(judged["outcome"], "verified", "{judged}");
}
