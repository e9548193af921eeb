//! A plugin's tools as functions ([`crate::execution::plugins`]): `<plugin>__<tool>`, source
//! `plugin`, asking by default at a moderate danger unless its manifest says otherwise, run
//! in the calling user's process of the plugin. Each plugin with tools is a capability of the
//! chain (reference 004), after Hero's own.

use futures::future::BoxFuture;
use hero_shared::calls::{AutoApprove, DangerLevel, FunctionPermissions, Permission};
use serde_json::Value;

use super::{Capability, Ctx, Function, Registry, Spec, ToolResult};
use crate::execution::plugins::{Plugin, Plugins, ToolDef};

/// The longest name a function may have (the providers' bound on a tool's name).
pub const MAX_NAME_CHARS: usize = 64;
/// The longest description a plugin's tool may have.
pub const MAX_DESCRIPTION_CHARS: usize = 1_000;
/// The largest input schema a plugin's tool may have, as JSON.
pub const MAX_SCHEMA_BYTES: usize = 16 << 10;

/// One tool of one plugin.
pub struct PluginTool {
    spec: Spec,
    plugin: String,
    tool: String,
}

impl Function for PluginTool {
    fn spec(&self) -> Spec {
        self.spec.clone()
    }

    fn run<'a>(
        &'a self,
        cx: &'a Ctx<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            cx.st
                .plugins
                .call(&cx.st.sandbox, &self.plugin, cx.user_id, &self.tool, args)
                .await
        })
    }
}

/// `tool` of `plugin` as a function; why not, if it cannot be one: a name over
/// [`MAX_NAME_CHARS`] or of other characters than letters, digits, `_` and `-`, a
/// description over [`MAX_DESCRIPTION_CHARS`], a schema over [`MAX_SCHEMA_BYTES`] or not an
/// object's.
pub fn function(plugin: &Plugin, tool: &ToolDef) -> Result<PluginTool, String> {
    let name = plugin.function_name(&tool.name);
    if name.len() > MAX_NAME_CHARS {
        return Err(format!(
            "its function's name {name} is longer than {MAX_NAME_CHARS} characters"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(format!(
            "its name {:?} has characters other than letters, digits, _ and -",
            tool.name
        ));
    }
    if tool.description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(format!(
            "its description is longer than {MAX_DESCRIPTION_CHARS} characters"
        ));
    }
    let size = serde_json::to_vec(&tool.schema).map_or(usize::MAX, |v| v.len());
    if size > MAX_SCHEMA_BYTES {
        return Err(format!(
            "its input schema is {size} bytes, more than {MAX_SCHEMA_BYTES}"
        ));
    }
    if tool.schema.get("type").is_some_and(|t| t != "object") {
        return Err("its input schema is not an object's".into());
    }
    let settings = plugin
        .manifest
        .as_ref()
        .and_then(|m| m.functions.get(&tool.name))
        .copied()
        .unwrap_or_default();
    let description = match tool.description.trim() {
        "" => format!("A tool of the plugin {}.", plugin.name),
        d => d.to_owned(),
    };
    Ok(PluginTool {
        spec: Spec {
            name: name.into(),
            description: description.into(),
            plugin: Some(plugin.name.clone()),
            default: match settings.auto_approve {
                Some(true) => Permission::Always,
                _ => Permission::Ask,
            },
            permissions: FunctionPermissions {
                auto_approve: AutoApprove::Always,
                danger_level: settings.danger.unwrap_or(DangerLevel::Moderate),
            },
            answered_by_user: false,
            schema: tool.schema.clone(),
            examples: Vec::new(),
        },
        plugin: plugin.name.clone(),
        tool: tool.name.clone(),
    })
}

/// A plugin with tools as a capability of the chain (reference 004, source `plugin`): its
/// tools, and no instructions of its own.
struct PluginCapability {
    name: String,
    tools: Vec<PluginTool>,
}

impl Capability for PluginCapability {
    fn name(&self) -> &str {
        &self.name
    }

    fn source(&self) -> &'static str {
        "plugin"
    }

    fn tools(&self) -> Vec<Spec> {
        self.tools.iter().map(|t| t.spec.clone()).collect()
    }

    fn prompt(&self) -> &str {
        ""
    }

    fn handle<'a>(
        &'a self,
        cx: &'a Ctx<'a>,
        tool: &'a str,
        input: &'a Value,
    ) -> BoxFuture<'a, Option<Result<ToolResult, String>>> {
        Box::pin(async move {
            let t = self.tools.iter().find(|t| t.spec.name == tool)?;
            Some(t.run(cx, input).await.map(|result| ToolResult {
                result,
                pending_change_id: None,
            }))
        })
    }
}

