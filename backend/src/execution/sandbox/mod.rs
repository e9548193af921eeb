//! Commands in a sandbox that fails closed (`bash`). Each run is a bubblewrap (`bwrap`)
//! process in new user, pid, network, ipc, uts and cgroup namespaces, mapped to an
//! unprivileged id with every capability dropped and no new privileges; it sees `/usr`
//! read-only, a fresh `/tmp`, and the user's workspace (`DATA_DIR/workspaces/<user>`,
//! 0700) as `/workspace`, and nothing else of the host: not the data directory, the key, the
//! database, or another user's workspace. It has no network (a network namespace of its
//! own, loopback included). A seccomp filter refuses the system calls a breakout needs
//! (tracing, mounts, modules, keyrings, BPF, perf, namespaces, io_uring). Inside, rlimits
//! bound files, memory, descriptors and CPU time; outside, where the machine has them, a
//! pids and a memory cgroup per run bound processes and memory. Nothing the server holds
//! open reaches the command: every descriptor above 2 is closed before bwrap starts.
//!
//! Inside, a Landlock ruleset ([`landlock`]) limits the file system to what the command may
//! use, forbids TCP and scopes signals and abstract sockets to the sandbox.
//!
//! The layers are probed once, on the first run, and logged. Without bubblewrap working
//! there is no isolating layer, and every run is refused with the reason in one line: a
//! command never runs unsandboxed.
//!
//! At the timeout, or on Stop, the whole tree dies: bwrap is killed (its pid namespace's
//! first process follows it, and with it every process of the namespace, daemonised or
//! not), and so is every process left in the run's cgroup. bwrap is spawned from a thread
//! that lives as long as the server: `--die-with-parent` ties the sandbox to the thread
//! that spawned it, and a pooled thread may end while the command still runs.

use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;

use crate::drive::abort::Abort;

pub mod landlock;
pub mod quota;

/// `nobody`: the host uid the sandbox runs as, by default, under a server run as root.
pub const NOBODY: u32 = 65534;

/// Whether this process runs as root.
pub fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Lets the sandbox's own uid reach the workspaces in `data_dir`: when the server runs as
/// root the sandbox does not, and bubblewrap opens the workspace by its path as that uid,
/// so the data directory becomes searchable (0711: nobody else may list it, and each file
/// in it is its owner's alone). A server that is not root leaves it 0700.
pub fn let_the_sandbox_in(data_dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if running_as_root() {
        std::fs::set_permissions(data_dir, std::fs::Permissions::from_mode(0o711))?;
    }
    Ok(())
}

/// What a run may use.
#[derive(Debug, Clone)]
pub struct SandboxLimits {
    pub default_timeout: Duration,
    pub max_timeout: Duration,
    /// Of stdout and of stderr, each: the rest is read and dropped.
    pub output_bytes: usize,
    pub memory_bytes: u64,
    pub processes: u32,
    /// The largest file a run may write.
    pub file_bytes: u64,
    /// The Landlock helper ([`landlock`]): the server's own executable, or a test's
    /// `hero-landlock`. None: no Landlock layer.
    pub landlock_helper: Option<PathBuf>,
    /// The host uid (and gid) the sandbox runs as when the server runs as root: never root
    /// itself, whose user namespace would map the command's files to root on the host (a
    /// setuid-root file left in a workspace). A server that is not root runs it as itself.
    pub sandbox_uid: u32,
    /// The most a user's workspace may hold on disk ([`quota`]).
    pub quota_bytes: u64,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            default_timeout: Duration::from_secs(30),
            max_timeout: Duration::from_secs(300),
            output_bytes: 64 << 10,
            memory_bytes: 512 << 20,
            processes: 128,
            file_bytes: 64 << 20,
            landlock_helper: None,
            sandbox_uid: NOBODY,
            quota_bytes: 1 << 30,
        }
    }
}

/// The layers this machine allows, found by [`Sandbox::probe`].
#[derive(Debug, Clone)]
pub struct Layers {
    pub bwrap: Option<PathBuf>,
    /// Why bash is refused, when it is.
    pub refused: Option<String>,
    /// `/sys/fs/cgroup/pids` and `/sys/fs/cgroup/memory` (cgroup v1), when they can be used.
    pub cgroups: Option<(PathBuf, PathBuf)>,
    /// The compiled seccomp filter bwrap loads, when this machine takes it.
    pub seccomp: Option<PathBuf>,
    /// The Landlock helper, when its rules hold here, and how fully (`full`, `partial`).
    pub landlock: Option<(PathBuf, String)>,
    /// The kernel counts a user's processes per user namespace (Linux 5.14 and later), so
    /// a run's `ulimit -u` bounds that run alone.
    pub nproc_per_namespace: bool,
}

impl Layers {
    /// One line for the log and the note.
    pub fn describe(&self) -> String {
        match &self.refused {
            Some(why) => format!("bash refused: {why}"),
            None => format!(
                "bubblewrap (user, pid, network, ipc, uts, cgroup namespaces; uid 65534; no capabilities; no new privileges; /usr read-only, workspace the only writable host path), rlimits (files, memory, descriptors, CPU){}{}{}",
                if self.seccomp.is_some() {
                    ", a seccomp filter (ptrace, mount, bpf, keyrings, module and namespace calls refused)"
                } else {
                    "; no seccomp filter (refused here)"
                },
                match (self.cgroups.is_some(), self.nproc_per_namespace) {
                    (true, true) => ", pids and memory cgroups, a process rlimit",
                    (true, false) => ", pids and memory cgroups",
                    (false, true) => "; no cgroups (none usable here), a process rlimit",
                    (false, false) =>
                        "; no cgroups (none usable here), no process bound but the timeout",
                },
                match &self.landlock {
                    Some((_, how)) => format!(
                        ", Landlock ({} enforced: /usr, /etc and /proc read-only, /workspace and /tmp writable, nothing else; no TCP; signals and abstract sockets scoped)",
                        if how == "full" { "fully" } else { "partially" }
                    ),
                    None => "; no Landlock (no helper, or not enforced by this kernel)".to_owned(),
                }
            ),
        }
    }
}

