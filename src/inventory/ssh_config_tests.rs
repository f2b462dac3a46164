//! `~/.ssh/config` and jump hosts as the inventory reads them.

use std::path::{Path, PathBuf};

use super::jump::{parse_chain, parse_hop};
use super::ssh_config::{SshConfigFile, TokenError, Tokens, expand_tokens};
use super::*;

fn parse(text: &str) -> Result<Inventory, InventoryError> {
    Inventory::parse(text, Path::new("inv.yaml"))
}

/// A temporary ssh config with `text`, and a key file `key` next to it.
struct Config {
    dir: tempfile::TempDir,
}

impl Config {
    fn new(text: &str) -> Config {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = text.replace("DIR", &dir.path().display().to_string());
        std::fs::write(dir.path().join("config"), text).expect("write config");
        std::fs::write(dir.path().join("key-bastion"), "").expect("key");
        Config { dir }
    }
    fn path(&self) -> PathBuf {
        self.dir.path().join("config")
    }
    /// An inventory using this config, with `ssh` lines (top level) and `nodes` as given.
    fn inventory(&self, ssh: &str, nodes: &str) -> Result<Inventory, InventoryError> {
        let text = format!(
            "cluster: {{name: c}}\nssh:\n  config: {}\n{ssh}nodes:\n{nodes}",
            self.path().display()
        );
        Inventory::parse(&text, Path::new("inv.yaml"))
    }
}

const ALIASES: &str = "\
# as people have it
Host web1 web2
    HostName %h.corp.example
    User deploy
    Port 2200
    IdentityFile DIR/key-%r-%h
    IdentityFile DIR/key-bastion

Host bastion
    HostName 192.0.2.10
    User jumper
    IdentityFile DIR/key-bastion
    StrictHostKeyChecking no

Host 10.1.*.* !10.1.0.99
    ProxyJump bastion
    User ops

Host db?
    ProxyJump admin@gw1:2222,gw2
    UserKnownHostsFile /dev/null

Host *
    User fallback
    Port 22
";

#[test]
fn host_aliases_give_host_name_user_port_and_identity_with_tokens() {
    let c = Config::new(ALIASES);
    let inv = c
        .inventory("", "  - {name: web-1, address: web1}\n")
        .expect("valid");
    let n = inv.node("web-1").expect("node");
    assert_eq!(n.address, "web1", "the address stays as written");
    assert_eq!(n.ssh.host_name.as_deref(), Some("web1.corp.example"));
    assert_eq!(
        n.ssh.user, "deploy",
        "first value obtained wins over Host *"
    );
    assert_eq!(n.ssh.port, 2200);
    // key-deploy-web1.corp.example does not exist: the first one that does is used.
    assert_eq!(
        n.ssh.identity_file,
        Some(c.dir.path().join("key-bastion")),
        "first existing IdentityFile"
    );
    assert_eq!(n.ssh.config, Some(c.path()));
    assert!(n.ssh.jump.is_empty());
}

#[test]
fn the_inventory_wins_over_the_ssh_config_field_by_field() {
    let c = Config::new(ALIASES);
    let inv = c
        .inventory(
            "  user: root\n",
            "  - {name: web-1, address: web1, ssh: {port: 22, identityFile: /k}}\n",
        )
        .expect("valid");
    let n = inv.node("web-1").expect("node");
    assert_eq!(n.ssh.user, "root");
    assert_eq!(n.ssh.port, 22);
    assert_eq!(n.ssh.identity_file.as_deref(), Some(Path::new("/k")));
    assert_eq!(
        n.ssh.host_name.as_deref(),
        Some("web1.corp.example"),
        "HostName still maps the alias"
    );
}

#[test]
fn patterns_negation_and_proxy_jump_resolve_the_jump_host_through_its_own_entry() {
    let c = Config::new(ALIASES);
    let inv = c
        .inventory(
            "",
            "  - {name: n1, address: 10.1.2.3}\n  - {name: n2, address: 10.1.0.99}\n",
        )
        .expect("valid");
    let n1 = inv.node("n1").expect("n1");
    assert_eq!(n1.ssh.user, "ops");
    assert_eq!(
        n1.ssh.jump,
        vec![JumpHost {
            name: "bastion".into(),
            host: "192.0.2.10".into(),
            port: 22,
            user: "jumper".into(),
            identity_file: Some(c.dir.path().join("key-bastion")),
        }]
    );
    let n2 = inv.node("n2").expect("n2");
    assert!(n2.ssh.jump.is_empty(), "negated pattern: {:?}", n2.ssh.jump);
    assert_eq!(n2.ssh.user, "fallback");
}

#[test]
fn a_jump_chain_keeps_the_user_and_port_written_in_it() {
    let c = Config::new(ALIASES);
    let inv = c
        .inventory("  user: me\n", "  - {name: n1, address: db1}\n")
        .expect("valid");
    let jump: Vec<(String, u16, String)> = inv
        .node("n1")
        .expect("n1")
        .ssh
        .jump
        .into_iter()
        .map(|j| (j.host, j.port, j.user))
        .collect();
    assert_eq!(
        jump,
        [
            ("gw1".to_string(), 2222, "admin".to_string()),
            ("gw2".to_string(), 22, "fallback".to_string()),
        ],
        "gw2 has no User of its own but `Host *` gives one"
    );
}

