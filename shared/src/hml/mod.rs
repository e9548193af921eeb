//! Hero Markup Language: the element vocabulary and the rules the parser applies to it.
//!
//! HML is markdown prose with a closed set of elements in it (reference 000 and 003).
//! This module owns *what the elements are*: their names, whether the server executes
//! them, whether their body is raw text or markup, where they may appear. The grammar
//! lives in [`tag`] (one complete tag), the chunk-fed state machine in [`stream`], the
//! tree the UI renders in [`doc`].
//!
//! A tag whose name is not in [`ElementKind`] is not an error and not an element: it is
//! prose (`<div>`, `Vec<T>`, `a < b` stay text), which is why there is no `Unknown` kind.

pub mod doc;
pub mod prompt;
pub mod stream;
pub mod tag;

pub use doc::{Document, Element, ElementError, Node, TreeBuilder, parse, parse_with};
pub use prompt::{Prompt, PromptOption};
pub use stream::{
    DEFAULT_MAX_ELEMENT_BYTES, DEFAULT_MAX_TAG_BYTES, Diagnostic, DiagnosticKind, DynSink, Event,
    OwnedEvent, ParserOptions, Span, StreamParser,
};
pub use tag::decode_entities;

/// Every HML element. Closed on purpose: adding one is a decision about execution and
/// nesting, made here once for the server and the browser alike.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ElementKind {
    /// Executable: a web search; body is the query.
    Websearch,
    /// Executable: a shell command (`cwd`, `timeout`); body is the command, verbatim.
    Bash,
    /// Executable: a question to the user (`timeout`, `default`, `options`).
    Ask,
    /// Executable: a JSON interaction block (or an `@target(method, args)` call).
    Interaction,
    /// Display: a processing indicator around the agent's musings.
    Thinking,
    /// Display: a task list (`title`) of `item`s.
    Todo,
    /// Display: one task (`status`), only inside `todo`.
    Item,
    /// Display: a progress bar (`value`, `max`, `status`); void, like `<br>`.
    Progress,
    /// Display: a clickable link (`href`).
    Link,
    /// Display: a copy button (`label`).
    Copy,
    /// Display: command output (`for`, `status`).
    Result,
    /// Display: an inline question (`id`, `type`, `answered`).
    HmlPrompt,
    /// The JSON options of an `hml-prompt`, only inside one.
    Data,
    /// The user's answer to an `hml-prompt`, only inside one.
    Response,
}

/// How the body of an element is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// Prose with nested elements, code fences and code spans.
    Markup,
    /// Verbatim text up to the first close tag (`echo a > b` is a command, not markup).
    Raw,
    /// Verbatim JSON up to the first close tag that is not inside a JSON string.
    Json,
    /// No body: the start tag is the whole element.
    Void,
}

impl ElementKind {
    pub const ALL: [ElementKind; 14] = [
        ElementKind::Websearch,
        ElementKind::Bash,
        ElementKind::Ask,
        ElementKind::Interaction,
        ElementKind::Thinking,
        ElementKind::Todo,
        ElementKind::Item,
        ElementKind::Progress,
        ElementKind::Link,
        ElementKind::Copy,
        ElementKind::Result,
        ElementKind::HmlPrompt,
        ElementKind::Data,
        ElementKind::Response,
    ];

    /// Longest tag name, so the scanner knows when a name cannot be HML any more.
    pub const MAX_NAME_LEN: usize = 11;