/// The sandbox of `bash`: its workspaces, its limits and (once probed) its layers.
pub struct Sandbox {
    workspaces: PathBuf,
    /// The host uid runs start as when it is not the server's own (the server is root).
    outer_uid: Option<u32>,
    pub limits: SandboxLimits,
    layers: OnceLock<Layers>,
    spawner: OnceLock<Spawner>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The command exited with this status (128 + n for a signal).
    Exited(i32),
    TimedOut,
    Stopped,
    /// Killed when its workspace reached its quota.
    OverQuota,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct Ran {
    pub ended: Ended,
    pub stdout: String,
    pub stderr: String,
    /// Output past [`SandboxLimits::output_bytes`] was dropped.
    pub cut: bool,
    pub took: Duration,
    /// When the first byte of output came, from the start.
    pub first_output: Option<Duration>,
    /// The workspace's quota it ran under.
    pub quota: u64,
}

impl Ran {
    /// The run as the agent and the card read it.
    pub fn report(&self) -> String {
        let how = match self.ended {
            Ended::Exited(c) => format!("exit status {c}"),
            Ended::TimedOut => "killed at its timeout".into(),
            Ended::Stopped => "stopped by the user".into(),
            Ended::OverQuota => format!(
                "ended when the workspace reached its quota ({}): remove files from it before the next command",
                quota::mib(self.quota)
            ),
        };
        let mut out = format!("{how}, after {:.2} s", self.took.as_secs_f64());
        for (name, text) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            if !text.is_empty() {
                out.push_str(&format!("\n--- {name} ---\n{text}"));
                if !text.ends_with('\n') {
                    out.push('\n');
                }
            }
        }
        if self.cut {
            out.push_str("[… output past the limit was dropped]\n");
        }
        out
    }
}

static RUNS: AtomicU64 = AtomicU64::new(0);

/// What runs before bwrap, as `bash -c PRELUDE hero-sandbox PIDS_PROCS MEMORY_PROCS FILTER
/// UID bwrap …`: it joins the run's cgroups, closes every descriptor but 0 to 2, opens the
/// seccomp filter as descriptor 9 (bwrap's `--seccomp 9`), and becomes bwrap, as `UID`
/// (with its own gid and no other group) when one is given: a server run as root drops to
/// it here, after the cgroups (whose files are root's) are joined. A command runs at a
/// lower priority (nice 10) than the server: a user's command does not take the CPU from
/// every other user's requests, and the quota's watchdog is scheduled before the writes it
/// watches.
const PRELUDE: &str = r#"set -e
[ -z "$1" ] || echo $$ > "$1"
[ -z "$2" ] || echo $$ > "$2"
filter="$3"
uid="$4"
shift 4
for fd in /proc/$$/fd/*; do
  fd=${fd##*/}
  if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-" 2>/dev/null || true; fi
done
[ -z "$filter" ] || exec 9<"$filter"
[ -z "$uid" ] || exec /usr/bin/nice -n 10 /usr/bin/setpriv --reuid="$uid" --regid="$uid" --clear-groups "$@"
exec /usr/bin/nice -n 10 "$@""#;

/// The command line up to bwrap itself.
fn prelude(
    pids: String,
    memory: String,
    seccomp: Option<&Path>,
    outer_uid: Option<u32>,
    bwrap: &Path,
) -> Vec<String> {
    vec![
        "/usr/bin/bash".into(),
        "-c".into(),
        PRELUDE.into(),
        "hero-sandbox".into(),
        pids,
        memory,
        seccomp.map(|p| p.display().to_string()).unwrap_or_default(),
        outer_uid.map(|u| u.to_string()).unwrap_or_default(),
        bwrap.display().to_string(),
    ]
}

/// [`Sandbox::workspace`]: `root/<user>`, made 0700, and handed to `outer_uid` if given.
fn make_workspace(root: &Path, outer_uid: Option<u32>, user_id: i64) -> std::io::Result<PathBuf> {
    make_dir_in(root, outer_uid, &user_id.to_string())
}

/// `root/<name>`, made 0700 (and `root` with it), and handed to `outer_uid` if given, with
/// `root` searchable by it.
fn make_dir_in(root: &Path, outer_uid: Option<u32>, name: &str) -> std::io::Result<PathBuf> {
    let dir = root.join(name);
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(&dir)?;
    if let Some(uid) = outer_uid {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        // Root's, and searchable only: the sandbox's uid goes through it to its own.
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o711))?;
        if std::fs::symlink_metadata(&dir)?.uid() != uid {
            hand_over(&dir, uid)?;
        }
    }
    Ok(dir)
}

/// Gives `dir` and everything in it to `uid` (and its gid of the same number), links
/// included and never followed. What is inside first and `dir` itself last: until then the
/// workspace is root's (0700), so no run of the sandbox's uid is in it to swap a directory
/// for a link while root walks it, and a walk cut short is done again at the next use.
fn hand_over(dir: &Path, uid: u32) -> std::io::Result<()> {
    if std::fs::symlink_metadata(dir)?.is_dir() {
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if std::fs::symlink_metadata(&path)?.is_dir() {
                hand_over(&path, uid)?;
            } else {
                std::os::unix::fs::lchown(&path, Some(uid), Some(uid))?;
            }
        }
    }
    std::os::unix::fs::lchown(dir, Some(uid), Some(uid))
}

