//! What the release pinned: the digest of every file the Job runs from, checked before
//! anything runs.
//!
//! The Job runs what its ConfigMaps hold (experiments with their command templates and
//! `undo:` commands, the inventory with its `maxNodesDown` and `allowedContexts`), with
//! the actor's powers, and through the API transport as root on the nodes. `update
//! configmaps` is part of Kubernetes' usual `edit` role; the Job's own spec is not what a
//! ConfigMap editor can change. So the chart writes into the Job's spec, at `helm install`
//! or `upgrade`, the SHA-256 of every file of those ConfigMaps (`FAULTLINE_PINNED`), and
//! the Job refuses to run when what is mounted differs: a file changed, added or taken
//! away since the release. Only a new release changes what the Job runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The files a release pinned, by path under the mount root (`experiments/NAME`), each
/// with its digest (`sha256:HEX`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Pins(BTreeMap<String, String>);

/// Why what is mounted is not what the release pinned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PinError {
    /// A line of the pins is not `PATH sha256:HEX`.
    #[error(
        "the release's pins (FAULTLINE_PINNED), line {line}: `{text}` is not `PATH sha256:HEX`"
    )]
    Malformed {
        /// Its number, from 1.
        line: usize,
        /// What it says.
        text: String,
    },
    /// A mounted file differs from its pin.
    #[error(
        "{path}: not what the release pinned ({pinned} pinned, {found} mounted): its \
         ConfigMap was changed after `helm install`/`upgrade`. Nothing is run; only a new \
         release changes what this Job runs"
    )]
    Changed {
        /// The file.
        path: String,
        /// Its pin.
        pinned: String,
        /// Its digest now.
        found: String,
    },
    /// A mounted file has no pin.
    #[error(
        "{0}: mounted but not pinned by the release: its ConfigMap was changed after `helm \
         install`/`upgrade`. Nothing is run; only a new release changes what this Job runs"
    )]
    Added(String),
    /// A pinned file is not mounted.
    #[error(
        "{0}: pinned by the release but not mounted: its ConfigMap was changed after `helm \
         install`/`upgrade`. Nothing is run"
    )]
    Missing(String),
    /// A mounted file cannot be read.
    #[error("{path}: cannot be read to check its pin: {error}")]
    Unreadable {
        /// The file.
        path: String,
        /// Why.
        error: String,
    },
}

impl Pins {
    /// Reads `PATH sha256:HEX` lines (blank lines skipped).
    pub(crate) fn parse(text: &str) -> Result<Pins, PinError> {
        let mut pins = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let malformed = || PinError::Malformed {
                line: i + 1,
                text: line.to_string(),
            };
            let (path, digest) = line.rsplit_once(' ').ok_or_else(malformed)?;
            let hex = digest.strip_prefix("sha256:").ok_or_else(malformed)?;
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(malformed());
            }
            pins.insert(path.trim().to_string(), digest.to_ascii_lowercase());
        }
        Ok(Pins(pins))
    }

    /// How many files are pinned.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Checks every file under `root/DIR` for each of `dirs` (a ConfigMap mount: its
    /// `..data` bookkeeping left out) against the pins: the same files, the same bytes.
    pub(crate) fn verify(&self, root: &Path, dirs: &[&str]) -> Result<(), PinError> {
        let mut mounted = BTreeMap::new();
        for dir in dirs {
            for (path, file) in files_in(root, dir)? {
                let bytes = std::fs::read(&file).map_err(|e| PinError::Unreadable {
                    path: path.clone(),
                    error: e.to_string(),
                })?;
                mounted.insert(path, digest(&bytes));
            }
        }
        for (path, found) in &mounted {
            match self.0.get(path) {
                None => return Err(PinError::Added(path.clone())),
                Some(pinned) if pinned != found => {
                    return Err(PinError::Changed {
                        path: path.clone(),
                        pinned: pinned.clone(),
                        found: found.clone(),
                    });
                }
                Some(_) => {}
            }
        }
        let under = |p: &str| dirs.iter().any(|d| p.starts_with(&format!("{d}/")));
        if let Some(path) = self
            .0
            .keys()
            .find(|p| under(p) && !mounted.contains_key(*p))
        {
            return Err(PinError::Missing(path.clone()));
        }
        Ok(())
    }
}

