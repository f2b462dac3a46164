//! The `faultline` binary: logging setup and the command line; everything else is in the library.

use clap::Parser;

/// With the `heap-samples` feature, every allocation is counted (`faultline::heap_samples`).
#[cfg(feature = "heap-samples")]
#[global_allocator]
static HEAP: faultline::heap_samples::Counting = faultline::heap_samples::Counting;

fn main() {
    // Before any thread exists (issue 29: per-thread arenas doubled the RSS).
    faultline::allocator::limit_arenas();
    #[cfg(feature = "heap-samples")]
    faultline::heap_samples::start_from_env();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // A warning written while undoing, to a stderr that is gone (a closed `| tee`, a
        // terminal that hung up), is dropped: by default the subscriber would report the
        // failed write with `eprintln!`, which panics on that same stderr.
        .log_internal_errors(false)
        // Colour only on a terminal: CI logs and captured output stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FAULTLINE_LOG")
                // kube's client logs every failed request at ERROR; a request that fails on
                // one API endpoint and is retried on another is not an error to the user, and
                // failures faultline cannot recover from are reported by faultline itself.
                .unwrap_or_else(|_| {
                    tracing_subscriber::EnvFilter::new("warn,kube_client::client::builder=off")
                }),
        )
        .init();
    tracing::debug!("faultline {} starting", env!("CARGO_PKG_VERSION"));
    let cli = faultline::cli::Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(faultline::cli::EXIT_ERROR);
        }
    };
    let code = runtime.block_on(faultline::cli::main(cli));
    std::process::exit(code);
}