/// The system calls a command has no use for and a breakout would: tracing, mounts, kernel
/// modules and keyrings, BPF and perf, namespaces, io_uring. Each fails with EPERM. So does
/// any call that would give a file or directory the setuid or setgid bit (a `chmod` of
/// any kind, or a file, directory or node made with one): such a file, left in the
/// workspace, would run as its owner for whoever can reach it on the host.
fn seccomp_filter() -> Result<Vec<u8>, String> {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    let denied = [
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_reboot,
        libc::SYS_kexec_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_acct,
        libc::SYS_quotactl,
        libc::SYS_syslog,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ];
    // Each call that takes a mode, and which argument holds it (fchmodat2 is 452 on every
    // architecture; the calls without `at` exist on x86_64 alone).
    #[allow(unused_mut)]
    let mut mode_at = vec![
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (452, 2),
        (libc::SYS_openat, 3),
        (libc::SYS_mkdirat, 2),
        (libc::SYS_mknodat, 2),
    ];
    #[cfg(target_arch = "x86_64")]
    mode_at.extend([
        (libc::SYS_chmod, 1),
        (libc::SYS_open, 2),
        (libc::SYS_creat, 1),
        (libc::SYS_mkdir, 1),
        (libc::SYS_mknod, 1),
    ]);
    let bit = |arg: u8, bit: u32| -> Result<SeccompRule, String> {
        let c = SeccompCondition::new(
            arg,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(bit.into()),
            bit.into(),
        )
        .map_err(|e| e.to_string())?;
        SeccompRule::new(vec![c]).map_err(|e| e.to_string())
    };
    let mut rules: std::collections::BTreeMap<i64, Vec<SeccompRule>> =
        denied.iter().map(|&n| (n, Vec::new())).collect();
    for (call, arg) in mode_at {
        rules.insert(
            call,
            vec![bit(arg, libc::S_ISUID)?, bit(arg, libc::S_ISGID)?],
        );
    }
    // openat2 takes its mode in a struct the filter cannot read: refused whole (every
    // libc opens files with openat).
    rules.insert(libc::SYS_openat2, Vec::new());
    // What the workspace's quota could not see: blocks allocated past a file's size (which
    // the file-size rlimit does not bound), and files that never have a name.
    let flag = |arg: u8, bits: u64| -> Result<SeccompRule, String> {
        let c = SeccompCondition::new(
            arg,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(bits),
            bits,
        )
        .map_err(|e| e.to_string())?;
        SeccompRule::new(vec![c]).map_err(|e| e.to_string())
    };
    rules.insert(
        libc::SYS_fallocate,
        vec![flag(1, libc::FALLOC_FL_KEEP_SIZE as u64)?],
    );
    // O_TMPFILE is two bits (one of them O_DIRECTORY): both must be set.
    let tmpfile = libc::O_TMPFILE as u32 as u64;
    if let Some(r) = rules.get_mut(&libc::SYS_openat) {
        r.push(flag(2, tmpfile)?);
    }
    #[cfg(target_arch = "x86_64")]
    {
        if let Some(r) = rules.get_mut(&libc::SYS_open) {
            r.push(flag(1, tmpfile)?);
        }
        // The x32 numbers of the same calls (a kernel that has that ABI on takes them).
        const X32: i64 = 0x4000_0000;
        let x32: Vec<(i64, Vec<SeccompRule>)> =
            rules.iter().map(|(n, r)| (n | X32, r.clone())).collect();
        rules.extend(x32);
    }
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    // bwrap reads the program as the kernel takes it: `struct sock_filter`s, native order.
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for ins in program {
        bytes.extend_from_slice(&ins.code.to_ne_bytes());
        bytes.push(ins.jt);
        bytes.push(ins.jf);
        bytes.extend_from_slice(&ins.k.to_ne_bytes());
    }
    Ok(bytes)
}

impl Sandbox {
    pub fn new(workspaces: PathBuf, limits: SandboxLimits) -> Sandbox {
        Sandbox {
            workspaces,
            outer_uid: running_as_root().then_some(limits.sandbox_uid),
            limits,
            layers: OnceLock::new(),
            spawner: OnceLock::new(),
        }
    }

    /// The layers, probed on first use (and logged).
    pub fn layers(&self) -> &Layers {
        self.layers.get_or_init(|| {
            let l = probe(
                &self.workspaces,
                self.limits.landlock_helper.as_deref(),
                self.outer_uid,
            );
            tracing::info!(sandbox = %l.describe(), "sandbox layers for bash");
            l
        })
    }

    /// The host uid a run starts as: the server's own, or [`SandboxLimits::sandbox_uid`]
    /// under a server run as root.
    pub fn outer_uid(&self) -> Option<u32> {
        self.outer_uid
    }

    /// The user's workspace directory on the host (created 0700), owned by the sandbox's
    /// uid: a workspace made while runs were root's is handed over, all of it, at its next
    /// use.
    pub fn workspace(&self, user_id: i64) -> std::io::Result<PathBuf> {
        make_workspace(&self.workspaces, self.outer_uid, user_id)
    }

    /// The layers, if a program may run under them at all (`what` names it in the reason).
    fn usable(&self, what: &str) -> Result<Layers, String> {
        let layers = self.layers().clone();
        if let Some(why) = &layers.refused {
            return Err(format!("{what} cannot run on this server: {why}"));
        }
        // Under a server run as root, the filter is what keeps a setuid file of the
        // sandbox's uid (which every workspace belongs to) out of the workspaces.
        if self.outer_uid.is_some() && layers.seccomp.is_none() {
            return Err(format!(
                "{what} cannot run on this server: its seccomp filter is refused here, and Hero runs as root"
            ));
        }
        Ok(layers)
    }

    /// The rlimits every program starts under, as a shell line: files of `file_bytes` at
    /// most, `cpu_seconds` of CPU time, and the memory, descriptor and (where the kernel
    /// counts them per user namespace) process bounds.
    fn ulimits(&self, layers: &Layers, file_bytes: u64, cpu_seconds: u64) -> String {
        let l = &self.limits;
        // Processes of the sandbox's user in its own namespace: the bound where no cgroup
        // can be made (cgroup v2, or a server without rights to them). Only where the
        // kernel counts them per user namespace: an older one would count every process of
        // the server's own user, and the command could not fork at all.
        let processes = if layers.nproc_per_namespace {
            format!("ulimit -u {}; ", l.processes)
        } else {
            String::new()
        };
        format!(
            "ulimit -c 0; ulimit -f {}; ulimit -n 256; {processes}ulimit -v {}; ulimit -t {cpu_seconds}; ",
            (file_bytes / 1024).max(1),
            (l.memory_bytes * 2) / 1024,
        )
    }

