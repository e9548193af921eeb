//! A plugin's manifest, `DATA_DIR/plugins/<name>/plugin.toml`:
//!
//! ```toml
//! name = "weather"                    # [a-z0-9-]{1,24}, its directory's name
//! version = "1.2.0"
//! description = "Forecasts from the national service"
//! command = "bin/weather --stdio"     # a program in its directory, then its arguments
//! processes = ["processes/*.md"]      # its processes: files, or every .md of a folder
//!
//! [functions.forecast]                # a tool's settings (default: ask, moderate)
//! danger = "safe"
//! auto_approve = true
//! ```
//!
//! Read once, at start-up; whatever is wrong is said in one line naming the field or file,
//! and the plugin is `failed` with it.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use hero_shared::calls::DangerLevel;
use hero_shared::process;
use serde::Deserialize;

/// The largest manifest read.
pub const MAX_MANIFEST_BYTES: u64 = 64 * 1024;
/// The most processes one plugin may bring.
pub const MAX_PROCESSES: usize = 100;
/// The longest name a plugin may have.
pub const MAX_NAME_CHARS: usize = 24;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: String,
    version: String,
    #[serde(default)]
    description: String,
    command: String,
    #[serde(default)]
    processes: Vec<String>,
    #[serde(default)]
    functions: BTreeMap<String, FunctionSettings>,
}

/// What the manifest says of one of its tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionSettings {
    /// How dangerous it is (default: moderate).
    #[serde(default)]
    pub danger: Option<DangerLevel>,
    /// Whether it may run without asking (default: it asks).
    #[serde(default)]
    pub auto_approve: Option<bool>,
}

/// A process a plugin brings: its name (the file's stem) and its markdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginProcess {
    pub name: String,
    pub content: String,
}

/// A manifest read and checked.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub name: String,
    pub version: String,
    pub description: String,
    /// The program, a file inside the plugin's directory.
    pub program: PathBuf,
    pub args: Vec<String>,
    pub functions: BTreeMap<String, FunctionSettings>,
    pub processes: Vec<PluginProcess>,
}

/// Whether `name` is a plugin's name: `[a-z0-9-]{1,24}`.
pub fn valid_name(name: &str) -> bool {
    (1..=MAX_NAME_CHARS).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Reads and checks `dir/plugin.toml`.
pub fn read(dir: &Path) -> Result<Manifest, String> {
    let path = dir.join("plugin.toml");
    let size = std::fs::metadata(&path)
        .map_err(|e| format!("plugin.toml could not be read: {e}"))?
        .len();
    if size > MAX_MANIFEST_BYTES {
        return Err(format!(
            "plugin.toml is {size} bytes, more than {MAX_MANIFEST_BYTES}"
        ));
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("plugin.toml could not be read: {e}"))?;
    let raw: Raw = toml::from_str(&text).map_err(|e| {
        let why = e.message().to_owned();
        match e.span() {
            Some(span) => {
                let line = text[..span.start.min(text.len())].lines().count().max(1);
                format!("plugin.toml line {line}: {why}")
            }
            None => format!("plugin.toml: {why}"),
        }
    })?;
    let dir_name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if !valid_name(&raw.name) {
        return Err(format!(
            "plugin.toml: name {:?} is not 1 to {MAX_NAME_CHARS} lowercase letters, digits or -",
            raw.name
        ));
    }
    if raw.name != dir_name {
        return Err(format!(
            "plugin.toml: name {:?} is not its directory's name ({dir_name:?})",
            raw.name
        ));
    }
    if raw.version.trim().is_empty() || raw.version.len() > 64 {
        return Err("plugin.toml: version is 1 to 64 characters".into());
    }
    if raw.description.chars().count() > process::MAX_DESCRIPTION_CHARS {
        return Err(format!(
            "plugin.toml: description is at most {} characters",
            process::MAX_DESCRIPTION_CHARS
        ));
    }
    let mut words = raw.command.split_whitespace();
    let program = words
        .next()
        .ok_or("plugin.toml: command is empty; name a program in the plugin's directory")?;
    let program = inside(dir, program).map_err(|why| format!("plugin.toml: command {why}"))?;
    if !program.is_file() {
        return Err(format!(
            "plugin.toml: command {:?} is not a file in the plugin's directory",
            raw.command
        ));
    }
    for tool in raw.functions.keys() {
        if tool.is_empty() || tool.len() > 64 {
            return Err(format!("plugin.toml: functions.{tool:?} is no tool's name"));
        }
    }
    Ok(Manifest {
        processes: processes(dir, &raw.processes)?,
        name: raw.name,
        version: raw.version.trim().to_owned(),
        description: raw.description,
        program,
        args: words.map(str::to_owned).collect(),
        functions: raw.functions,
    })
}

/// `relative` inside `dir`, resolved (links followed); why not, otherwise.
fn inside(dir: &Path, relative: &str) -> Result<PathBuf, String> {
    let rel = Path::new(relative);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(format!(
            "{relative:?} is outside the plugin's directory (a path in it, with no .. or leading /)"
        ));
    }
    let root = dir
        .canonicalize()
        .map_err(|e| format!("{relative:?}: the directory cannot be read: {e}"))?;
    let found = root
        .join(rel)
        .canonicalize()
        .map_err(|_| format!("{relative:?} is not in the plugin's directory"))?;
    if !found.starts_with(&root) {
        return Err(format!("{relative:?} leads outside the plugin's directory"));
    }
    Ok(found)
}

