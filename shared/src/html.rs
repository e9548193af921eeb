//! A conversation as HTML, safe by construction: the one renderer of the server's page and
//! of the browser (stored messages, their calls' cards, and the reply while it streams).
//!
//! Every tag and attribute name is a `&'static str` of this module; every value and every
//! piece of text is escaped ([`crate::markdown::escape`]); prose goes through the markdown
//! renderer, which writes only its own closed set of tags; a link's `href` must pass
//! [`crate::markdown::safe_link`]. So model text can never open a tag, an attribute or a
//! URL scheme of its own. What acts in the page (a prompt's OK, a question's options, a
//! call's Approve, a copy button) is a `<button data-action=…>` or a field, handled by the
//! chat's one delegated listener: the HTML carries no handler.
//!
//! Fields a reader types into sit under a `data-keep` key, so that the page can carry what
//! was typed across a message drawn again.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::calls::{CallOrigin, CallView, Outcome};
use crate::frame::{CompiledMessage, FrameType, Role};
use crate::hml::{Element, ElementKind, Node, Prompt, PromptType};
use crate::hooks::{self, Action};
use crate::markdown::{self, MdPart, escape, safe_link};

/// HTML being written: tags and attribute names are this module's own, values escaped.
#[derive(Default)]
struct Out(String);

impl Out {
    /// `<tag a="v" …>`; an attribute whose value is `None` is left out; `checked` is bare.
    fn open(&mut self, tag: &'static str, attrs: &[(&'static str, Option<&str>)]) {
        self.0.push('<');
        self.0.push_str(tag);
        for (name, value) in attrs {
            let Some(v) = value else { continue };
            self.0.push(' ');
            self.0.push_str(name);
            if !matches!(*name, "checked" | "disabled" | "open") {
                self.0.push_str("=\"");
                escape(&mut self.0, v);
                self.0.push('"');
            }
        }
        self.0.push('>');
    }

    fn close(&mut self, tag: &'static str) {
        self.0.push_str("</");
        self.0.push_str(tag);
        self.0.push('>');
    }

    fn text(&mut self, t: &str) {
        escape(&mut self.0, t);
    }

    /// `<tag …>text</tag>`.
    fn leaf(&mut self, tag: &'static str, attrs: &[(&'static str, Option<&str>)], text: &str) {
        self.open(tag, attrs);
        self.text(text);
        self.close(tag);
    }
}

/// Where a message is drawn: in a stored message its prompts can be answered and its
/// questions show their calls; a reply still streaming (`live`) has its open elements in
/// progress.
#[derive(Clone, Copy)]
pub struct Place<'a> {
    pub live: bool,
    /// The stored message's id (`None` while it streams).
    pub message_id: Option<&'a str>,
    /// The calls the message asked for.
    pub calls: &'a [CallView],
}

impl Place<'_> {
    fn call_of(&self, element_id: &str) -> Option<&CallView> {
        self.calls.iter().find(|c| match &c.request.origin {
            CallOrigin::Element { element_id: e, .. } => e == element_id,
            o @ CallOrigin::Assertion { .. } => o.element_id() == element_id,
            _ => false,
        })
    }
}

/// Markdown prose: `<div class="md">`, each code block with its copy button.
pub fn markdown_html(src: &str) -> String {
    let mut out = Out::default();
    prose(&mut out, src);
    out.0
}

/// The nodes of a parsed reply (or of one of its top-level blocks while it streams).
pub fn nodes_html(nodes: &[Node], place: Place<'_>) -> String {
    let mut out = Out::default();
    write_nodes(&mut out, nodes, place);
    out.0
}

/// A stored message (not a summary: the page draws those itself), and the cards of its
/// calls. `stored`: the reader may hide it or show it again.
pub fn message_html(m: &CompiledMessage, calls: &[CallView]) -> String {
    message_html_in(m, calls, true)
}

/// [`message_html`]; `rewritable`: whether Edit or Regenerate is offered (not before the
/// conversation's last summary, where the server refuses both).
fn message_html_in(m: &CompiledMessage, calls: &[CallView], rewritable: bool) -> String {
    let mut out = Out::default();
    let private = m.payload.get("private").and_then(Value::as_bool) == Some(true);
    let class = format!(
        "msg msg-{}{}{}",
        match m.role {
            Role::User => "user",
            Role::System => "system",
            Role::Agent => "agent",
        },
        if private { " msg-private" } else { "" },
        if m.hidden { " msg-hidden" } else { "" }
    );
    out.open(
        "div",
        &[
            ("class", Some(&class)),
            (hooks::MESSAGE_ID.name(), Some(&m.frame_id)),
        ],
    );
    match m.role {
        Role::User => {
            out.open("div", &[("class", Some("msg-who"))]);
            // A message another agent queued (`@agent(queue, …)`) is never shown as the user's.
            match m.payload.get("queued") {
                Some(q) => out.text(&queued_by(q)),
                None => out.text("You "),
            }
            marks(&mut out, m, private, rewritable);
            out.close("div");
            out.leaf("div", &[("class", Some("msg-body plain"))], &m.content);
            if let Some(Value::Array(files)) = m.payload.get("attachments") {
                attachments(&mut out, files);
            }
        }
        Role::System => {
            out.text(&m.content);
            out.text(" ");
            marks(&mut out, m, private, rewritable);
        }
        Role::Agent => {
            let name = m
                .payload
                .get("agent_name")
                .and_then(Value::as_str)
                .unwrap_or("Agent");
            out.open("div", &[("class", Some("msg-who"))]);
            out.leaf("span", &[("data-testid", Some("agent-name"))], name);
            out.text(" ");
            marks(&mut out, m, private, rewritable);
            out.close("div");
            out.open("div", &[("class", Some("msg-body"))]);
            let doc = crate::hml::parse(&m.content);
            // Legacy assertions are drawn as what they stand for.
            let nodes = if crate::legacy::may_hold(&m.content) {
                crate::legacy::expand(doc)
            } else {
                doc.nodes
            };
            let place = Place {
                live: false,
                message_id: Some(&m.frame_id),
                calls,
            };
            write_nodes(&mut out, &nodes, place);
            out.close("div");
            // A reply the server's shutdown cut says so in its error instead.
            let aborted = m.payload.get("aborted").and_then(Value::as_bool) == Some(true)
                && m.payload.get("aborted_by").is_none();
            if aborted {
                out.leaf(
                    "div",
                    &[("class", Some("msg-note"))],
                    "Stopped: the reply was cut short at your request.",
                );
            }
            if let Some(e) = m.payload.get("error").and_then(Value::as_str) {
                out.leaf(
                    "div",
                    &[("class", Some("msg-error")), ("role", Some("alert"))],
                    e,
                );
            }
        }
    }
    out.close("div");
    out.0.push_str(&calls_html(calls, &m.frame_id));
    out.0
}

/// Who queued a message for the session: "Queued by Analyst from session 3 ".
fn queued_by(q: &Value) -> String {
    let agent = q
        .get("agent_name")
        .and_then(Value::as_str)
        .unwrap_or("an agent");
    match q.get("from_session").and_then(Value::as_i64) {
        Some(s) => format!("Queued by {agent} from session {s} "),
        None => format!("Queued by {agent} "),
    }
}

/// The cards of a message's calls (nothing when it made none): under a stored message, and
/// under the reply in flight while its calls run as their elements close.
pub fn calls_html(calls: &[CallView], message_id: &str) -> String {
    let mut out = Out::default();
    // A question asked by an element of the message is asked (and answered) there, once:
    // it has no card.
    let shown: Vec<&CallView> = calls
        .iter()
        .filter(|c| !(c.request.status == crate::calls::CallStatus::Asking && in_place(c)))
        .collect();
    if !shown.is_empty() {
        out.open("div", &[("class", Some("calls"))]);
        for c in shown {
            call_card(&mut out, c, message_id);
        }
        out.close("div");
    }
    out.0
}

/// Whether the call is drawn where its message asked for it (an element or an assertion),
/// not only in its card.
fn in_place(c: &CallView) -> bool {
    matches!(
        c.request.origin,
        CallOrigin::Element { .. } | CallOrigin::Assertion { .. }
    )
}

