//! The function registry (reference 000, "Function Registration"): what an agent may ask the
//! system to run. Each function is one module with a [`Spec`] (name, description, default
//! permission, argument schema, examples) and a handler; [`builtin::registry`] lists them.
//! The registry knows no handler by name: the handlers act on what is above it (an
//! answer, an agent's files), and only the composition root takes the builtin list.
//!
//! Every call the gate lets through reaches its handler past the registry's [`bus`]
//! (subscribers, and handlers that may transform or intercept it).
//!
//! Adding a function: write a module with a type implementing [`Function`], and add one
//! line to [`builtin::registry`]. `help` answers from the specs, the Permissions page lists
//! them, and providers are offered them as tools.
//!
//! Capabilities (reference 004) are the registry's chain: Hero's functions first, then each
//! [`Capability`] added with [`Registry::add_capability`] (`config`, `tasks`, then plugins' and
//! MCP servers' tools), each with tools, default instructions (kept per user as the config key
//! `capability:<name>`) and a handler that answers `None` for a tool not its own.
//! [`Registry::handle_tool_call`] walks the chain, the first `Some` winning; a tool name
//! claimed twice is the first claimant's.

pub mod agent_queue;
pub mod ask;
pub mod bash;
pub mod builtin;
pub mod bus;
pub mod commands;
pub mod config;
pub mod context_file;
pub mod help;
pub mod memory;
pub mod plugin;
pub mod process;
pub mod schema;
pub mod skills;
pub mod tasks;
pub mod update_prompt;
pub mod user_notify;
pub mod websearch;

use std::borrow::Cow;
use std::sync::Arc;

use futures::future::BoxFuture;
use hero_shared::calls::{FunctionPermissions, Permission};
use hero_shared::hml::Element;
use serde_json::Value;

use crate::AppState;

/// What a function is, for the registry, `help`, the Permissions page and the providers.
#[derive(Debug, Clone)]
pub struct Spec {
    pub name: Cow<'static, str>,
    pub description: Cow<'static, str>,
    /// The plugin it is a tool of, if it is one (its ability's source is `plugin`).
    pub plugin: Option<String>,
    /// Its level for a user who has not chosen one.
    pub default: Permission,
    /// Whether it may be allowed always, and how dangerous it is (reference 000).
    pub permissions: FunctionPermissions,
    /// A question for the user (`ask`): it is not run but answered, by the user (or by its
    /// default at its timeout), and the answer is its result.
    pub answered_by_user: bool,
    /// A JSON Schema object of the subset [`schema::validate`] reads.
    pub schema: Value,
    /// Example arguments.
    pub examples: Vec<Value>,
}

/// What a handler is given besides its arguments.
pub struct Ctx<'a> {
    pub st: &'a AppState,
    pub user_id: i64,
    pub session_id: i64,
    /// The session's agent, on whose behalf a call of the agent's acts (if known).
    pub agent_id: Option<i64>,
    pub registry: &'a Registry,
    /// The call's request frame (004's pending change is named by it).
    pub request_id: &'a str,
}

/// A function's handler. Its output is text for the agent; its error, one line for the
/// agent and the user. Both are cut to [`MAX_OUTPUT_CHARS`] by the caller.
pub trait Function: Send + Sync + 'static {
    fn spec(&self) -> Spec;

    /// The arguments an executable element of the function's name stands for
    /// (`<websearch>words</websearch>`); `None` when the element does not call it.
    fn args_of_element(&self, _e: &Element) -> Option<Value> {
        None
    }

    fn run<'a>(&'a self, cx: &'a Ctx<'a>, args: &'a Value)
    -> BoxFuture<'a, Result<String, String>>;
}

/// The most of a function's output the agent is given (characters); past it the output is
/// cut and says so.
pub const MAX_OUTPUT_CHARS: usize = 16_000;

/// What a capability's handler answers (004's `ToolResult`): the agent's result, and the
/// change it proposed, if any (its `pendingChangeId`).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub result: String,
    pub pending_change_id: Option<String>,
}

/// A capability (reference 004, "Capability Interface"): a name, its tools, its default
/// instructions, and a handler that answers `None` for a tool that is not its own, so the
/// chain asks the next.
pub trait Capability: Send + Sync + 'static {
    fn name(&self) -> &str;

    /// Where it comes from: `builtin`, `mcp` or `plugin`.
    fn source(&self) -> &'static str {
        "builtin"
    }

    /// Its tools: what the gate, `help`, the Permissions page and the providers see.
    fn tools(&self) -> Vec<Spec>;

    /// Its default instructions, the first version of `capability:<name>` for each user.
    fn prompt(&self) -> &str;

    fn handle<'a>(
        &'a self,
        cx: &'a Ctx<'a>,
        tool: &'a str,
        input: &'a Value,
    ) -> BoxFuture<'a, Option<Result<ToolResult, String>>>;
}

