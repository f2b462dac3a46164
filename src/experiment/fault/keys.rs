//! The inventory's keys for carrying faults out: `commands.<key>` (shell text run on the
//! node) and `power.<key>` (argv run where faultline runs), one row per key.
//!
//! The inventory parses, merges and looks up both through these tables, the executor and
//! `doctor` name them from here, and each fault operation ([`NodeOp`], [`PowerAction`])
//! says which key carries it out: a new operation is one row here and its profiles'
//! commands, not a field in four structs.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer};

use super::{NodeOp, PowerAction};

/// A table of configuration keys: every row, each with the one spelling the inventory uses.
pub trait KeyTable: Copy + Ord + 'static {
    /// Every key, in the order messages list them.
    const ALL: &'static [Self];
    /// The section these keys live in (`commands`, `power`).
    const SECTION: &'static str;
    /// The key's spelling in the inventory (`kubeletStop`).
    fn name(self) -> &'static str;

    /// The key as an inventory path, for messages (`commands.kubeletStop`).
    fn path(self) -> String {
        format!("{}.{}", Self::SECTION, self.name())
    }

    /// The key spelled `name`.
    fn named(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|k| k.name() == name)
    }
}

/// A shell command the inventory configures for a node (`commands.<key>`), run on the
/// node over its transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CommandKey {
    /// Stop the kubelet (or the service hosting it).
    KubeletStop,
    /// Start it again.
    KubeletStart,
    /// Restart it.
    KubeletRestart,
    /// Report whether it runs (the exit code carries the answer).
    KubeletStatus,
    /// Reboot the node.
    Reboot,
    /// Power the node off from inside.
    PowerOff,
    /// Cut the node off from the API server.
    Partition,
    /// Undo `partition`.
    Heal,
    /// Print the systemd properties of the unit that runs the kubelet
    /// (`systemctl show -p Id,LoadState,ActiveState,Restart kubelet`), for `doctor`.
    KubeletUnit,
    /// Print an identifier of the node's current boot (a reboot is confirmed when it
    /// changes); unset: the built-in [`crate::execute::DEFAULT_BOOT_ID`].
    BootId,
}

impl KeyTable for CommandKey {
    const ALL: &'static [CommandKey] = &[
        CommandKey::KubeletStop,
        CommandKey::KubeletStart,
        CommandKey::KubeletRestart,
        CommandKey::KubeletStatus,
        CommandKey::Reboot,
        CommandKey::PowerOff,
        CommandKey::Partition,
        CommandKey::Heal,
        CommandKey::KubeletUnit,
        CommandKey::BootId,
    ];
    const SECTION: &'static str = "commands";

    fn name(self) -> &'static str {
        match self {
            CommandKey::KubeletStop => "kubeletStop",
            CommandKey::KubeletStart => "kubeletStart",
            CommandKey::KubeletRestart => "kubeletRestart",
            CommandKey::KubeletStatus => "kubeletStatus",
            CommandKey::Reboot => "reboot",
            CommandKey::PowerOff => "powerOff",
            CommandKey::Partition => "partition",
            CommandKey::Heal => "heal",
            CommandKey::KubeletUnit => "kubeletUnit",
            CommandKey::BootId => "bootId",
        }
    }
}

/// An out-of-band power command the inventory configures (`power.<key>`), an argv run
/// where faultline runs (a BMC, a hypervisor, Docker).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PowerKey {
    /// Turn the node on: the only way back from a power-off.
    On,
    /// Turn the node off.
    Off,
    /// Print the power state (`on`/`off`).
    Status,
    /// Reboot the node from outside, returning once it runs again (`docker restart`,
    /// `virsh reboot`). Preferred over the in-band `commands.reboot` when set: a node whose
    /// in-band reboot only stops it (a kind or k3d container) would otherwise stay down.
    Reboot,
    /// Print the node machine's current network address(es). A run compares it before
    /// the first fault and after the node comes back: Docker may hand a restarted kind or
    /// k3d node container another address, which breaks the cluster in ways that would
    /// otherwise look like a failed expectation.
    Address,
}