    /// Starts `inner` (a program and its arguments, as the sandbox sees them) in a sandbox
    /// showing `mounts`, in `cwd`, with `home` as `HOME`: in the run's own cgroups (where
    /// the machine has them), every descriptor but 0 to 2 closed, under the filter and the
    /// Landlock helper when they hold here. Its stdin is a pipe when `stdin`.
    async fn spawn_in(
        &self,
        layers: &Layers,
        mounts: &[Mount<'_>],
        cwd: &str,
        home: &str,
        inner: Vec<String>,
        stdin: bool,
    ) -> Result<Running, String> {
        let bwrap = layers.bwrap.clone().expect("probed");
        let run = RUNS.fetch_add(1, Ordering::Relaxed);
        let cgroup = layers
            .cgroups
            .as_ref()
            .and_then(|(p, m)| {
                RunCgroup::new(p, m, run, &self.limits)
                    .inspect_err(|e| {
                        tracing::warn!(error = %e, "a run's cgroups could not be made; it runs with its rlimits alone")
                    })
                    .ok()
            });
        // A shell first, which becomes bwrap: it puts itself in the run's cgroups (nothing of
        // the run starts outside them), and closes every descriptor but 0, 1 and 2, so that
        // nothing the server holds open (or inherited) reaches the command.
        let (pids, memory) = cgroup
            .as_ref()
            .map_or((String::new(), String::new()), |cg| {
                (
                    cg.pids.join("cgroup.procs").display().to_string(),
                    cg.memory.join("cgroup.procs").display().to_string(),
                )
            });
        let mut argv = prelude(
            pids,
            memory,
            layers.seccomp.as_deref(),
            self.outer_uid,
            &bwrap,
        );
        let helper = layers.landlock.as_ref().map(|(h, _)| h.as_path());
        argv.extend(bwrap_args(
            mounts,
            cwd,
            home,
            layers.seccomp.is_some(),
            helper,
        ));
        if helper.is_some() {
            argv.extend([landlock::INSIDE.into(), landlock::ARG.into()]);
        }
        argv.extend(inner);
        let spawned = self
            .spawner
            .get_or_init(Spawner::start)
            .spawn(argv, stdin)
            .await;
        let child = match spawned {
            Ok(child) => child,
            Err(e) => {
                // Nothing ran in the run's cgroups: they go at once.
                if let Some(cg) = &cgroup {
                    cg.remove_now();
                }
                return Err(format!("the sandbox could not start: {e}"));
            }
        };
        Ok(Running { child, cgroup })
    }

    /// Runs `command` in the user's sandbox.
    pub async fn run(
        &self,
        user_id: i64,
        command: &str,
        cwd: Option<&str>,
        timeout: Option<Duration>,
        abort: Option<&Abort>,
    ) -> Result<Ran, String> {
        let layers = self.usable("bash")?;
        let cwd = sandbox_cwd(cwd)?;
        if command.contains('\0') {
            return Err("the command holds a NUL character".into());
        }
        let timeout = timeout
            .unwrap_or(self.limits.default_timeout)
            .min(self.limits.max_timeout);
        let (root, outer) = (self.workspaces.clone(), self.outer_uid);
        let workspace = tokio::task::spawn_blocking(move || make_workspace(&root, outer, user_id))
            .await
            .map_err(std::io::Error::other)
            .and_then(|r| r)
            .map_err(|e| format!("the workspace could not be made: {e}"))?;
        let quota = self.limits.quota_bytes;
        // Measured and watched from before the run starts (none of its writes comes before
        // the watches); the same walk says what the workspace holds.
        let (ws, q) = (workspace.clone(), quota);
        let prepared = tokio::task::spawn_blocking(move || quota::Watchdog::prepare(&ws, q))
            .await
            .map_err(std::io::Error::other)
            .and_then(|r| r)
            .map_err(|e| format!("the workspace's quota cannot be watched here: {e}"))?;
        let used = prepared.used();
        if used >= quota {
            return Err(format!(
                "the workspace holds {} and its quota is {}: no command runs until files are removed from it (the Permissions page can empty it)",
                quota::mib(used),
                quota::mib(quota)
            ));
        }
        // Inside: the rlimits (no one file may take the workspace past its quota), then the
        // command (as bash's own `-c`, verbatim).
        let file_bytes = self.limits.file_bytes.min(quota - used);
        let limits = self.ulimits(&layers, file_bytes, timeout.as_secs() + 1)
            + "exec /usr/bin/bash -c \"$1\"";
        let inner = vec![
            "/usr/bin/bash".into(),
            "-c".into(),
            limits,
            "hero-bash".into(),
            command.to_owned(),
        ];
        let started = Instant::now();
        let mounts = [Mount {
            host: &workspace,
            inside: "/workspace",
            writable: true,
        }];
        // Killed however this future ends: dropped by a Stop included.
        let mut run = self
            .spawn_in(&layers, &mounts, &cwd, "/workspace", inner, false)
            .await?;
        // Fails closed: a run whose workspace cannot be watched does not go on.
        let dog = prepared
            .start(&run.child)
            .map_err(|e| format!("the workspace's quota cannot be watched here: {e}"))?;
        let pipes = (run.child.stdout.take(), run.child.stderr.take());
        let (Some(out), Some(err)) = pipes else {
            return Err("the sandbox's output could not be read".into());
        };
        let out = tokio::process::ChildStdout::from_std(out).map_err(|e| e.to_string())?;
        let err = tokio::process::ChildStderr::from_std(err).map_err(|e| e.to_string())?;
        let first = OnceLock::new();
        let cap = self.limits.output_bytes;
        // Kept outside the futures: a run killed at its timeout keeps what it printed.
        let (kept_out, kept_err) = (
            std::sync::Mutex::new((Vec::new(), false)),
            std::sync::Mutex::new((Vec::new(), false)),
        );
        let reading = async {
            tokio::join!(
                read_capped(out, cap, &kept_out, &first, started),
                read_capped(err, cap, &kept_err, &first, started)
            )
        };
        // The run has ended when both pipes are closed (everything in it that held them has
        // exited) and bwrap has been reaped: looked at from the moment the output ends, so a
        // short command is seen to end at once, not at the next tick of a backoff that began
        // at its spawn (which cost up to half its time).
        let waiting = async {
            let mut pause = Duration::from_millis(1);
            loop {
                if let Ok(Some(status)) = run.child.try_wait() {
                    return status;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(25));
            }
        };
        let stopped = async {
            match abort {
                Some(a) => a.aborted().await,
                None => std::future::pending().await,
            }
        };
        let ended = tokio::select! {
            status = async { reading.await; waiting.await } => {
                use std::os::unix::process::ExitStatusExt;
                Ended::Exited(status.code().or_else(|| status.signal().map(|s| 128 + s)).unwrap_or(-1))
            }
            () = tokio::time::sleep(timeout) => Ended::TimedOut,
            () = stopped => Ended::Stopped,
        };
        let over = tokio::task::spawn_blocking(move || dog.stop())
            .await
            .unwrap_or(false);
        let ended = if over { Ended::OverQuota } else { ended };
        // Whatever is left of the run dies with it: daemonised children included.
        run.kill();
        if let Some(cg) = run.cgroup.take() {
            cg.remove().await;
        }
        let take = |m: std::sync::Mutex<(Vec<u8>, bool)>| {
            m.into_inner().unwrap_or_else(|p| p.into_inner())
        };
        let ((o, oc), (e, ec)) = (take(kept_out), take(kept_err));
        let cut = oc || ec;
        Ok(Ran {
            ended,
            stdout: String::from_utf8_lossy(&o).into_owned(),
            stderr: String::from_utf8_lossy(&e).into_owned(),
            cut,
            took: started.elapsed(),
            first_output: first.get().copied(),
            quota,
        })
    }

    /// Starts a program that runs until it is dropped (a plugin's MCP server, talking on
    /// its stdin and stdout): `code` read-only at `/plugin`, `state` (made 0700, the
    /// sandbox's uid's) writable at `/state`, its working directory and `HOME`, and nothing
    /// else of the host but `/usr`. The same layers as `bash`, and the same bounds but time:
    /// `cpu_seconds` of CPU in all, and `state` held to the workspace quota while it runs.
    pub async fn start(
        &self,
        code: &Path,
        state: &Path,
        argv: Vec<String>,
        cpu_seconds: u64,
    ) -> Result<Program, String> {
        let layers = self.usable("plugins")?;
        let (parent, user) = match (state.parent(), state.file_name()) {
            (Some(p), Some(u)) => (p.to_path_buf(), u.to_string_lossy().into_owned()),
            _ => return Err(format!("{} is no state directory", state.display())),
        };
        let outer = self.outer_uid;
        let quota = self.limits.quota_bytes;
        let prepared = tokio::task::spawn_blocking(move || {
            // Every directory above it made searchable by the sandbox's uid, when that is
            // not the server's: it opens the state directory by its path.
            let mut b = std::fs::DirBuilder::new();
            b.recursive(true);
            std::os::unix::fs::DirBuilderExt::mode(
                &mut b,
                if outer.is_some() { 0o711 } else { 0o700 },
            );
            b.create(&parent)?;
            let dir = make_dir_in(&parent, outer, &user)?;
            quota::Watchdog::prepare(&dir, quota)
        })
        .await
        .map_err(std::io::Error::other)
        .and_then(|r| r)
        .map_err(|e| format!("the plugin's state directory could not be made: {e}"))?;
        let mounts = [
            Mount {
                host: code,
                inside: "/plugin",
                writable: false,
            },
            Mount {
                host: state,
                inside: "/state",
                writable: true,
            },
        ];
        let launch = Launch {
            mounts: &mounts,
            home: "/state",
            argv,
            env: &[],
            cpu_seconds,
        };
        self.launch(&layers, prepared, launch).await
    }

    /// Starts a program of the user's that runs until it is dropped (an MCP server of
    /// theirs, talking on its stdin and stdout) as `bash` runs: the user's workspace
    /// writable at `/workspace` (its working directory and `HOME`, held to its quota), `/usr`
    /// read-only, nothing else of the host, no network. `env` reaches it through its stdin
    /// before anything else, never on a command line (where the host's other users could
    /// read it): each name `[A-Za-z_][A-Za-z0-9_]*`, no value holding a line's end.
    pub async fn start_in_workspace(
        &self,
        user_id: i64,
        argv: Vec<String>,
        env: &[(String, String)],
        cpu_seconds: u64,
    ) -> Result<Program, String> {
        let layers = self.usable("MCP servers")?;
        if let Some((k, _)) = env
            .iter()
            .find(|(k, v)| !valid_env_name(k) || v.contains(['\n', '\r', '\0']))
        {
            return Err(format!("the environment variable {k:?} cannot be passed"));
        }
        let (root, outer) = (self.workspaces.clone(), self.outer_uid);
        let quota = self.limits.quota_bytes;
        let prepared = tokio::task::spawn_blocking(move || {
            let ws = make_workspace(&root, outer, user_id)?;
            quota::Watchdog::prepare(&ws, quota).map(|p| (ws, p))
        })
        .await
        .map_err(std::io::Error::other)
        .and_then(|r| r)
        .map_err(|e| format!("the workspace could not be made: {e}"))?;
        let (workspace, prepared) = prepared;
        let mounts = [Mount {
            host: &workspace,
            inside: "/workspace",
            writable: true,
        }];
        let launch = Launch {
            mounts: &mounts,
            home: "/workspace",
            argv,
            env,
            cpu_seconds,
        };
        self.launch(&layers, prepared, launch).await
    }

    /// Starts what `launch` describes, its first mount's directory watched for its quota
    /// (`prepared`), its environment written to its stdin first.
    async fn launch(
        &self,
        layers: &Layers,
        prepared: quota::Prepared,
        launch: Launch<'_>,
    ) -> Result<Program, String> {
        let Launch {
            mounts,
            home,
            argv,
            env,
            cpu_seconds,
        } = launch;
        if argv.iter().any(|a| a.contains('\0')) {
            return Err("the command holds a NUL character".into());
        }
        let quota = self.limits.quota_bytes;
        let used = prepared.used();
        if used >= quota {
            return Err(format!(
                "its directory holds {} and the quota is {}",
                quota::mib(used),
                quota::mib(quota)
            ));
        }
        // Inside: the rlimits, then the environment read from stdin up to an empty line (a
        // byte at a time: nothing after it is taken from the program), then the program.
        let read_env = if env.is_empty() {
            ""
        } else {
            "while IFS= read -r l && [ -n \"$l\" ]; do export \"$l\"; done; "
        };
        let limits = self.ulimits(
            layers,
            self.limits.file_bytes.min(quota - used),
            cpu_seconds,
        ) + read_env
            + "exec \"$@\"";
        let mut inner = vec![
            "/usr/bin/bash".into(),
            "-c".into(),
            limits,
            "hero-plugin".into(),
        ];
        inner.extend(argv);
        let mut running = self
            .spawn_in(layers, mounts, home, home, inner, true)
            .await?;
        let dog = prepared
            .start(&running.child)
            .map_err(|e| format!("its directory cannot be watched here: {e}"))?;
        let c = &mut running.child;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (c.stdin.take(), c.stdout.take(), c.stderr.take())
        else {
            return Err("the sandbox's pipes could not be opened".into());
        };
        let io = |e: std::io::Error| format!("the sandbox's pipes could not be opened: {e}");
        let mut stdin = tokio::process::ChildStdin::from_std(stdin).map_err(io)?;
        if !env.is_empty() {
            use tokio::io::AsyncWriteExt;
            let mut lines = String::new();
            for (k, v) in env {
                lines.push_str(&format!("{k}={v}\n"));
            }
            lines.push('\n');
            stdin
                .write_all(lines.as_bytes())
                .await
                .map_err(|e| format!("its environment could not be given: {e}"))?;
        }
        Ok(Program {
            stdin: Some(stdin),
            stdout: Some(tokio::process::ChildStdout::from_std(stdout).map_err(io)?),
            stderr: Some(tokio::process::ChildStderr::from_std(stderr).map_err(io)?),
            dog: Some(dog),
            running,
        })
    }

    /// What the user's workspace holds on disk, and its quota.
    pub async fn usage(&self, user_id: i64) -> std::io::Result<(u64, u64)> {
        let dir = self.workspaces.join(user_id.to_string());
        let used = tokio::task::spawn_blocking(move || quota::used(&dir))
            .await
            .map_err(std::io::Error::other)?;
        Ok((used, self.limits.quota_bytes))
    }

    /// Empties the user's workspace (what a user does when it is full: no command runs in
    /// a workspace at its quota).
    pub async fn empty(&self, user_id: i64) -> std::io::Result<()> {
        let dir = self.workspaces.join(user_id.to_string());
        tokio::task::spawn_blocking(move || {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                return Ok(());
            };
            for e in entries {
                let p = e?.path();
                if std::fs::symlink_metadata(&p)?.is_dir() {
                    std::fs::remove_dir_all(&p)?;
                } else {
                    std::fs::remove_file(&p)?;
                }
            }
            Ok(())
        })
        .await
        .map_err(std::io::Error::other)?
    }
}

