//! A workspace's bound on disk (`workspace_quota_mib`), held while a command runs, not only
//! checked after it: a run that fills its workspace would fill the disk the database and
//! every other user share.
//!
//! - Before a run, the workspace's use is measured ([`used`]); at or over the quota, the
//!   run is refused with the reason.
//! - The run's file-size rlimit is what is left of the quota (or the per-file bound, if
//!   smaller): no single file takes the workspace past it.
//! - While it runs, a [`Watchdog`] thread follows every write in the workspace through
//!   inotify, keeps each file's size, and kills the run (through a pidfd: never another
//!   process that took its pid) the moment the sum reaches the quota. It measures the
//!   whole workspace again every [`RESCAN`] too, and whenever a directory came or went or
//!   the kernel's event queue overflowed, so nothing it was not told of escapes it for long.
//!
//! Sizes are what the files take on disk (blocks), links not followed; a sparse file
//! counts only what it holds. The workspace is walked by descriptor (`openat` with
//! `O_NOFOLLOW`, within its own file system, each directory watched through the descriptor
//! the walk opened): a command that swaps a directory for a link while root walks it sends
//! the walk nowhere else. Files the run's processes hold open after removing them count
//! too, until they are closed. A walk that cannot finish (a tree deeper than the
//! descriptors root may hold) counts as full: the quota fails closed. (The seccomp filter
//! refuses `fallocate` past a file's size and `O_TMPFILE`, which the count could not see.)

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::fd::OwnedFd;
use rustix::fs::inotify;

/// How often a watched workspace is measured again whole, events or not.
pub const RESCAN: Duration = Duration::from_millis(250);

/// What one file or directory takes on disk, its link unfollowed.
fn on_disk(m: &std::fs::Metadata) -> u64 {
    m.blocks().saturating_mul(512)
}

/// What a `stat` says a file takes on disk.
fn stat_on_disk(st: &rustix::fs::Stat) -> u64 {
    (st.st_blocks as u64).saturating_mul(512)
}

/// The bytes `dir` and everything in it take on disk (what was removed meanwhile counts
/// nothing; a walk that cannot finish counts as `u64::MAX`).
pub fn used(dir: &Path) -> u64 {
    let mut sizes = HashMap::new();
    if !walk(dir, &mut sizes, &mut |_, _| {}) {
        return u64::MAX;
    }
    sizes.values().sum()
}

/// Adds every entry under `dir` (itself included) to `sizes`, and calls `each_dir` with
/// each directory and its descriptor. By descriptor, links never followed, never leaving
/// `dir`'s file system; false if a directory could not be read (but for one removed
/// meanwhile).
fn walk(
    dir: &Path,
    sizes: &mut HashMap<PathBuf, u64>,
    each_dir: &mut dyn FnMut(&Path, &OwnedFd),
) -> bool {
    use rustix::fs::{AtFlags, CWD, Dir, FileType, Mode, OFlags, fstat, openat, statat};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let top = match openat(CWD, dir, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return true,
        Err(_) => return false,
    };
    let Ok(st) = fstat(&top) else {
        return false;
    };
    let dev = st.st_dev;
    sizes.insert(dir.to_path_buf(), stat_on_disk(&st));
    let mut complete = true;
    // The directories still to read, each with its descriptor.
    let mut stack = vec![(dir.to_path_buf(), top)];
    while let Some((path, fd)) = stack.pop() {
        each_dir(&path, &fd);
        let Ok(entries) = Dir::read_from(&fd) else {
            complete = false;
            continue;
        };
        let mut subdirs = Vec::new();
        for e in entries.flatten() {
            let name = e.file_name();
            if matches!(name.to_bytes(), b"." | b"..") {
                continue;
            }
            let Ok(st) = statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            let child = path.join(
                <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name.to_bytes()),
            );
            sizes.insert(child.clone(), stat_on_disk(&st));
            if FileType::from_raw_mode(st.st_mode) == FileType::Directory && st.st_dev == dev {
                subdirs.push((child, name.to_owned()));
            }
        }
        for (child, name) in subdirs {
            match openat(&fd, name.as_c_str(), flags, Mode::empty()) {
                Ok(cfd) => stack.push((child, cfd)),
                Err(rustix::io::Errno::NOENT) => {}
                Err(_) => complete = false,
            }
        }
    }
    complete
}

