//! Escapes from the `bash` sandbox, each of which must fail: reading another user's
//! workspace, the data directory, the key or the database; writing outside the workspace;
//! reaching the network; signalling or tracing the server; bombs and floods; outliving the
//! timeout; symlinks and `cwd` out of the workspace. The server's secrets are real files
//! beside the workspaces, where a data directory keeps them.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use hero_backend::execution::sandbox::{Ended, Ran, Sandbox, SandboxLimits, sandbox_cwd};

struct Fixture {
    _dir: tempfile::TempDir,
    data: PathBuf,
    sandbox: Sandbox,
}

/// A data directory with a key, a database and two users' workspaces; user 1 runs.
fn fixture(limits: SandboxLimits) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    hero_backend::execution::sandbox::let_the_sandbox_in(dir.path()).unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("workspaces/2")).unwrap();
    hero_backend::execution::sandbox::let_the_sandbox_in(&data).unwrap();
    std::fs::write(data.join("master.key"), "MASTER-KEY-SECRET").unwrap();
    std::fs::write(data.join("hero.db"), "SQLITE-DATABASE-SECRET").unwrap();
    std::fs::write(data.join("workspaces/2/notes.txt"), "BOB-PRIVATE-NOTES").unwrap();
    let limits = SandboxLimits {
        landlock_helper: Some(env!("CARGO_BIN_EXE_hero-landlock").into()),
        ..limits
    };
    let sandbox = Sandbox::new(data.join("workspaces"), limits);
    assert!(
        sandbox.layers().refused.is_none(),
        "the sandbox must work on this machine: {}",
        sandbox.layers().describe()
    );
    // This machine's kernel enforces Landlock (ABI 7): the layer must be there.
    assert!(
        sandbox.layers().landlock.is_some(),
        "no Landlock layer: {}",
        sandbox.layers().describe()
    );
    Fixture {
        _dir: dir,
        data,
        sandbox,
    }
}

