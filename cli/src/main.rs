//! The `sf` command line; see `sf --help` and docs/cli.md.

fn main() -> std::process::ExitCode {
    sf_cli::main(std::env::args_os())
}
