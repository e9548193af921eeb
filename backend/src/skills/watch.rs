//! A user's workspace and project skills, kept read while their folders are unchanged
//! (reference 002 §13): `notify` watches the folders of the users who used them last
//! ([`WATCHED_WORKSPACES`] at most, the least recently used let go and read again at their
//! next use), and any change marks the user's skills to be read again. Only the folders
//! down to each skill's own are watched, none through a link: a change deeper in a skill
//! (its `scripts/`) is seen at its next change above, its files being read from disk anyway.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hashlink::LinkedHashMap;

use super::Root;

/// The most users whose skill folders are watched (and their skills kept read).
pub const WATCHED_WORKSPACES: usize = 256;

/// One user's skills as last read, and the folders watched for them.
struct Kept {
    roots: Vec<Root>,
    fresh: Arc<AtomicBool>,
    watched: Vec<PathBuf>,
}

type Flags = Arc<Mutex<HashMap<i64, Arc<AtomicBool>>>>;

/// The users' skills kept read, and what watches their folders.
pub(super) struct Workspaces {
    root: PathBuf,
    /// None when nothing can be watched here: every use reads the folders.
    watcher: Mutex<Option<notify::RecommendedWatcher>>,
    kept: Mutex<LinkedHashMap<i64, Kept>>,
    /// Each kept user's mark, shared with the watcher's callback.
    flags: Flags,
    limit: usize,
    /// How many times a user's folders were read (not taken from what was kept).
    pub(super) reads: AtomicU64,
}