async fn run(f: &Fixture, cmd: &str) -> Ran {
    f.sandbox
        .run(1, cmd, None, Some(Duration::from_secs(10)), None)
        .await
        .unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

/// Runs `cmd`, which must not succeed.
async fn refused(f: &Fixture, cmd: &str) {
    let r = run(f, cmd).await;
    assert_ne!(
        r.ended,
        Ended::Exited(0),
        "{cmd} succeeded: {}",
        all_output(&r)
    );
}

fn all_output(r: &Ran) -> String {
    format!("{}{}", r.stdout, r.stderr)
}

/// No secret of the server's is readable by absolute path, relative path, /proc or a
/// symlink; the environment holds nothing of the server's.
#[tokio::test]
async fn the_servers_files_and_other_workspaces_are_out_of_reach() {
    let f = fixture(SandboxLimits::default());
    let d = f.data.display().to_string();
    let attempts = [
        format!("cat {d}/master.key"),
        format!("cat {d}/hero.db"),
        format!("cat {d}/workspaces/2/notes.txt"),
        "cat ../2/notes.txt".into(),
        "cat /workspace/../2/notes.txt".into(),
        format!("ln -s {d}/master.key k && cat k"),
        format!("ln -s {d}/workspaces/2 bob && cat bob/notes.txt"),
        format!("cat /proc/1/root{d}/master.key"),
        format!("cat /proc/self/root{d}/hero.db"),
        "grep -r BOB-PRIVATE / 2>/dev/null".into(),
        "grep -r MASTER-KEY-SECRET /proc/*/environ /proc/*/cmdline 2>/dev/null".into(),
        "env".into(),
        "ls -la /proc/self/fd/ && cat /proc/self/fd/* 2>/dev/null".into(),
        "cat /etc/shadow /etc/passwd /root/.bash_history".into(),
        "ls /sys /home /root /work /var 2>&1".into(),
    ];
    for cmd in attempts {
        let r = run(&f, &cmd).await;
        let out = all_output(&r);
        for secret in [
            "MASTER-KEY-SECRET",
            "SQLITE-DATABASE-SECRET",
            "BOB-PRIVATE-NOTES",
            "HERO_",
        ] {
            assert!(!out.contains(secret), "{cmd} leaked {secret}: {out}");
        }
    }
    // The environment is the sandbox's own.
    let env = run(&f, "env | sort").await.stdout;
    assert_eq!(
        env.lines()
            .filter(|l| !l.starts_with('_')
                && !l.starts_with("PWD")
                && !l.starts_with("SHLVL")
                && !l.starts_with("OLDPWD"))
            .collect::<Vec<_>>(),
        [
            "HOME=/workspace",
            "LANG=C.UTF-8",
            "PATH=/usr/local/bin:/usr/bin:/bin"
        ]
    );
}

/// Only the workspace (and a private /tmp) can be written; the host's /tmp is untouched.
#[tokio::test]
async fn nothing_outside_the_workspace_can_be_written() {
    let f = fixture(SandboxLimits::default());
    let marker = format!("hero-escape-{}", std::process::id());
    for cmd in [
        "echo x > /usr/bin/evil".to_owned(),
        "echo x > /evil".to_owned(),
        "mkdir /etc".to_owned(),
        format!("echo x > {}/master.key", f.data.display()),
        "mount -t tmpfs none /usr".to_owned(),
        "chroot / true".to_owned(),
    ] {
        refused(&f, &cmd).await;
    }
    assert_eq!(
        std::fs::read_to_string(f.data.join("master.key")).unwrap(),
        "MASTER-KEY-SECRET"
    );
    let r = run(
        &f,
        &format!("echo inside > /tmp/{marker} && cat /tmp/{marker}"),
    )
    .await;
    assert_eq!(r.stdout, "inside\n");
    assert!(
        !std::path::Path::new(&format!("/tmp/{marker}")).exists(),
        "the host's /tmp was written"
    );
    // The workspace is the user's, and kept between runs.
    let r = run(&f, "echo kept > note.txt && pwd").await;
    assert_eq!(r.stdout, "/workspace\n");
    assert_eq!(run(&f, "cat note.txt").await.stdout, "kept\n");
    assert_eq!(
        std::fs::read_to_string(f.data.join("workspaces/1/note.txt")).unwrap(),
        "kept\n"
    );
}

/// No network: not the server on loopback, not another address.
#[tokio::test]
async fn the_network_is_out_of_reach() {
    let f = fixture(SandboxLimits::default());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    for cmd in [
        format!("echo hi > /dev/tcp/127.0.0.1/{port}"),
        "echo hi > /dev/tcp/10.0.0.1/80".into(),
        "echo hi > /dev/tcp/1.1.1.1/53".into(),
        "getent hosts example.com".into(),
    ] {
        let r = run(&f, &format!("timeout 3 bash -c '{cmd}'")).await;
        assert_ne!(r.ended, Ended::Exited(0), "{cmd} reached out");
    }
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_err(),
        "the sandbox connected to the host's loopback"
    );
    let r = run(&f, "cat /proc/net/dev | tail -n +3 | cut -d: -f1").await;
    assert_eq!(r.stdout.trim(), "lo", "only a loopback of its own");
}

/// The server's process cannot be seen, signalled or traced; privileges stay dropped.
#[tokio::test]
async fn the_server_cannot_be_signalled_or_traced() {
    let f = fixture(SandboxLimits::default());
    let me = std::process::id();
    for cmd in [
        format!("kill -9 {me}"),
        format!("kill -STOP {me}"),
        format!("cat /proc/{me}/environ"),
        format!("cat /proc/{me}/mem"),
        format!("ls /proc/{me}/fd"),
        "unshare -r true".into(),
        "unshare -U true".into(),
        "su -c true".into(),
        "capsh --print | grep -q 'Current: =ep'".into(),
    ] {
        refused(&f, &cmd).await;
    }
    let r = run(&f, "id -u; grep CapEff /proc/self/status; grep NoNewPrivs /proc/self/status; ps -e --no-headers | wc -l").await;
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0], "65534");
    assert_eq!(lines[1].split_whitespace().nth(1), Some("0000000000000000"));
    assert_eq!(lines[2].split_whitespace().nth(1), Some("1"));
    assert!(
        lines[3].trim().parse::<u32>().unwrap() <= 4,
        "only the sandbox's own processes: {}",
        r.stdout
    );
}