/// A message's marks (private, hidden), its versions (‹ 2/3 ›) and its menu (hide or show
/// again, edit or regenerate, branch).
fn marks(out: &mut Out, m: &CompiledMessage, private: bool, rewritable: bool) {
    out.open("div", &[("class", Some("msg-marks"))]);
    if let Some(v) = &m.versions {
        versions(out, v);
    }
    if private {
        out.leaf(
            "span",
            &[
                ("class", Some("badge mark-private")),
                ("title", Some("Not sent to the agent")),
            ],
            "private",
        );
    }
    if m.hidden {
        out.leaf("span", &[("class", Some("badge mark-hidden"))], "hidden");
    }
    out.leaf(
        "button",
        &[
            ("type", Some("button")),
            ("class", Some("msg-menu")),
            (hooks::ACTION.name(), Some(Action::Hide.as_str())),
            (hooks::FRAME.name(), Some(&m.frame_id)),
            (
                hooks::HIDDEN.name(),
                Some(if m.hidden { "true" } else { "false" }),
            ),
        ],
        if m.hidden { "Show again" } else { "Hide" },
    );
    // The user's own words are edited; an agent's reply is asked for again.
    let again = match m.role {
        _ if !rewritable => None,
        Role::User if !private && m.payload.get("queued").is_none() => Some((
            Action::Edit,
            "Edit",
            "Change this message and send it again",
        )),
        Role::Agent => Some((Action::Regenerate, "Regenerate", "Ask for another answer")),
        _ => None,
    };
    if let Some((action, label, title)) = again {
        out.leaf(
            "button",
            &[
                ("type", Some("button")),
                ("class", Some("msg-menu")),
                (hooks::ACTION.name(), Some(action.as_str())),
                (hooks::FRAME.name(), Some(&m.frame_id)),
                ("title", Some(title)),
            ],
            label,
        );
    }
    out.leaf(
        "button",
        &[
            ("type", Some("button")),
            ("class", Some("msg-menu msg-branch")),
            (hooks::ACTION.name(), Some(Action::Branch.as_str())),
            (hooks::FRAME.name(), Some(&m.frame_id)),
            (
                "title",
                Some("A new session with the conversation up to here"),
            ),
        ],
        "Branch",
    );
    out.close("div");
}

/// Where a message's attachment is downloaded from, relative to the chat's page
/// (`…/s/{id}`), so that it holds under any base path.
pub fn attachment_href(id: &str) -> Option<String> {
    let plain = !id.is_empty() && id.len() <= 64;
    (plain && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'))
        .then(|| format!("../api/attachments/{id}"))
}

/// A size in bytes as people read it: "812 B", "12.3 KB", "4.1 MB".
pub fn size_text(bytes: u64) -> String {
    // Tenths by integers: no float formatting in the wasm for this.
    let tenths = |unit: u64| {
        let t = (bytes.saturating_mul(10) + unit / 2) / unit;
        format!("{}.{}", t / 10, t % 10)
    };
    match bytes {
        b if b < 1000 => format!("{b} B"),
        b if b < 1_000_000 => format!("{} KB", tenths(1000)),
        _ => format!("{} MB", tenths(1_000_000)),
    }
}

/// The files a message carries, each a chip that downloads it.
fn attachments(out: &mut Out, files: &[Value]) {
    out.open(
        "div",
        &[
            ("class", Some("attachments")),
            ("data-testid", Some("attachments")),
        ],
    );
    for f in files {
        let field = |k: &str| f.get(k).and_then(Value::as_str).unwrap_or_default();
        let label = format!(
            "{} · {}",
            field("name"),
            size_text(f.get("size").and_then(Value::as_u64).unwrap_or(0))
        );
        let href = attachment_href(field("id"));
        out.leaf(
            "a",
            &[
                ("class", Some("attachment-chip")),
                ("href", href.as_deref()),
                ("download", Some("")),
                ("data-kind", Some(field("kind"))),
            ],
            &label,
        );
    }
    out.close("div");
}

/// A file chosen for the next message, above the message box: its name and size, and a
/// button that takes it off (`hooks::ATTACHMENT`: the chip's key while it uploads).
pub fn pending_attachment_html(key: &str, name: &str, size: u64) -> String {
    let mut out = Out::default();
    out.open(
        "span",
        &[
            ("class", Some("attachment-chip pending")),
            (hooks::ATTACHMENT.name(), Some(key)),
            ("aria-busy", Some("true")),
        ],
    );
    out.leaf("span", &[], &format!("{name} · {}", size_text(size)));
    out.leaf(
        "button",
        &[
            ("type", Some("button")),
            ("class", Some("remove")),
            ("aria-label", Some(&format!("Remove {name}"))),
        ],
        "×",
    );
    out.close("span");
    out.0
}

/// The switch between a message's versions: "‹ 2/3 ›", each arrow showing the version
/// beside (none past the first or the last).
fn versions(out: &mut Out, v: &crate::frame::Versions) {
    out.open(
        "span",
        &[
            ("class", Some("versions")),
            ("data-testid", Some("versions")),
        ],
    );
    let arrow = |out: &mut Out, to: usize, label: &str, text: &str| {
        let to_text = to.to_string();
        let off = to == 0 || to > v.count;
        out.leaf(
            "button",
            &[
                ("type", Some("button")),
                ("class", Some("version-switch")),
                (hooks::ACTION.name(), Some(Action::Version.as_str())),
                (hooks::FRAME.name(), Some(&v.of)),
                (hooks::VERSION.name(), Some(&to_text)),
                ("aria-label", Some(label)),
                ("disabled", off.then_some("")),
            ],
            text,
        );
    };
    arrow(out, v.current - 1, "Previous version", "‹");
    out.leaf(
        "span",
        &[("class", Some("version-of"))],
        &format!("{}/{}", v.current, v.count),
    );
    arrow(out, v.current + 1, "Next version", "›");
    out.close("span");
}

fn prose(out: &mut Out, src: &str) {
    out.open("div", &[("class", Some("md"))]);
    for part in markdown::render(src) {
        match part {
            // The markdown renderer's own closed set of tags, its text escaped.
            MdPart::Html(h) => {
                out.open("div", &[("class", Some("md-html"))]);
                out.0.push_str(&h);
                out.close("div");
            }
            MdPart::Code { lang, text } => {
                out.open("div", &[("class", Some("code-block"))]);
                out.open("div", &[("class", Some("code-head"))]);
                out.leaf("span", &[("class", Some(hooks::CODE_LANG.name()))], &lang);
                copy_button(out, "Copy");
                out.close("div");
                out.open("pre", &[]);
                out.leaf("code", &[], &text);
                out.close("pre");
                out.close("div");
            }
        }
    }
    out.close("div");
}

/// Copies the text of the nearest `<code>` of its block (`data-copy` root).
fn copy_button(out: &mut Out, label: &str) {
    out.leaf(
        "button",
        &[
            ("type", Some("button")),
            ("class", Some("copy-button")),
            (hooks::ACTION.name(), Some(Action::Copy.as_str())),
            (hooks::LABEL.name(), Some(label)),
        ],
        label,
    );
}

fn write_nodes(out: &mut Out, nodes: &[Node], place: Place<'_>) {
    for n in nodes {
        match n {
            Node::Text(t) => prose(out, t),
            Node::Element(e) => element(out, e, place),
        }
    }
}

/// The `class` of a status, reduced to safe characters.
fn status_class(prefix: &str, status: Option<&str>) -> String {
    let s: String = status
        .unwrap_or("none")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .take(24)
        .collect();
    format!("{prefix} status-{s}")
}

fn element(out: &mut Out, e: &Element, place: Place<'_>) {
    let id = Some(e.id.as_str());
    match e.kind {
        ElementKind::Thinking => {
            let open = e.truncated && place.live;
            out.open(
                "details",
                &[
                    (
                        "class",
                        Some(if open {
                            "hml hml-thinking live"
                        } else {
                            "hml hml-thinking"
                        }),
                    ),
                    (hooks::HML_ID.name(), id),
                    (hooks::HML.name(), Some("thinking")),
                ],
            );
            out.leaf("summary", &[], if open { "Thinking…" } else { "Thought" });
            out.open("div", &[("class", Some("hml-body"))]);
            write_nodes(out, &e.children, place);
            out.close("div");
            out.close("details");
        }
        ElementKind::Todo => {
            out.open(
                "div",
                &[
                    ("class", Some("hml hml-todo")),
                    (hooks::HML_ID.name(), id),
                    (hooks::HML.name(), Some("todo")),
                ],
            );
            out.leaf(
                "div",
                &[("class", Some("hml-todo-title"))],
                e.attr("title").unwrap_or("Tasks"),
            );
            out.open("ul", &[]);
            for n in &e.children {
                let Node::Element(i) = n else { continue };
                if i.kind != ElementKind::Item {
                    continue;
                }
                let status = i.attr("status").unwrap_or("pending");
                let mark = match status {
                    "done" | "completed" => "✓",
                    "in_progress" | "in-progress" | "active" => "◐",
                    "failed" | "error" => "✗",
                    _ => "○",
                };
                let class = status_class("hml-item", Some(status));
                out.open(
                    "li",
                    &[("class", Some(&class)), ("data-status", Some(status))],
                );
                out.leaf(
                    "span",
                    &[
                        ("class", Some("hml-item-mark")),
                        ("aria-hidden", Some("true")),
                    ],
                    mark,
                );
                out.open("span", &[("class", Some("hml-item-text"))]);
                write_nodes(out, &i.children, place);
                out.close("span");
                out.close("li");
            }
            out.close("ul");
            out.close("div");
        }
        ElementKind::Progress => {
            let max = e
                .attr("max")
                .and_then(|m| m.trim().parse::<f64>().ok())
                .filter(|m| m.is_finite() && *m > 0.0)
                .unwrap_or(100.0);
            let value = e
                .attr("value")
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|v| v.is_finite())
                .unwrap_or(0.0)
                .clamp(0.0, max);
            out.open(
                "div",
                &[
                    ("class", Some("hml hml-progress")),
                    (hooks::HML_ID.name(), id),
                    (hooks::HML.name(), Some("progress")),
                ],
            );
            let (max_s, value_s) = (max.to_string(), value.to_string());
            out.open(
                "progress",
                &[("max", Some(&max_s)), ("value", Some(&value_s))],
            );
            out.close("progress");
            let label = format!(
                "{}{:.0}%",
                e.attr("status")
                    .map(|s| format!("{s} · "))
                    .unwrap_or_default(),
                value / max * 100.0
            );
            out.leaf("span", &[("class", Some("hml-progress-label"))], &label);
            out.close("div");
        }
        ElementKind::Link => {
            let text = e.text();
            let label = if text.trim().is_empty() {
                e.attr("href").unwrap_or("link").to_owned()
            } else {
                text
            };
            match e.attr("href").map(str::trim).and_then(safe_link) {
                Some(href) => out.leaf(
                    "a",
                    &[
                        ("class", Some("hml hml-inline hml-link")),
                        ("href", Some(href)),
                        ("target", Some("_blank")),
                        ("rel", Some(markdown::LINK_REL)),
                        (hooks::HML_ID.name(), id),
                        (hooks::HML.name(), Some("link")),
                    ],
                    &label,
                ),
                None => out.leaf(
                    "span",
                    &[
                        ("class", Some("hml hml-inline hml-link unsafe")),
                        (hooks::HML_ID.name(), id),
                        (hooks::HML.name(), Some("link")),
                    ],
                    &label,
                ),
            }
        }
        ElementKind::Copy => {
            out.open(
                "span",
                &[
                    ("class", Some("hml hml-inline hml-copy")),
                    (hooks::HML_ID.name(), id),
                    (hooks::HML.name(), Some("copy")),
                ],
            );
            out.leaf("code", &[], &e.text());
            copy_button(out, e.attr("label").unwrap_or("Copy"));
            out.close("span");
        }
        ElementKind::Result => {
            let status = e.attr("status");
            let class = status_class("hml hml-result", status);
            out.open(
                "div",
                &[
                    ("class", Some(&class)),
                    (hooks::HML_ID.name(), id),
                    (hooks::HML.name(), Some("result")),
                ],
            );
            let head = format!(
                "Result{}{}",
                e.attr("for").map(|t| format!(" · {t}")).unwrap_or_default(),
                status.map(|s| format!(" · {s}")).unwrap_or_default()
            );
            out.leaf("div", &[("class", Some("hml-result-head"))], &head);
            out.open("pre", &[]);
            out.text(&e.text());
            out.close("pre");
            out.close("div");
        }
        ElementKind::HmlPrompt => prompt(out, e, place),
        ElementKind::Ask => ask(out, e, place),
        ElementKind::Bash | ElementKind::Websearch | ElementKind::Interaction => {
            executable(out, e, place)
        }
        // Only meaningful inside their parents, which render them.
        ElementKind::Item | ElementKind::Data | ElementKind::Response => {
            out.leaf("span", &[("class", Some("hml-orphan"))], &e.text())
        }
    }
}

