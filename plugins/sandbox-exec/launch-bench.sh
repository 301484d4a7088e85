#!/usr/bin/env bash
# The launch benchmark of issue #5, with its setup: installs bubblewrap when it is missing
# (Debian's apt, as root), builds the release binaries, and prints the medians and ratios of
# /bin/true bare, under unshare, under bubblewrap and under sandbox-exec.
#
#   plugins/sandbox-exec/launch-bench.sh [ROUNDS]      (default 300)
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v bwrap >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null
    else
        echo "bubblewrap is not installed (apt-get install bubblewrap); its row is skipped" >&2
    fi
fi
cargo build --release -p sf-sandbox-exec --bins --examples
target_dir="${CARGO_TARGET_DIR:-target}"
exec "$target_dir/release/examples/launch_bench" "${1:-300}"
