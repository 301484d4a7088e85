//! `sf-oats`: the `sf oats` commands as a program of their own (`sf oats …` runs it). See
//! `sf-oats --help` and docs/oats.md.

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    sf_oats_cli::main()
}
