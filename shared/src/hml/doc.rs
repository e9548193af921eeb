//! The document tree the UI renders, built from parser events.
//!
//! [`parse`] feeds the whole text to a [`StreamParser`] and folds its events with
//! [`TreeBuilder`]; the browser can fold the events of a live stream with the same
//! builder, so a page renders the same tree whether it watched the reply stream or
//! loaded it afterwards. Adjacent text is merged, so the tree does not depend on how
//! the text was cut into chunks.

use serde::{Deserialize, Serialize};

use super::stream::{Diagnostic, DynSink, Event, ParserOptions, Span, StreamParser};
use super::{Body, ElementKind};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    pub nodes: Vec<Node>,
    pub diagnostics: Vec<Diagnostic>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Node {
    /// Markdown prose, verbatim (code fences and spans included).
    Text(String),
    Element(Element),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Element {
    /// Deterministic: the `id` attribute, else `e<n>` for the n-th element of the text.
    pub id: String,
    pub kind: ElementKind,
    /// In source order; names lower-cased, values entity-decoded.
    pub attributes: Vec<(String, String)>,
    /// Prose and nested elements of a markup body; empty for raw and JSON bodies.
    pub children: Vec<Node>,
    /// The inner source, verbatim (less dropped stray tags): the command of a `bash`,
    /// the JSON of an `interaction`.
    pub content: String,
    /// The stream ended before the close tag. A truncated executable never runs.
    pub truncated: bool,
    /// The element outgrew the parser's bound (`content` and `children` are then empty).
    pub error: Option<ElementError>,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ElementError {
    TooLarge { limit: usize },
}

impl Element {
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn has_attr(&self, name: &str) -> bool {
        self.attributes.iter().any(|(n, _)| n == name)
    }

    /// Whether the server may run this element.
    pub fn is_runnable(&self) -> bool {
        self.kind.is_executable() && !self.truncated && self.error.is_none()
    }

    /// The text of the element's own prose children (for an `hml-prompt`, its question).
    pub fn text(&self) -> String {
        let mut s = String::new();
        for c in &self.children {
            if let Node::Text(t) = c {
                s.push_str(t);
            }
        }
        s
    }

    pub fn child(&self, kind: ElementKind) -> Option<&Element> {
        self.children.iter().find_map(|c| match c {
            Node::Element(e) if e.kind == kind => Some(e),
            _ => None,
        })
    }
}

impl Document {
    /// Every element, depth first in document order.
    pub fn elements(&self) -> impl Iterator<Item = &Element> {
        let mut stack: Vec<std::slice::Iter<'_, Node>> = vec![self.nodes.iter()];
        std::iter::from_fn(move || {
            loop {
                let top = stack.last_mut()?;
                match top.next() {
                    None => {
                        stack.pop();
                    }
                    Some(Node::Text(_)) => {}
                    Some(Node::Element(e)) => {
                        stack.push(e.children.iter());
                        return Some(e);
                    }
                }
            }
        })
    }

    pub fn find(&self, id: &str) -> Option<&Element> {
        self.elements().find(|e| e.id == id)
    }
}

/// Folds parser events into a [`Document`].
#[derive(Debug, Default)]
pub struct TreeBuilder {
    doc: Document,
    open: Vec<Element>,
}

fn push_text(nodes: &mut Vec<Node>, text: &str) {
    if let Some(Node::Text(t)) = nodes.last_mut() {
        t.push_str(text);
    } else {
        nodes.push(Node::Text(text.to_owned()));
    }
}

impl TreeBuilder {
    pub fn new() -> TreeBuilder {
        TreeBuilder::default()
    }

    pub fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Text { text, .. } => match self.open.last_mut() {
                Some(e) => push_text(&mut e.children, text),
                None => push_text(&mut self.doc.nodes, text),
            },
            Event::Start {
                id,
                kind,
                attributes,
                offset,
                ..
            } => self.open.push(Element {
                id: id.to_owned(),
                kind,
                attributes: attributes.to_vec(),
                children: Vec::new(),
                content: String::new(),
                truncated: false,
                error: None,
                span: Span {
                    start: offset,
                    ..Span::default()
                },
            }),
            Event::Update { delta, kind, .. } => {
                if let Some(e) = self.open.last_mut()
                    && kind.body() == Body::Markup
                {
                    push_text(&mut e.children, delta);
                }
            }
            Event::Complete {
                content,
                truncated,
                span,
                ..
            } => {
                if let Some(mut e) = self.open.pop() {
                    e.content = content.to_owned();
                    e.truncated = truncated;
                    e.span = span;
                    self.attach(e);
                }
            }
            Event::Error { limit, .. } => {
                if let Some(mut e) = self.open.pop() {
                    e.children.clear();
                    e.error = Some(ElementError::TooLarge { limit });
                    self.attach(e);
                }
            }
            Event::Diagnostic(d) => self.doc.diagnostics.push(d.clone()),
        }
    }

    fn attach(&mut self, e: Element) {
        match self.open.last_mut() {
            Some(p) => p.children.push(Node::Element(e)),
            None => self.doc.nodes.push(Node::Element(e)),
        }
    }

    /// The document so far; elements still open are left out until they end.
    pub fn finish(mut self) -> Document {
        while let Some(e) = self.open.pop() {
            self.attach(e);
        }
        self.doc
    }
}

/// Parses a whole text: exactly what feeding it to a [`StreamParser`] in any chunks gives.
pub fn parse(text: &str) -> Document {
    parse_with(text, ParserOptions::default())
}

pub fn parse_with(text: &str, opts: ParserOptions) -> Document {
    let mut parser = StreamParser::with_options(opts);
    let mut tree = TreeBuilder::new();
    // One sink type for feeding and finishing, the browser's live reply's too (`DynSink`):
    // each sink type is a copy of the whole parser in the wasm.
    let sink: DynSink<'_> = &mut |e| tree.event(e);
    parser.feed_str_with(text, &mut *sink);
    parser.finish_with(sink);
    tree.finish()
}