/// `pid` and its descendants, as far as /proc shows them (at most 4,096: more than a run's
/// process bound allows).
fn tree(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut pids = vec![pid];
    while let Some(p) = pids.pop() {
        if out.len() >= 4096 {
            break;
        }
        out.push(p);
        if let Ok(children) = std::fs::read_to_string(format!("/proc/{p}/task/{p}/children")) {
            pids.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<i32>().ok()),
            );
        }
    }
    out
}

/// Kills the run: every process under its first one at once (a process a SIGKILL is
/// pending for writes nothing more, whenever it is next scheduled; left to the namespace's
/// own teardown, which needs bwrap scheduled first, the writers would go on meanwhile),
/// then the first one itself, through its pidfd.
fn kill_run(pid: i32, pidfd: &OwnedFd) {
    for p in tree(pid).into_iter().skip(1) {
        if let Some(p) = rustix::process::Pid::from_raw(p) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
    }
    if let Err(e) = rustix::process::pidfd_send_signal(pidfd, rustix::process::Signal::KILL) {
        tracing::warn!(error = %e, "a run past its workspace quota could not be killed");
    }
}

/// What the processes from `pid` down hold open in the workspace's file system after
/// removing it (a file keeps its blocks until its last descriptor closes), each file once.
fn open_but_removed(pid: i32, dev: u64) -> u64 {
    let mut seen = std::collections::HashSet::new();
    let mut total = 0u64;
    for p in tree(pid) {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{p}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let removed = std::fs::read_link(fd.path())
                .is_ok_and(|t| t.to_string_lossy().ends_with(" (deleted)"));
            if !removed {
                continue;
            }
            if let Ok(m) = std::fs::metadata(fd.path())
                && m.dev() == dev
                && m.is_file()
                && seen.insert(m.ino())
            {
                total = total.saturating_add(on_disk(&m));
            }
        }
    }
    total
}

/// `bytes` as the people who read the messages count them: MiB, one decimal.
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// Watches one run's workspace; see the module's documentation.
pub struct Watchdog {
    stop: Arc<AtomicBool>,
    hit: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A workspace measured and watched before its run starts (so that no write of the run
/// comes before the watches), waiting for the run ([`Prepared::start`]).
pub struct Prepared {
    w: Watched,
    quota: u64,
}

impl Watchdog {
    /// Measures and watches `dir` for a run about to start, to be killed at `quota` bytes.
    pub fn prepare(dir: &Path, quota: u64) -> std::io::Result<Prepared> {
        let ino = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)?;
        let mut w = Watched {
            root: dir.to_path_buf(),
            dev: std::fs::symlink_metadata(dir)?.dev(),
            pid: None,
            ino,
            dirs: HashMap::new(),
            sizes: HashMap::new(),
            removed: 0,
            incomplete: false,
        };
        w.rescan();
        Ok(Prepared { w, quota })
    }
}

impl Prepared {
    /// What the workspace held when it was measured.
    pub fn used(&self) -> u64 {
        self.w.total()
    }

    /// Watches on for the run `child` (not yet reaped), which it kills at the quota.
    pub fn start(self, child: &std::process::Child) -> std::io::Result<Watchdog> {
        let Prepared { mut w, quota } = self;
        let pid = rustix::process::Pid::from_child(child);
        let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())?;
        w.pid = Some(pid.as_raw_nonzero().get());
        let (stop, hit) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let (stop2, hit2) = (stop.clone(), hit.clone());
        let thread = std::thread::Builder::new()
            .name("hero-quota".into())
            .spawn(move || {
                // Ahead of the run it watches (which runs at nice 10) where the server may
                // raise itself (as root); without that right, level with the server.
                let _ = rustix::process::setpriority_process(None, -10);
                if w.watch(quota, &stop2) {
                    hit2.store(true, Ordering::SeqCst);
                    kill_run(pid.as_raw_nonzero().get(), &pidfd);
                }
            })?;
        Ok(Watchdog {
            stop,
            hit,
            thread: Some(thread),
        })
    }
}