impl KeyTable for PowerKey {
    const ALL: &'static [PowerKey] = &[
        PowerKey::On,
        PowerKey::Off,
        PowerKey::Status,
        PowerKey::Reboot,
        PowerKey::Address,
    ];
    const SECTION: &'static str = "power";

    fn name(self) -> &'static str {
        match self {
            PowerKey::On => "on",
            PowerKey::Off => "off",
            PowerKey::Status => "status",
            PowerKey::Reboot => "reboot",
            PowerKey::Address => "address",
        }
    }
}

/// Where the shell text of a node operation comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeCommand<'a> {
    /// The inventory's command for this key.
    Configured(CommandKey),
    /// Written in the experiment (a `run` step's command).
    Written(&'a str),
}

impl NodeOp {
    /// Where this operation's shell text comes from.
    pub fn command(&self) -> NodeCommand<'_> {
        NodeCommand::Configured(match self {
            NodeOp::KubeletStop => CommandKey::KubeletStop,
            NodeOp::KubeletStart => CommandKey::KubeletStart,
            NodeOp::KubeletRestart => CommandKey::KubeletRestart,
            NodeOp::KubeletStatus => CommandKey::KubeletStatus,
            NodeOp::Reboot => CommandKey::Reboot,
            NodeOp::PowerOff => CommandKey::PowerOff,
            NodeOp::Partition => CommandKey::Partition,
            NodeOp::Heal => CommandKey::Heal,
            NodeOp::BootId => CommandKey::BootId,
            NodeOp::Run(text) => return NodeCommand::Written(text),
        })
    }

    /// The inventory command that carries this operation out; `None` for a step's own
    /// command (`run`).
    pub fn command_key(&self) -> Option<CommandKey> {
        match self.command() {
            NodeCommand::Configured(key) => Some(key),
            NodeCommand::Written(_) => None,
        }
    }

    /// Where this operation's command comes from, for messages.
    pub(crate) fn source(&self) -> String {
        self.command_key()
            .map_or_else(|| "a `run` step's command".to_string(), CommandKey::path)
    }
}

impl PowerAction {
    /// The inventory's power command that carries this action out.
    pub fn key(self) -> PowerKey {
        match self {
            PowerAction::On => PowerKey::On,
            PowerAction::Off => PowerKey::Off,
            PowerAction::Status => PowerKey::Status,
            PowerAction::Reboot => PowerKey::Reboot,
        }
    }
}

/// Values configured per key of a table: `commands:` or `power:` of one layer of an
/// inventory (top level, node, profile), or of a node with its layers merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configured<K: KeyTable, V>(BTreeMap<K, V>);

impl<K: KeyTable, V> Default for Configured<K, V> {
    fn default() -> Self {
        Configured(BTreeMap::new())
    }
}

impl<K: KeyTable, V: Clone> Configured<K, V> {
    /// The value set for `key`, if any layer set one.
    pub fn get(&self, key: K) -> Option<&V> {
        self.0.get(&key)
    }

    /// Whether `key` is set.
    pub fn has(&self, key: K) -> bool {
        self.0.contains_key(&key)
    }

    /// Sets `key` (tests, discovery).
    pub fn set(&mut self, key: K, value: V) {
        self.0.insert(key, value);
    }

    /// Every key set, with its value.
    pub fn iter(&self) -> impl Iterator<Item = (K, &V)> {
        self.0.iter().map(|(k, v)| (*k, v))
    }

    /// Each key from the first layer (most specific first) that sets it.
    pub fn merged<'a>(layers: impl IntoIterator<Item = Option<&'a Self>>) -> Self
    where
        K: 'a,
        V: 'a,
    {
        let mut out = BTreeMap::new();
        for layer in layers.into_iter().flatten() {
            for (k, v) in &layer.0 {
                out.entry(*k).or_insert_with(|| v.clone());
            }
        }
        Configured(out)
    }
}

