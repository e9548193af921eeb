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
//!   whole workspace again every [`RESCAN`] too, and whenever the kernel's event queue
//!   overflowed, so nothing it was not told of escapes it for long.
//!
//! Sizes are what the files take on disk (blocks), links not followed; a sparse file
//! counts only what it holds.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::fs::inotify;

/// How often a watched workspace is measured again whole, events or not.
pub const RESCAN: Duration = Duration::from_millis(250);

/// What one file or directory takes on disk, its link unfollowed.
fn on_disk(m: &std::fs::Metadata) -> u64 {
    m.blocks().saturating_mul(512)
}

/// The bytes `dir` and everything in it take on disk (what can no longer be read, because
/// it was removed meanwhile, counts nothing).
pub fn used(dir: &Path) -> u64 {
    let mut sizes = HashMap::new();
    walk(dir, &mut sizes, &mut |_| {});
    sizes.values().sum()
}

/// Adds every entry under `dir` (itself included) to `sizes`, and calls `each_dir` for each
/// directory.
fn walk(dir: &Path, sizes: &mut HashMap<PathBuf, u64>, each_dir: &mut dyn FnMut(&Path)) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if m.is_dir() {
            each_dir(&p);
            if let Ok(entries) = std::fs::read_dir(&p) {
                stack.extend(entries.filter_map(|e| e.ok()).map(|e| e.path()));
            }
        }
        sizes.insert(p, on_disk(&m));
    }
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

impl Watchdog {
    /// Starts watching `dir` for the run `child` (not yet reaped), killed at `quota` bytes.
    pub fn start(dir: &Path, quota: u64, child: &std::process::Child) -> std::io::Result<Self> {
        let pidfd = rustix::process::pidfd_open(
            rustix::process::Pid::from_child(child),
            rustix::process::PidfdFlags::empty(),
        )?;
        let ino = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)?;
        let mut w = Watched {
            root: dir.to_path_buf(),
            ino,
            dirs: HashMap::new(),
            sizes: HashMap::new(),
        };
        let (stop, hit) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let (stop2, hit2) = (stop.clone(), hit.clone());
        let thread = std::thread::Builder::new()
            .name("hero-quota".into())
            .spawn(move || {
                w.rescan();
                if w.watch(quota, &stop2) {
                    hit2.store(true, Ordering::SeqCst);
                    if let Err(e) =
                        rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::KILL)
                    {
                        tracing::warn!(error = %e, "a run past its workspace quota could not be killed");
                    }
                }
            })?;
        Ok(Watchdog {
            stop,
            hit,
            thread: Some(thread),
        })
    }

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
    ino: rustix::fd::OwnedFd,
    /// Watch descriptor → the directory it watches.
    dirs: HashMap<i32, PathBuf>,
    sizes: HashMap<PathBuf, u64>,
}

impl Watched {
    fn total(&self) -> u64 {
        self.sizes.values().sum()
    }

    fn add_watch(ino: &rustix::fd::OwnedFd, dirs: &mut HashMap<i32, PathBuf>, dir: &Path) {
        let flags = inotify::WatchFlags::MODIFY
            | inotify::WatchFlags::CLOSE_WRITE
            | inotify::WatchFlags::CREATE
            | inotify::WatchFlags::DELETE
            | inotify::WatchFlags::MOVED_FROM
            | inotify::WatchFlags::MOVED_TO
            | inotify::WatchFlags::DONT_FOLLOW
            | inotify::WatchFlags::ONLYDIR;
        if let Ok(wd) = inotify::add_watch(ino, dir, flags) {
            dirs.insert(wd, dir.to_path_buf());
        }
    }

    /// Measures everything again, and watches every directory.
    fn rescan(&mut self) {
        self.sizes.clear();
        let (ino, dirs) = (&self.ino, &mut self.dirs);
        walk(&self.root, &mut self.sizes, &mut |d| {
            Self::add_watch(ino, dirs, d)
        });
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
            let mut changed: Vec<(PathBuf, bool)> = Vec::new();
            let mut overflow = false;
            let mut reader = inotify::Reader::new(&self.ino, &mut buf);
            while let Ok(ev) = reader.next() {
                let flags = ev.events();
                if flags.contains(inotify::ReadFlags::QUEUE_OVERFLOW) {
                    overflow = true;
                }
                let (Some(dir), Some(name)) = (self.dirs.get(&ev.wd()), ev.file_name()) else {
                    continue;
                };
                let name: &std::ffi::OsStr =
                    std::os::unix::ffi::OsStrExt::from_bytes(name.to_bytes());
                let path = dir.join(name);
                changed.push((path, flags.contains(inotify::ReadFlags::ISDIR)));
            }
            for (path, is_dir) in changed {
                match std::fs::symlink_metadata(&path) {
                    Ok(m) if is_dir || m.is_dir() => {
                        let (ino, dirs) = (&self.ino, &mut self.dirs);
                        walk(&path, &mut self.sizes, &mut |d| {
                            Self::add_watch(ino, dirs, d)
                        });
                    }
                    Ok(m) => {
                        self.sizes.insert(path, on_disk(&m));
                    }
                    // Removed or moved away: what was under it goes too.
                    Err(_) => self.sizes.retain(|p, _| !p.starts_with(&path)),
                }
            }
            if overflow || scanned.elapsed() >= RESCAN {
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

    /// A process writing past the quota in a watched directory is killed at it, within a
    /// step of its writes.
    #[test]
    fn a_writer_past_the_quota_is_killed_at_it() {
        let dir = tempfile::tempdir().unwrap();
        let quota = 8 << 20;
        let mut child = std::process::Command::new("/usr/bin/bash")
            .arg("-c")
            .arg("mkdir -p sub; for i in $(seq 1 64); do head -c 1048576 /dev/zero > sub/f$i; done")
            .current_dir(dir.path())
            .spawn()
            .unwrap();
        let dog = Watchdog::start(dir.path(), quota, &child).unwrap();
        let status = child.wait().unwrap();
        assert!(dog.stop(), "the watchdog did not fire: {status:?}");
        assert!(!status.success(), "{status:?}");
        let left = used(dir.path());
        assert!(left <= quota + (1 << 20) + (64 << 10), "{}", mib(left));
    }
}
