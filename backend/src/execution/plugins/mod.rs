//! Plugins (reference 000 "Plugin system with ability exports"): programs an administrator
//! installs in `DATA_DIR/plugins/<name>/`, each described by its [`manifest`], exporting
//! abilities: processes (markdown files it ships, source `plugin`, ids
//! `plugin:<plugin>__<name>`) and, run as MCP servers over stdio in the bash sandbox, tools.
//!
//! Read once at start-up ([`Plugins::load`]): a plugin whose manifest is wrong is `failed`
//! with the reason, one the sandbox cannot run here (no bubblewrap) is `unavailable` with
//! its reason, and start-up goes on either way. Running them (a process per plugin and user,
//! its tools as functions `<plugin>__<tool>`) is not built yet: a ready plugin's processes
//! are its abilities so far.

pub mod manifest;

use std::path::{Path, PathBuf};

use hero_shared::api::{PluginDto, PluginStatus};

pub use manifest::{Manifest, PluginProcess};

/// One plugin directory as start-up found it.
#[derive(Debug, Clone)]
pub struct Plugin {
    /// Its directory's name (its name, when its manifest is good).
    pub name: String,
    pub dir: PathBuf,
    /// Its manifest, when it was read.
    pub manifest: Option<Manifest>,
    pub status: PluginStatus,
    /// Why it is failed or unavailable.
    pub error: Option<String>,
}

impl Plugin {
    /// The id of its process `name`.
    pub fn process_id(&self, process: &str) -> String {
        format!("plugin:{}__{process}", self.name)
    }

    pub fn dto(&self) -> PluginDto {
        let m = self.manifest.as_ref();
        PluginDto {
            name: self.name.clone(),
            version: m.map(|m| m.version.clone()).unwrap_or_default(),
            description: m.map(|m| m.description.clone()).unwrap_or_default(),
            status: self.status,
            error: self.error.clone(),
            abilities: m
                .into_iter()
                .flat_map(|m| &m.processes)
                .map(|p| self.process_id(&p.name))
                .collect(),
        }
    }
}

/// The plugins start-up found, by directory name.
#[derive(Debug, Default)]
pub struct Plugins {
    list: Vec<Plugin>,
}

/// The most plugin directories read.
pub const MAX_PLUGINS: usize = 100;

impl Plugins {
    /// Reads every plugin directory under `root` (none: no plugins). `refused`: why the
    /// sandbox cannot run a program here, if it cannot (asked only when there is a plugin).
    pub fn load(root: Option<&Path>, refused: impl FnOnce() -> Option<String>) -> Plugins {
        let Some(root) = root else {
            return Plugins::default();
        };
        let mut dirs: Vec<PathBuf> = match std::fs::read_dir(root) {
            Ok(entries) => entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                tracing::error!(dir = %root.display(), error = %e, "the plugins' directory cannot be read; no plugin is loaded");
                Vec::new()
            }
        };
        dirs.sort();
        if dirs.len() > MAX_PLUGINS {
            tracing::error!(
                found = dirs.len(),
                "more plugin directories than {MAX_PLUGINS}; the first {MAX_PLUGINS} by name are read"
            );
            dirs.truncate(MAX_PLUGINS);
        }
        if dirs.is_empty() {
            return Plugins::default();
        }
        let refused = refused();
        let list = dirs
            .into_iter()
            .map(|dir| {
                let name = dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let read = manifest::read(&dir);
                let (status, error, manifest) = match (read, &refused) {
                    (Err(why), _) => (PluginStatus::Failed, Some(why), None),
                    (Ok(m), Some(why)) => (
                        PluginStatus::Unavailable,
                        Some(format!(
                            "plugins run in the bash sandbox, which cannot run here: {why}"
                        )),
                        Some(m),
                    ),
                    (Ok(m), None) => (PluginStatus::Ready, None, Some(m)),
                };
                match &error {
                    Some(why) => tracing::warn!(plugin = %name, status = status.as_str(), "{why}"),
                    None => tracing::info!(plugin = %name, "plugin ready"),
                }
                Plugin {
                    name,
                    dir,
                    manifest,
                    status,
                    error,
                }
            })
            .collect();
        Plugins { list }
    }

    pub fn list(&self) -> &[Plugin] {
        &self.list
    }

    /// The processes of the plugins that are not failed: `(plugin, process)`.
    pub fn processes(&self) -> impl Iterator<Item = (&Plugin, &PluginProcess)> {
        self.list
            .iter()
            .filter(|p| p.status != PluginStatus::Failed)
            .flat_map(|p| {
                p.manifest
                    .iter()
                    .flat_map(|m| &m.processes)
                    .map(move |process| (p, process))
            })
    }

    /// A plugin's process by its id's rest (`<plugin>__<name>`).
    pub fn process(&self, id: &str) -> Option<(&Plugin, &PluginProcess)> {
        let (plugin, name) = id.split_once("__")?;
        self.processes()
            .find(|(p, process)| p.name == plugin && process.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn install(root: &Path, name: &str, manifest: &str) {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::write(dir.join("plugin.toml"), manifest).unwrap();
        std::fs::write(dir.join("bin/run"), "#!/bin/sh\n").unwrap();
    }

    /// Where the sandbox cannot run, a good plugin is unavailable with the reason; a wrong
    /// one is failed all the same; the sandbox is not asked when there is no plugin.
    #[test]
    fn states_say_why_a_plugin_cannot_run() {
        let root = tempfile::tempdir().unwrap();
        install(
            root.path(),
            "good",
            "name = \"good\"\nversion = \"1\"\ncommand = \"bin/run\"\n",
        );
        install(root.path(), "bad", "name = 3\n");
        let loaded = Plugins::load(Some(root.path()), || Some("no bubblewrap here".into()));
        let seen: Vec<(&str, PluginStatus)> = loaded
            .list()
            .iter()
            .map(|p| (p.name.as_str(), p.status))
            .collect();
        assert_eq!(
            seen,
            [
                ("bad", PluginStatus::Failed),
                ("good", PluginStatus::Unavailable)
            ]
        );
        let why = loaded.list()[1].error.as_deref().unwrap();
        assert!(why.contains("no bubblewrap here"), "{why}");
        let ready = Plugins::load(Some(root.path()), || None);
        assert_eq!(ready.list()[1].status, PluginStatus::Ready);

        let empty = tempfile::tempdir().unwrap();
        let none = Plugins::load(Some(empty.path()), || panic!("the sandbox was asked"));
        assert!(none.list().is_empty());
        let missing = Plugins::load(Some(&empty.path().join("nothing")), || {
            panic!("the sandbox was asked")
        });
        assert!(missing.list().is_empty());
    }
}