/// A host directory the sandbox shows, and where.
struct Mount<'a> {
    host: &'a Path,
    inside: &'static str,
    writable: bool,
}

/// The bwrap arguments: namespaces, identity, what of the host is visible.
fn bwrap_args(
    mounts: &[Mount<'_>],
    cwd: &str,
    home: &str,
    seccomp: bool,
    landlock: Option<&Path>,
) -> Vec<String> {
    let mut a: Vec<String> = [
        "--unshare-all",
        "--unshare-user",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--disable-userns",
        "--uid",
        "65534",
        "--gid",
        "65534",
        "--hostname",
        "sandbox",
        "--ro-bind",
        "/usr",
        "/usr",
        "--symlink",
        "usr/bin",
        "/bin",
        "--symlink",
        "usr/lib",
        "/lib",
        "--symlink",
        "usr/lib64",
        "/lib64",
        "--symlink",
        "usr/sbin",
        "/sbin",
        "--ro-bind-try",
        "/etc/alternatives",
        "/etc/alternatives",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/local/bin:/usr/bin:/bin",
        "--setenv",
        "LANG",
        "C.UTF-8",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    a.extend(["--setenv".into(), "HOME".into(), home.to_owned()]);
    if seccomp {
        a.extend(["--seccomp".into(), "9".into()]);
    }
    if let Some(helper) = landlock {
        a.extend([
            "--ro-bind".into(),
            helper.display().to_string(),
            landlock::INSIDE.into(),
        ]);
    }
    for m in mounts {
        a.extend([
            if m.writable { "--bind" } else { "--ro-bind" }.into(),
            m.host.display().to_string(),
            m.inside.into(),
        ]);
    }
    a.extend([
        // The sandbox's own root (a tmpfs bwrap made) read-only too: only the workspace
        // and /tmp take writes.
        "--remount-ro".into(),
        "/".into(),
        "--chdir".into(),
        cwd.to_owned(),
        "--".into(),
    ]);
    a
}

/// The working directory inside the sandbox: `/workspace` by default; a relative path is
/// under it; an absolute one must be under `/workspace` or `/tmp`; no `..`.
pub fn sandbox_cwd(cwd: Option<&str>) -> Result<String, String> {
    let Some(c) = cwd.map(str::trim).filter(|c| !c.is_empty()) else {
        return Ok("/workspace".into());
    };
    if c.contains('\0') || c.len() > 1024 {
        return Err("cwd is not a usable path".into());
    }
    let p = Path::new(c);
    if p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!(
            "cwd {c:?} may not go up with `..`: commands run in the workspace"
        ));
    }
    let full = if p.is_absolute() {
        p.to_path_buf()
    } else {
        Path::new("/workspace").join(p)
    };
    if !(full.starts_with("/workspace") || full.starts_with("/tmp")) {
        return Err(format!(
            "cwd {c:?} is outside the workspace: use a path under /workspace (or /tmp)"
        ));
    }
    Ok(full.display().to_string())
}