    /// The tag name, as written in HML and sent as the `type` of SSE events.
    pub const fn name(self) -> &'static str {
        match self {
            ElementKind::Websearch => "websearch",
            ElementKind::Bash => "bash",
            ElementKind::Ask => "ask",
            ElementKind::Interaction => "interaction",
            ElementKind::Thinking => "thinking",
            ElementKind::Todo => "todo",
            ElementKind::Item => "item",
            ElementKind::Progress => "progress",
            ElementKind::Link => "link",
            ElementKind::Copy => "copy",
            ElementKind::Result => "result",
            ElementKind::HmlPrompt => "hml-prompt",
            ElementKind::Data => "data",
            ElementKind::Response => "response",
        }
    }

    /// Looks a tag name up, ASCII case-insensitively (models write `<THINKING>` too).
    #[inline]
    pub fn from_name(name: &[u8]) -> Option<ElementKind> {
        // One candidate per (length, first letter), then one comparison: this runs for
        // every `<` in prose.
        let first = name.first()?.to_ascii_lowercase();
        let kind = match (name.len(), first) {
            (9, b'w') => ElementKind::Websearch,
            (4, b'b') => ElementKind::Bash,
            (3, b'a') => ElementKind::Ask,
            (11, b'i') => ElementKind::Interaction,
            (8, b't') => ElementKind::Thinking,
            (4, b't') => ElementKind::Todo,
            (4, b'i') => ElementKind::Item,
            (8, b'p') => ElementKind::Progress,
            (4, b'l') => ElementKind::Link,
            (4, b'c') => ElementKind::Copy,
            (6, b'r') => ElementKind::Result,
            (10, b'h') => ElementKind::HmlPrompt,
            (4, b'd') => ElementKind::Data,
            (8, b'r') => ElementKind::Response,
            _ => return None,
        };
        kind.name()
            .as_bytes()
            .eq_ignore_ascii_case(name)
            .then_some(kind)
    }

    /// Whether the server runs this element when it completes. A truncated one never runs.
    pub const fn is_executable(self) -> bool {
        matches!(
            self,
            ElementKind::Websearch
                | ElementKind::Bash
                | ElementKind::Ask
                | ElementKind::Interaction
        )
    }

    pub const fn body(self) -> Body {
        match self {
            ElementKind::Websearch
            | ElementKind::Bash
            | ElementKind::Ask
            | ElementKind::Response => Body::Raw,
            ElementKind::Interaction | ElementKind::Data => Body::Json,
            ElementKind::Progress => Body::Void,
            _ => Body::Markup,
        }
    }

    /// The element this one must sit inside, if any. Outside it the tag is prose.
    pub const fn required_parent(self) -> Option<ElementKind> {
        match self {
            ElementKind::Item => Some(ElementKind::Todo),
            ElementKind::Data | ElementKind::Response => Some(ElementKind::HmlPrompt),
            _ => None,
        }
    }

    /// The attributes reference 000/003 give this element (others are kept, not dropped).
    pub const fn known_attributes(self) -> &'static [&'static str] {
        match self {
            ElementKind::Bash => &["cwd", "timeout"],
            ElementKind::Ask => &["timeout", "default", "options"],
            ElementKind::Todo => &["title"],
            ElementKind::Item => &["status"],
            ElementKind::Progress => &["value", "max", "status"],
            ElementKind::Link => &["href"],
            ElementKind::Copy => &["label"],
            ElementKind::Result => &["for", "status"],
            ElementKind::HmlPrompt => &["id", "type", "answered", "answered-by"],
            _ => &[],
        }
    }
}

impl std::fmt::Display for ElementKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The input types of `hml-prompt` (reference 003). Anything else renders as `text`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptType {
    Text,
    Number,
    Color,
    Checkbox,
    Checkboxes,
    Radio,
    Select,
    Range,
}

impl PromptType {
    pub fn from_attr(value: Option<&str>) -> PromptType {
        match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            Some("number") => PromptType::Number,
            Some("color") => PromptType::Color,
            Some("checkbox") => PromptType::Checkbox,
            Some("checkboxes") => PromptType::Checkboxes,
            Some("radio") => PromptType::Radio,
            Some("select") => PromptType::Select,
            Some("range") => PromptType::Range,
            _ => PromptType::Text,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            PromptType::Text => "text",
            PromptType::Number => "number",
            PromptType::Color => "color",
            PromptType::Checkbox => "checkbox",
            PromptType::Checkboxes => "checkboxes",
            PromptType::Radio => "radio",
            PromptType::Select => "select",
            PromptType::Range => "range",
        }
    }

    /// Whether the options come from the JSON in the prompt's `data` child.
    pub const fn has_options(self) -> bool {
        matches!(
            self,
            PromptType::Checkboxes | PromptType::Radio | PromptType::Select
        )
    }
}

#[cfg(test)]
mod kind_tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in ElementKind::ALL {
            assert_eq!(ElementKind::from_name(k.name().as_bytes()), Some(k));
            assert_eq!(
                ElementKind::from_name(k.name().to_uppercase().as_bytes()),
                Some(k)
            );
            assert!(k.name().len() <= ElementKind::MAX_NAME_LEN);
        }
        assert_eq!(ElementKind::from_name(b"div"), None);
        assert_eq!(ElementKind::from_name(b""), None);
        assert_eq!(ElementKind::from_name(b"interactions"), None);
    }

    #[test]
    fn prompt_types() {
        let got: Vec<_> = [
            "text",
            "number",
            "color",
            "checkbox",
            "checkboxes",
            "radio",
            "select",
            "range",
            "multiselect",
        ]
        .iter()
        .map(|t| PromptType::from_attr(Some(t)).name())
        .collect();
        assert_eq!(
            got,
            [
                "text",
                "number",
                "color",
                "checkbox",
                "checkboxes",
                "radio",
                "select",
                "range",
                "text"
            ]
        );
        assert!(PromptType::Select.has_options() && !PromptType::Range.has_options());
    }
}

#[cfg(test)]
mod tests;
