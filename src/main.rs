//! The `chaos` binary: a thin shell over the library so tests can call everything in-process.

fn main() -> std::process::ExitCode {
    chaos::cli::main()
}