/// `sha256:HEX` of `bytes`.
pub(crate) fn digest(bytes: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    let hex: String = d.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The files of a ConfigMap mounted at `root/dir`, as `dir/NAME` → path: its keys are
/// symbolic links into `..data`, which (with the timestamped directory behind it) is left
/// out.
fn files_in(root: &Path, dir: &str) -> Result<Vec<(String, PathBuf)>, PinError> {
    let at = root.join(dir);
    let entries = match std::fs::read_dir(&at) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(PinError::Unreadable {
                path: dir.to_string(),
                error: e.to_string(),
            });
        }
    };
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("..") {
            continue;
        }
        let path = entry.path();
        if path.is_file() {
            files.push((format!("{dir}/{name}"), path));
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ConfigMap mount as the kubelet makes it: files behind `..data`.
    fn mount(root: &Path, dir: &str, files: &[(&str, &str)]) {
        let data = root.join(dir).join("..2026_12_07_00_00_00.1");
        std::fs::create_dir_all(&data).expect("mkdir");
        for (name, text) in files {
            std::fs::write(data.join(name), text).expect("write");
        }
        std::os::unix::fs::symlink("..2026_12_07_00_00_00.1", root.join(dir).join("..data"))
            .expect("link");
        for (name, _) in files {
            std::os::unix::fs::symlink(format!("..data/{name}"), root.join(dir).join(name))
                .expect("link");
        }
    }

    fn pins_of(files: &[(&str, &str)]) -> Pins {
        Pins::parse(
            &files
                .iter()
                .map(|(p, t)| format!("{p} {}\n", digest(t.as_bytes())))
                .collect::<String>(),
        )
        .expect("pins")
    }

    #[test]
    fn the_digest_is_sha256_as_helm_writes_it() {
        // `helm template` with `{{ "abc" | sha256sum }}` gives this.
        assert_eq!(
            digest(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    /// Issue 69, item 4: anyone who may edit ConfigMaps in the release's namespace could
    /// change what the Job runs with the actor's powers. Now the mounted files must be
    /// the release's, byte for byte.
    #[test]
    fn a_changed_added_or_removed_file_is_refused_and_the_release_s_own_pass() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let exp = ("experiments/drain.yaml", "name: drain\n");
        let inv = ("inventory/inventory.yaml", "cluster: {name: in-cluster}\n");
        mount(root, "experiments", &[("drain.yaml", exp.1)]);
        mount(root, "inventory", &[("inventory.yaml", inv.1)]);
        let dirs = ["experiments", "manifests", "inventory"];
        assert_eq!(pins_of(&[exp, inv]).verify(root, &dirs), Ok(()));
        // Changed after the release.
        let changed = pins_of(&[("experiments/drain.yaml", "name: other\n"), inv]);
        assert!(matches!(
            changed.verify(root, &dirs),
            Err(PinError::Changed { path, .. }) if path == "experiments/drain.yaml"
        ));
        // A file added to a ConfigMap, or one taken away.
        assert_eq!(
            pins_of(&[inv]).verify(root, &dirs),
            Err(PinError::Added("experiments/drain.yaml".into()))
        );
        let more = pins_of(&[exp, inv, ("manifests/web.yaml", "kind: Deployment\n")]);
        assert_eq!(
            more.verify(root, &dirs),
            Err(PinError::Missing("manifests/web.yaml".into()))
        );
    }

    #[test]
    fn malformed_pins_name_their_line() {
        assert!(matches!(
            Pins::parse("experiments/a.yaml sha256:abc\n"),
            Err(PinError::Malformed { line: 1, .. })
        ));
        assert!(matches!(
            Pins::parse("\nexperiments/a.yaml md5:00\n"),
            Err(PinError::Malformed { line: 2, .. })
        ));
        assert_eq!(Pins::parse("\n\n").expect("empty").len(), 0);
    }
}