/// Reads a pipe to its end into `kept`, keeping the first `cap` bytes (and whether more
/// came).
async fn read_capped<R: tokio::io::AsyncRead + Unpin>(
    mut r: R,
    cap: usize,
    kept: &std::sync::Mutex<(Vec<u8>, bool)>,
    first: &OnceLock<Duration>,
    started: Instant,
) {
    let mut buf = vec![0u8; 16 << 10];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let _ = first.set(started.elapsed());
                let mut k = kept.lock().unwrap_or_else(|p| p.into_inner());
                let room = cap.saturating_sub(k.0.len());
                if n > room {
                    k.1 = true;
                }
                k.0.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

/// What [`Sandbox::launch`] starts: what it sees, its home, its command, its environment
/// and its CPU time in all.
struct Launch<'a> {
    mounts: &'a [Mount<'a>],
    home: &'a str,
    argv: Vec<String>,
    env: &'a [(String, String)],
    cpu_seconds: u64,
}

/// Whether `name` may name an environment variable: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn valid_env_name(name: &str) -> bool {
    let mut b = name.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// A program [`Sandbox::start`] started, with its pipes (taken by whoever talks to it):
/// killed, whole, when dropped.
pub struct Program {
    pub stdin: Option<tokio::process::ChildStdin>,
    pub stdout: Option<tokio::process::ChildStdout>,
    pub stderr: Option<tokio::process::ChildStderr>,
    /// Declared before `running`: the watch stops before the program is killed.
    dog: Option<quota::Watchdog>,
    running: Running,
}

