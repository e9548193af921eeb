//! The bus's middleware (reference 000, "Interactions System" and "Middleware Pipeline"):
//! every call the gate let through is routed to its function past the registry's
//! subscribers and handlers. Subscribers see each routed call; handlers run one after
//! another in alphabetical order of their names, and each may let the call pass, change its
//! arguments for the ones after it and the function ([`Handled::Transform`]), or answer it
//! itself ([`Handled::Intercept`]: the function does not run, and the later handlers are
//! not asked). Cross-cutting work (counting, logging, a rate limit) is one of these, not a
//! change to every function.
//!
//! [`builtin`] is what the server routes through: a subscriber counting calls by function
//! for `/metrics` and one logging them.

use std::borrow::Cow;

use serde_json::Value;

use super::Ctx;

/// A call on its way to its function: who it acts for is in the [`Ctx`].
#[derive(Debug, Clone, Copy)]
pub struct Routed<'a> {
    pub function: &'a str,
    pub args: &'a Value,
    /// The request frame's id: the call's execution id.
    pub request_id: &'a str,
}

/// What a handler does with a call.
#[derive(Debug, Clone, PartialEq)]
pub enum Handled {
    /// On to the next handler, as it came.
    Pass,
    /// On with these arguments instead.
    Transform(Value),
    /// Answered here: the result the agent is told, as a function's (output, or error).
    Intercept(Result<String, String>),
}

/// A handler of the pipeline; run in alphabetical order of [`Handler::name`].
pub trait Handler: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    fn handle(&self, cx: &Ctx<'_>, call: &Routed<'_>) -> Handled;
}

/// A subscriber: sees every routed call, changes nothing.
pub trait Subscriber: Send + Sync + 'static {
    fn seen(&self, cx: &Ctx<'_>, call: &Routed<'_>);
}

/// The subscribers and the handlers, the handlers kept in alphabetical order.
#[derive(Default)]
pub struct Bus {
    handlers: Vec<Box<dyn Handler>>,
    subscribers: Vec<Box<dyn Subscriber>>,
}

/// Where a call stands after the pipeline.
#[derive(Debug, PartialEq)]
pub enum Routing<'a> {
    /// To its function, with these arguments.
    Run(Cow<'a, Value>),
    /// Answered by the handler named.
    Answered(&'static str, Result<String, String>),
}

impl Bus {
    /// Adds a handler in its place by name; a second one of the same name replaces the first.
    pub fn handle(&mut self, h: impl Handler) {
        self.handlers.retain(|x| x.name() != h.name());
        let at = self.handlers.partition_point(|x| x.name() < h.name());
        self.handlers.insert(at, Box::new(h));
    }

    pub fn subscribe(&mut self, s: impl Subscriber) {
        self.subscribers.push(Box::new(s));
    }

    /// The handlers' names, in the order they run.
    pub fn handlers(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.handlers.iter().map(|h| h.name())
    }

    /// Routes one call: every subscriber sees it, then the handlers in order.
    pub fn route<'a>(
        &self,
        cx: &Ctx<'_>,
        function: &str,
        args: &'a Value,
        request_id: &str,
    ) -> Routing<'a> {
        let seen = Routed {
            function,
            args,
            request_id,
        };
        for s in &self.subscribers {
            s.seen(cx, &seen);
        }
        let mut args = Cow::Borrowed(args);
        for h in &self.handlers {
            let call = Routed {
                function,
                args: &args,
                request_id,
            };
            match h.handle(cx, &call) {
                Handled::Pass => {}
                Handled::Transform(v) => args = Cow::Owned(v),
                Handled::Intercept(answer) => return Routing::Answered(h.name(), answer),
            }
        }
        Routing::Run(args)
    }
}

/// Counts each routed call by function for the operator's `/metrics`.
pub struct Count;

impl Subscriber for Count {
    fn seen(&self, cx: &Ctx<'_>, call: &Routed<'_>) {
        cx.st.metrics.call(call.function);
    }
}

/// Logs each routed call (at debug: its function and ids, never its arguments, which may
/// hold what the user would not have in a log).
pub struct Log;

impl Subscriber for Log {
    fn seen(&self, cx: &Ctx<'_>, call: &Routed<'_>) {
        tracing::debug!(
            function = call.function,
            request = call.request_id,
            session = cx.session_id,
            "a call is routed to its function"
        );
    }
}

/// The bus the server routes through.
pub fn builtin() -> Bus {
    let mut bus = Bus::default();
    bus.subscribe(Count);
    bus.subscribe(Log);
    bus
}