/// The process bound holds without cgroups too (a cgroup v2 host, or a server without
/// rights to them): the sandbox's user has an rlimit on processes, and forks beyond it fail.
#[tokio::test]
async fn processes_are_bounded_by_an_rlimit_too() {
    let f = fixture(SandboxLimits {
        processes: 20,
        ..SandboxLimits::default()
    });
    // Before Linux 5.14 the kernel counts a user's processes across namespaces, and the
    // sandbox leaves the rlimit out (the cgroups, where there are some, still bound them).
    if !f.sandbox.layers().nproc_per_namespace {
        return;
    }
    let r = run(&f, "ulimit -u").await;
    assert_eq!(r.stdout, "20\n", "{}", all_output(&r));
    let r = run(
        &f,
        "perl -e 'my $n = 0; for (1..40) { my $p = fork(); last unless defined $p; if ($p == 0) { sleep 2; exit 0 } $n++ } print $n'",
    )
    .await;
    let started: usize = r.stdout.trim().parse().unwrap_or(usize::MAX);
    assert!(
        started < 20,
        "{started} background processes: {}",
        all_output(&r)
    );
}

/// Bombs and floods end bounded: the fork bomb and the memory bomb fail or are killed at
/// the timeout, the output flood is cut, a huge file is refused; the server goes on.
#[tokio::test]
async fn bombs_and_floods_are_bounded() {
    let f = fixture(SandboxLimits {
        output_bytes: 4096,
        ..SandboxLimits::default()
    });
    let t = Instant::now();
    let r = f
        .sandbox
        .run(
            1,
            "bomb() { bomb | bomb & }; bomb; sleep 5; echo survived",
            None,
            Some(Duration::from_secs(3)),
            None,
        )
        .await
        .unwrap();
    assert!(
        matches!(r.ended, Ended::TimedOut | Ended::Exited(_)),
        "{r:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    let r = run(
        &f,
        "x=$(head -c 3000000000 /dev/zero | tr '\\0' a); echo ${#x}",
    )
    .await;
    assert_ne!(r.stdout.trim(), "3000000000", "a 3 GB string was allowed");
    let r = f
        .sandbox
        .run(1, "yes flood", None, Some(Duration::from_secs(2)), None)
        .await
        .unwrap();
    assert_eq!(r.ended, Ended::TimedOut);
    assert!(r.cut && r.stdout.len() == 4096, "{}", r.stdout.len());
    let r = run(
        &f,
        "head -c 100000000 /dev/zero > big; ls -l big | cut -d' ' -f5",
    )
    .await;
    assert_ne!(r.stdout.trim(), "100000000", "a 100 MB file was written");
    let _ = run(&f, "rm -f big").await;
    let r = run(&f, "ulimit -n; ulimit -c").await;
    assert_eq!(r.stdout, "256\n0\n");
}

/// At the timeout the whole tree dies, whatever it did to outlive it.
#[tokio::test]
async fn nothing_outlives_the_timeout() {
    let f = fixture(SandboxLimits::default());
    let tag = format!("hero-survivor-{}", std::process::id());
    let cases = [
        "(exec -a TAG sleep 1000) & sleep 1000",
        "nohup bash -c 'exec -a TAG sleep 1000' >/dev/null 2>&1 & sleep 1000",
        "setsid bash -c 'exec -a TAG sleep 1000' & sleep 1000",
        "(setsid bash -c 'trap \"\" TERM HUP INT; exec -a TAG sleep 1000' &); sleep 1000",
        "bash -c '(exec -a TAG sleep 1000) & disown'; sleep 1000",
        "exec -a TAG sleep 1000",
    ];
    for (i, how) in cases.iter().enumerate() {
        // The tag in argv makes the processes findable from the host.
        let mark = format!("{tag}-{i}");
        let cmd = how.replace("TAG", &mark);
        let t = Instant::now();
        let r = f
            .sandbox
            .run(1, &cmd, None, Some(Duration::from_secs(1)), None)
            .await
            .unwrap();
        assert_eq!(r.ended, Ended::TimedOut, "{how}: {r:?}");
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "{how}: {:?}",
            t.elapsed()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        let alive = std::process::Command::new("pgrep")
            .arg("-f")
            .arg(&mark)
            .output()
            .unwrap();
        assert!(
            alive.stdout.is_empty(),
            "{how}: still alive: {}",
            String::from_utf8_lossy(&alive.stdout)
        );
    }
}

/// Stop kills the run at once.
#[tokio::test]
async fn stop_kills_the_run() {
    let f = fixture(SandboxLimits::default());
    let abort = hero_backend::drive::abort::Abort::default();
    let a2 = abort.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        a2.abort();
    });
    let t = Instant::now();
    let r = f
        .sandbox
        .run(
            1,
            "echo started; sleep 100",
            None,
            Some(Duration::from_secs(60)),
            Some(&abort),
        )
        .await
        .unwrap();
    assert_eq!(r.ended, Ended::Stopped);
    assert_eq!(r.stdout, "started\n");
    assert!(t.elapsed() < Duration::from_secs(2));
}

