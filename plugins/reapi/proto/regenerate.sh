#!/usr/bin/env bash
# Regenerates ../src/generated/ (the Remote Workers API v1test2, which bazel-remote-apis does
# not include) from the buildgrid wheel on PyPI, with no protoc: the wheel's compiled
# descriptors are extracted to remoteworkers.fds (extract.py), and tonic-prost-build writes
# the Rust from them (generate/). Needs the venv .ci/buildgrid-venv makes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${1:-$here/../../../target/buildgrid-venv}"
"$venv/bin/python" "$here/extract.py" "$here/remoteworkers.fds"
cargo run --quiet --manifest-path "$here/generate/Cargo.toml" --target-dir "$here/../../../target/proto-generate" -- \
  "$here/remoteworkers.fds" "$here/../src/generated"
