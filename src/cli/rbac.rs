//! `faultline rbac [EXPERIMENT…] [--role observer|actor] [-o manifests|values] [--nodes A,B]`: the RBAC
//! rules of faultline's ServiceAccounts, generated from the fault table, to apply or to
//! pass to the Helm chart.

use std::path::{Path, PathBuf};

use super::{EXIT_ERROR, EXIT_OK, NamespaceArg, RbacOutput};
use crate::rbac::{self, RbacRole};

/// Prints the rules; exit 2 when the experiments cannot be read or a setup manifest's kind
/// is not known offline.
pub(super) fn rbac(
    paths: &[PathBuf],
    role: Option<RbacRole>,
    (output, namespaces_exist): (RbacOutput, bool),
    (name, namespace): (&str, &NamespaceArg),
    (inventory, only_nodes): (Option<&Path>, &[String]),
) -> i32 {
    if let Some(bad) = only_nodes.iter().find(|n| !rbac::is_node_name(n)) {
        fail!(
            "--nodes: `{bad}` is not a node name (lower-case letters, digits, \
             `-` and `.`, at most 253 characters)"
        );
        return EXIT_ERROR;
    }
    let inventory = match inventory.map(crate::inventory::Inventory::load).transpose() {
        Ok(inv) => inv,
        Err(e) => {
            fail!("{e}");
            return EXIT_ERROR;
        }
    };
    let roles = match role {
        Some(r) => vec![r],
        None => vec![RbacRole::Observer, RbacRole::Actor],
    };
    let experiments = if paths.is_empty() {
        if roles.contains(&RbacRole::Actor) {
            fail!("the actor's rules depend on the experiments; name them (or --role observer)");
            return EXIT_ERROR;
        }
        Vec::new()
    } else {
        match super::load_experiments_in(paths, namespace) {
            Some(e) => e,
            None => return EXIT_ERROR,
        }
    };
    // The chart creates the setup's namespaces and the node-access pods' before faultline
    // runs (so may the user: `--namespaces-exist`): the actor holds no `create` for them.
    let mut created_for_it = Vec::new();
    if namespaces_exist {
        for exp in &experiments {
            match rbac::kinds::setup_namespaces(exp) {
                Ok(ns) => created_for_it.extend(ns),
                Err(e) => {
                    fail!("{e}");
                    return EXIT_ERROR;
                }
            }
        }
    }
    let node_access = inventory
        .as_ref()
        .map(rbac::node_access_namespaces)
        .unwrap_or_default();
    let mut grants = Vec::new();
    for r in roles {
        let made = if namespaces_exist {
            [created_for_it.clone(), node_access.clone()].concat()
        } else {
            Vec::new()
        };
        match rbac::grants(r, &experiments, inventory.as_ref(), &made, only_nodes) {
            Ok(g) => grants.push((r, g)),
            Err(e) => {
                fail!("{e}");
                return EXIT_ERROR;
            }
        }
    }
    match output {
        RbacOutput::Manifests => {
            for (r, g) in &grants {
                print!("{}", rbac::manifests(name, *r, g));
            }
        }
        RbacOutput::Values => {
            let grace = (!experiments.is_empty()).then(|| crate::run::grace::needed(&experiments));
            print!(
                "{}",
                rbac::values(
                    &grants,
                    &created_for_it,
                    &node_access,
                    grace.as_ref().map(|g| (g.seconds, g.because.as_str()))
                )
            );
        }
    }
    EXIT_OK
}