/// `cwd` stays in the workspace (or /tmp): never up, never elsewhere.
#[tokio::test]
async fn cwd_stays_inside() {
    assert_eq!(sandbox_cwd(None).unwrap(), "/workspace");
    assert_eq!(sandbox_cwd(Some("src/app")).unwrap(), "/workspace/src/app");
    assert_eq!(sandbox_cwd(Some("/tmp")).unwrap(), "/tmp");
    for bad in [
        "..",
        "../2",
        "/workspace/../2",
        "/etc",
        "/",
        "a/../../b",
        "/data/workspaces/2",
    ] {
        assert!(sandbox_cwd(Some(bad)).is_err(), "{bad}");
    }
    let f = fixture(SandboxLimits::default());
    let e = f
        .sandbox
        .run(1, "pwd", Some("../2"), None, None)
        .await
        .unwrap_err();
    assert!(e.contains("may not go up"), "{e}");
    // A symlink in the workspace leads only within the sandbox's own view.
    let _ = run(&f, &format!("ln -sfn {} out", f.data.display())).await;
    let r = f
        .sandbox
        .run(1, "ls", Some("out"), None, None)
        .await
        .unwrap();
    assert!(!all_output(&r).contains("master.key"), "{}", all_output(&r));
    // An exit status, output and the time it took come back.
    let r = f
        .sandbox
        .run(1, "echo out; echo err >&2; exit 3", None, None, None)
        .await
        .unwrap();
    assert_eq!(
        (r.ended.clone(), r.stdout.as_str(), r.stderr.as_str()),
        (Ended::Exited(3), "out\n", "err\n")
    );
    assert!(
        r.report().starts_with("exit status 3, after "),
        "{}",
        r.report()
    );
}

/// The seccomp filter is loaded, and the calls it denies fail with EPERM: tracing oneself,
/// BPF, keyrings, perf, a new namespace, io_uring; ordinary work goes on.
#[tokio::test]
async fn the_seccomp_filter_denies_what_a_breakout_needs() {
    let f = fixture(SandboxLimits::default());
    assert!(
        f.sandbox.layers().seccomp.is_some(),
        "{}",
        f.sandbox.layers().describe()
    );
    let r = run(&f, "grep Seccomp: /proc/self/status").await;
    assert_eq!(
        r.stdout.split_whitespace().nth(1),
        Some("2"),
        "{}",
        r.stdout
    );
    // x86_64 numbers: ptrace 101, bpf 321, keyctl 250, perf_event_open 298, unshare 272,
    // io_uring_setup 425.
    for (name, nr) in [
        ("ptrace", 101),
        ("bpf", 321),
        ("keyctl", 250),
        ("perf_event_open", 298),
        ("unshare", 272),
        ("io_uring_setup", 425),
    ] {
        let r = run(
            &f,
            &format!("perl -e 'use POSIX; my $r = syscall({nr}, 0, 0, 0, 0, 0); print $r == -1 && $! == EPERM ? \"denied\" : \"allowed $r $!\"'"),
        )
        .await;
        assert_eq!(r.stdout, "denied", "{name}: {}", all_output(&r));
    }
    let r = run(&f, "echo fine | tr a-z A-Z").await;
    assert_eq!(r.stdout, "FINE\n");
}

/// Landlock, inside the namespaces: what bwrap alone leaves writable (its /dev) cannot be
/// written, files outside the allowed trees cannot be read, TCP is refused even inside the
/// sandbox's own network, and the command still works where it should.
#[tokio::test]
async fn landlock_confines_what_the_namespaces_leave() {
    let f = fixture(SandboxLimits::default());
    for cmd in [
        "touch /dev/made-here",
        "mkdir /dev/dir",
        "ln -s /workspace /dev/link",
        "cat /.hero-landlock > /dev/null",
        "exec 3<>/dev/tcp/127.0.0.1/9",
    ] {
        refused(&f, cmd).await;
    }
    let r = run(
        &f,
        "ls / >/dev/null && echo ok > /workspace/w && cat /workspace/w && echo tmp > /tmp/t && cat /tmp/t && head -c 4 /dev/urandom | wc -c && cat /proc/self/status | grep -c NoNewPrivs",
    )
    .await;
    assert_eq!(r.ended, Ended::Exited(0), "{}", all_output(&r));
    assert_eq!(r.stdout, "ok\ntmp\n4\n1\n");
}

