//! `sudo` on the node: how a command is put under it, where its password comes from,
//! and what its refusals mean, so that a node that will not run faultline's commands as
//! root says why and how to mend it.

use crate::inventory::SshSettings;

use super::error::ExecError;
use super::render::{self, RenderError};
use super::ssh::{Secret, SshEnd, SshTarget};

/// `command` put under `sudo` as the node's SSH settings ask: as it is without `sudo`;
/// `sudo -n` when no password is given; `sudo -S` reading the password from standard
/// input otherwise.
pub(super) fn wrap(settings: &SshSettings, command: String) -> Result<String, RenderError> {
    Ok(match (settings.sudo, &settings.sudo_password_env) {
        (false, _) => command,
        (true, None) => format!("sudo -n sh -c {}", render::quote(&command)?),
        // The password arrives on stdin; the command itself gets /dev/null, so it cannot
        // read the password when sudo asked for none.
        (true, Some(_)) => format!(
            "sudo -S -p '' sh -c {}",
            render::quote(&format!("exec </dev/null; {command}"))?
        ),
    })
}

/// The sudo password for a node whose commands run through `sudo -S`, read from its
/// variable now (never stored).
pub(super) fn sudo_password(node: &str, target: &SshTarget) -> Result<Option<Secret>, ExecError> {
    let s = &target.settings;
    let (true, Some(var)) = (s.sudo, &s.sudo_password_env) else {
        return Ok(None);
    };
    match std::env::var(var) {
        Ok(pw) => Ok(Some(Secret(pw))),
        Err(_) => Err(ExecError::Sudo {
            node: node.into(),
            user: s.user.clone(),
            problem: format!("needs the password from ${var}, which is not set"),
            hint: format!("export {var} before running faultline"),
        }),
    }
}

/// Reads sudo's own complaint (exit 1, English messages) out of a command's output.
pub(super) fn sudo_refused(
    node: &str,
    user: &str,
    var: Option<&str>,
    output: &str,
) -> Option<ExecError> {
    let said = |what: &str| {
        output
            .lines()
            .any(|l| l.starts_with("sudo:") && l.contains(what))
    };
    let nopasswd = format!(
        "allow it without a password (a sudoers line such as `{user} ALL=(ALL) NOPASSWD: ALL`, \
         or only for the commands faultline runs) or set ssh.sudoPasswordEnv to the name of an \
         environment variable holding the password"
    );
    let (problem, hint) = if said("is not in the sudoers file") || said("is not allowed to") {
        (
            "is not allowed".to_string(),
            format!("give `{user}` sudo rights on the node, or log in as root"),
        )
    } else if var.is_none()
        && (said("a password is required")
            || said("a terminal is required")
            || said("no tty present"))
    {
        (
            "requires a password (sudo -n would have prompted)".to_string(),
            nopasswd,
        )
    } else if let Some(var) = var
        && (said("incorrect password") || said("no password was provided"))
    {
        (
            format!("refused the password from ${var}"),
            format!("check the password in ${var}"),
        )
    } else {
        return None;
    };
    Some(ExecError::Sudo {
        node: node.into(),
        user: user.into(),
        problem,
        hint,
    })
}

/// Who an SSH command runs as under `sudo`, kept while it runs to read sudo's refusal in
/// its output afterwards.
pub(super) struct SudoLogin {
    /// The login user.
    user: String,
    /// The variable the sudo password is read from, if one is given.
    password_env: Option<String>,
}

impl SudoLogin {
    /// The login of `target` when its commands run under `sudo`.
    pub(super) fn of(target: &SshTarget) -> Option<SudoLogin> {
        target.settings.sudo.then(|| SudoLogin {
            user: target.settings.user.clone(),
            password_env: target.settings.sudo_password_env.clone(),
        })
    }

    /// sudo's refusal of a command on `node` that ended as `end`: only an exit 1 can be.
    pub(super) fn refusal(&self, node: &str, end: &SshEnd) -> Option<ExecError> {
        let SshEnd::Exited {
            code: Some(1),
            output,
        } = end
        else {
            return None;
        };
        sudo_refused(node, &self.user, self.password_env.as_deref(), output)
    }
}
