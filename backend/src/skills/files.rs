//! Reading a skill's folder, never outside it: a folder is reached from a root the user
//! cannot change (the data directory's `skills`, or their workspace's own directory) by
//! `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` (no link anywhere on the way, so a
//! command cannot swap a directory for a link between two reads), and every file in it is
//! opened beneath the folder's descriptor (`RESOLVE_BENEATH`: a link or `..` leading out
//! fails), whatever a sandboxed command left in a workspace. Only regular files are read
//! (opened without blocking, so a FIFO cannot hold a read up); sizes, counts and depth are
//! bounded.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{Mode, OFlags, ResolveFlags};

/// The largest file of a skill other than its `SKILL.md`.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// The most a skill's folder may hold in all.
pub const MAX_FOLDER_BYTES: u64 = 8 << 20;
/// The most files a skill's folder may hold.
pub const MAX_FILES: usize = 256;
/// The deepest a skill's folder may nest.
pub const MAX_DEPTH: usize = 8;

fn open_beneath(dir: impl AsFd, rel: &str, flags: OFlags) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::openat2(
        dir,
        rel,
        flags | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    )?)
}

/// Opens a root folder the user cannot change (the administrator's skills, a user's
/// workspace directory itself), as the server's settings name it.
pub fn open_root(dir: &Path) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Opens the folder `rel` beneath `dir`, through no link at all.
pub fn open_subdir(dir: impl AsFd, rel: &str) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::openat2(
        dir,
        rel,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )?)
}

/// The names of the folders in `dir` (links and files left out), by name.
pub fn folders(dir: impl AsFd) -> std::io::Result<Vec<String>> {
    let fd = open_beneath(dir, ".", OFlags::RDONLY | OFlags::DIRECTORY)?;
    let mut out = Vec::new();
    for entry in rustix::fs::Dir::read_from(&fd)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let st = rustix::fs::statat(&fd, name.as_str(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory {
            out.push(name);
        }
    }
    out.sort();
    Ok(out)
}

/// The file `rel` beneath the folder `dir`, if it is a regular file of `max` bytes at most.
pub fn read(dir: impl AsFd, rel: &str, max: u64) -> Result<Vec<u8>, String> {
    if rel.contains('\0') {
        return Err(format!("{rel:?} is no file's path"));
    }
    let fd = open_beneath(dir, rel, OFlags::RDONLY).map_err(|e| match e.raw_os_error() {
        Some(libc::EXDEV) => format!("{rel} leads outside the skill's folder"),
        Some(libc::ELOOP) => format!("{rel} is a link, and links are not followed"),
        Some(libc::ENOENT) => format!("{rel} is not in the skill's folder"),
        _ => format!("{rel} cannot be read: {e}"),
    })?;
    let st = rustix::fs::fstat(&fd).map_err(|e| format!("{rel} cannot be read: {e}"))?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
        return Err(format!("{rel} is not a regular file"));
    }
    let size = st.st_size as u64;
    if size > max {
        return Err(format!("{rel} is {size} bytes, more than {max}"));
    }
    let mut file = std::fs::File::from(fd);
    let mut out = Vec::with_capacity(size as usize);
    use std::io::Read;
    (&mut file)
        .take(max + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("{rel} cannot be read: {e}"))?;
    if out.len() as u64 > max {
        return Err(format!("{rel} is more than {max} bytes"));
    }
    Ok(out)
}

/// The files of the folder `dir`, as `(path relative to it, size)`, by path, and why the
/// folder cannot be a skill's if it cannot: a FIFO, device or socket in it, more than
/// [`MAX_FILES`] files, [`MAX_FOLDER_BYTES`] in all, or [`MAX_DEPTH`] levels. Links are
/// listed as they are not: they are skipped (a read through one stays beneath anyway).
pub fn list(dir: impl AsFd) -> Result<Vec<(String, u64)>, String> {
    let mut out = Vec::new();
    let mut total = 0u64;
    walk(dir.as_fd(), "", 0, &mut out, &mut total)?;
    out.sort();
    Ok(out)
}

fn walk(
    dir: std::os::fd::BorrowedFd<'_>,
    prefix: &str,
    depth: usize,
    out: &mut Vec<(String, u64)>,
    total: &mut u64,
) -> Result<(), String> {
    if depth >= MAX_DEPTH {
        return Err(format!("the folder nests deeper than {MAX_DEPTH} levels"));
    }
    let fd = open_beneath(dir, ".", OFlags::RDONLY | OFlags::DIRECTORY)
        .map_err(|e| format!("{prefix}: {e}"))?;
    let entries =
        rustix::fs::Dir::read_from(&fd).map_err(|e| format!("the folder cannot be read: {e}"))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("the folder cannot be read: {e}"))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "." || name == ".." {
            continue;
        }
        let path = format!("{prefix}{name}");
        let st = rustix::fs::statat(&fd, name.as_str(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| format!("{path}: {e}"))?;
        match rustix::fs::FileType::from_raw_mode(st.st_mode) {
            rustix::fs::FileType::Directory => {
                let sub = open_subdir(&fd, &name).map_err(|e| format!("{path}: {e}"))?;
                walk(sub.as_fd(), &format!("{path}/"), depth + 1, out, total)?;
            }
            rustix::fs::FileType::RegularFile => {
                let size = st.st_size as u64;
                *total += size;
                out.push((path, size));
                if out.len() > MAX_FILES {
                    return Err(format!("the folder holds more than {MAX_FILES} files"));
                }
                if *total > MAX_FOLDER_BYTES {
                    return Err(format!(
                        "the folder holds more than {} MiB",
                        MAX_FOLDER_BYTES >> 20
                    ));
                }
            }
            rustix::fs::FileType::Symlink => {}
            _ => return Err(format!("{path} is a FIFO, device or socket")),
        }
    }
    Ok(())
}