/// The processes the manifest names: each a `.md` file, or `folder/*.md` for every one in
/// a folder, by name; a name or text a process may not have is the plugin's failure.
fn processes(dir: &Path, patterns: &[String]) -> Result<Vec<PluginProcess>, String> {
    let mut files: Vec<PathBuf> = Vec::new();
    for p in patterns {
        match p.strip_suffix("*.md") {
            Some(folder) => {
                let folder = match folder.trim_end_matches('/') {
                    "" => ".",
                    f => f,
                };
                let folder =
                    inside(dir, folder).map_err(|why| format!("plugin.toml: processes {why}"))?;
                let mut found: Vec<PathBuf> = std::fs::read_dir(&folder)
                    .map_err(|e| format!("plugin.toml: processes {p:?}: {e}"))?
                    .flatten()
                    .map(|e| e.path())
                    .filter(|f| f.extension().is_some_and(|x| x == "md") && f.is_file())
                    .collect();
                found.sort();
                files.extend(found);
            }
            None if p.ends_with(".md") => {
                files.push(inside(dir, p).map_err(|why| format!("plugin.toml: processes {why}"))?)
            }
            None => {
                return Err(format!(
                    "plugin.toml: processes {p:?} is neither a .md file nor folder/*.md"
                ));
            }
        }
    }
    if files.len() > MAX_PROCESSES {
        return Err(format!(
            "plugin.toml: processes name {} files, more than {MAX_PROCESSES}",
            files.len()
        ));
    }
    let mut out: Vec<PluginProcess> = Vec::with_capacity(files.len());
    for f in files {
        let shown = f
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        let name = shown.trim_end_matches(".md").to_owned();
        process::check_name(&name).map_err(|why| format!("{shown}: {why}"))?;
        let size = std::fs::metadata(&f).map(|m| m.len()).unwrap_or(u64::MAX);
        if size > process::MAX_CONTENT_BYTES as u64 {
            return Err(format!(
                "{shown}: more than {} bytes",
                process::MAX_CONTENT_BYTES
            ));
        }
        let content =
            std::fs::read_to_string(&f).map_err(|e| format!("{shown} could not be read: {e}"))?;
        process::check(&content).map_err(|why| format!("{shown}: {why}"))?;
        if out.iter().any(|p| p.name == name) {
            return Err(format!("{shown}: a second process named {name:?}"));
        }
        out.push(PluginProcess { name, content });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plugin directory named `name` holding `files` (path, text); `bin/run` is made
    /// executable.
    fn plugin(name: &str, files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(name);
        for (path, text) in files {
            let p = dir.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
        }
        (root, dir)
    }

    const GOOD: &str = r#"
name = "weather"
version = "1.2.0"
description = "Forecasts"
command = "bin/run --stdio"
processes = ["processes/*.md", "extra.md"]

[functions.forecast]
danger = "safe"
auto_approve = true
"#;

    #[test]
    fn a_good_manifest_is_read_with_its_processes() {
        let (_root, dir) = plugin(
            "weather",
            &[
                ("plugin.toml", GOOD),
                ("bin/run", "#!/bin/sh\n"),
                ("processes/brief.md", "Brief {{user.name}} on {{args}}."),
                ("processes/alerts.md", "Alerts."),
                ("extra.md", "Extra."),
            ],
        );
        let m = read(&dir).unwrap();
        assert_eq!((m.name.as_str(), m.version.as_str()), ("weather", "1.2.0"));
        assert!(m.program.ends_with("weather/bin/run"));
        assert_eq!(m.args, ["--stdio"]);
        assert_eq!(
            m.functions["forecast"],
            FunctionSettings {
                danger: Some(DangerLevel::Safe),
                auto_approve: Some(true)
            }
        );
        let names: Vec<&str> = m.processes.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["alerts", "brief", "extra"]);
    }

    #[test]
    fn whatever_is_wrong_is_said_in_a_line() {
        let with = |toml: &str, extra: &[(&str, &str)]| {
            let mut files = vec![("plugin.toml", toml), ("bin/run", "#!/bin/sh\n")];
            files.extend_from_slice(extra);
            let (_root, dir) = plugin("weather", &files);
            read(&dir).unwrap_err()
        };
        let cases: Vec<(String, &str)> = vec![
            (with("name = ", &[]), "plugin.toml line 1"),
            (with(&GOOD.replace("weather", "Weather!"), &[]), "lowercase"),
            (
                with(&GOOD.replace("\"weather\"", "\"other\""), &[]),
                "directory's name",
            ),
            (
                with(&GOOD.replace("bin/run", "../run"), &[]),
                "outside the plugin's directory",
            ),
            (
                with(&GOOD.replace("bin/run", "/bin/sh"), &[]),
                "outside the plugin's directory",
            ),
            (
                with(&GOOD.replace("bin/run", "bin/none"), &[]),
                "not in the plugin's directory",
            ),
            (with(&GOOD.replace("command", "cmd"), &[]), "plugin.toml"),
            (
                with(GOOD, &[("processes/bad.md", "{{nope}}"), ("extra.md", "x")]),
                "bad.md",
            ),
            (
                with(GOOD, &[("processes/bad name.md", "x"), ("extra.md", "x")]),
                "bad name.md",
            ),
            (with(GOOD, &[("processes/a.md", "x")]), "extra.md"),
            (
                with(GOOD, &[]),
                "\"processes\" is not in the plugin's directory",
            ),
        ];
        for (got, wanted) in cases {
            assert!(got.contains(wanted), "{wanted:?} in {got:?}");
        }
    }

    #[test]
    fn a_link_out_of_the_directory_is_refused() {
        let (_root, dir) = plugin("weather", &[("plugin.toml", GOOD), ("extra.md", "x")]);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::os::unix::fs::symlink("/bin/sh", dir.join("bin/run")).unwrap();
        let e = read(&dir).unwrap_err();
        assert!(e.contains("leads outside"), "{e}");
    }
}