impl Program {
    /// Whether it was killed for filling its state directory past the quota.
    pub fn over_quota(&self) -> bool {
        self.dog.as_ref().is_some_and(quota::Watchdog::hit)
    }

    /// Whether it has ended (it is reaped if so).
    pub fn ended(&mut self) -> bool {
        matches!(self.running.child.try_wait(), Ok(Some(_)) | Err(_))
    }
}

/// A run in progress: killed when dropped.
struct Running {
    child: std::process::Child,
    cgroup: Option<RunCgroup>,
}

impl Running {
    /// Kills the run: bwrap (its namespace follows), then whatever is left in its cgroup.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(cg) = &self.cgroup {
            cg.kill_all();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
        if let Some(cg) = self.cgroup.take()
            && !cg.remove_now()
        {
            // Its processes are still dying (the kernel refuses to remove a cgroup before):
            // tried again, in the background, as a finished run's are.
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(cg.remove());
            } else {
                tracing::warn!(cgroup = %cg.pids.display(), "a sandbox cgroup could not be removed");
            }
        }
    }
}

/// A run's own pids and memory cgroups (v1).
struct RunCgroup {
    pids: PathBuf,
    memory: PathBuf,
}

impl RunCgroup {
    fn new(
        pids_root: &Path,
        mem_root: &Path,
        run: u64,
        l: &SandboxLimits,
    ) -> std::io::Result<RunCgroup> {
        let name = format!("run-{}-{run}", std::process::id());
        let cg = RunCgroup {
            pids: pids_root.join(&name),
            memory: mem_root.join(&name),
        };
        let made = (|| {
            std::fs::create_dir_all(&cg.pids)?;
            std::fs::create_dir_all(&cg.memory)?;
            std::fs::write(cg.pids.join("pids.max"), l.processes.to_string())?;
            std::fs::write(
                cg.memory.join("memory.limit_in_bytes"),
                l.memory_bytes.to_string(),
            )
        })();
        if let Err(e) = made {
            // Nothing half-made is left behind.
            cg.remove_now();
            return Err(e);
        }
        // Swap counted too where the kernel accounts it (ignored where it does not).
        let _ = std::fs::write(
            cg.memory.join("memory.memsw.limit_in_bytes"),
            l.memory_bytes.to_string(),
        );
        Ok(cg)
    }

    /// Removes the (empty) cgroups at once; answers whether both are gone.
    fn remove_now(&self) -> bool {
        let gone = |p: &Path| std::fs::remove_dir(p).is_ok() || !p.exists();
        let pids = gone(&self.pids);
        gone(&self.memory) && pids
    }