/// One capability of the chain, as the registry lists it.
#[derive(Clone)]
pub struct Link {
    pub name: String,
    pub source: &'static str,
    /// The tools it claimed (a name another claimed first is not among them).
    pub tools: Vec<String>,
    /// Its default instructions; none for Hero's functions.
    pub prompt: Option<String>,
    capability: Option<Arc<dyn Capability>>,
}

impl Link {
    /// The config key of its instructions, if it has any.
    pub fn prompt_key(&self) -> Option<String> {
        self.prompt
            .as_ref()
            .map(|_| format!("capability:{}", self.name))
    }
}

/// The name of the chain's first link, Hero's own functions.
pub const FUNCTIONS: &str = "functions";

/// Every registered function, by name, in registration order, each with its spec as a
/// native tool (built once, shared by every request that offers it), and the chain of
/// capabilities they belong to.
///
/// A user's registry is Hero's with the user's own capabilities added ([`Registry::with`]:
/// their MCP servers); it shares Hero's functions and bus.
#[derive(Clone)]
pub struct Registry {
    functions: Vec<(Spec, Arc<dyn Function>, Arc<crate::providers::Tool>)>,
    chain: Vec<Link>,
    /// What every call the gate lets through is routed past ([`bus`]).
    pub bus: Arc<bus::Bus>,
}

/// A capability's tool as a function of the registry: its call walks the chain.
struct Chained(Spec);

impl Function for Chained {
    fn spec(&self) -> Spec {
        self.0.clone()
    }

    fn run<'a>(
        &'a self,
        cx: &'a Ctx<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            match cx.registry.handle_tool_call(cx, &self.0.name, args).await {
                Some(r) => r.map(|t| t.result),
                None => Err(format!("no capability answers `{}`", self.0.name)),
            }
        })
    }
}

impl Registry {
    /// No function, and a bus with no subscriber or handler.
    pub fn empty() -> Registry {
        Registry {
            functions: Vec::new(),
            chain: vec![Link {
                name: FUNCTIONS.to_owned(),
                source: "builtin",
                tools: Vec::new(),
                prompt: None,
                capability: None,
            }],
            bus: Arc::default(),
        }
    }

    /// The bus, to add handlers and subscribers to before the registry is shared.
    ///
    /// # Panics
    /// Once a copy of the registry has been made ([`Registry::with`]).
    pub fn bus_mut(&mut self) -> &mut bus::Bus {
        Arc::get_mut(&mut self.bus).expect("the bus is changed before the registry is shared")
    }

    /// This registry with `capabilities` added at the end of its chain (a user's own: their
    /// MCP servers). Hero's functions and the bus are shared, not copied.
    pub fn with(&self, capabilities: impl IntoIterator<Item = Arc<dyn Capability>>) -> Registry {
        let mut r = self.clone();
        for c in capabilities {
            r.add_capability(c);
        }
        r
    }

    /// Adds a function of Hero's own; a second one of the same name replaces the first.
    pub fn register(&mut self, f: impl Function) {
        let spec = f.spec();
        self.functions.retain(|(s, _, _)| s.name != spec.name);
        for link in &mut self.chain {
            link.tools.retain(|t| *t != spec.name);
        }
        self.chain[0].tools.push(spec.name.to_string());
        let tool = crate::providers::Tool::new(&spec.name, &spec.description, &spec.schema);
        self.functions.push((spec, Arc::new(f), Arc::new(tool)));
    }

    /// Adds a capability at the end of the chain: its tools become the registry's, but a
    /// name already claimed stays its first claimant's.
    pub fn add_capability(&mut self, c: Arc<dyn Capability>) {
        let mut claimed = Vec::new();
        for spec in c.tools() {
            if self.get(&spec.name).is_some() {
                tracing::warn!(capability = c.name(), tool = %spec.name, "a tool another capability claimed first is left out");
                continue;
            }
            claimed.push(spec.name.to_string());
            let tool = crate::providers::Tool::new(&spec.name, &spec.description, &spec.schema);
            self.functions
                .push((spec.clone(), Arc::new(Chained(spec)), Arc::new(tool)));
        }
        // A capability with no instructions (an MCP server that sends none) has no key.
        let prompt = Some(c.prompt().to_owned()).filter(|p| !p.trim().is_empty());
        self.chain.push(Link {
            name: c.name().to_owned(),
            source: c.source(),
            tools: claimed,
            prompt,
            capability: Some(c),
        });
    }

    pub fn get(&self, name: &str) -> Option<(&Spec, &dyn Function)> {
        self.functions
            .iter()
            .find(|(s, _, _)| s.name == name)
            .map(|(s, f, _)| (s, f.as_ref()))
    }

    pub fn specs(&self) -> impl Iterator<Item = &Spec> {
        self.functions.iter().map(|(s, _, _)| s)
    }

    /// Each spec with itself as a native tool (004's `getAllTools`).
    pub fn tools(&self) -> impl Iterator<Item = (&Spec, &Arc<crate::providers::Tool>)> {
        self.functions.iter().map(|(s, _, t)| (s, t))
    }