/// Nothing a command does leaves a file on the host that would run as someone else, or a
/// device: no setuid or setgid bit in any way of setting one (chmod, install, a mode given
/// at creation, a directory's inherited setgid), no device node; the workspace is mounted
/// nosuid and nodev inside; and under a server run as root, nothing in the workspace is
/// root's (the sandbox runs as [`hero_backend::execution::sandbox::NOBODY`]). Checked from the host.
#[tokio::test]
async fn no_setuid_file_device_or_roots_file_reaches_the_host() {
    let f = fixture(SandboxLimits::default());
    let attempts = [
        "cp /usr/bin/bash rootbash; chmod u+s rootbash",
        "cp /usr/bin/bash rootbash2; chmod 4755 rootbash2",
        "install -m 4755 /usr/bin/bash installed",
        "install -m 2755 /usr/bin/bash ginstalled",
        "mkdir sgid; chmod g+s sgid; touch sgid/inherits",
        "mkdir -m 2755 sgid2",
        "touch both; chmod 6755 both",
        "cp -p /usr/bin/passwd passwd-copy",
        "perl -e 'open(my $f, \">\", \"p\"); chmod(04755, \"p\")'",
        "perl -e 'use Fcntl; sysopen(my $f, \"made-setuid\", O_CREAT|O_WRONLY, 04755)'",
        "mknod chardev c 1 3",
        "mknod blockdev b 8 0",
        "python3 -c 'import os; os.mknod(\"pydev\", 0o20644, os.makedev(1, 3))'",
    ];
    for cmd in attempts {
        run(&f, cmd).await;
    }
    let r = run(&f, "touch plain; chmod u+s plain; echo $?").await;
    assert!(
        r.stderr.contains("Operation not permitted") && r.stdout.trim() != "0",
        "{}",
        all_output(&r)
    );
    let r = run(&f, "grep ' /workspace ' /proc/self/mountinfo").await;
    let options = r.stdout.split_whitespace().nth(5).unwrap_or_default();
    assert!(
        options.contains("nosuid") && options.contains("nodev"),
        "{}",
        r.stdout
    );
    // Ordinary modes still work.
    let r = run(
        &f,
        "touch x; chmod 750 x; stat -c %a x; mkdir d; chmod 700 d",
    )
    .await;
    assert_eq!(r.stdout, "750\n", "{}", all_output(&r));

    let workspace = f.data.join("workspaces/1");
    let root = hero_backend::execution::sandbox::running_as_root();
    let mut seen = 0;
    let mut stack = vec![workspace.clone()];
    while let Some(p) = stack.pop() {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let m = std::fs::symlink_metadata(&p).unwrap();
        seen += 1;
        assert_eq!(
            m.mode() & 0o6000,
            0,
            "{} has mode {:o}",
            p.display(),
            m.mode()
        );
        let t = m.file_type();
        assert!(
            !t.is_char_device() && !t.is_block_device(),
            "{} is a device",
            p.display()
        );
        if root {
            assert_eq!(
                (m.uid(), m.gid()),
                (
                    hero_backend::execution::sandbox::NOBODY,
                    hero_backend::execution::sandbox::NOBODY
                ),
                "{} is not the sandbox's",
                p.display()
            );
        }
        if t.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
    }
    assert!(seen > 10, "the attempts made their files: {seen}");
}

/// The same escapes under a server that is not root: this test binary runs the test
/// above again as an ordinary user (when it runs as root; as an ordinary user, the test
/// above already is that).
#[tokio::test]
async fn no_setuid_file_reaches_the_host_under_an_ordinary_user_either() {
    if !hero_backend::execution::sandbox::running_as_root() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("/usr/bin/setpriv")
        .args(["--reuid=4242", "--regid=4242", "--clear-groups"])
        .arg(&exe)
        .args([
            "--exact",
            "no_setuid_file_device_or_roots_file_reaches_the_host",
            "--test-threads=1",
        ])
        .env("TMPDIR", "/tmp")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
}