#[test]
fn nothing_in_the_config_weakens_host_key_checking() {
    let c = Config::new(ALIASES);
    let file = SshConfigFile::load(&c.path()).expect("parses");
    let bastion = file.lookup("bastion");
    assert!(
        bastion
            .warnings
            .iter()
            .any(|w| w.contains("StrictHostKeyChecking no") && w.contains("ignored")),
        "{:?}",
        bastion.warnings
    );
    let db = file.lookup("db1");
    assert_eq!(db.known_hosts, None, "/dev/null is not taken");
    assert!(db.warnings.iter().any(|w| w.contains("/dev/null")));
    // And the inventory still verifies: the flag stays off.
    let inv = c
        .inventory("", "  - {name: n1, address: bastion}\n")
        .expect("valid");
    assert!(!inv.node("n1").unwrap().ssh.insecure_ignore_host_keys);
}

#[test]
fn inventory_jump_overrides_proxy_jump_and_none_turns_it_off() {
    let c = Config::new(ALIASES);
    let inv = c
        .inventory(
            "  jump: ssh://root@[2001:db8::1]:2022\n",
            "  - {name: n1, address: 10.1.2.3}\n  - {name: n2, address: 10.1.2.4, ssh: {jump: none}}\n",
        )
        .expect("valid");
    let j = &inv.node("n1").unwrap().ssh.jump;
    assert_eq!(j.len(), 1);
    assert_eq!(
        (j[0].host.as_str(), j[0].port, j[0].user.as_str()),
        ("2001:db8::1", 2022, "root")
    );
    assert!(inv.node("n2").unwrap().ssh.jump.is_empty());
}

#[test]
fn a_jump_host_without_config_inherits_the_node_user_and_key() {
    let inv = parse(
        "cluster: {name: c}\nssh: {config: none, user: core, identityFile: /keys/id, jump: gw:2200}\n\
         nodes: [{name: n1, address: 10.0.0.1}]\n",
    )
    .expect("valid");
    let n = inv.node("n1").unwrap();
    assert_eq!(n.ssh.config, None);
    assert_eq!(
        n.ssh.jump,
        vec![JumpHost {
            name: "gw:2200".into(),
            host: "gw".into(),
            port: 2200,
            user: "core".into(),
            identity_file: Some("/keys/id".into()),
        }]
    );
}

#[test]
fn a_proxy_jump_loop_is_an_error_not_a_hang() {
    let c = Config::new("Host a\n  ProxyJump b\nHost b\n  ProxyJump a\n");
    let err = c
        .inventory("", "  - {name: n1, address: a}\n")
        .expect_err("loop");
    assert!(err.to_string().contains("loop"), "{err}");
}

#[test]
fn match_blocks_are_skipped_not_applied_to_the_host_before_them() {
    let c = Config::new(
        "Host web\n  User a\nMatch exec \"true\"\n  User b\n  Port 2\nMatch all\n  Port 3\n",
    );
    let file = SshConfigFile::load(&c.path()).expect("parses");
    let e = file.lookup("web");
    assert_eq!(e.user.as_deref(), Some("a"));
    assert_eq!(e.port, Some(3), "`Match all` applies to every host");
    assert_eq!(file.lookup("other").user, None);
}

#[test]
fn config_errors_name_the_file_and_line() {
    let c = Config::new("Host a\n  User x\n  Port notaport\n");
    let err = c
        .inventory("", "  - {name: n1, address: a}\n")
        .expect_err("bad port");
    let text = err.to_string();
    assert!(
        text.contains(&format!("{}:3:", c.path().display())),
        "{text}"
    );
    let missing =
        parse("cluster: {name: c}\nssh: {config: /nonexistent/ssh_config}\nnodes: [{name: n1}]\n")
            .expect_err("missing");
    assert!(
        missing.to_string().contains("/nonexistent/ssh_config"),
        "{missing}"
    );
}

#[test]
fn exec_nodes_never_read_the_ssh_config() {
    let inv = parse(
        "cluster: {name: c}\nprofile: kind\nssh: {config: /nonexistent/ssh_config}\nnodes: [{name: n1}]\n",
    )
    .expect("an exec node has no use for it");
    assert_eq!(inv.node("n1").unwrap().ssh.config, None);
}

#[test]
fn jump_text_is_read_as_ssh_reads_it() {
    let hop = parse_hop("ssh://u@h:2").unwrap();
    assert_eq!(
        (hop.user.as_deref(), hop.host.as_str(), hop.port),
        (Some("u"), "h", Some(2))
    );
    let hop = parse_hop("[::1]").unwrap();
    assert_eq!((hop.host.as_str(), hop.port), ("::1", None));
    assert!(parse_chain("none").unwrap().is_empty());
    assert_eq!(parse_chain("a, b:3").unwrap().len(), 2);
    for bad in ["h:0", "h:x", "@h", "", "a b", "[::1"] {
        assert!(parse_hop(bad).is_err(), "{bad}");
    }
}

#[test]
fn identity_tokens_expand_and_unknown_ones_are_errors() {
    let t = Tokens {
        host: "10.0.0.1",
        original: "web",
        user: "ops",
        port: 22,
    };
    assert_eq!(
        expand_tokens("/k/%r@%h:%p-%n-%%", &t).unwrap(),
        "/k/ops@10.0.0.1:22-web-%"
    );
    let unknown = expand_tokens("/k/%C", &t).unwrap_err();
    assert_eq!(
        unknown,
        TokenError::Unknown {
            token: 'C',
            value: "/k/%C".into()
        }
    );
    assert!(unknown.to_string().contains("%C"));
}