impl Workspaces {
    pub(super) fn new(root: &Path, limit: usize) -> Workspaces {
        let flags: Flags = Arc::default();
        let marks = flags.clone();
        let base = root.to_path_buf();
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let marks = marks.lock().unwrap_or_else(|p| p.into_inner());
            let event = match event {
                // Events may have been lost: every user's skills are read again.
                Err(_) => {
                    for flag in marks.values() {
                        flag.store(false, Ordering::Release);
                    }
                    return;
                }
                // Reading a folder is an event too: only changes count.
                Ok(e) if matches!(e.kind, notify::EventKind::Access(_)) => return,
                Ok(e) => e,
            };
            for path in &event.paths {
                let user = path
                    .strip_prefix(&base)
                    .ok()
                    .and_then(|rel| rel.components().next())
                    .and_then(|c| c.as_os_str().to_str()?.parse::<i64>().ok());
                if let Some(flag) = user.and_then(|u| marks.get(&u)) {
                    flag.store(false, Ordering::Release);
                }
            }
        })
        .map_err(|e| tracing::warn!("the users' skill folders are read at each use: {e}"))
        .ok();
        Workspaces {
            root: root.to_path_buf(),
            watcher: Mutex::new(watcher),
            kept: Mutex::default(),
            flags,
            limit,
            reads: AtomicU64::new(0),
        }
    }

    /// `user_id`'s workspace and project skills if no folder must be read for them: those
    /// kept and unchanged since, or none when the user has no workspace (`ws`) yet.
    pub(super) fn without_reading(&self, user_id: i64, ws: &Path) -> Option<Vec<Root>> {
        {
            let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(k) = kept.get(&user_id)
                && k.fresh.load(Ordering::Acquire)
            {
                let roots = k.roots.clone();
                kept.to_back(&user_id);
                return Some(roots);
            }
        }
        match std::fs::symlink_metadata(ws) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Some(vec![Root::default(), Root::default()])
            }
            _ => None,
        }
    }

    /// `user_id`'s workspace and project skills: those kept if unchanged since, else read
    /// now by `read` (and kept, their folders watched).
    pub(super) fn roots(&self, user_id: i64, read: impl FnOnce() -> Vec<Root>) -> Vec<Root> {
        // What was kept, changed since: a folder gone bad keeps what it was.
        let previous = {
            let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            match kept.get(&user_id) {
                Some(k) if k.fresh.load(Ordering::Acquire) => {
                    let roots = k.roots.clone();
                    kept.to_back(&user_id);
                    return roots;
                }
                Some(k) => k.roots.clone(),
                None => Vec::new(),
            }
        };
        // Watched before reading: a change while the folders are read marks them again.
        let fresh = Arc::new(AtomicBool::new(true));
        let watched = self.watch(user_id, &fresh);
        self.reads.fetch_add(1, Ordering::Relaxed);
        let mut roots = read();
        for (new, old) in roots.iter_mut().zip(&previous) {
            super::keep_last_good(new, old);
        }
        let Some(watched) = watched else {
            return roots;
        };
        let mut gone = Vec::new();
        {
            let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            kept.insert(
                user_id,
                Kept {
                    roots: roots.clone(),
                    fresh,
                    watched,
                },
            );
            while kept.len() > self.limit {
                if let Some(old) = kept.pop_front() {
                    gone.push(old);
                }
            }
        }
        self.let_go(gone);
        roots
    }

    /// Watches `user_id`'s skill folders, marking `fresh` false at any change; none if they
    /// cannot be watched (no workspace yet, no watcher, the system's watches spent).
    fn watch(&self, user_id: i64, fresh: &Arc<AtomicBool>) -> Option<Vec<PathBuf>> {
        use notify::Watcher;
        let ws = self.root.join(user_id.to_string());
        let mut paths = Vec::new();
        let dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_dir());
        if !dir(&ws) {
            return None;
        }
        paths.push(ws.clone());
        for tier in [
            ws.join("skills"),
            ws.join(".agents"),
            ws.join(".agents/skills"),
        ] {
            if !dir(&tier) {
                continue;
            }
            if tier.ends_with("skills") {
                let entries = std::fs::read_dir(&tier).ok()?;
                for e in entries.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        paths.push(e.path());
                    }
                }
            }
            paths.push(tier);
        }
        self.flags
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(user_id, fresh.clone());
        let mut watcher = self.watcher.lock().unwrap_or_else(|p| p.into_inner());
        let w = watcher.as_mut()?;
        for (i, p) in paths.iter().enumerate() {
            if let Err(e) = w.watch(p, notify::RecursiveMode::NonRecursive) {
                tracing::debug!(user = user_id, "a skill folder cannot be watched: {e}");
                for done in &paths[..i] {
                    let _ = w.unwatch(done);
                }
                return None;
            }
        }
        Some(paths)
    }

    /// Stops watching the folders of users no longer kept.
    fn let_go(&self, gone: Vec<(i64, Kept)>) {
        use notify::Watcher;
        if gone.is_empty() {
            return;
        }
        let mut flags = self.flags.lock().unwrap_or_else(|p| p.into_inner());
        let mut watcher = self.watcher.lock().unwrap_or_else(|p| p.into_inner());
        for (user, k) in gone {
            flags.remove(&user);
            if let Some(w) = watcher.as_mut() {
                for p in &k.watched {
                    let _ = w.unwatch(p);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::{Library, MAX_SKILLS_PER_ROOT};

    fn write(root: &Path, path: &str, text: &str) {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn names(library: &Library, user: i64) -> Vec<String> {
        library.roots(user)[..2]
            .iter()
            .flat_map(|r| r.skills.iter().map(|s| s.md.name.clone()))
            .collect()
    }

    /// Kept while unchanged; a new skill folder, or a change to one, is seen at the next
    /// use after the watcher's word (polled: no time asserted).
    #[test]
    fn a_users_skills_are_kept_until_their_folders_change() {
        let workspaces = tempfile::tempdir().unwrap();
        write(
            workspaces.path(),
            "7/skills/alpha/SKILL.md",
            "---\nname: alpha\ndescription: A.\n---\nBody\n",
        );
        let library = Library::load(None, workspaces.path(), MAX_SKILLS_PER_ROOT);
        assert_eq!(names(&library, 7), ["alpha"]);
        assert_eq!(names(&library, 7), ["alpha"]);
        assert_eq!(library.user_reads(), 1, "the second use reads nothing");
        write(
            workspaces.path(),
            "7/.agents/skills/beta/SKILL.md",
            "---\nname: beta\ndescription: B.\n---\nBody\n",
        );
        let seen = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            names(&library, 7) == ["alpha", "beta"]
        });
        assert!(seen, "the new project skill was never listed");
        write(
            workspaces.path(),
            "7/skills/alpha/SKILL.md",
            "---\nname: alpha\ndescription: Changed.\n---\nBody\n",
        );
        let changed = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            library.roots(7)[0].skills[0].md.description == "Changed."
        });
        assert!(changed, "the changed skill was never read again");
        write(
            workspaces.path(),
            "7/skills/alpha/SKILL.md",
            "---\nname: alpha\n",
        );
        let kept = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            let roots = library.roots(7);
            roots[0]
                .failed
                .iter()
                .any(|f| f.error.contains("last good"))
                && roots[0].skills[0].md.description == "Changed."
        });
        assert!(kept, "the broken skill did not keep its last good version");
        // A user without a workspace is read at each use (nothing to watch).
        let before = library.user_reads();
        names(&library, 8);
        names(&library, 8);
        assert_eq!(library.user_reads(), before + 2);
    }

    #[test]
    fn at_most_the_limit_of_users_are_kept() {
        let workspaces = tempfile::tempdir().unwrap();
        for user in [1, 2] {
            std::fs::create_dir_all(workspaces.path().join(user.to_string())).unwrap();
        }
        let kept = Workspaces::new(workspaces.path(), 1);
        for user in [1, 2, 1] {
            kept.roots(user, Vec::new);
        }
        assert_eq!(
            kept.reads.load(Ordering::Relaxed),
            3,
            "user 1 was let go for 2"
        );
        kept.roots(1, Vec::new);
        assert_eq!(kept.reads.load(Ordering::Relaxed), 3);
        assert_eq!(kept.flags.lock().unwrap().len(), 1);
    }
}
