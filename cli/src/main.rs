//! The `sf` command line; see `sf --help` and docs/cli.md.

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    sf_cli::main(std::env::args_os())
}