    fn kill_all(&self) {
        for _ in 0..3 {
            let Ok(procs) = std::fs::read_to_string(self.pids.join("cgroup.procs")) else {
                return;
            };
            let pids: Vec<&str> = procs.split_whitespace().collect();
            if pids.is_empty() {
                return;
            }
            let _ = std::process::Command::new("kill")
                .arg("-9")
                .args(&pids)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }

    /// Removes the cgroups once their processes are gone (the kernel refuses before).
    async fn remove(self) {
        for _ in 0..100 {
            let a = std::fs::remove_dir(&self.pids).is_ok() || !self.pids.exists();
            let b = std::fs::remove_dir(&self.memory).is_ok() || !self.memory.exists();
            if a && b {
                return;
            }
            self.kill_all();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tracing::warn!(cgroup = %self.pids.display(), "a sandbox cgroup could not be removed");
    }
}

/// Finds bwrap and checks that it makes the namespaces (and takes the seccomp filter);
/// finds writable cgroups.
fn probe(workspaces: &Path, helper: Option<&Path>, outer_uid: Option<u32>) -> Layers {
    let bwrap = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join("bwrap"))
        .find(|p| p.is_file());
    let Some(bwrap) = bwrap else {
        return Layers {
            bwrap: None,
            refused: Some(
                "bubblewrap (bwrap) is not installed; install Debian's `bubblewrap`".into(),
            ),
            cgroups: None,
            seccomp: None,
            landlock: None,
            nproc_per_namespace: false,
        };
    };
    // One run of `true` as every run goes (the prelude, bwrap, as the sandbox's uid, in a
    // workspace where the real ones are), with and without the filter. One directory per
    // probe: probes running at once (tests) must not remove each other's.
    static PROBES: AtomicU64 = AtomicU64::new(0);
    let dir = workspaces.join(format!(
        ".probe-{}-{}",
        std::process::id(),
        PROBES.fetch_add(1, Ordering::Relaxed)
    ));
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    let _ = b.create(&dir);
    if let Some(uid) = outer_uid {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(workspaces, std::fs::Permissions::from_mode(0o711));
        let _ = std::os::unix::fs::lchown(&dir, Some(uid), Some(uid));
    }
    let try_with = |seccomp: Option<&Path>, landlock: Option<&Path>| {
        let mut argv = prelude(String::new(), String::new(), seccomp, outer_uid, &bwrap);
        let mounts = [Mount {
            host: &dir,
            inside: "/workspace",
            writable: true,
        }];
        argv.extend(bwrap_args(
            &mounts,
            "/workspace",
            "/workspace",
            seccomp.is_some(),
            landlock,
        ));
        match landlock {
            Some(_) => argv.extend([
                landlock::INSIDE.into(),
                landlock::ARG.into(),
                landlock::PROBE.into(),
            ]),
            None => argv.push("/usr/bin/true".into()),
        }
        std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
    };
    let try_run = |seccomp: Option<&Path>| try_with(seccomp, None);
    let refused = match try_run(None) {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "bubblewrap cannot make its namespaces here{}: {}",
            match outer_uid {
                Some(uid) => format!(
                    " as uid {uid} (the sandbox's, under a server run as root: it needs user namespaces for unprivileged users, and every directory above the workspaces searchable)"
                ),
                None => String::new(),
            },
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!("bubblewrap could not run: {e}")),
    };
    let filter_file = workspaces.join(".seccomp.bpf");
    let seccomp = seccomp_filter()
        .inspect_err(
            |e| tracing::warn!(error = %e, "the sandbox's seccomp filter could not be compiled"),
        )
        .ok()
        .filter(|bpf| {
            let mut b = std::fs::DirBuilder::new();
            b.recursive(true);
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
            b.create(workspaces).is_ok() && std::fs::write(&filter_file, bpf).is_ok()
        })
        .map(|_| filter_file.clone())
        .filter(|f| refused.is_none() && try_run(Some(f)).is_ok_and(|o| o.status.success()));
    // Run as another uid, bwrap opens the helper by its path as that uid, which may not
    // reach where the executable lives (a build under a private directory): a link to it
    // beside the workspaces, which that uid reaches by construction (a copy across file
    // systems).
    let helper = match (helper, outer_uid) {
        (Some(h), Some(_)) => {
            let beside = workspaces.join(".hero-landlock");
            let _ = std::fs::remove_file(&beside);
            std::fs::hard_link(h, &beside)
                .or_else(|_| std::fs::copy(h, &beside).map(|_| ()))
                .inspect_err(|e| tracing::warn!(error = %e, "the Landlock helper could not be put beside the workspaces"))
                .ok()
                .map(|()| beside)
        }
        (h, _) => h.map(Path::to_path_buf),
    };
    // The helper, run as every command will be (inside bwrap, under the filter), says how
    // fully the kernel enforces its rules.
    let landlock = helper.filter(|_| refused.is_none()).and_then(|h| {
        let h = h.as_path();
        let o = try_with(seccomp.as_deref(), Some(h)).ok()?;
        let how = String::from_utf8_lossy(&o.stdout).trim().to_owned();
        if !o.status.success() || !matches!(how.as_str(), "full" | "partial") {
            tracing::warn!(
                helper = %h.display(),
                error = %String::from_utf8_lossy(&o.stderr).trim(),
                "the sandbox's Landlock layer is not available"
            );
            return None;
        }
        Some((h.to_path_buf(), how))
    });
    let _ = std::fs::remove_dir_all(&dir);
    let cgroups = ["pids", "memory"]
        .map(|c| Path::new("/sys/fs/cgroup").join(c).join("hero-sandbox"))
        .into_iter()
        .map(|p| std::fs::create_dir_all(&p).ok().map(|()| p))
        .collect::<Option<Vec<_>>>()
        .filter(|v| v.iter().all(|p| p.join("cgroup.procs").exists()))
        .map(|v| (v[0].clone(), v[1].clone()))
        // Only if a run's cgroups can be made with their limits (cgroup v1's files; a v2
        // hierarchy has neither `pids.max` here nor `memory.limit_in_bytes`).
        .filter(|(p, m)| {
            // A name of its own: probes running at once (tests) must not share one.
            let run = RUNS.fetch_add(1, Ordering::Relaxed);
            RunCgroup::new(p, m, run, &SandboxLimits::default())
                .map(|cg| cg.remove_now())
                .inspect_err(|e| tracing::debug!(error = %e, "no usable cgroups"))
                .is_ok()
        });
    Layers {
        bwrap: Some(bwrap),
        refused,
        cgroups,
        seccomp,
        landlock,
        nproc_per_namespace: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .is_ok_and(|r| kernel_at_least(&r, (5, 14))),
    }
}

/// Whether a kernel release (`6.1.0-18-amd64`) is at least `min` (major, minor).
fn kernel_at_least(release: &str, min: (u32, u32)) -> bool {
    let mut parts = release.trim().split(['.', '-']);
    let mut next = || parts.next().and_then(|p| p.parse::<u32>().ok());
    matches!((next(), next()), (Some(major), Some(minor)) if (major, minor) >= min)
}

/// The thread runs are spawned from: it lives as long as the server, so that
/// `--die-with-parent` fires when a run is killed, not when a pooled thread retires.
struct Spawner {
    tx: std::sync::mpsc::Sender<Spawn>,
}

/// What the spawner thread is asked: a command line, whether its stdin is a pipe, and
/// where the child goes.
type Spawn = (
    Vec<String>,
    bool,
    tokio::sync::oneshot::Sender<std::io::Result<std::process::Child>>,
);

impl Spawner {
    fn start() -> Spawner {
        let (tx, rx) = std::sync::mpsc::channel::<Spawn>();
        std::thread::Builder::new()
            .name("hero-sandbox-spawner".into())
            .spawn(move || {
                for (argv, stdin, reply) in rx {
                    // Given up (a Stop, a timeout) while it waited: nothing is started.
                    if reply.is_closed() {
                        continue;
                    }
                    let child = std::process::Command::new(&argv[0])
                        .args(&argv[1..])
                        .env_clear()
                        .env("PATH", "/usr/bin:/bin")
                        .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
                        .stdout(Stdio::piped())
                        .stderr(Stdio::piped())
                        .spawn();
                    // Given up since: the child is killed and reaped here, or it would run on
                    // unbounded (the spawner thread, its parent, never ends).
                    if let Err(Ok(mut child)) = reply.send(child) {
                        let _ = child.kill();
                        let _ = child.wait();
                    }
                }
            })
            .expect("the sandbox spawner thread");
        Spawner { tx }
    }

    async fn spawn(&self, argv: Vec<String>, stdin: bool) -> std::io::Result<std::process::Child> {
        let (reply, rx) = tokio::sync::oneshot::channel();
        self.tx
            .send((argv, stdin, reply))
            .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
        rx.await
            .map_err(|_| std::io::Error::other("the spawner thread is gone"))?
    }
}

#[cfg(test)]
mod tests {
    use super::kernel_at_least;

    #[test]
    fn kernel_releases_compare_by_major_and_minor() {
        for (release, at_least) in [
            ("6.18.44-fc-v657", true),
            ("5.14.0-427.el9.x86_64", true),
            ("5.15.0-105-generic\n", true),
            ("5.10.0-28-amd64", false),
            ("4.19.0", false),
            ("", false),
            ("six.one", false),
        ] {
            assert_eq!(kernel_at_least(release, (5, 14)), at_least, "{release:?}");
        }
    }
}
