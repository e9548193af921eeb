//! Which paths a memory file may have (reference 002 §1, §14): `MEMORY.md`; `memory.md`,
//! read only when there is no `MEMORY.md`; and Markdown files under `memory/`, at most
//! [`MAX_DEPTH`] levels of letters, digits, `.`, `_` and `-`. Anything else is refused with
//! the reason.

/// The longest path, in bytes.
pub const MAX_PATH_BYTES: usize = 255;
/// The most levels beneath `memory/` (folders and the file).
pub const MAX_DEPTH: usize = 8;

/// The file of lasting facts.
pub const MAIN: &str = "MEMORY.md";
/// The older name of [`MAIN`], read only when it is missing.
pub const FALLBACK: &str = "memory.md";

/// Checks a memory file's path, saying why one is refused.
pub fn check(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("a memory file needs a path, such as MEMORY.md or memory/2026-11-24.md".into());
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(format!(
            "a memory file's path is at most {MAX_PATH_BYTES} bytes"
        ));
    }
    if path.contains('\0') {
        return Err("a memory file's path cannot hold a NUL character".into());
    }
    if path.starts_with('/') {
        return Err(format!(
            "{path:?} starts with /: memory paths are relative, such as memory/notes.md"
        ));
    }
    if path == MAIN || path == FALLBACK {
        return Ok(());
    }
    if path.eq_ignore_ascii_case("MEMORY.json") {
        return Err("MEMORY.json is deprecated; write MEMORY.md".into());
    }
    let Some(rest) = path.strip_prefix("memory/") else {
        return Err(format!(
            "{path:?} is no memory file: memory is MEMORY.md or Markdown files under memory/"
        ));
    };
    let parts: Vec<&str> = rest.split('/').collect();
    if parts.len() > MAX_DEPTH {
        return Err(format!(
            "{path:?} is more than {MAX_DEPTH} levels deep under memory/"
        ));
    }
    for part in &parts {
        if part.is_empty() {
            return Err(format!("{path:?} has an empty part (// or a trailing /)"));
        }
        if part.chars().all(|c| c == '.') {
            return Err(format!(
                "{path:?} has a part of dots ({part}), which cannot be a name"
            ));
        }
        if *part == ".git" || *part == "node_modules" {
            return Err(format!("{part} is never memory"));
        }
        if let Some(c) = part
            .chars()
            .find(|c| !(c.is_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(format!(
                "{path:?} holds {c:?}: a memory path's parts are letters, digits, '.', '_' and '-'"
            ));
        }
    }
    if !rest.ends_with(".md") || parts.last().is_some_and(|f| f.len() <= 3) {
        return Err(format!(
            "{path:?} is not a Markdown file: memory files end in .md"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paths_memory_may_have() {
        for ok in [
            "MEMORY.md",
            "memory.md",
            "memory/2026-11-24.md",
            "memory/projects/hero.md",
            "memory/a/b/c/d/e/f/g/h.md",
            "memory/notes_v1.2-final.md",
            "memory/Wörter.md",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn each_refused_path_says_why() {
        for (bad, why) in [
            ("", "needs a path"),
            ("/etc/passwd", "starts with /"),
            ("/MEMORY.md", "starts with /"),
            ("memory/../secrets.md", "dots"),
            ("memory/./a.md", "dots"),
            ("memory//a.md", "empty part"),
            ("memory/a/", "empty part"),
            ("memory/.git/config.md", ".git is never memory"),
            ("memory/node_modules/x.md", "node_modules is never memory"),
            ("memory/a.txt", "not a Markdown file"),
            ("memory/.md", "not a Markdown file"),
            ("memory/a b.md", "letters, digits"),
            ("memory/a\0.md", "NUL"),
            ("MEMORY.json", "deprecated; write MEMORY.md"),
            ("notes.md", "no memory file"),
            ("memory/a/b/c/d/e/f/g/h/i.md", "8 levels"),
        ] {
            let err = check(bad).expect_err(bad);
            assert!(err.contains(why), "{bad:?}: {err}");
        }
        let long = format!("memory/{}.md", "a".repeat(250));
        assert!(check(&long).unwrap_err().contains("255 bytes"));
    }
}
