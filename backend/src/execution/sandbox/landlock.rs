//! The Landlock layer of the sandbox, applied inside it: after bwrap has made the namespaces
//! and mounts (Landlock forbids mounting, so it cannot come first), a helper restricts itself
//! and becomes the command. The helper is Hero's own executable started as
//! `hero __hero-landlock PROGRAM ARGS…` ([`main_if_asked`], the first thing `main` does),
//! bound read-only into the sandbox at [`INSIDE`] and always started with [`ARG`] first;
//! tests use the `hero-landlock` binary of this crate, which takes the same arguments.
//!
//! The rules: `/usr`, `/etc` and `/proc` (and a plugin's `/plugin`) may be read and
//! executed, `/dev` read and written (its devices only; nothing may be made there),
//! `/workspace` and `/tmp` (and a plugin's `/state`) used freely; (a path the sandbox does
//! not show gets no rule);
//! directories may be listed; nothing else of the file system may be read or changed. No TCP bind or connect. Signals and abstract
//! unix sockets reach only processes of the same sandbox. Should the rules fail to apply,
//! the helper exits (126) instead of running the command: it fails closed.

use std::ffi::OsString;

use landlock::{
    ABI, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError,
    RulesetStatus, Scope, path_beneath_rules,
};

/// The argument that makes Hero's executable the helper.
pub const ARG: &str = "__hero-landlock";

/// Where the helper is bound inside the sandbox.
pub const INSIDE: &str = "/.hero-landlock";

/// The helper's answer to `--probe`: how much of the rules the kernel enforces.
pub const PROBE: &str = "--probe";

/// How the helper ended, for its `main` to print and exit with: on success it has become
/// the command, so only a probe's answer or a failure comes back.
#[derive(Debug, PartialEq, Eq)]
pub struct Exit {
    pub code: i32,
    /// For stdout (the probe's answer).
    pub out: Option<&'static str>,
    /// For stderr: why the command did not run.
    pub err: Option<String>,
}

impl Exit {
    fn failed(code: i32, why: String) -> Exit {
        Exit {
            code,
            out: None,
            err: Some(format!("hero sandbox: {why}")),
        }
    }

    /// Prints what the helper has to say and ends the process.
    pub fn finish(self) -> ! {
        use std::io::Write;
        if let Some(o) = self.out {
            let _ = writeln!(std::io::stdout(), "{o}");
        }
        if let Some(e) = self.err {
            let _ = writeln!(std::io::stderr(), "{e}");
        }
        std::process::exit(self.code)
    }
}

/// If this process was started as the helper, restricts itself and becomes the command (or
/// answers the probe); then this never returns. Otherwise it returns at once.
pub fn main_if_asked() {
    let mut args = std::env::args_os().skip(1);
    if args.next().is_none_or(|a| a != ARG) {
        return;
    }
    helper(args.collect()).finish();
}

/// The helper's body: restrict, then exec `argv` (or answer `--probe`).
pub fn helper(argv: Vec<OsString>) -> Exit {
    let status = match restrict() {
        Ok(RulesetStatus::NotEnforced) => {
            return Exit::failed(
                126,
                "this kernel enforces no Landlock rules; not running".into(),
            );
        }
        Ok(s) => s,
        Err(e) => {
            return Exit::failed(126, format!("the Landlock rules could not be applied: {e}"));
        }
    };
    let Some(program) = argv.first() else {
        return Exit::failed(126, "no command".into());
    };
    if program == PROBE {
        return Exit {
            code: 0,
            out: Some(if status == RulesetStatus::FullyEnforced {
                "full"
            } else {
                "partial"
            }),
            err: None,
        };
    }
    use std::os::unix::process::CommandExt;
    let err = std::process::Command::new(program).args(&argv[1..]).exec();
    Exit::failed(127, format!("{}: {err}", program.to_string_lossy()))
}

/// Restricts this process (and what it executes) to the rules above.
fn restrict() -> Result<RulesetStatus, RulesetError> {
    // The newest ABI this crate knows; an older kernel enforces what it can (best effort).
    let abi = ABI::V6;
    let read = AccessFs::from_read(abi);
    let existing = |paths: &'static [&'static str]| {
        paths
            .iter()
            .copied()
            .filter(|p| std::path::Path::new(p).exists())
    };
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))?
        .handle_access(AccessNet::from_all(abi))?
        .scope(Scope::from_all(abi))?
        .create()?
        // Directories may be listed anywhere (bwrap shows little): `ls /` works.
        .add_rules(path_beneath_rules(["/"], AccessFs::ReadDir))?
        .add_rules(path_beneath_rules(
            existing(&["/usr", "/etc", "/proc", "/plugin"]),
            read,
        ))?
        .add_rules(path_beneath_rules(
            existing(&["/dev"]),
            read | AccessFs::WriteFile | AccessFs::IoctlDev,
        ))?
        .add_rules(path_beneath_rules(
            existing(&["/workspace", "/tmp", "/state"]),
            AccessFs::from_all(abi),
        ))?
        // The helper itself (bound at INSIDE) needs nothing more once it has exec'd.
        .restrict_self()?;
    Ok(status.ruleset)
}