/// A run that writes past its workspace's quota is ended at it: the workspace holds at
/// most the quota and a few file-size steps more (the watchdog's lag on a busy machine),
/// the run and the agent are told why, the next run is refused with the reason until the
/// workspace is emptied, and one file alone cannot take it past the quota either.
#[tokio::test]
async fn a_workspace_is_held_to_its_quota_while_a_command_runs() {
    use hero_backend::execution::sandbox::quota::{mib, used};
    let quota = 8 << 20;
    let step = 1 << 20;
    let f = fixture(SandboxLimits {
        quota_bytes: quota,
        ..SandboxLimits::default()
    });
    let r = run(
        &f,
        "mkdir -p out; for i in $(seq 1 64); do head -c 1048576 /dev/zero > out/f$i; done; echo finished",
    )
    .await;
    assert_eq!(r.ended, Ended::OverQuota, "{}", r.report());
    assert!(!r.stdout.contains("finished"), "{}", r.report());
    assert!(
        r.report().contains("reached its quota (8.0 MiB)"),
        "{}",
        r.report()
    );
    let workspace = f.data.join("workspaces/1");
    let held = used(&workspace);
    println!("quota {}, held after the run {}", mib(quota), mib(held));
    // The watchdog kills the run as soon as it reads the write that reached the quota; on
    // a machine busy with other work (the whole test suite on two cores) the writer may
    // finish a few more files first. Far below the 64 MiB the run would write.
    assert!(held <= quota + 4 * step + (64 << 10), "{}", mib(held));
    // Refused, with the reason, while the workspace is at its quota.
    let refused = f
        .sandbox
        .run(1, "echo hi", None, Some(Duration::from_secs(5)), None)
        .await
        .unwrap_err();
    assert!(
        refused.contains("quota is 8.0 MiB") && refused.contains("no command runs"),
        "{refused}"
    );
    f.sandbox.empty(1).await.unwrap();
    assert!(used(&workspace) < 64 << 10);
    // One file alone stops at what is left of the quota.
    let r = run(&f, "head -c 100M /dev/zero > big; echo $?").await;
    let held = used(&workspace);
    assert!(held <= quota + (64 << 10), "{}: {}", mib(held), r.report());
    assert_ne!(r.stdout.trim(), "0", "{}", r.report());
    f.sandbox.empty(1).await.unwrap();
    assert_eq!(run(&f, "echo again").await.stdout, "again\n");
    // What the count could not see is refused: blocks past a file's end, nameless files.
    let r = run(
        &f,
        "fallocate --keep-size -l 100M kept 2>&1; echo $?; python3 -c 'import os; os.open(\".\", os.O_TMPFILE | os.O_WRONLY)' 2>&1 | tail -1",
    )
    .await;
    assert!(
        r.stdout.contains("Operation not permitted") && r.stdout.contains("PermissionError"),
        "{}",
        r.report()
    );
    assert!(used(&workspace) < 64 << 10, "{}", mib(used(&workspace)));
    // Ordinary allocation still works.
    assert_eq!(
        run(&f, "fallocate -l 1M plain && stat -c %s plain")
            .await
            .stdout,
        "1048576\n"
    );
}

/// Under a server run as root, the Landlock helper is found even where the sandbox's uid
/// cannot reach the executable (a build under a private directory): bwrap is given a link
/// to it beside the workspaces.
#[tokio::test]
async fn the_landlock_helper_is_reached_from_a_private_directory() {
    if !hero_backend::execution::sandbox::running_as_root() {
        return;
    }
    let private = tempfile::tempdir().unwrap(); // 0700: nobody but root goes through it
    let helper = private.path().join("hero-landlock");
    std::fs::copy(env!("CARGO_BIN_EXE_hero-landlock"), &helper).unwrap();
    let dir = tempfile::tempdir().unwrap();
    hero_backend::execution::sandbox::let_the_sandbox_in(dir.path()).unwrap();
    let sandbox = Sandbox::new(
        dir.path().join("workspaces"),
        SandboxLimits {
            landlock_helper: Some(helper),
            ..SandboxLimits::default()
        },
    );
    let layers = sandbox.layers();
    assert!(layers.refused.is_none(), "{}", layers.describe());
    assert!(layers.landlock.is_some(), "{}", layers.describe());
    let r = sandbox
        .run(
            1,
            "touch /dev/made-here",
            None,
            Some(Duration::from_secs(5)),
            None,
        )
        .await
        .unwrap();
    assert_ne!(r.ended, Ended::Exited(0), "{}", r.report());
}