/// Writes the skill `name` as a folder under the administrator's `root` (made if missing):
/// its `SKILL.md` and `files` (paths checked by the caller) written beside the folder first,
/// then moved into its place, the folder it replaces removed after. Answers whether the
/// skill is new. Hidden folders (`.staging-…`) are never read as skills.
pub fn replace_folder(
    root: &Path,
    name: &str,
    skill_md: &str,
    files: &std::collections::BTreeMap<String, String>,
) -> std::io::Result<bool> {
    let stamp = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    std::fs::create_dir_all(root)?;
    let staging = root.join(format!(".staging-{name}-{stamp}"));
    let written = (|| {
        std::fs::create_dir(&staging)?;
        std::fs::write(staging.join("SKILL.md"), skill_md)?;
        for (path, text) in files {
            let to = staging.join(path);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(to, text)?;
        }
        Ok(())
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    let target = root.join(name);
    let old = root.join(format!(".old-{name}-{stamp}"));
    let existed = match std::fs::rename(&target, &old) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    if let Err(e) = std::fs::rename(&staging, &target) {
        if existed {
            let _ = std::fs::rename(&old, &target);
        }
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    // The new folder is in place: an old one left behind is hidden, and only logged.
    if existed && let Err(e) = std::fs::remove_dir_all(&old) {
        tracing::warn!(folder = %old.display(), "a replaced skill's folder was left: {e}");
    }
    Ok(!existed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder past a bound is no skill's, saying which: more than 256 files, more than
    /// 8 MiB in all, more than 8 levels.
    #[test]
    fn a_folder_is_bounded_in_files_bytes_and_depth() {
        let root = tempfile::tempdir().unwrap();
        let many = root.path().join("many");
        std::fs::create_dir_all(&many).unwrap();
        for i in 0..MAX_FILES {
            std::fs::write(many.join(format!("f{i}")), "x").unwrap();
        }
        assert_eq!(list(open_root(&many).unwrap()).unwrap().len(), MAX_FILES);
        std::fs::write(many.join("one-more"), "x").unwrap();
        let why = list(open_root(&many).unwrap()).unwrap_err();
        assert!(why.contains("more than 256 files"), "{why}");

        let big = root.path().join("big");
        std::fs::create_dir_all(&big).unwrap();
        let mib = vec![b'x'; 1 << 20];
        for i in 0..8 {
            std::fs::write(big.join(format!("f{i}")), &mib).unwrap();
        }
        assert!(list(open_root(&big).unwrap()).is_ok(), "8 MiB is allowed");
        std::fs::write(big.join("one-more"), "x").unwrap();
        let why = list(open_root(&big).unwrap()).unwrap_err();
        assert!(why.contains("more than 8 MiB"), "{why}");

        let deep = root.path().join("deep");
        let seven = deep.join("a/b/c/d/e/f/g");
        std::fs::create_dir_all(&seven).unwrap();
        std::fs::write(seven.join("ok.txt"), "x").unwrap();
        assert!(
            list(open_root(&deep).unwrap()).is_ok(),
            "8 levels are allowed"
        );
        std::fs::create_dir_all(seven.join("h")).unwrap();
        let why = list(open_root(&deep).unwrap()).unwrap_err();
        assert!(why.contains("deeper than 8"), "{why}");
    }

    #[test]
    fn reads_stay_beneath_the_folder() {
        let root = tempfile::tempdir().unwrap();
        let secret = root.path().join("master.key");
        std::fs::write(&secret, "secret").unwrap();
        let skill = root.path().join("pdf");
        std::fs::create_dir_all(skill.join("scripts")).unwrap();
        std::fs::write(skill.join("SKILL.md"), "body").unwrap();
        std::fs::write(skill.join("scripts/fill.py"), "print()").unwrap();
        std::os::unix::fs::symlink(&secret, skill.join("key")).unwrap();
        std::os::unix::fs::symlink("../master.key", skill.join("up")).unwrap();
        std::os::unix::fs::symlink("scripts/fill.py", skill.join("inside")).unwrap();
        let fd = open_root(&skill).unwrap();
        assert_eq!(read(&fd, "SKILL.md", 100).unwrap(), b"body");
        assert_eq!(read(&fd, "scripts/fill.py", 100).unwrap(), b"print()");
        for bad in [
            "key",
            "up",
            "../master.key",
            "/etc/passwd",
            "scripts/../../master.key",
        ] {
            let why = read(&fd, bad, 100).unwrap_err();
            assert!(
                why.contains("outside") || why.contains("not in") || why.contains("a link"),
                "{bad}: {why}"
            );
        }
        assert!(
            read(&fd, "SKILL.md", 2)
                .unwrap_err()
                .contains("more than 2")
        );
        assert!(
            read(&fd, "scripts", 100)
                .unwrap_err()
                .contains("not a regular file")
        );
        assert_eq!(
            list(&fd).unwrap(),
            [
                ("SKILL.md".to_owned(), 4),
                ("scripts/fill.py".to_owned(), 7)
            ]
        );
        let made = std::process::Command::new("mkfifo")
            .arg(skill.join("pipe"))
            .status()
            .unwrap();
        assert!(made.success());
        assert!(
            read(&fd, "pipe", 100)
                .unwrap_err()
                .contains("not a regular file")
        );
        assert!(list(&fd).unwrap_err().contains("FIFO"));
    }
}