    /// The capability a tool belongs to, when it is not one of Hero's own functions.
    pub fn capability_of(&self, tool: &str) -> Option<&str> {
        self.chain
            .iter()
            .skip(1)
            .find(|l| l.tools.iter().any(|t| t == tool))
            .map(|l| l.name.as_str())
    }

    /// The chain: Hero's functions, then each capability in the order added.
    pub fn chain(&self) -> &[Link] {
        &self.chain
    }

    /// The capabilities with instructions, in the chain's order: (name, default prompt).
    pub fn prompts(&self) -> impl Iterator<Item = (&str, &str)> {
        self.chain
            .iter()
            .filter_map(|l| Some((l.name.as_str(), l.prompt.as_deref()?)))
    }

    /// 004's `handleToolCall`: each link of the chain is asked in turn, and the first that
    /// answers `Some` answers the call (Hero's functions answer for their own names).
    pub async fn handle_tool_call(
        &self,
        cx: &Ctx<'_>,
        tool: &str,
        input: &Value,
    ) -> Option<Result<ToolResult, String>> {
        for link in &self.chain {
            let answer = match &link.capability {
                // Hero's functions: those of its own names.
                None if link.tools.iter().any(|t| t == tool) => match self.get(tool) {
                    Some((_, f)) => Some(f.run(cx, input).await.map(|result| ToolResult {
                        result,
                        pending_change_id: None,
                    })),
                    None => None,
                },
                None => None,
                Some(c) => c.handle(cx, tool, input).await,
            };
            if answer.is_some() {
                return answer;
            }
        }
        None
    }
}

/// Cuts text to [`MAX_OUTPUT_CHARS`], saying so.
pub fn cut(mut text: String) -> String {
    if let Some((at, _)) = text.char_indices().nth(MAX_OUTPUT_CHARS) {
        text.truncate(at);
        text.push_str("\n[… cut: the output was longer]");
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A capability answering `answers` with its name and the tool, `None` for the rest.
    struct Cap {
        name: &'static str,
        claims: &'static [&'static str],
        answers: &'static [&'static str],
    }

    impl Capability for Cap {
        fn name(&self) -> &str {
            self.name
        }

        fn tools(&self) -> Vec<Spec> {
            let mut s = help::Help.spec();
            self.claims
                .iter()
                .map(|n| {
                    s.name = (*n).into();
                    s.clone()
                })
                .collect()
        }

        fn prompt(&self) -> &str {
            "instructions"
        }

        fn handle<'a>(
            &'a self,
            _cx: &'a Ctx<'a>,
            tool: &'a str,
            _input: &'a Value,
        ) -> BoxFuture<'a, Option<Result<ToolResult, String>>> {
            Box::pin(async move {
                self.answers.contains(&tool).then(|| {
                    Ok(ToolResult {
                        result: format!("{}:{tool}", self.name),
                        pending_change_id: None,
                    })
                })
            })
        }
    }

    #[tokio::test]
    async fn the_chain_passes_on_none_and_the_first_some_wins() {
        let (_dir, st) = crate::test_support::state().await;
        let mut r = Registry::empty();
        r.register(help::Help);
        r.add_capability(Arc::new(Cap {
            name: "a",
            claims: &["x", "y", "help"],
            answers: &["x"],
        }));
        r.add_capability(Arc::new(Cap {
            name: "b",
            claims: &["x", "y", "z"],
            answers: &["x", "y", "z", "help"],
        }));
        // A name claimed twice is its first claimant's: Hero's `help`, then a's x and y.
        let claimed: Vec<(&str, Vec<&str>)> = r
            .chain()
            .iter()
            .map(|l| {
                (
                    l.name.as_str(),
                    l.tools.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            claimed,
            [
                (FUNCTIONS, vec!["help"]),
                ("a", vec!["x", "y"]),
                ("b", vec!["z"])
            ]
        );
        assert_eq!(r.prompts().map(|(n, _)| n).collect::<Vec<_>>(), ["a", "b"]);
        let cx = Ctx {
            st: &st,
            user_id: 1,
            session_id: 1,
            agent_id: None,
            registry: &r,
            request_id: "r",
        };
        let call = |tool: &'static str| {
            let (r, cx) = (&r, &cx);
            async move {
                r.handle_tool_call(cx, tool, &json!({}))
                    .await
                    .map(|a| a.map(|t| t.result))
            }
        };
        assert_eq!(
            call("x").await,
            Some(Ok("a:x".into())),
            "the first Some wins"
        );
        assert_eq!(
            call("y").await,
            Some(Ok("b:y".into())),
            "a's None passes on"
        );
        assert_eq!(call("z").await, Some(Ok("b:z".into())));
        assert_eq!(call("w").await, None, "no link answers");
        let help = call("help").await.unwrap().unwrap();
        assert!(
            help.contains("## help\n"),
            "Hero's own function first: {help}"
        );
        // Through the registry, as the gate's calls run: the chain answers.
        let (_, f) = r.get("y").unwrap();
        assert_eq!(f.run(&cx, &json!({})).await, Ok("b:y".into()));
    }
}
