//! Finding the calls a message makes: executable elements, `<interaction>` blocks,
//! `@system(...)` in prose and native tool calls, in order, each checked against its
//! function's schema.

use hero_shared::calls::CallOrigin;
use hero_shared::hml::{Element, ElementKind};
use hero_shared::interaction::{self, CallSource, InteractionCall, InteractionError};
use serde_json::Value;

use super::*;
use crate::execution::functions::{self, Registry};
use crate::providers::ToolCall;

/// Finds the calls in a message's text and the provider's tool calls, in the order they
/// were made, each validated against the registry.
pub fn find(registry: &Registry, text: &str, tools: &[ToolCall]) -> Vec<Asked> {
    let mut found: Vec<(u64, Asked)> = Vec::new();
    let doc = if text.contains('<') || hero_shared::legacy::may_hold(text) {
        Some(hero_shared::hml::parse(text))
    } else {
        None
    };
    let span_of = |id: &str| {
        doc.as_ref()
            .and_then(|d| d.find(id))
            .map_or(0, |e| e.span.start)
    };
    // Only elements at the top of the reply are calls: one inside a display element
    // (`<thinking>`, a todo item, a result) is quoted, as prose calls there are.
    let top: std::collections::HashSet<&str> = doc
        .as_ref()
        .map(|d| {
            d.nodes
                .iter()
                .filter_map(|n| match n {
                    hero_shared::hml::Node::Element(e) => Some(e.id.as_str()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let quoted = |id: &str| !top.contains(id);
    // Executable elements that stand for a function (`<websearch>`), complete only.
    if let Some(d) = &doc {
        for e in d.elements().filter(|e| !quoted(&e.id)) {
            if e.kind == ElementKind::Interaction || e.truncated || e.error.is_some() {
                continue;
            }
            if let Some(a) = element_call(registry, e) {
                found.push((e.span.start, a));
            }
        }
    }
    // `<interaction>` blocks and `@system(...)` in prose.
    let det = interaction::detect(text);
    // Where a detected call stands in the reply, and where it came from.
    let origin_of = |source: &CallSource| match source {
        CallSource::Block { element_id } => (
            span_of(element_id),
            CallOrigin::Element {
                element_id: element_id.clone(),
                kind: "interaction".into(),
            },
        ),
        CallSource::Call { offset } => (*offset, CallOrigin::Prose { offset: *offset }),
    };
    let block_quoted = |source: &CallSource| matches!(source, CallSource::Block { element_id } if quoted(element_id));
    for c in det.calls.into_iter().filter(|c| !block_quoted(&c.source)) {
        let (at, origin) = origin_of(&c.source);
        found.push((at, from_call(registry, c, origin)));
    }
    for (source, err) in det.rejected {
        // A block cut off by the end of the reply never runs and is not a call.
        if err == InteractionError::Incomplete || block_quoted(&source) {
            continue;
        }
        let (at, origin) = origin_of(&source);
        found.push((at, unreadable(err, origin)));
    }
    // Legacy assertions that are calls (`command`, `question`).
    if let Some(d) = doc.as_ref().filter(|_| hero_shared::legacy::may_hold(text)) {
        for f in hero_shared::legacy::find(d) {
            if let hero_shared::legacy::Mapped::Markup {
                call: Some((function, mut args, problem)),
                ..
            } = f.mapped
            {
                interaction::strip_sender_ids(&mut args);
                let origin = CallOrigin::Assertion { index: f.index };
                let asked = Asked {
                    function,
                    args,
                    origin,
                    problem,
                    bound: false,
                };
                found.push((f.at as u64, asked));
            }
        }
    }
    found.sort_by_key(|(at, _)| *at);
    let mut asked: Vec<Asked> = found.into_iter().map(|(_, a)| a).collect();
    for t in tools {
        let mut args = t.input.clone();
        interaction::strip_sender_ids(&mut args);
        asked.push(Asked {
            function: t.name.clone(),
            problem: t
                .input
                .is_null()
                .then(|| "the tool call's arguments are not a JSON object".to_owned()),
            args,
            origin: CallOrigin::Tool {
                tool_use_id: t.id.clone(),
            },
            bound: false,
        });
    }
    // Unknown functions and arguments against the schema.
    for a in &mut asked {
        check(registry, a);
    }
    bound(&mut asked, MAX_CALLS_PER_MESSAGE);
    asked
}

/// Keeps the calls a message may still make (`room`), the last kept saying the rest did
/// not run; with no room left, the first is kept to say so, and none runs.
pub fn bound(asked: &mut Vec<Asked>, room: usize) {
    if asked.len() <= room {
        return;
    }
    let keep = room.max(1);
    let dropped = asked.len() - keep;
    asked.truncate(keep);
    if let Some(last) = asked.last_mut() {
        let max = MAX_CALLS_PER_MESSAGE;
        last.bound = true;
        last.problem = Some(match dropped {
            0 => format!("a message may make at most {max} calls; this one was not run"),
            n => format!(
                "a message may make at most {max} calls; this one and the {n} after it were not run"
            ),
        });
    }
}

/// The call an executable element at the top of a reply makes, found the moment it closes
/// (the reply still streaming): what [`find`] finds for the same element in the whole
/// reply, checked against its function's schema. `None`: it calls nothing (an element
/// with no function, or one cut off or too large).
pub fn closed(registry: &Registry, e: &Element) -> Option<Asked> {
    if !e.kind.is_executable() || e.truncated || e.error.is_some() {
        return None;
    }
    let mut a = match e.kind {
        ElementKind::Interaction => {
            let origin = CallOrigin::Element {
                element_id: e.id.clone(),
                kind: "interaction".into(),
            };
            match interaction::parse_block(&e.content, &e.id) {
                Ok(c) => from_call(registry, c, origin),
                Err(err) => unreadable(err, origin),
            }
        }
        _ => element_call(registry, e)?,
    };
    check(registry, &mut a);
    Some(a)
}

/// The call an executable element that stands for a function makes (`<websearch>`).
fn element_call(registry: &Registry, e: &Element) -> Option<Asked> {
    if !e.kind.is_executable() || e.kind == ElementKind::Interaction {
        return None;
    }
    let (_, f) = registry.get(e.kind.name())?;
    Some(Asked {
        function: e.kind.name().to_owned(),
        args: f.args_of_element(e)?,
        origin: CallOrigin::Element {
            element_id: e.id.clone(),
            kind: e.kind.name().to_owned(),
        },
        problem: None,
        bound: false,
    })
}

/// An interaction read (a block or a call in prose), routed by its target (reference 000,
/// "Interactions System"): `@system` and a function's own id (`@websearch`, and 000's
/// `@search`) to the registry, `@user(notify, …)` to `user_notify`, `@agent(queue, …)` to
/// `agent_queue`.
fn from_call(registry: &Registry, c: InteractionCall, origin: CallOrigin) -> Asked {
    let target = c.target_id.trim_start_matches('@');
    let method = c.target_property.as_str();
    let (function, problem) = match (target, method) {
        ("system", _) => (c.target_property.clone(), None),
        ("user", "notify") => ("user_notify".to_owned(), None),
        ("user", other) => (
            format!("user.{other}"),
            Some(format!("@user has no `{other}`; it takes notify")),
        ),
        ("search", _) => ("websearch".to_owned(), None),
        ("agent", "queue") => ("agent_queue".to_owned(), None),
        ("agent", other) => (
            format!("agent.{other}"),
            Some(format!("@agent has no `{other}`; it takes queue")),
        ),
        (f, _) if registry.get(f).is_some() => (f.to_owned(), None),
        _ => (
            c.target_property.clone(),
            Some(format!(
                "`{}` is not a target Hero serves: call @system(name, …), a function by its name, @user(notify, …) or @agent(queue, …)",
                c.target_id
            )),
        ),
    };
    Asked {
        function,
        args: c.payload,
        origin,
        problem,
        bound: false,
    }
}

/// An interaction that could not be read: a call that is told why, never run.
fn unreadable(err: InteractionError, origin: CallOrigin) -> Asked {
    Asked {
        function: "(unreadable)".into(),
        args: Value::Null,
        origin,
        problem: Some(match err {
            InteractionError::Malformed { detail } => {
                format!("the call could not be read: {detail}")
            }
            InteractionError::NotAnObject => {
                "an <interaction> holds a JSON object or an @system(...) call".into()
            }
            InteractionError::MissingField { field } => {
                format!("the interaction has no `{field}`")
            }
            InteractionError::Incomplete => "the interaction was cut off".into(),
        }),
        bound: false,
    }
}

/// An unknown function, or arguments against its schema, is the call's problem.
pub fn check(registry: &Registry, a: &mut Asked) {
    if a.problem.is_some() {
        return;
    }
    a.problem = match registry.get(&a.function) {
        None => Some(format!(
            "there is no function `{}`; call @system(help) for the list",
            a.function
        )),
        Some((spec, _)) => functions::schema::read_durations(&spec.name, &spec.schema, &mut a.args)
            .and_then(|()| functions::schema::validate(&spec.name, &spec.schema, &a.args))
            .err(),
    };
}