/// Adds each plugin with tools to the chain as a capability; a tool that cannot be a
/// function (see [`function`]) is skipped and logged, and one whose name another has already
/// is left to its first claimant (logged by the registry).
pub fn register(registry: &mut Registry, plugins: &Plugins) {
    for plugin in plugins.list() {
        let tools: Vec<PluginTool> = plugin
            .tools
            .iter()
            .filter_map(|tool| {
                function(plugin, tool)
                    .inspect_err(|why| {
                        tracing::warn!(plugin = %plugin.name, tool = %tool.name, "skipped: {why}")
                    })
                    .ok()
            })
            .collect();
        if !tools.is_empty() {
            registry.add_capability(std::sync::Arc::new(PluginCapability {
                name: plugin.name.clone(),
                tools,
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::plugins::Manifest;
    use crate::execution::plugins::manifest::FunctionSettings;
    use hero_shared::api::PluginStatus;
    use serde_json::json;

    fn plugin(functions: &[(&str, FunctionSettings)]) -> Plugin {
        Plugin {
            name: "kit".into(),
            dir: "/nowhere".into(),
            manifest: Some(Manifest {
                name: "kit".into(),
                version: "1".into(),
                description: String::new(),
                program: "/nowhere/run".into(),
                args: Vec::new(),
                functions: functions
                    .iter()
                    .map(|(n, f)| ((*n).to_owned(), *f))
                    .collect(),
                processes: Vec::new(),
            }),
            status: PluginStatus::Ready,
            error: None,
            tools: Vec::new(),
        }
    }

    fn tool(name: &str, description: &str, schema: Value) -> ToolDef {
        ToolDef {
            name: name.into(),
            description: description.into(),
            schema,
        }
    }

    /// A tool becomes a function within its bounds, asking at a moderate danger unless its
    /// manifest says otherwise; past a bound it is refused, saying which.
    #[test]
    fn a_tool_is_a_function_within_its_bounds() {
        let object = json!({"type": "object", "properties": {}});
        let f = function(&plugin(&[]), &tool("echo", "Says it back.", object.clone())).unwrap();
        assert_eq!(f.spec.name, "kit__echo");
        assert_eq!(f.spec.plugin.as_deref(), Some("kit"));
        assert_eq!(f.spec.default, Permission::Ask);
        assert_eq!(f.spec.permissions.danger_level, DangerLevel::Moderate);
        let trusted = FunctionSettings {
            danger: Some(DangerLevel::Safe),
            auto_approve: Some(true),
        };
        let f = function(
            &plugin(&[("echo", trusted)]),
            &tool("echo", "", object.clone()),
        )
        .unwrap();
        assert_eq!(f.spec.default, Permission::Always);
        assert_eq!(f.spec.permissions.danger_level, DangerLevel::Safe);
        assert_eq!(f.spec.description, "A tool of the plugin kit.");

        let long = "d".repeat(MAX_DESCRIPTION_CHARS + 1);
        let why = function(&plugin(&[]), &tool("echo", &long, object.clone()))
            .err()
            .unwrap();
        assert!(why.contains("description"), "{why}");
        let big = json!({"type": "object", "description": "s".repeat(MAX_SCHEMA_BYTES)});
        let why = function(&plugin(&[]), &tool("echo", "d", big))
            .err()
            .unwrap();
        assert!(why.contains("schema"), "{why}");
        let why = function(&plugin(&[]), &tool("echo", "d", json!({"type": "string"})))
            .err()
            .unwrap();
        assert!(why.contains("object"), "{why}");
        let why = function(&plugin(&[]), &tool("e cho", "d", object.clone()))
            .err()
            .unwrap();
        assert!(why.contains("characters"), "{why}");
        let why = function(&plugin(&[]), &tool(&"t".repeat(60), "d", object))
            .err()
            .unwrap();
        assert!(why.contains("64"), "{why}");
    }
}