impl Watchdog {
    /// Whether the run was killed at the quota.
    pub fn hit(&self) -> bool {
        self.hit.load(Ordering::SeqCst)
    }

    /// Stops watching (the run has ended); answers [`Watchdog::hit`].
    pub fn stop(mut self) -> bool {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.hit()
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// The watchdog thread's state: the inotify descriptor, its watches, and each entry's size.
struct Watched {
    root: PathBuf,
    /// The workspace's file system.
    dev: u64,
    /// The run's first process (bwrap): it and its descendants are the run (once it runs).
    pid: Option<i32>,
    ino: OwnedFd,
    /// Watch descriptor → the directory it watches.
    dirs: HashMap<i32, PathBuf>,
    sizes: HashMap<PathBuf, u64>,
    /// What the run held open after removing it, at the last walk.
    removed: u64,
    /// The last walk could not read everything: counted as full.
    incomplete: bool,
}

impl Watched {
    fn total(&self) -> u64 {
        if self.incomplete {
            return u64::MAX;
        }
        self.sizes
            .values()
            .sum::<u64>()
            .saturating_add(self.removed)
    }

    /// Watches the directory the walk opened as `fd`, through that descriptor (whatever its
    /// path holds by now).
    fn add_watch(ino: &OwnedFd, dirs: &mut HashMap<i32, PathBuf>, dir: &Path, fd: &OwnedFd) {
        use std::os::fd::AsRawFd;
        let flags = inotify::WatchFlags::MODIFY
            | inotify::WatchFlags::CLOSE_WRITE
            | inotify::WatchFlags::CREATE
            | inotify::WatchFlags::DELETE
            | inotify::WatchFlags::MOVED_FROM
            | inotify::WatchFlags::MOVED_TO
            | inotify::WatchFlags::ONLYDIR;
        let by_fd = format!("/proc/self/fd/{}", fd.as_raw_fd());
        match inotify::add_watch(ino, by_fd.as_str(), flags) {
            Ok(wd) => {
                dirs.insert(wd, dir.to_path_buf());
            }
            // Unwatched, it is still measured at every walk.
            Err(e) => tracing::debug!(error = %e, "a workspace directory could not be watched"),
        }
    }

    /// Measures everything again, and watches every directory.
    fn rescan(&mut self) {
        self.sizes.clear();
        let (ino, dirs) = (&self.ino, &mut self.dirs);
        let complete = walk(&self.root, &mut self.sizes, &mut |d, fd| {
            Self::add_watch(ino, dirs, d, fd)
        });
        self.incomplete = !complete;
        self.removed = self.pid.map_or(0, |pid| open_but_removed(pid, self.dev));
    }

    /// Follows the workspace until `stop`, or until it reaches `quota` (true).
    fn watch(&mut self, quota: u64, stop: &AtomicBool) -> bool {
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 16 << 10];
        let mut scanned = Instant::now();
        while !stop.load(Ordering::SeqCst) {
            if self.total() >= quota {
                return true;
            }
            let mut fds = [rustix::event::PollFd::new(
                &self.ino,
                rustix::event::PollFlags::IN,
            )];
            let wait = rustix::time::Timespec {
                tv_sec: 0,
                tv_nsec: 20_000_000,
            };
            let _ = rustix::event::poll(&mut fds, Some(&wait));
            let mut changed: std::collections::HashSet<PathBuf> = Default::default();
            let mut again = false;
            let mut reader = inotify::Reader::new(&self.ino, &mut buf);
            // One read's worth of events, then the sizes and the check: a writer that never
            // stops writing would otherwise keep this loop reading events and never checking.
            while let Ok(ev) = reader.next() {
                let flags = ev.events();
                // A lost event, or a directory come or gone: everything is walked again.
                if flags.contains(inotify::ReadFlags::QUEUE_OVERFLOW)
                    || flags.contains(inotify::ReadFlags::ISDIR)
                {
                    again = true;
                }
                if let (Some(dir), Some(name)) = (self.dirs.get(&ev.wd()), ev.file_name()) {
                    let name: &std::ffi::OsStr =
                        std::os::unix::ffi::OsStrExt::from_bytes(name.to_bytes());
                    changed.insert(dir.join(name));
                }
                if reader.is_buffer_empty() {
                    break;
                }
            }
            for path in changed {
                // By path: at worst (a directory swapped for a link meanwhile) another
                // file's size is counted until the next walk, which can only end the run.
                match std::fs::symlink_metadata(&path) {
                    Ok(m) if !m.is_dir() => {
                        self.sizes.insert(path, on_disk(&m));
                    }
                    Ok(_) => again = true,
                    // Removed: it may still be held open, which the next walk counts.
                    Err(_) => {
                        if self.sizes.remove(&path).is_some_and(|b| b > 0) {
                            again = true;
                        }
                    }
                }
            }
            if again || scanned.elapsed() >= RESCAN {
                self.rescan();
                scanned = Instant::now();
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn use_counts_what_files_take_and_nothing_twice() {
        let dir = tempfile::tempdir().unwrap();
        let empty = used(dir.path());
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/f"), vec![1u8; 1 << 20]).unwrap();
        std::os::unix::fs::symlink("/usr", dir.path().join("link")).unwrap();
        let with = used(dir.path());
        assert!(with >= empty + (1 << 20), "{empty} -> {with}");
        assert!(with < empty + (1 << 20) + (64 << 10), "{empty} -> {with}");
        assert_eq!(mib(3 << 20), "3.0 MiB");
    }

    /// Runs `script` in `dir` under a watchdog of `quota`: whether it fired, how the script
    /// ended, and when.
    fn watched(dir: &Path, quota: u64, script: &str) -> (bool, std::process::ExitStatus, Duration) {
        let mut child = std::process::Command::new("/usr/bin/bash")
            .arg("-c")
            .arg(script)
            .current_dir(dir)
            .spawn()
            .unwrap();
        let dog = Watchdog::prepare(dir, quota)
            .unwrap()
            .start(&child)
            .unwrap();
        let started = Instant::now();
        let status = child.wait().unwrap();
        (dog.stop(), status, started.elapsed())
    }

    /// Files a run removed but holds open still take their blocks: they count.
    #[test]
    fn files_held_open_after_their_removal_count() {
        let dir = tempfile::tempdir().unwrap();
        let (fired, status, took) = watched(
            dir.path(),
            8 << 20,
            "for i in 1 2 3 4; do exec {fd}>f$i; rm f$i; head -c 3145728 /dev/zero >&$fd; done; sleep 5",
        );
        assert!(fired, "the watchdog did not fire: {status:?}");
        assert!(took < Duration::from_secs(4), "{status:?}");
    }

    /// A directory swapped for a link to elsewhere is not followed: what lies there is not
    /// counted, and the walk stays in the workspace.
    #[test]
    fn links_are_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/usr", dir.path().join("usr")).unwrap();
        std::os::unix::fs::symlink("/", dir.path().join("root")).unwrap();
        assert!(used(dir.path()) < 64 << 10);
    }

    /// A process writing past the quota in a watched directory is killed at it, within two
    /// steps of its writes (the kill lands after the write that crossed it is seen; on a
    /// loaded two-core machine one more 1 MiB write can land meanwhile: CI saw 9.8 MiB).
    #[test]
    fn a_writer_past_the_quota_is_killed_at_it() {
        let dir = tempfile::tempdir().unwrap();
        let quota = 8 << 20;
        let (fired, status, _) = watched(
            dir.path(),
            quota,
            "mkdir -p sub; for i in $(seq 1 64); do head -c 1048576 /dev/zero > sub/f$i; done",
        );
        assert!(fired, "the watchdog did not fire: {status:?}");
        assert!(!status.success(), "{status:?}");
        let left = used(dir.path());
        assert!(left <= quota + (2 << 20) + (64 << 10), "{}", mib(left));
    }
}