/// `<hml-prompt>`: its field (answered with Enter for text and number, OK for the rest, in
/// a stored message), or the answer once given.
fn prompt(out: &mut Out, e: &Element, place: Place<'_>) {
    let id = Some(e.id.as_str());
    let Some(p) = Prompt::from_element(e) else {
        out.leaf("span", &[("class", Some("hml-orphan"))], &e.text());
        return;
    };
    // A reply still streaming has no answer frame yet: whatever its markup claims, its
    // prompts wait. An answer the agent recorded is shown as such, and the field stays.
    let answered = p.answered && !place.live;
    if answered && !p.by_agent {
        out.open(
            "span",
            &[
                ("class", Some("hml hml-inline hml-prompt answered")),
                (hooks::HML_ID.name(), id),
                (hooks::HML.name(), Some("hml-prompt")),
            ],
        );
        out.leaf(
            "span",
            &[("class", Some("hml-prompt-question"))],
            &p.question,
        );
        out.leaf(
            "span",
            &[("class", Some("hml-prompt-response"))],
            p.response.as_deref().unwrap_or_default(),
        );
        out.close("span");
        return;
    }
    let attr = |name: &str| {
        p.attributes
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    // Ids count from e0 in every message: what names a field must name its message too.
    let key = place.message_id.map(|m| format!("{m}:{}", p.id));
    let kind = match p.input {
        PromptType::Text => "text",
        PromptType::Number => "number",
        PromptType::Color => "color",
        PromptType::Select => "select",
        PromptType::Checkbox => "checkbox",
        PromptType::Checkboxes => "checkboxes",
        PromptType::Radio => "radio",
        PromptType::Range => "range",
    };
    out.open(
        "span",
        &[
            ("class", Some("hml hml-inline hml-prompt")),
            (hooks::HML_ID.name(), id),
            (hooks::HML.name(), Some("hml-prompt")),
            (hooks::TYPE.name(), Some(kind)),
            (hooks::MESSAGE.name(), place.message_id),
            (hooks::KEEP.name(), key.as_deref()),
        ],
    );
    if answered {
        out.leaf(
            "span",
            &[("class", Some("hml-prompt-recorded"))],
            &format!(
                "Recorded by the agent from your message: {}. Answer here to correct it.",
                p.response.as_deref().unwrap_or_default()
            ),
        );
    }
    if p.input != PromptType::Checkbox {
        out.leaf(
            "span",
            &[("class", Some("hml-prompt-question"))],
            &p.question,
        );
    }
    let label = Some(p.question.as_str());
    match p.input {
        PromptType::Select => {
            out.open("select", &[("aria-label", label)]);
            for o in &p.options {
                out.leaf("option", &[("value", Some(&o.value))], &o.label);
            }
            out.close("select");
        }
        PromptType::Radio | PromptType::Checkboxes => {
            let name = format!("prompt-{}", key.as_deref().unwrap_or(&p.id));
            let ty = if p.input == PromptType::Radio {
                "radio"
            } else {
                "checkbox"
            };
            for o in &p.options {
                out.open("label", &[("class", Some("hml-prompt-option"))]);
                out.open(
                    "input",
                    &[
                        ("type", Some(ty)),
                        ("name", Some(&name)),
                        ("value", Some(&o.value)),
                    ],
                );
                out.text(&o.label);
                out.close("label");
            }
        }
        PromptType::Checkbox => {
            out.open("label", &[("class", Some("hml-prompt-option"))]);
            let checked = (attr("default") == Some("true")).then_some("");
            out.open("input", &[("type", Some("checkbox")), ("checked", checked)]);
            out.text(&p.question);
            out.close("label");
        }
        other => {
            let ty = match other {
                PromptType::Number => "number",
                PromptType::Color => "color",
                PromptType::Range => "range",
                _ => "text",
            };
            out.open(
                "input",
                &[
                    ("type", Some(ty)),
                    ("placeholder", label),
                    ("aria-label", label),
                    ("min", attr("min")),
                    ("max", attr("max")),
                    ("step", attr("step")),
                    ("value", attr("default")),
                ],
            );
        }
    }
    // Text and number are sent with Enter; the rest with OK.
    if place.message_id.is_some() && !matches!(p.input, PromptType::Text | PromptType::Number) {
        out.leaf(
            "button",
            &[
                ("type", Some("button")),
                ("class", Some("hml-prompt-ok")),
                (hooks::ACTION.name(), Some(Action::Prompt.as_str())),
            ],
            "OK",
        );
    }
    out.close("span");
}

/// `<ask>`: a question waiting for the user's answer, its answer, or (still being written,
/// or never a question) the executable card.
fn ask(out: &mut Out, e: &Element, place: Place<'_>) {
    let (Some(c), Some(message_id)) = (place.call_of(&e.id), place.message_id) else {
        executable(out, e, place);
        return;
    };
    let question = c
        .request
        .arg("question")
        .map(str::to_owned)
        .unwrap_or_else(|| e.content.trim().to_owned());
    if !c.is_question() {
        let (class, shown) = match &c.result {
            Some(r) if r.outcome == Outcome::Ok => ("hml hml-ask answered", r.output.as_str()),
            _ => ("hml hml-ask closed", c.state()),
        };
        out.open(
            "div",
            &[
                ("class", Some(class)),
                (hooks::HML_ID.name(), Some(&e.id)),
                (hooks::HML.name(), Some("ask")),
            ],
        );
        out.leaf("div", &[("class", Some("hml-ask-question"))], &question);
        out.leaf(
            "div",
            &[
                ("class", Some("hml-ask-answer")),
                ("data-testid", Some("ask-answer")),
            ],
            shown,
        );
        out.close("div");
        return;
    }
    waiting(out, c, message_id, &e.id, &question);
}

/// A question still waiting: its options, a field for another answer, its countdown (the
/// page fills it in from `data-expires-at`). In its `<ask>` element, or, for a question
/// asked through a native tool call, in its call's card.
fn waiting(out: &mut Out, c: &CallView, message_id: &str, element_id: &str, question: &str) {
    let key = format!("ask-{}", c.request_id);
    out.open(
        "div",
        &[
            ("class", Some("hml hml-ask asking")),
            (hooks::HML_ID.name(), Some(element_id)),
            (hooks::HML.name(), Some("ask")),
            (hooks::MESSAGE.name(), Some(message_id)),
            (hooks::KEEP.name(), Some(&key)),
        ],
    );
    out.leaf("div", &[("class", Some("hml-ask-question"))], question);
    out.open("div", &[("class", Some("hml-ask-options"))]);
    for o in c.request.arg_list("options") {
        out.leaf(
            "button",
            &[
                ("type", Some("button")),
                ("class", Some("ask-option")),
                (hooks::ACTION.name(), Some(Action::Ask.as_str())),
                (hooks::ANSWER.name(), Some(&o)),
            ],
            &o,
        );
    }
    out.close("div");
    out.open("div", &[("class", Some("hml-ask-own"))]);
    out.open(
        "input",
        &[
            ("type", Some("text")),
            ("aria-label", Some("Your answer")),
            ("placeholder", Some("Your answer (Enter sends)")),
        ],
    );
    out.leaf(
        "button",
        &[
            ("type", Some("button")),
            ("class", Some("ask-send")),
            (hooks::ACTION.name(), Some(Action::Ask.as_str())),
        ],
        "Answer",
    );
    out.close("div");
    match c.request.expires_at {
        Some(at) => {
            let at = at.to_string();
            out.open(
                "div",
                &[
                    ("class", Some("hml-ask-countdown")),
                    ("data-testid", Some("ask-countdown")),
                    (hooks::EXPIRES_AT.name(), Some(&at)),
                    (hooks::DEFAULT.name(), c.request.arg("default")),
                ],
            );
            out.close("div");
        }
        None => out.leaf(
            "div",
            &[("class", Some("hml-ask-note"))],
            "The agent waits for your answer: answer here or in the message box.",
        ),
    }
    out.close("div");
}

/// What a timed question's countdown says, `left_ms` before it takes its default.
pub fn countdown_text(left_ms: i64, default: Option<&str>) -> (u64, String) {
    let left = (left_ms.max(0) as u64).div_ceil(1000);
    let then = match default {
        Some(d) => format!("“{d}” is the answer"),
        None => "the question closes".to_owned(),
    };
    let text = if left == 0 {
        format!("Time is up: {then}.")
    } else {
        format!("{then} in {left} s")
    };
    (left, text)
}

/// The executable elements (`<bash>`, `<websearch>`, `<ask>`, `<interaction>`): what would
/// run and where it stands.
fn executable(out: &mut Out, e: &Element, place: Place<'_>) {
    let open = e.truncated && place.live;
    let detail = match e.kind {
        ElementKind::Bash => [
            e.attr("cwd").map(|c| format!("in {c}")),
            e.attr("timeout").map(|t| format!("timeout {t}")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" · "),
        _ => String::new(),
    };
    let state = if open {
        "being written…"
    } else if e.error.is_some() {
        "too large: not run"
    } else if e.truncated {
        "cut off: never run"
    } else {
        place
            .call_of(&e.id)
            .map_or("recognised: not run", CallView::state)
    };
    let class = if open {
        "hml hml-exec exec-streaming"
    } else if e.truncated || e.error.is_some() {
        "hml hml-exec exec-truncated"
    } else {
        "hml hml-exec exec-ready"
    };
    out.open(
        "div",
        &[
            ("class", Some(class)),
            (hooks::HML_ID.name(), Some(&e.id)),
            (hooks::HML.name(), Some(e.kind.name())),
        ],
    );
    out.open("div", &[("class", Some("hml-exec-head"))]);
    out.leaf("span", &[("class", Some("hml-exec-kind"))], e.kind.name());
    out.leaf("span", &[("class", Some("hml-exec-detail"))], &detail);
    out.leaf("span", &[("class", Some("hml-exec-state"))], state);
    out.close("div");
    out.leaf("pre", &[], &e.content);
    out.close("div");
}

/// A call's card: what it calls, where it stands, its result folded; Approve, Deny and
/// Always allow while it waits; a question asked through a native tool call asks here.
fn call_card(out: &mut Out, c: &CallView, message_id: &str) {
    let state = c.state();
    let class = format!(
        "call call-{}{}",
        state.split([' ', ':']).next().unwrap_or_default(),
        if c.request.change.is_some() {
            " call-proposal"
        } else {
            ""
        }
    );
    let function = c.request.function.as_str();
    out.open(
        "div",
        &[
            ("class", Some(&class)),
            (hooks::CALL.name(), Some(&c.request_id)),
            (hooks::FUNCTION.name(), Some(function)),
        ],
    );
    out.open("div", &[("class", Some("call-head"))]);
    out.leaf("span", &[("class", Some("call-fn"))], function);
    // What it does in words where Hero knows the function; else its arguments.
    match crate::calls::call_words(function, &c.request.args) {
        Some((verb, what, code)) => {
            out.open("span", &[("class", Some("call-what"))]);
            out.text(&format!("{verb}: "));
            out.leaf(if code { "code" } else { "span" }, &[], &what);
            out.close("span");
        }
        None => {
            let args = match &c.request.args {
                Value::Null => String::new(),
                a if a.as_object().is_some_and(|o| o.is_empty()) => String::new(),
                a => a.to_string(),
            };
            out.leaf("code", &[("class", Some("call-args"))], &args);
        }
    }
    let permissions = c.request.permissions;
    if let Some(p) = permissions.filter(|_| c.is_pending()) {
        let danger = p.danger_level.as_str();
        out.leaf(
            "span",
            &[
                ("class", Some(&format!("call-danger danger-{danger}"))),
                ("title", Some("how much harm this function can do")),
            ],
            danger,
        );
    }
    out.leaf(
        "span",
        &[
            ("class", Some("call-state")),
            ("data-testid", Some("call-state")),
        ],
        state,
    );
    out.close("div");
    if let Some(change) = &c.request.change {
        proposed_change(out, change, c.is_pending());
    }
    if c.is_pending() {
        out.open("div", &[("class", Some("call-actions"))]);
        // One that asks every time has no "Always allow"; a dangerous one's is confirmed.
        let always = permissions.is_none_or(|p| p.may_be_always());
        let confirm = permissions
            .filter(|p| p.danger_level == crate::calls::DangerLevel::Dangerous)
            .map(|_| {
                format!(
                    "{function} is dangerous. Let your agents run it from now on without asking?"
                )
            });
        // A proposed change is approved or rejected (reference 004's words).
        let deny = if c.request.change.is_some() {
            "Reject"
        } else {
            "Deny"
        };
        for (class, action, label) in [
            ("approve", Action::Approve.as_str(), "Approve".to_owned()),
            ("deny", Action::Deny.as_str(), deny.to_owned()),
            (
                "always",
                Action::Always.as_str(),
                format!("Always allow {function}"),
            ),
        ] {
            if class == "always" && !always {
                continue;
            }
            let confirm = confirm.as_deref().filter(|_| class == "always");
            out.leaf(
                "button",
                &[
                    ("type", Some("button")),
                    ("class", Some(class)),
                    (hooks::ACTION.name(), Some(action)),
                    (hooks::CONFIRM.name(), confirm),
                ],
                &label,
            );
        }
        out.close("div");
    }
    if c.is_question() && !in_place(c) {
        let question = c.request.arg("question").unwrap_or_default();
        waiting(out, c, message_id, &c.request.origin.element_id(), question);
    }
    // What the agent read of its configuration is shown open, for the user to see what
    // it goes by (reference 004's read-only panel).
    if let Some(r) = c
        .result
        .as_ref()
        .filter(|r| c.request.function == "read_config" && r.outcome == Outcome::Ok)
    {
        out.open(
            "details",
            &[
                (
                    "class",
                    Some(&format!("call-result {}", hooks::CONFIG_READ.name())),
                ),
                ("data-testid", Some("config-read")),
                ("open", Some("")),
            ],
        );
        out.leaf("summary", &[], "What it read");
        out.leaf(
            "button",
            &[
                ("type", Some("button")),
                ("class", Some("panel-close")),
                (hooks::ACTION.name(), Some(Action::ClosePanel.as_str())),
            ],
            "Close",
        );
        out.leaf("pre", &[], &r.output);
        out.close("details");
    } else if let Some(r) = &c.result {
        out.open("details", &[("class", Some("call-result"))]);
        out.leaf(
            "summary",
            &[],
            if r.outcome == Outcome::Ok {
                "Result"
            } else {
                "Why"
            },
        );
        out.leaf("pre", &[], &r.output);
        out.close("details");
    }
    out.close("div");
}

/// A proposed configuration change on its call's card: the key, the version it was made
/// against, the reason, and the diff by line. While it waits, the stylesheet slides it in
/// beside the chat (`.call-pending .change`); once decided, it stays folded in the card.
fn proposed_change(out: &mut Out, change: &crate::calls::ProposedChange, pending: bool) {
    out.open(
        if pending { "div" } else { "details" },
        &[
            ("class", Some("change")),
            ("data-testid", Some("config-change")),
            (
                "data-change-id",
                Some(change.pending_change_id.as_str()).filter(|id| !id.is_empty()),
            ),
            ("role", pending.then_some("region")),
            ("aria-label", pending.then_some("Proposed change")),
        ],
    );
    let head = format!(
        "Proposed change to {} (from v{})",
        change.key, change.base_version
    );
    out.leaf(
        if pending { "div" } else { "summary" },
        &[("class", Some("change-head"))],
        &head,
    );
    out.leaf("p", &[("class", Some("change-reason"))], &change.reason);
    out.open("div", &[("class", Some("diff"))]);
    for op in &change.diff {
        let (class, mark) = match op.op.as_str() {
            "insert" => ("diff-line diff-insert", "+ "),
            "delete" => ("diff-line diff-delete", "- "),
            _ => ("diff-line diff-equal", "  "),
        };
        for line in op.text.lines() {
            out.leaf("div", &[("class", Some(class))], &format!("{mark}{line}"));
        }
    }
    out.close("div");
    out.close(if pending { "div" } else { "details" });
}

/// Where a summary stands in for what came before it: the summary, folded, and (until the
/// page has it) a button that pages in what it covers.
pub fn summary_html(m: &CompiledMessage, earlier_shown: bool) -> String {
    let mut out = Out::default();
    let covered = m
        .payload
        .get("messages")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    out.open(
        "div",
        &[
            ("class", Some("compact-divider")),
            (hooks::MESSAGE_ID.name(), Some(&m.frame_id)),
            ("data-testid", Some("summarised")),
        ],
    );
    out.open("div", &[("class", Some("compact-head"))]);
    out.leaf(
        "span",
        &[("class", Some("compact-label"))],
        &format!("Summarised: {covered} earlier messages"),
    );
    if !earlier_shown {
        let seq = m.seq.to_string();
        out.leaf(
            "button",
            &[
                ("type", Some("button")),
                ("class", Some("show-earlier")),
                (hooks::ACTION.name(), Some(Action::Earlier.as_str())),
                (hooks::SEQ.name(), Some(&seq)),
            ],
            "Show earlier",
        );
    }
    out.close("div");
    out.open("details", &[("class", Some("compact-summary"))]);
    out.leaf("summary", &[], "The summary the agent carries on from");
    prose(&mut out, &m.content);
    out.close("details");
    out.close("div");
    out.0
}

/// The stored messages as the page first shows them: each in its slot (the element the
/// browser redraws it in, `data-slot` its id), or a line saying there are none yet.
pub fn stored_html(messages: &[(String, String)]) -> String {
    if messages.is_empty() {
        return EMPTY.to_owned();
    }
    let mut out = Out::default();
    for (id, html) in messages {
        out.open(
            "div",
            &[("class", Some("msg-slot")), (hooks::SLOT.name(), Some(id))],
        );
        out.0.push_str(html);
        out.close("div");
    }
    out.0
}

/// The pages paged in above the view ("show earlier"), oldest first, each from
/// [`messages_html`].
pub fn earlier_pages_html(pages: &[Vec<(String, String)>]) -> String {
    let mut out = Out::default();
    for page in pages {
        out.open("div", &[("class", Some("earlier"))]);
        for (_, html) in page {
            out.0.push_str(html);
        }
        out.close("div");
    }
    out.0
}

/// The reply in flight's frame: the agent's name, an empty `msg-body`, which the client
/// fills block by block (`app::chat::live::block_html`) or with [`TYPING`], and the place
/// of its calls' cards ([`hooks::LIVE_CALLS`], filled with [`calls_html`]) as they run
/// while it streams.
pub fn live_reply_html(message_id: &str, agent_name: &str) -> String {
    let mut out = Out::default();
    out.open(
        "div",
        &[
            ("class", Some("msg msg-agent live")),
            (hooks::MESSAGE_ID.name(), Some(message_id)),
        ],
    );
    out.leaf("div", &[("class", Some("msg-who"))], agent_name);
    out.leaf("div", &[("class", Some("msg-body"))], "");
    out.close("div");
    out.leaf("div", &[("class", Some(hooks::LIVE_CALLS.name()))], "");
    out.0
}

/// "Show earlier messages" above the list: brings in the page before `seq`.
pub fn show_earlier_top_html(seq: i64) -> String {
    let mut out = Out::default();
    let seq = seq.to_string();
    out.leaf(
        "button",
        &[
            ("type", Some("button")),
            ("class", Some("show-earlier top")),
            (hooks::EARLIER_TOP.name(), Some("")),
            ("data-testid", Some("show-earlier")),
            (hooks::ACTION.name(), Some(Action::Earlier.as_str())),
            (hooks::SEQ.name(), Some(&seq)),
        ],
        "Show earlier messages",
    );
    out.0
}

/// The banner above the message box while a question of the agent's waits for its answer
/// from there: the question itself is asked once, in the conversation.
pub fn answering_banner_html() -> String {
    banner(
        "composer-answering",
        "answering",
        "Your next message answers the agent's question above.",
        "Dismiss",
    )
}

/// The banner above the message box while it holds an edit of one of the user's messages.
pub fn editing_banner_html() -> String {
    banner(
        hooks::EDITING_BANNER.name(),
        "editing",
        "Editing your message: sending it starts a new version of it.",
        "Cancel",
    )
}

/// A banner above the message box: what the box is for now, and a button that ends it.
fn banner(class: &str, testid: &str, text: &str, end: &str) -> String {
    let mut out = Out::default();
    out.open(
        "div",
        &[("class", Some(class)), ("data-testid", Some(testid))],
    );
    out.leaf("span", &[], text);
    out.leaf(
        "button",
        &[
            ("type", Some("button")),
            ("class", Some(hooks::DISMISS.name())),
        ],
        end,
    );
    out.close("div");
    out.0
}

/// A region's error line: what went wrong there, as an alert (`class`: `form-error` under
/// a form or the header, `msg-error` under a reply).
pub fn error_line_html(class: &str, error: &str) -> String {
    let mut out = Out::default();
    out.leaf(
        "p",
        &[("class", Some(class)), ("role", Some("alert"))],
        error,
    );
    out.0
}

/// "View system prompt"'s section: loading (`None`), the prompt, or why it could not be
/// read.
pub fn system_prompt_html(prompt: Option<Result<&str, &str>>) -> String {
    let mut out = Out::default();
    out.open(
        "section",
        &[
            ("class", Some("system-prompt")),
            ("aria-label", Some("System prompt")),
        ],
    );
    match prompt {
        None => out.0.push_str(LOADING),
        Some(Ok(p)) => out.leaf("pre", &[("data-testid", Some("system-prompt"))], p),
        Some(Err(e)) => out.0.push_str(&error_line_html("form-error", e)),
    }
    out.close("section");
    out.0
}

/// A reply being written in batch mode (nothing streams).
pub const TYPING: &str = "<p class=\"typing\">Writing the whole reply…</p>";

/// While something is fetched.
pub const LOADING: &str = "<p class=\"muted\">Loading…</p>";

/// JSON made safe to sit in a `<script type="application/json">` block: `<`, `>` and `&`
/// as `\u003c`, `\u003e`, `\u0026` (the same JSON, and no `</script>` can end the block).
pub fn json_for_script(json: &str) -> String {
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// What the list shows before the first message.
pub const EMPTY: &str = "<p class=\"empty\">No messages yet. Say hello below.</p>";

/// A compiled page of messages as the page shows it: each message with its calls' cards,
/// summaries as [`summary_html`], the frames that only make cards left out, hidden
/// messages only when `show_hidden`. One `(message id, HTML)` per message shown.
pub fn messages_html(
    messages: &[CompiledMessage],
    show_hidden: bool,
    earlier_shown: impl Fn(i64) -> bool,
) -> Vec<(String, String)> {
    earlier_messages_html(messages, show_hidden, earlier_shown, i64::MIN)
}

/// [`messages_html`] of a page shown above the view: a message before `summary_seq` (the
/// conversation's last summary) offers neither Edit nor Regenerate, which the server
/// refuses there.
pub fn earlier_messages_html(
    messages: &[CompiledMessage],
    show_hidden: bool,
    earlier_shown: impl Fn(i64) -> bool,
    summary_seq: i64,
) -> Vec<(String, String)> {
    let all = crate::calls::calls(messages);
    messages
        .iter()
        .filter(|m| show_hidden || !m.hidden)
        // A call's request and result show as a card under its message.
        .filter(|m| !matches!(m.frame_type, FrameType::Request | FrameType::Result))
        .map(|m| {
            let html = if m.frame_type == FrameType::Compact {
                summary_html(m, earlier_shown(m.seq))
            } else {
                let mine: Vec<CallView> = all
                    .iter()
                    .filter(|c| c.message_id == m.frame_id)
                    .cloned()
                    .collect();
                message_html_in(m, &mine, m.seq >= summary_seq)
            };
            (m.frame_id.clone(), html)
        })
        .collect()
}

/// What a highlighted piece of code is, as the page colours it (`hl-<name>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hl {
    Plain,
    Comment,
    String,
    Number,
    Constant,
    Keyword,
    Function,
    Type,
}

impl Hl {
    pub fn class(self) -> &'static str {
        match self {
            Hl::Plain => "hl-plain",
            Hl::Comment => "hl-comment",
            Hl::String => "hl-string",
            Hl::Number => "hl-number",
            Hl::Constant => "hl-constant",
            Hl::Keyword => "hl-keyword",
            Hl::Function => "hl-function",
            Hl::Type => "hl-type",
        }
    }
}

/// A code block's text as highlighted tokens: each a span of its class, its text escaped;
/// plain text as it is.
pub fn highlighted_html(tokens: &[(Hl, String)]) -> String {
    let mut out = Out::default();
    for (hl, text) in tokens {
        match hl {
            Hl::Plain => out.text(text),
            _ => out.leaf("span", &[("class", Some(hl.class()))], text),
        }
    }
    out.0
}

/// Checks that `html` from this module is inert: only its own tags and the markdown
/// renderer's, each attribute one this module writes (a `data-*` or `aria-*` value is never
/// live), a link's `href` of an allowed scheme, fields of the kinds prompts use, buttons
/// that submit nothing. No handler, style, source, frame or form. The invariant of the
/// hostile corpus and of the renderer's fuzz target; `Err` says what was found.
pub fn inert(html: &str) -> Result<(), String> {
    const TAGS: &[&str] = &[
        "div",
        "span",
        "p",
        "em",
        "strong",
        "del",
        "sup",
        "sub",
        "code",
        "pre",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "blockquote",
        "ol",
        "ul",
        "li",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "br",
        "hr",
        "a",
        "details",
        "summary",
        "button",
        "input",
        "select",
        "option",
        "label",
        "progress",
        "q",
        "section",
    ];
    markdown::check_tags(
        html,
        TAGS,
        |name, attr, value| match (name, attr, value) {
            (_, a, _) if a.starts_with("data-") || a.starts_with("aria-") => true,
            (_, "class" | "role" | "title", Some(_)) => true,
            ("a", "href", Some(v)) => {
                let v = v.replace("&amp;", "&");
                safe_link(&v).is_some()
                    || v.strip_prefix("../api/attachments/")
                        .and_then(attachment_href)
                        .is_some_and(|h| h == v)
            }
            ("a", "download", _) => true,
            ("a", "rel", Some(v)) => v == markdown::LINK_REL,
            ("a", "target", Some("_blank")) => true,
            ("ol", "start", Some(v)) => v.bytes().all(|b| b.is_ascii_digit()),
            ("button", "type", Some("button")) => true,
            ("button", "disabled", _) => true,
            ("input", "type", Some(t)) => {
                matches!(
                    t,
                    "text" | "number" | "color" | "range" | "checkbox" | "radio"
                )
            }
            ("input", "name" | "value" | "placeholder" | "min" | "max" | "step", Some(_)) => true,
            ("input", "disabled" | "checked", None) => true,
            ("option" | "progress", "value", Some(_)) => true,
            ("details", "open", _) => true,
            ("progress", "max", Some(_)) => true,
            _ => false,
        },
        |_, _| Ok(()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page shown above the view: what lies before the last summary offers neither Edit
    /// nor Regenerate (the server refuses both there); what comes after it does.
    #[test]
    fn before_the_summary_nothing_is_offered_to_rewrite() {
        let at = |seq: i64, role: Role| CompiledMessage {
            frame_id: format!("m{seq}"),
            seq,
            role,
            ..agent("text")
        };
        let page = [at(3, Role::User), at(4, Role::Agent), at(9, Role::Agent)];
        let drawn = earlier_messages_html(&page, false, |_| false, 5);
        let offers = |html: &str| {
            html.contains("data-action=\"edit\"") || html.contains("data-action=\"regenerate\"")
        };
        assert!(!offers(&drawn[0].1) && !offers(&drawn[1].1), "{drawn:?}");
        assert!(offers(&drawn[2].1), "{drawn:?}");
        // Without a summary, every message offers its own.
        let all = messages_html(&page, false, |_| false);
        assert!(all.iter().all(|(_, h)| offers(h)), "{all:?}");
    }

    fn agent(content: &str) -> CompiledMessage {
        CompiledMessage {
            frame_id: "m1".into(),
            seq: 1,
            frame_type: FrameType::Message,
            parent_id: None,
            author_type: crate::frame::AuthorType::Agent,
            author_id: None,
            role: Role::Agent,
            content: content.into(),
            hidden: false,
            edited: false,
            versions: None,
            timestamp: String::new(),
            payload: serde_json::json!({"agent_name": "A<b>"}),
        }
    }

    /// A message another agent queued is drawn as theirs, never as "You", its name escaped.
    #[test]
    fn a_queued_message_is_not_the_users() {
        let mut m = agent("Check the <figures>.");
        m.role = Role::User;
        m.author_type = crate::frame::AuthorType::System;
        m.payload = serde_json::json!({"role": "user", "queued": {"agent_name": "A<b>", "from_session": 3, "chain": 1}});
        let html = message_html(&m, &[]);
        assert!(
            html.contains(r#"<div class="msg-who">Queued by A&lt;b&gt; from session 3 "#),
            "{html}"
        );
        assert!(!html.contains("You "), "{html}");
        assert!(html.contains("Check the &lt;figures&gt;."), "{html}");
        m.payload = serde_json::json!({"role": "user"});
        assert!(message_html(&m, &[]).contains(r#"<div class="msg-who">You "#));
    }

    /// Each skeleton the client writes carries the hooks it finds its parts by.
    #[test]
    fn the_clients_skeletons_carry_the_hooks_the_client_reads() {
        use crate::hooks::*;
        let live = live_reply_html("m", "Ada");
        let top = show_earlier_top_html(3);
        let banner = answering_banner_html();
        let editing = editing_banner_html();
        for (html, hooks) in [
            (live.as_str(), &[LIVE, BODY, LIVE_CALLS, MESSAGE_ID][..]),
            (top.as_str(), &[EARLIER_TOP, SEQ, ACTION][..]),
            (banner.as_str(), &[ANSWERING, DISMISS][..]),
            (editing.as_str(), &[EDITING_BANNER, DISMISS][..]),
            (EMPTY, &[EMPTY_NOTE][..]),
        ] {
            for h in hooks {
                assert!(h.is_in(html), "{} is not in {html}", h.selector());
            }
        }
    }

    /// The client's other skeletons: an error line, the answering banner, the system
    /// prompt's section; every value escaped, and each inert.
    #[test]
    fn the_clients_error_lines_banner_and_prompt_section_are_drawn_here() {
        let line = error_line_html("msg-error", "<b>no</b> & more");
        assert_eq!(
            line,
            r#"<p class="msg-error" role="alert">&lt;b&gt;no&lt;/b&gt; &amp; more</p>"#
        );
        let banner = answering_banner_html();
        assert!(
            banner.starts_with(r#"<div class="composer-answering" data-testid="answering">"#),
            "{banner}"
        );
        assert_eq!(inert(&banner), Ok(()));
        assert_eq!(inert(&editing_banner_html()), Ok(()));
        let loading = system_prompt_html(None);
        assert!(
            loading.contains(LOADING) && loading.contains("system-prompt"),
            "{loading}"
        );
        let prompt = system_prompt_html(Some(Ok("You are <Ada>.")));
        assert!(
            prompt.contains(r#"<pre data-testid="system-prompt">You are &lt;Ada&gt;.</pre>"#),
            "{prompt}"
        );
        let failed = system_prompt_html(Some(Err("not yours")));
        assert!(failed.contains(r#"role="alert">not yours</p>"#), "{failed}");
        for html in [line, banner, loading, prompt, failed] {
            inert(&html).unwrap();
        }
    }

    #[test]
    fn the_live_reply_and_the_top_button_are_drawn_here_too() {
        let live = live_reply_html("m\"1", "<b>Ada</b>");
        assert!(
            live.starts_with(r#"<div class="msg msg-agent live" data-message-id="m&quot;1">"#),
            "{live}"
        );
        assert!(
            live.contains(r#"<div class="msg-who">&lt;b&gt;Ada&lt;/b&gt;</div>"#),
            "{live}"
        );
        assert!(live.contains(r#"<div class="msg-body"></div>"#), "{live}");
        assert!(hooks::LIVE_CALLS.is_in(&live), "{live}");
        let top = show_earlier_top_html(42);
        assert!(
            top.contains(r#"data-action="earlier""#) && top.contains(r#"data-seq="42""#),
            "{top}"
        );
        assert!(top.contains(r#"class="show-earlier top""#), "{top}");
    }

    /// Every `data-action` this renderer writes is one of [`crate::hooks::Action`], the
    /// names the chat's listener reads.
    #[test]
    fn every_data_action_written_is_an_action() {
        use crate::calls::{CallRequest, CallStatus};
        use crate::hooks::Action;
        let src = "Here:\n\n```rust\nfn main() {}\n```\n\n<copy label=\"x\">y</copy>\n\
                   <websearch>rust</websearch>\n<hml-prompt id=\"p\" type=\"select\">Pick<data>[\"red\"]</data></hml-prompt>\n\
                   <ask options=\"yes,no\">Go?</ask>";
        let call = CallView {
            request_id: "r".into(),
            message_id: "m1".into(),
            request: CallRequest {
                function: "websearch".into(),
                args: serde_json::json!({"query": "rust"}),
                origin: CallOrigin::Tool {
                    tool_use_id: "t".into(),
                },
                status: CallStatus::Pending,
                decided_by: None,
                sender_id: None,
                problem: None,
                content: "websearch".into(),
                expires_at: None,
                permissions: Some(crate::calls::FunctionPermissions::allowed(
                    crate::calls::DangerLevel::Dangerous,
                )),
                change: None,
            },
            result: None,
        };
        // What the agent read of its configuration: its panel's Close.
        let read = CallView {
            request_id: "r2".into(),
            request: CallRequest {
                function: "read_config".into(),
                args: serde_json::json!({"key": "soul"}),
                status: CallStatus::Approved,
                permissions: None,
                ..call.request.clone()
            },
            result: Some(crate::calls::CallResult {
                function: "read_config".into(),
                outcome: crate::calls::Outcome::Ok,
                content: String::new(),
                output: "soul (v1):\nCalm.".into(),
                tool_use_id: None,
            }),
            ..call.clone()
        };
        let mut html = message_html(&agent(src), &[call, read]);
        let summary = CompiledMessage {
            frame_type: FrameType::Compact,
            ..agent("Summary.")
        };
        // A user's message, edited: its versions and its own menu.
        let edited = CompiledMessage {
            role: Role::User,
            author_type: crate::frame::AuthorType::User,
            versions: Some(crate::frame::Versions {
                of: "m0".into(),
                count: 2,
                current: 2,
            }),
            ..agent("mine")
        };
        html.extend(
            messages_html(&[summary, edited, agent("after")], false, |_| false)
                .into_iter()
                .map(|(_, h)| h),
        );
        let mut seen = Vec::new();
        for part in html.split("data-action=\"").skip(1) {
            let value = &part[..part.find('"').expect("a closed attribute")];
            let action = Action::parse(value);
            assert!(action.is_some(), "data-action=\"{value}\" is no Action");
            seen.extend(action);
        }
        // Every hook the client reads in a message is in what was drawn.
        for hook in crate::hooks::MESSAGE_HOOKS {
            assert!(
                hook.is_in(&html),
                "nothing drawn carries {}: {html:?}",
                hook.selector()
            );
        }
        // A question's options are buttons only while its call asks (the calls' tests).
        for a in Action::ALL.into_iter().filter(|a| *a != Action::Ask) {
            assert!(seen.contains(&a), "nothing drawn asks for {a:?}: {html:?}");
        }
    }

    /// A message's versions: "‹ 2/3 ›", each arrow naming the version it shows, none past
    /// either end; the HTML stays inert.
    #[test]
    fn versions_switch_between_neighbours() {
        let of = |current| CompiledMessage {
            versions: Some(crate::frame::Versions {
                of: "m0".into(),
                count: 3,
                current,
            }),
            ..agent("again")
        };
        let html = message_html(&of(2), &[]);
        assert!(
            html.contains(r#"data-version="1" aria-label="Previous version">‹"#),
            "{html}"
        );
        assert!(
            html.contains(r#"<span class="version-of">2/3</span>"#),
            "{html}"
        );
        assert!(
            html.contains(r#"data-version="3" aria-label="Next version">›"#),
            "{html}"
        );
        assert!(!html.contains("disabled"), "{html}");
        let first = message_html(&of(1), &[]);
        assert!(
            first.contains(r#"aria-label="Previous version" disabled"#),
            "{first}"
        );
        let last = message_html(&of(3), &[]);
        assert!(
            last.contains(r#"aria-label="Next version" disabled"#),
            "{last}"
        );
        for h in [html, first, last] {
            assert_eq!(inert(&h), Ok(()), "{h}");
        }
    }

    /// A message's attachments are chips that download them (relative to the chat's page);
    /// a name is text, an id that is no id gets no link, and all of it is inert.
    #[test]
    fn attachments_are_chips_that_download_them() {
        let mut m = agent("see the files");
        m.role = Role::User;
        m.payload = serde_json::json!({"role": "user", "attachments": [
            {"id": "01ab-cd", "name": "<b>plan</b>.md", "kind": "text", "size": 1234},
            {"id": "../../x", "name": "odd.png", "kind": "image", "size": 10}
        ]});
        let html = message_html(&m, &[]);
        assert!(
            html.contains(r#"<a class="attachment-chip" href="../api/attachments/01ab-cd" download="" data-kind="text">&lt;b&gt;plan&lt;/b&gt;.md · 1.2 KB</a>"#),
            "{html}"
        );
        assert!(
            html.contains(
                r#"<a class="attachment-chip" download="" data-kind="image">odd.png · 10 B</a>"#
            ),
            "{html}"
        );
        assert_eq!(inert(&html), Ok(()));
        let pending = pending_attachment_html("3", "a \"b\".csv", 2_500_000);
        assert!(
            pending.contains("a &quot;b&quot;.csv · 2.5 MB"),
            "{pending}"
        );
        assert_eq!(inert(&pending), Ok(()));
        assert!(inert(r#"<a href="../api/attachments/x y">x</a>"#).is_err());
    }

    #[test]
    fn model_text_is_escaped_everywhere_it_lands() {
        let h = message_html(
            &agent(
                "<link href=\"javascript:alert(1)\">x\" onclick=\"y</link> <copy label='\"><script>'>a<b></copy> <todo title=\"<i>\"><item status='\" onmouseover=1'>t</item></todo>",
            ),
            &[],
        );
        assert!(!h.contains("<script"), "{h}");
        assert!(!h.contains("<b>"), "{h}");
        assert!(!h.contains("<i>"), "{h}");
        assert!(!h.contains("href=\"javascript"), "{h}");
        assert!(!h.contains("\" onclick"), "{h}");
        assert!(!h.contains("\" onmouseover"), "{h}");
        assert!(h.contains("A&lt;b&gt;"), "{h}");
    }

    #[test]
    fn highlighted_code_is_inert_spans() {
        let html = highlighted_html(&[
            (Hl::Keyword, "fn".into()),
            (Hl::Plain, " main() { ".into()),
            (Hl::String, "\"<script>alert(1)</script>\"".into()),
            (Hl::Plain, " }".into()),
        ]);
        assert_eq!(
            html,
            r#"<span class="hl-keyword">fn</span> main() { <span class="hl-string">&quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;</span> }"#
        );
        inert(&html).unwrap();
    }

    /// A card says what its call does in words; a question its message asks in place has no
    /// card (it is asked once, where it is), one asked through a tool call has.
    #[test]
    fn a_card_says_its_call_in_words_and_a_question_is_asked_once() {
        use crate::calls::{CallRequest, CallStatus};
        let call = |function: &str, args: Value, status: CallStatus, origin: CallOrigin| CallView {
            request_id: format!("r-{function}"),
            message_id: "m1".into(),
            request: CallRequest {
                function: function.into(),
                args,
                origin,
                status,
                decided_by: None,
                sender_id: None,
                problem: None,
                content: function.into(),
                expires_at: None,
                permissions: None,
                change: None,
            },
            result: None,
        };
        let element = || CallOrigin::Element {
            element_id: "e1".into(),
            kind: "bash".into(),
        };
        let html = calls_html(
            &[
                call(
                    "bash",
                    serde_json::json!({"command": "ls <x>"}),
                    CallStatus::Pending,
                    element(),
                ),
                call(
                    "ask",
                    serde_json::json!({"question": "Tea?"}),
                    CallStatus::Asking,
                    element(),
                ),
                call(
                    "mystery",
                    serde_json::json!({"n": 1}),
                    CallStatus::Pending,
                    element(),
                ),
            ],
            "m1",
        );
        assert!(
            html.contains(r#"<span class="call-what">Runs: <code>ls &lt;x&gt;</code></span>"#),
            "{html}"
        );
        assert!(!html.contains("r-ask") && !html.contains("Tea?"), "{html}");
        assert!(
            html.contains(r#"<code class="call-args">{&quot;n&quot;:1}</code>"#),
            "{html}"
        );
        let tool = calls_html(
            &[call(
                "ask",
                serde_json::json!({"question": "Tea?"}),
                CallStatus::Asking,
                CallOrigin::Tool {
                    tool_use_id: "t".into(),
                },
            )],
            "m1",
        );
        assert!(
            tool.contains("r-ask") && tool.contains("Asks: <span>Tea?</span>"),
            "{tool}"
        );
        assert_eq!(
            calls_html(
                &[call(
                    "ask",
                    serde_json::json!({"question": "Tea?"}),
                    CallStatus::Asking,
                    element()
                )],
                "m1"
            ),
            "",
            "no empty box of cards"
        );
    }

    /// A proposed change's card shows its key, reason and diff while it waits (with Approve
    /// and Reject), folded once decided; what it holds is escaped.
    #[test]
    fn a_proposed_changes_card_shows_its_diff() {
        use crate::calls::{CallRequest, CallStatus, DiffOp, ProposedChange};
        let card = |status: CallStatus| {
            let call = CallView {
                request_id: "r".into(),
                message_id: "m1".into(),
                request: CallRequest {
                    function: "propose_config_change".into(),
                    args: serde_json::json!({}),
                    origin: CallOrigin::Tool {
                        tool_use_id: "t".into(),
                    },
                    status,
                    decided_by: None,
                    sender_id: None,
                    problem: None,
                    content: "propose".into(),
                    expires_at: None,
                    permissions: None,
                    change: Some(ProposedChange {
                        pending_change_id: "req-1".into(),
                        key: "capability:tasks".into(),
                        base_version: 3,
                        reason: "the user <asked>".into(),
                        diff: vec![
                            DiffOp {
                                op: "equal".into(),
                                text: "keep\n".into(),
                            },
                            DiffOp {
                                op: "delete".into(),
                                text: "old\n".into(),
                            },
                            DiffOp {
                                op: "insert".into(),
                                text: "new <b>\nmore\n".into(),
                            },
                        ],
                    }),
                },
                result: None,
            };
            let mut out = Out::default();
            call_card(&mut out, &call, "m1");
            out.0
        };
        let waiting = card(CallStatus::Pending);
        assert_eq!(inert(&waiting), Ok(()));
        assert!(waiting.contains("call-waiting call-proposal"), "{waiting}");
        assert!(waiting.contains(r#"data-change-id="req-1""#), "{waiting}");
        for part in [
            "Proposed change to capability:tasks (from v3)",
            "the user &lt;asked&gt;",
            r#"<div class="diff-line diff-equal">  keep</div>"#,
            r#"<div class="diff-line diff-delete">- old</div>"#,
            r#"<div class="diff-line diff-insert">+ new &lt;b&gt;</div>"#,
            r#"<div class="diff-line diff-insert">+ more</div>"#,
            ">Approve</button>",
            ">Reject</button>",
        ] {
            assert!(waiting.contains(part), "{part}: {waiting}");
        }
        let decided = card(CallStatus::Denied);
        assert!(
            decided.contains(r#"<details class="change""#) && !decided.contains(">Reject<"),
            "{decided}"
        );
    }

    /// What the agent read of its configuration is shown open, escaped.
    #[test]
    fn a_config_read_shows_open() {
        use crate::calls::{CallRequest, CallResult, CallStatus};
        let call = CallView {
            request_id: "r".into(),
            message_id: "m1".into(),
            request: CallRequest {
                function: "read_config".into(),
                args: serde_json::json!({"key": "capability:tasks"}),
                origin: CallOrigin::Tool {
                    tool_use_id: "t".into(),
                },
                status: CallStatus::Approved,
                decided_by: None,
                sender_id: None,
                problem: None,
                content: "read".into(),
                expires_at: None,
                permissions: None,
                change: None,
            },
            result: Some(CallResult {
                function: "read_config".into(),
                outcome: Outcome::Ok,
                content: String::new(),
                output: "capability:tasks (v2):\nPut <b>personal</b> tasks in Personal.".into(),
                tool_use_id: None,
            }),
        };
        let mut out = Out::default();
        call_card(&mut out, &call, "m1");
        let html = out.0;
        assert_eq!(inert(&html), Ok(()));
        assert!(
            html.contains(
                r#"<details class="call-result config-read" data-testid="config-read" open>"#
            ) && html.contains("Reads its configuration: <code>capability:tasks</code>")
                && html.contains("Put &lt;b&gt;personal&lt;/b&gt; tasks"),
            "{html}"
        );
    }

    /// A card waiting for approval shows how dangerous its function is; "Always allow" is
    /// confirmed for a dangerous one and absent for one that asks every time.
    #[test]
    fn an_approval_card_shows_its_danger() {
        use crate::calls::{
            AutoApprove, CallRequest, CallStatus, DangerLevel, FunctionPermissions,
        };
        let card = |function: &str, permissions: Option<FunctionPermissions>| {
            let call = CallView {
                request_id: "r".into(),
                message_id: "m1".into(),
                request: CallRequest {
                    function: function.into(),
                    args: serde_json::json!({}),
                    origin: CallOrigin::Tool {
                        tool_use_id: "t".into(),
                    },
                    status: CallStatus::Pending,
                    decided_by: None,
                    sender_id: None,
                    problem: None,
                    content: function.into(),
                    expires_at: None,
                    permissions,
                    change: None,
                },
                result: None,
            };
            let mut out = Out::default();
            call_card(&mut out, &call, "m1");
            out.0
        };
        let bash = card(
            "bash",
            Some(FunctionPermissions::allowed(DangerLevel::Dangerous)),
        );
        assert!(
            bash.contains(r#"<span class="call-danger danger-dangerous""#),
            "{bash}"
        );
        assert!(
            bash.contains(r#"data-action="always" data-confirm="bash is dangerous. Let your agents run it from now on without asking?">Always allow bash"#),
            "{bash}"
        );
        let search = card(
            "websearch",
            Some(FunctionPermissions::allowed(DangerLevel::Moderate)),
        );
        assert!(
            search.contains(">moderate</span>") && !search.contains("data-confirm"),
            "{search}"
        );
        assert!(search.contains("Always allow websearch"), "{search}");
        let command = card(
            "command_agent",
            Some(FunctionPermissions {
                auto_approve: AutoApprove::Never,
                danger_level: DangerLevel::Moderate,
            }),
        );
        assert!(
            command.contains("Approve") && !command.contains("Always allow"),
            "{command}"
        );
        // A request stored before the metadata was kept: no badge, Always allow as before.
        let old = card("websearch", None);
        assert!(
            !old.contains("call-danger") && old.contains("Always allow"),
            "{old}"
        );
    }

    #[test]
    fn a_stored_prompt_has_its_field_and_ok_a_live_one_no_ok() {
        let src =
            r#"<hml-prompt id="p" type="select">Pick<data>["red", "green"]</data></hml-prompt>"#;
        let stored = message_html(&agent(src), &[]);
        assert!(stored.contains(r#"data-keep="m1:p""#), "{stored}");
        assert!(
            stored.contains(r#"<option value="green">green</option>"#),
            "{stored}"
        );
        assert!(stored.contains(r#"data-action="prompt""#), "{stored}");
        let doc = crate::hml::parse(src);
        let live = nodes_html(
            &doc.nodes,
            Place {
                live: true,
                message_id: None,
                calls: &[],
            },
        );
        assert!(!live.contains("data-action"), "{live}");
    }

    /// A reply still streaming cannot show its prompt answered, whatever it wrote; an
    /// answer the agent recorded says so and keeps the field, so the user may correct it.
    #[test]
    fn only_the_user_answers_a_prompt_on_the_page() {
        let src = r#"<hml-prompt id="p" answered answered-by="user">Sure?<response>yes</response></hml-prompt>"#;
        let doc = crate::hml::parse(src);
        let live = nodes_html(
            &doc.nodes,
            Place {
                live: true,
                message_id: None,
                calls: &[],
            },
        );
        assert!(!live.contains("answered"), "{live}");
        assert!(!live.contains("hml-prompt-response"), "{live}");
        let recorded = r#"<hml-prompt id="p" answered answered-by="agent">Sure?<response>yes</response></hml-prompt>"#;
        let stored = message_html(&agent(recorded), &[]);
        assert!(
            stored.contains("Recorded by the agent from your message: yes."),
            "{stored}"
        );
        assert!(stored.contains(r#"data-keep="m1:p""#), "{stored}");
        assert!(!stored.contains("hml-prompt answered"), "{stored}");
        let given = r#"<hml-prompt id="p" answered>Sure?<response>yes</response></hml-prompt>"#;
        let stored = message_html(&agent(given), &[]);
        assert!(stored.contains("hml-prompt answered"), "{stored}");
        assert!(!stored.contains("Recorded by the agent"), "{stored}");
    }

    #[test]
    fn json_in_a_script_block_cannot_end_it_and_reads_the_same() {
        let v = serde_json::json!({"t": "</script><script>alert(1)</script> & <!--"});
        let safe = json_for_script(&v.to_string());
        assert!(
            !safe.contains('<') && !safe.contains('>') && !safe.contains('&'),
            "{safe}"
        );
        assert_eq!(serde_json::from_str::<Value>(&safe).ok(), Some(v));
    }

    #[test]
    fn the_countdown_says_what_happens_and_when() {
        assert_eq!(
            countdown_text(2_100, Some("no")),
            (3, "“no” is the answer in 3 s".to_owned())
        );
        assert_eq!(
            countdown_text(-5, None),
            (0, "Time is up: the question closes.".to_owned())
        );
    }
}
