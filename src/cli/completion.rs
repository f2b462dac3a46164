//! `faultline completion SHELL`: the shell completion script, generated from the command
//! line's own definition so it always knows every command and flag.

use clap::CommandFactory;
use clap_complete::Shell;

use super::{Cli, EXIT_OK};

/// Prints the completion script for `shell` to stdout.
pub(super) fn completion(shell: Shell) -> i32 {
    let mut command = Cli::command();
    clap_complete::generate(shell, &mut command, "faultline", &mut std::io::stdout());
    EXIT_OK
}
