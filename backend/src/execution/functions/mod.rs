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

pub mod agent_queue;
pub mod ask;
pub mod bash;
pub mod builtin;
pub mod bus;
pub mod commands;
pub mod context_file;
pub mod help;
pub mod memory;
pub mod plugin;
pub mod process;
pub mod schema;
pub mod skills;
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

/// Every registered function, by name, in registration order, each with its spec as a
/// native tool (built once, shared by every request that offers it).
pub struct Registry {
    functions: Vec<(Spec, Box<dyn Function>, Arc<crate::providers::Tool>)>,
    /// What every call the gate lets through is routed past ([`bus`]).
    pub bus: bus::Bus,
}

impl Registry {
    /// No function, and a bus with no subscriber or handler.
    pub fn empty() -> Registry {
        Registry {
            functions: Vec::new(),
            bus: bus::Bus::default(),
        }
    }

    /// Adds a function; a second one of the same name replaces the first.
    pub fn register(&mut self, f: impl Function) {
        let spec = f.spec();
        self.functions.retain(|(s, _, _)| s.name != spec.name);
        let tool = crate::providers::Tool::new(&spec.name, &spec.description, &spec.schema);
        self.functions.push((spec, Box::new(f), Arc::new(tool)));
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

    /// Each spec with itself as a native tool.
    pub fn tools(&self) -> impl Iterator<Item = (&Spec, &Arc<crate::providers::Tool>)> {
        self.functions.iter().map(|(s, _, t)| (s, t))
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
