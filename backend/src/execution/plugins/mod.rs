//! Plugins (reference 000 "Plugin system with ability exports"): programs an administrator
//! installs in `DATA_DIR/plugins/<name>/`, each described by its [`manifest`], exporting
//! abilities: processes (markdown files it ships, source `plugin`, ids
//! `plugin:<plugin>__<name>`) and, run as MCP servers over stdio in the bash sandbox, tools.
//!
//! Read once at start-up ([`Plugins::load`], then [`Plugins::discover`]): a plugin whose
//! manifest is wrong, or whose tools cannot be listed, is `failed` with the reason; one the
//! sandbox cannot run here (no bubblewrap) is `unavailable` with its reason; start-up goes
//! on either way. A ready plugin's tools are functions `<plugin>__<tool>` (registered by
//! [`crate::execution::functions::plugin`]), run by its [`host`]: a process per plugin and
//! user. A plugin with a process running is `running`.

pub mod host;
pub mod manifest;

use std::path::PathBuf;
use std::sync::Arc;

use hero_shared::api::{PluginDto, PluginStatus};
use serde_json::Value;

pub use host::{PluginSettings, ToolDef};
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
    /// Its tools, as its process listed them at start-up.
    pub tools: Vec<ToolDef>,
}

impl Plugin {
    /// The id of its process `name`.
    pub fn process_id(&self, process: &str) -> String {
        format!("plugin:{}__{process}", self.name)
    }

    /// The name its tool `tool` has as a function.
    pub fn function_name(&self, tool: &str) -> String {
        format!("{}__{tool}", self.name)
    }

    /// `running` stands for `ready` while a process of it runs.
    pub fn dto(&self, running: bool) -> PluginDto {
        let m = self.manifest.as_ref();
        PluginDto {
            name: self.name.clone(),
            version: m.map(|m| m.version.clone()).unwrap_or_default(),
            description: m.map(|m| m.description.clone()).unwrap_or_default(),
            status: match self.status {
                PluginStatus::Ready if running => PluginStatus::Running,
                s => s,
            },
            error: self.error.clone(),
            abilities: m
                .into_iter()
                .flat_map(|m| &m.processes)
                .map(|p| self.process_id(&p.name))
                .chain(
                    self.tools
                        .iter()
                        .map(|t| format!("plugin:{}", self.function_name(&t.name))),
                )
                .collect(),
        }
    }
}

/// Why `plugin`'s tools cannot all be abilities, if they cannot: two of one name, or one
/// named as one of its processes.
fn clash(plugin: &Plugin, tools: &[ToolDef]) -> Option<String> {
    let processes = plugin.manifest.iter().flat_map(|m| &m.processes);
    for (i, t) in tools.iter().enumerate() {
        if tools[..i].iter().any(|o| o.name == t.name) {
            return Some(format!("it lists two tools named {:?}", t.name));
        }
        if processes.clone().any(|p| p.name == t.name) {
            return Some(format!(
                "a tool and a process of it are both named {:?}",
                t.name
            ));
        }
    }
    None
}

/// The plugins start-up found, by directory name.
#[derive(Default)]
pub struct Plugins {
    list: Vec<Plugin>,
    settings: PluginSettings,
    /// Their processes running.
    live: Arc<host::Live>,
}

/// The most plugin directories read.
pub const MAX_PLUGINS: usize = 100;