impl<K: KeyTable, V> FromIterator<(K, V)> for Configured<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Configured(iter.into_iter().collect())
    }
}

/// Reads a key by its table spelling; anything else is an error that lists the table and
/// the closest spelling.
fn key_from_str<'de, K: KeyTable, D: Deserializer<'de>>(d: D) -> Result<K, D::Error> {
    let name = String::deserialize(d)?;
    K::named(&name).ok_or_else(|| {
        let names: Vec<&str> = K::ALL.iter().map(|k| k.name()).collect();
        let hint = crate::experiment::suggest::closest(&name, &names)
            .map(|c| format!("did you mean `{c}`? "))
            .unwrap_or_default();
        serde::de::Error::custom(format!(
            "unknown key `{}` in `{}`: {hint}expected one of {}",
            name.escape_debug(),
            K::SECTION,
            names.join(", ")
        ))
    })
}

impl<'de> Deserialize<'de> for CommandKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        key_from_str(d)
    }
}

impl<'de> Deserialize<'de> for PowerKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        key_from_str(d)
    }
}

impl<'de, K, V> Deserialize<'de> for Configured<K, V>
where
    K: KeyTable + Deserialize<'de>,
    V: Deserialize<'de>,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        BTreeMap::<K, V>::deserialize(d).map(Configured)
    }
}

impl fmt::Display for CommandKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.path())
    }
}

impl fmt::Display for PowerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_has_one_spelling_that_reads_back() {
        fn check<K: KeyTable + std::fmt::Debug>() {
            let mut names: Vec<&str> = K::ALL.iter().map(|k| k.name()).collect();
            for k in K::ALL {
                assert_eq!(K::named(k.name()), Some(*k));
            }
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), K::ALL.len(), "a spelling used twice");
        }
        check::<CommandKey>();
        check::<PowerKey>();
    }

    #[test]
    fn every_node_operation_but_run_has_its_command_and_every_power_action_its_key() {
        use NodeOp::*;
        for op in [
            KubeletStop,
            KubeletStart,
            KubeletRestart,
            KubeletStatus,
            Reboot,
            PowerOff,
            Partition,
            Heal,
            BootId,
        ] {
            let key = op.command_key().expect("an inventory command");
            assert_eq!(op.source(), key.path());
        }
        assert_eq!(Run("true".into()).command_key(), None);
        for a in [
            PowerAction::On,
            PowerAction::Off,
            PowerAction::Status,
            PowerAction::Reboot,
        ] {
            assert_eq!(PowerKey::named(a.key().name()), Some(a.key()));
        }
    }

    #[test]
    fn layers_merge_key_by_key_most_specific_first() {
        let node: Configured<CommandKey, String> =
            [(CommandKey::KubeletStop, "node stop".to_string())]
                .into_iter()
                .collect();
        let top: Configured<CommandKey, String> = [
            (CommandKey::KubeletStop, "top stop".to_string()),
            (CommandKey::Heal, "top heal".to_string()),
        ]
        .into_iter()
        .collect();
        let merged = Configured::merged([Some(&node), None, Some(&top)]);
        assert_eq!(merged.get(CommandKey::KubeletStop).unwrap(), "node stop");
        assert_eq!(merged.get(CommandKey::Heal).unwrap(), "top heal");
        assert!(!merged.has(CommandKey::Reboot));
    }

    #[test]
    fn an_unknown_key_is_refused_with_the_closest_spelling() {
        let err = serde_saphyr::from_str::<Configured<CommandKey, String>>(
            "kubeletStop: a\nkubletStart: b\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("unknown key `kubletStart` in `commands`"),
            "{err}"
        );
        assert!(err.contains("did you mean `kubeletStart`"), "{err}");
        assert!(err.contains("line 2"), "{err}");
        let ok =
            serde_saphyr::from_str::<Configured<PowerKey, Vec<String>>>("on: [a, b]\n").unwrap();
        assert_eq!(ok.get(PowerKey::On).unwrap(), &["a", "b"]);
    }
}
