//! The sandbox launcher: started by the sandbox-exec supervisor with a plan on its standard
//! input (a socket); builds the sandbox and execs the runtime in it. Not for direct use.

fn main() {
    sf_sandbox_exec::launcher::main()
}