impl Plugins {
    /// Reads every plugin directory under `settings.dir` (none: no plugins). `refused`: why
    /// the sandbox cannot run a program here, if it cannot (asked only when there is a
    /// plugin).
    pub fn load(settings: &PluginSettings, refused: impl FnOnce() -> Option<String>) -> Plugins {
        let none = || Plugins {
            settings: settings.clone(),
            ..Plugins::default()
        };
        let Some(root) = settings.dir.as_deref() else {
            return none();
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
            return none();
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
                    tools: Vec::new(),
                }
            })
            .collect();
        Plugins { list, ..none() }
    }

    /// Runs each ready plugin once, all at once, to list its tools: one that cannot be run
    /// or listed is failed with the reason. Its state directory for this is
    /// `plugin-state/<plugin>/_start`.
    pub async fn discover(&mut self, sandbox: &crate::execution::sandbox::Sandbox) {
        let state = &self.settings.state;
        let listed = futures::future::join_all(self.list.iter().map(|p| async move {
            if p.status != PluginStatus::Ready {
                return None;
            }
            Some(host::discover(sandbox, p, &state.join(&p.name).join("_start")).await)
        }))
        .await;
        for (p, listed) in self.list.iter_mut().zip(listed) {
            match listed {
                None => {}
                Some(Ok(tools)) => match clash(p, &tools) {
                    None => p.tools = tools,
                    Some(why) => {
                        tracing::warn!(plugin = %p.name, "plugin failed: {why}");
                        p.status = PluginStatus::Failed;
                        p.error = Some(why);
                    }
                },
                Some(Err(why)) => {
                    tracing::warn!(plugin = %p.name, "plugin failed: {why}");
                    p.status = PluginStatus::Failed;
                    p.error = Some(why);
                }
            }
        }
    }

    pub fn list(&self) -> &[Plugin] {
        &self.list
    }

    /// What `GET /api/plugins` shows.
    pub fn dtos(&self) -> Vec<PluginDto> {
        self.list
            .iter()
            .map(|p| p.dto(self.live.running(&p.name)))
            .collect()
    }

    /// How many plugin processes run now.
    pub fn processes_running(&self) -> usize {
        self.live.count()
    }

    /// Calls `plugin`'s `tool` for `user_id` in that user's process of it.
    pub async fn call(
        &self,
        sandbox: &crate::execution::sandbox::Sandbox,
        plugin: &str,
        user_id: i64,
        tool: &str,
        args: &Value,
    ) -> Result<String, String> {
        let Some(p) = self.list.iter().find(|p| p.name == plugin) else {
            return Err(format!("there is no plugin {plugin}"));
        };
        if p.status == PluginStatus::Failed || p.status == PluginStatus::Unavailable {
            return Err(format!(
                "the plugin {plugin} cannot run: {}",
                p.error.as_deref().unwrap_or("it is not ready")
            ));
        }
        host::call(sandbox, &self.live, &self.settings, p, user_id, tool, args).await
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
    use std::path::Path;

    fn at(dir: &Path) -> PluginSettings {
        PluginSettings {
            dir: Some(dir.to_path_buf()),
            ..PluginSettings::default()
        }
    }

    fn install(root: &Path, name: &str, manifest: &str) {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::write(dir.join("plugin.toml"), manifest).unwrap();
        std::fs::write(dir.join("bin/run"), "#!/bin/sh\n").unwrap();
    }

    /// Two tools of one name, or a tool named as a process of the plugin: it fails, saying
    /// which name.
    #[test]
    fn tools_that_clash_fail_their_plugin() {
        let tool = |name: &str| ToolDef {
            name: name.into(),
            description: String::new(),
            schema: serde_json::json!({"type": "object"}),
        };
        let plugin = Plugin {
            name: "kit".into(),
            dir: PathBuf::from("/nowhere"),
            manifest: Some(Manifest {
                name: "kit".into(),
                version: "1".into(),
                description: String::new(),
                program: PathBuf::from("/nowhere/run"),
                args: Vec::new(),
                functions: Default::default(),
                processes: vec![PluginProcess {
                    name: "brief".into(),
                    content: "Brief.".into(),
                }],
            }),
            status: PluginStatus::Ready,
            error: None,
            tools: Vec::new(),
        };
        assert_eq!(clash(&plugin, &[tool("echo"), tool("read")]), None);
        let twice = clash(&plugin, &[tool("echo"), tool("echo")]).unwrap();
        assert!(twice.contains("two tools named \"echo\""), "{twice}");
        let both = clash(&plugin, &[tool("brief")]).unwrap();
        assert!(both.contains("both named \"brief\""), "{both}");
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
        let loaded = Plugins::load(&at(root.path()), || Some("no bubblewrap here".into()));
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
        let ready = Plugins::load(&at(root.path()), || None);
        assert_eq!(ready.list()[1].status, PluginStatus::Ready);

        let empty = tempfile::tempdir().unwrap();
        let none = Plugins::load(&at(empty.path()), || panic!("the sandbox was asked"));
        assert!(none.list().is_empty());
        let missing = Plugins::load(&at(&empty.path().join("nothing")), || {
            panic!("the sandbox was asked")
        });
        assert!(missing.list().is_empty());
    }
}
