//! `faultline init`: a first experiment for one kind of fault, written from a commented
//! template, so that a new user starts from a file that validates and says what to fill in
//! instead of from a blank page or a copy of the lab's experiments (which apply the lab's
//! own manifests).

use std::io::Write as _;
use std::path::Path;

use clap::ValueEnum;

use super::{EXIT_ERROR, EXIT_OK};

/// The kinds of fault `init` has a template for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Starter {
    /// Stop a worker's kubelet and start it again before the pods' toleration.
    KubeletStop,
    /// Reboot a worker.
    Reboot,
    /// Power a worker off past the pods' toleration, then on (needs a power driver).
    PowerOff,
    /// Cut a worker off from the API server, then heal it.
    Partition,
    /// Drain a worker through the eviction API, then uncordon it.
    Drain,
}

impl Starter {
    /// Every template.
    #[cfg(test)]
    pub(crate) const ALL: [Starter; 5] = [
        Starter::KubeletStop,
        Starter::Reboot,
        Starter::PowerOff,
        Starter::Partition,
        Starter::Drain,
    ];

    /// The template's text: a valid experiment with TODOs where the user's cluster differs.
    pub(crate) fn template(self) -> &'static str {
        match self {
            Starter::KubeletStop => include_str!("init_templates/kubelet-stop.yaml"),
            Starter::Reboot => include_str!("init_templates/reboot.yaml"),
            Starter::PowerOff => include_str!("init_templates/power-off.yaml"),
            Starter::Partition => include_str!("init_templates/partition.yaml"),
            Starter::Drain => include_str!("init_templates/drain.yaml"),
        }
    }
}

/// Writes the template of `starter` to `out` (never over an existing file), or to stdout
/// without one; then says on stderr what to do next.
pub(super) fn init(starter: Starter, out: Option<&Path>) -> i32 {
    let text = starter.template();
    let Some(path) = out else {
        // A closed pipe (`| head`) is not an error worth a message.
        let _ = std::io::stdout().write_all(text.as_bytes());
        return EXIT_OK;
    };
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    match created {
        Ok(()) => {
            say_err!(
                "wrote {p}; fill in its TODOs, then:\n  faultline validate {p}\n  \
                 faultline plan {p} -i INVENTORY\n  faultline run {p} -i INVENTORY",
                p = path.display()
            );
            EXIT_OK
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            fail!(
                "{} exists; init never overwrites a file (give another name)",
                path.display()
            );
            EXIT_ERROR
        }
        Err(e) => {
            fail!("cannot write {}: {e}", path.display());
            EXIT_ERROR
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_is_a_valid_experiment_with_no_warning() {
        for starter in Starter::ALL {
            let name = starter
                .to_possible_value()
                .expect("named")
                .get_name()
                .to_string();
            let checked =
                crate::experiment::check(starter.template(), Path::new(&format!("{name}.yaml")));
            let exp = checked.result.unwrap_or_else(|d| panic!("{name}: {d}"));
            assert!(checked.warnings.is_empty(), "{name}: {}", checked.warnings);
            assert_eq!(exp.name, format!("my-{name}"));
            assert!(starter.template().contains("TODO"), "{name}");
        }
    }

    #[test]
    fn init_writes_a_new_file_and_never_overwrites_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mine.yaml");
        assert_eq!(init(Starter::Reboot, Some(&path)), EXIT_OK);
        assert_eq!(
            std::fs::read_to_string(&path).expect("written"),
            Starter::Reboot.template()
        );
        std::fs::write(&path, "mine").expect("edit");
        assert_eq!(init(Starter::Drain, Some(&path)), EXIT_ERROR);
        assert_eq!(std::fs::read_to_string(&path).expect("kept"), "mine");
    }
}
