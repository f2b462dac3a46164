//! faultline's integration tests that need no cluster, in one test binary: the reporters,
//! the judge, the experiment and inventory files, the CLI, SSH against a real sshd on
//! loopback, the Helm chart. One binary rather than one per file: each test crate is built in
//! release (`ci/test` builds everything once, in release, for the end-to-end stages) and
//! linked against the whole library, and on a fresh 2-core machine 26 of them took most of
//! the build. The tests that need a cluster (`lab`, `kind`, `lab_doctor`, `observe_lab`,
//! `observe_gap_lab`, `discover_docker`, `soak`) stay binaries of their own, so that `ci/test`
//! can build and run them apart.

#[path = "../judge_support/mod.rs"]
mod judge_support;
#[path = "../records_support/mod.rs"]
mod records_support;
#[path = "../sshd_support/mod.rs"]
mod sshd_support;

mod cli;
mod cli_flags;
mod compare;
mod compare_cli;
mod doctor_ssh;
mod execute_primed;
mod execute_primed_local;
mod execute_ssh;
mod experiment_invalid_corpus;
mod experiment_model;
mod experiment_probes;
mod experiment_valid;
mod first_hour_cli;
mod helm;
mod job;
mod judge_figures;
mod judge_incremental;
mod judge_probes;
mod judge_verdicts;
mod observe_gap;
mod offline_cli;
mod plan_rehearse_json;
mod plan_roll_model;
mod rehearse_records;
mod report_html;
mod report_html_glance;
mod report_json;
mod report_junit;
mod report_markdown;
mod report_roll;
mod report_terminal;
mod report_timers;
mod restore_json;
mod time_zero;
mod tour;
mod validate_one_pass;
