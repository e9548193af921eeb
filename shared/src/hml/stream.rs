//! The chunk-fed HML parser: text in arbitrary pieces in, element events out.
//!
//! Every byte is looked at once. Prose is skipped with `memchr` to the next byte that can
//! change anything (`<`, a backtick, a newline); the bytes of a construct that straddles a
//! chunk boundary (a tag, a close tag of a raw body, a UTF-8 sequence) are carried in a
//! small buffer, never re-scanned. Every decision depends only on the bytes before it, so
//! feeding a text whole or one byte at a time yields the same elements, ids and contents;
//! [`super::parse`] is literally "feed all, finish, build a tree from the events".
//!
//! What is an element, on purpose:
//! - only tags named in [`ElementKind`]; `<div>`, `Vec<T>` and `a < b` are prose;
//! - nothing inside a code fence (```` ``` ```` / `~~~` at a line start, up to three spaces
//!   in, closed by a run of the same char at least as long) or an inline code span (a
//!   backtick run, closed by a run of the same length or by the end of the line: a parser
//!   that must decide as it goes cannot wait for a closer that may never come);
//! - the bodies of `bash`, `websearch`, `ask` and `response` are raw text up to their close
//!   tag; those of `interaction` and `data` are raw JSON whose close tag does not count
//!   inside a JSON string (a string ends at a newline too, so one stray quote cannot eat
//!   the rest of the reply);
//! - `item` only inside `todo`, `data` and `response` only inside `hml-prompt`; a new
//!   `item` closes the open one, a close tag closes what is open inside it;
//! - a stray close tag of an HML element is dropped (with a diagnostic), and so is a
//!   misplaced start tag (`item` outside `todo`); `progress` is void.
//!
//! Each started element ends with exactly one [`Event::Complete`] (possibly `truncated`,
//! when the stream ended first) or one [`Event::Error`] (its content outgrew
//! [`ParserOptions::max_element_bytes`]); nothing about it follows.

use std::collections::HashSet;

use memchr::{memchr, memchr2, memchr3};

use super::tag::{Attributes, parse_attributes};
use super::{Body, ElementKind};

/// Default bound on the content of one top-level element (1 MiB).
pub const DEFAULT_MAX_ELEMENT_BYTES: usize = 1 << 20;
/// Default bound on one tag, attributes included; longer, the `<` was prose after all.
pub const DEFAULT_MAX_TAG_BYTES: usize = 8 << 10;
/// Default bound on nesting. Deeper start tags are prose: without a bound, a reply of
/// nested tags and stray close tags would cost time quadratic in its length.
pub const DEFAULT_MAX_DEPTH: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParserOptions {
    /// Bound on the content of an element (for nested elements, of the outermost open
    /// one): past it the open elements end with [`Event::Error`] and the parser's memory
    /// stays bounded whatever the model sends.
    pub max_element_bytes: usize,
    /// Bound on one tag's length.
    pub max_tag_bytes: usize,
    /// Bound on the number of elements open at once.
    pub max_depth: usize,
}

impl Default for ParserOptions {
    fn default() -> Self {
        ParserOptions {
            max_element_bytes: DEFAULT_MAX_ELEMENT_BYTES,
            max_tag_bytes: DEFAULT_MAX_TAG_BYTES,
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }
}

/// Byte offsets of an element in the parsed text (after UTF-8 repair, if any was needed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Span {
    /// The `<` of the start tag.
    pub start: u64,
    /// Just after the start tag's `>`.
    pub content_start: u64,
    /// Where the content ends: the close tag's `<`, or the end of the stream.
    pub content_end: u64,
    /// Just after the close tag, or the end of the stream.
    pub end: u64,
}

/// One thing the parser noticed and recovered from; never a failure.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Diagnostic {
    pub offset: u64,
    pub kind: DiagnosticKind,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DiagnosticKind {
    /// A close tag with no such element open; dropped.
    StrayCloseTag { element: String },
    /// An element closed by an ancestor's close tag or a sibling `item`.
    ImplicitlyClosed { id: String },
    /// An element still open when the stream ended.
    Truncated { id: String },
    /// An element whose content outgrew the bound.
    TooLarge { id: String, limit: usize },
    /// `item`, `data` or `response` outside its parent: dropped, its content is prose.
    Misplaced { element: String },
    /// The stream ended inside, or a tag outgrew the bound before, an HML tag's `>`.
    UnterminatedTag { element: String },
    /// A start tag past the nesting bound: left as prose.
    TooDeep { element: String, limit: usize },
}

/// A parser event, borrowing from the chunk being fed and from the parser.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// Prose outside any element. `code` is true inside a code fence or span (and for
    /// the fence and backtick markers), so a detector can skip what the agent quoted.
    Text {
        text: &'a str,
        code: bool,
    },
    /// An element's start tag was read.
    Start {
        id: &'a str,
        kind: ElementKind,
        parent: Option<&'a str>,
        attributes: &'a [(String, String)],
        offset: u64,
    },
    /// Content of the innermost open element: its raw body, or prose between its
    /// children. Concatenated, the deltas of a raw element are its content.
    Update {
        id: &'a str,
        kind: ElementKind,
        delta: &'a str,
    },
    /// The element ended; `content` is its inner source text verbatim, less the tags the
    /// parser dropped (stray close tags, misplaced `item`/`data`/`response`).
    Complete {
        id: &'a str,
        kind: ElementKind,
        attributes: &'a [(String, String)],
        content: &'a str,
        truncated: bool,
        span: Span,
    },
    /// The element ended without completing: it outgrew the bound.
    Error {
        id: &'a str,
        kind: ElementKind,
        limit: usize,
    },
    Diagnostic(&'a Diagnostic),
}

impl Event<'_> {
    /// Whether the server should run this event's element: a complete, untruncated
    /// executable element. A truncated one is never offered for execution.
    pub fn is_executable_completion(&self) -> bool {
        matches!(self, Event::Complete { kind, truncated: false, .. } if kind.is_executable())
    }

    pub fn to_owned(&self) -> OwnedEvent {
        match *self {
            Event::Text { text, code } => OwnedEvent::Text {
                text: text.to_owned(),
                code,
            },
            Event::Start {
                id,
                kind,
                parent,
                attributes,
                offset,
            } => OwnedEvent::Start {
                id: id.to_owned(),
                kind,
                parent: parent.map(str::to_owned),
                attributes: attributes.to_vec(),
                offset,
            },
            Event::Update { id, kind, delta } => OwnedEvent::Update {
                id: id.to_owned(),
                kind,
                delta: delta.to_owned(),
            },
            Event::Complete {
                id,
                kind,
                attributes,
                content,
                truncated,
                span,
            } => OwnedEvent::Complete {
                id: id.to_owned(),
                kind,
                attributes: attributes.to_vec(),
                content: content.to_owned(),
                truncated,
                span,
            },
            Event::Error { id, kind, limit } => OwnedEvent::Error {
                id: id.to_owned(),
                kind,
                limit,
            },
            Event::Diagnostic(d) => OwnedEvent::Diagnostic(d.clone()),
        }
    }
}

/// [`Event`] with owned data, for callers that keep events past the next `feed`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnedEvent {
    Text {
        text: String,
        code: bool,
    },
    Start {
        id: String,
        kind: ElementKind,
        parent: Option<String>,
        attributes: Vec<(String, String)>,
        offset: u64,
    },
    Update {
        id: String,
        kind: ElementKind,
        delta: String,
    },
    Complete {
        id: String,
        kind: ElementKind,
        attributes: Vec<(String, String)>,
        content: String,
        truncated: bool,
        span: Span,
    },
    Error {
        id: String,
        kind: ElementKind,
        limit: usize,
    },
    Diagnostic(Diagnostic),
}

impl OwnedEvent {
    /// The borrowed view, e.g. for [`crate::wire::SseEvent::from_parser_event`].
    pub fn as_event(&self) -> Event<'_> {
        match self {
            OwnedEvent::Text { text, code } => Event::Text { text, code: *code },
            OwnedEvent::Start {
                id,
                kind,
                parent,
                attributes,
                offset,
            } => Event::Start {
                id,
                kind: *kind,
                parent: parent.as_deref(),
                attributes,
                offset: *offset,
            },
            OwnedEvent::Update { id, kind, delta } => Event::Update {
                id,
                kind: *kind,
                delta,
            },
            OwnedEvent::Complete {
                id,
                kind,
                attributes,
                content,
                truncated,
                span,
            } => Event::Complete {
                id,
                kind: *kind,
                attributes,
                content,
                truncated: *truncated,
                span: *span,
            },
            OwnedEvent::Error { id, kind, limit } => Event::Error {
                id,
                kind: *kind,
                limit: *limit,
            },
            OwnedEvent::Diagnostic(d) => Event::Diagnostic(d),
        }
    }

    pub fn is_executable_completion(&self) -> bool {
        matches!(self, OwnedEvent::Complete { kind, truncated: false, .. } if kind.is_executable())
    }
}

/// Markdown context, for deciding whether a `<` may start a tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Md {
    Prose,
    /// Inside an inline code span opened by a run of this many backticks.
    Code(u32),
    /// Inside a fenced code block.
    Fence {
        tilde: bool,
        len: u32,
    },
}

/// Where in the attributes of a start tag the scanner is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Quote {
    None,
    AfterEq,
    In(u8),
}

/// The construct being read at the current byte, in markup mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sub {
    Mid,
    /// After a newline (or a start tag): up to three spaces may precede a fence.
    LineStart {
        spaces: u8,
    },
    /// In a run of backticks; `line_start` makes a run of 3+ an opening fence.
    Ticks {
        count: u32,
        line_start: bool,
    },
    /// In a run of tildes at a line start.
    Tildes {
        count: u32,
    },
    /// In a fence: a run of the fence char at a line start.
    FenceRun {
        count: u32,
    },
    /// In a fence: after a long enough run, only spaces may follow before the newline.
    FenceTail,
    /// After `<` (and `/`): reading a tag name.
    Lt {
        close: bool,
        name: [u8; ElementKind::MAX_NAME_LEN],
        len: u8,
    },
    /// After `</name`: only spaces, then `>`.
    CloseGt {
        kind: ElementKind,
    },
    /// In a start tag's attributes.
    Attrs {
        kind: ElementKind,
        name_len: u8,
        quote: Quote,
        len: usize,
    },
}

/// The construct being read in a raw or JSON body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RawSub {
    Body,
    InStr,
    Esc,
    /// After `<`: this many bytes of `/name` matched.
    Close {
        matched: u8,
    },
    CloseGt,
}

#[derive(Clone, Copy, Debug)]
struct Raw {
    kind: ElementKind,
    json: bool,
    sub: RawSub,
    /// The element overflowed: its body is skipped to its close tag, nothing is emitted.
    discard: bool,
}

#[derive(Debug)]
struct Open {
    id: String,
    kind: ElementKind,
    attributes: Attributes,
    /// Index of this element's content in `StreamParser::content`.
    content_start: usize,
    start: u64,
    content_start_off: u64,
}

/// The streaming parser. One per message: element ids count from the start of the text.
#[derive(Debug)]
pub struct StreamParser {
    opts: ParserOptions,
    md: Md,
    sub: Sub,
    raw: Option<Raw>,
    stack: Vec<Open>,
    /// Inner source of the outermost open element; nested elements are slices of it.
    content: String,
    /// The start of a tag (or raw close tag) that began in an earlier chunk.
    hold: String,
    /// Offset of the `<` of the construct in `hold` / being read.
    cand_off: u64,
    /// Bytes of a UTF-8 sequence cut by the chunk boundary.
    utf8: [u8; 4],
    utf8_len: u8,
    /// Bytes processed before the current chunk.
    pos: u64,
    ordinal: u64,
    explicit_ids: HashSet<String>,
    /// Some explicit id starts with `e`, so auto ids must be checked against them.
    explicit_auto_like: bool,
    diag: Diagnostic,
}

/// A sink behind a pointer. The parser is generic over its sink, so that the server's hot
/// path inlines it; callers where a call per event costs nothing next to what the event does
/// (building a tree, updating the page) share this one type, and so one copy of the parser
/// in the wasm.
pub type DynSink<'s> = &'s mut dyn FnMut(Event<'_>);

impl Default for StreamParser {
    fn default() -> Self {
        StreamParser::new()
    }
}

#[inline]
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'\x0c')
}

// Byte classes for the quiet-chunk check: which bytes can change which state.
const C_NON_ASCII: u8 = 1;
const C_LT: u8 = 2; // `<`
const C_TICK: u8 = 4; // backtick
const C_NEWLINE: u8 = 8;
const C_QUOTE: u8 = 16; // `"`
const C_BACKSLASH: u8 = 32;
const C_ALWAYS: u8 = 128; // set for every byte
const C_PROSE: u8 = C_LT | C_TICK | C_NEWLINE;
const C_CODE: u8 = C_TICK | C_NEWLINE;
const C_JSON: u8 = C_LT | C_QUOTE;
const C_IN_STR: u8 = C_QUOTE | C_BACKSLASH | C_NEWLINE;

static CLASS: [u8; 256] = {
    let mut t = [C_ALWAYS; 256];
    let mut i = 128;
    while i < 256 {
        t[i] |= C_NON_ASCII;
        i += 1;
    }
    t[b'<' as usize] |= C_LT;
    t[b'`' as usize] |= C_TICK;
    t[b'\n' as usize] |= C_NEWLINE;
    t[b'"' as usize] |= C_QUOTE;
    t[b'\\' as usize] |= C_BACKSLASH;
    t
};

/// What the markup scanner decided about the candidate tag ending at the current byte.
enum TagEnd {
    Start { kind: ElementKind, name_len: u8 },
    Close { kind: ElementKind },
}

impl StreamParser {
    pub fn new() -> StreamParser {
        StreamParser::with_options(ParserOptions::default())
    }

    pub fn with_options(opts: ParserOptions) -> StreamParser {
        StreamParser {
            opts,
            md: Md::Prose,
            sub: Sub::LineStart { spaces: 0 },
            raw: None,
            stack: Vec::new(),
            content: String::new(),
            hold: String::new(),
            cand_off: 0,
            utf8: [0; 4],
            utf8_len: 0,
            pos: 0,
            ordinal: 0,
            explicit_ids: HashSet::new(),
            explicit_auto_like: false,
            diag: Diagnostic {
                offset: 0,
                kind: DiagnosticKind::Truncated { id: String::new() },
            },
        }
    }

    pub fn options(&self) -> ParserOptions {
        self.opts
    }

    /// Bytes consumed so far (offsets in events count from the start of the stream).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Feeds bytes that may end anywhere, even inside a UTF-8 sequence; invalid UTF-8
    /// becomes U+FFFD. Events are pushed, owned, onto `out` (which the caller may reuse);
    /// adjacent text and updates of one element are merged.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<OwnedEvent>) {
        self.feed_with(chunk, |e| push_merged(out, e));
    }

    /// Ends the stream: open elements complete as truncated. The parser is then ready
    /// for a new message.
    pub fn finish(&mut self, out: &mut Vec<OwnedEvent>) {
        self.finish_with(|e| push_merged(out, e));
    }

    /// [`Self::feed`] without copying: each event borrows from the chunk or the parser
    /// and lives only for the callback.
    pub fn feed_with<F: FnMut(Event<'_>)>(&mut self, chunk: &[u8], mut sink: F) {
        if self.utf8_len == 0 && chunk.len() <= 16 {
            // Small chunks are the streaming case: one pass over a byte-class table says
            // whether the piece is ASCII and whether it can change any state.
            let acc = chunk.iter().fold(0u8, |a, &c| a | CLASS[c as usize]);
            if acc & C_NON_ASCII == 0 {
                // SAFETY: every byte is ASCII, so the chunk is valid UTF-8.
                let s = unsafe { std::str::from_utf8_unchecked(chunk) };
                if acc & self.quiet_mask() == 0 {
                    let code = self.raw.is_none() && !matches!(self.md, Md::Prose);
                    self.emit_run(s, code, &mut sink);
                    self.pos += chunk.len() as u64;
                } else {
                    self.scan(s, &mut sink);
                }
                return;
            }
        }
        let mut rest = chunk;
        if self.utf8_len > 0 {
            rest = self.complete_utf8(rest, &mut sink);
        }
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    self.run(s, &mut sink);
                    return;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    if let Ok(s) = std::str::from_utf8(valid) {
                        self.run(s, &mut sink);
                    }
                    match e.error_len() {
                        Some(n) => {
                            self.run("\u{fffd}", &mut sink);
                            rest = &after[n..];
                        }
                        None => {
                            // An incomplete sequence at the end: keep it for the next chunk.
                            self.utf8[..after.len()].copy_from_slice(after);
                            self.utf8_len = after.len() as u8;
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Feeds text already known to be UTF-8.
    pub fn feed_str_with<F: FnMut(Event<'_>)>(&mut self, chunk: &str, mut sink: F) {
        if self.utf8_len > 0 {
            self.utf8_len = 0;
            self.run("\u{fffd}", &mut sink);
        }
        self.run(chunk, &mut sink);
    }

    /// Completes a UTF-8 sequence cut by the previous chunk; returns the unused input.
    /// Decides exactly as `from_utf8` on the whole text would, so a cut changes nothing.
    fn complete_utf8<'c, F: FnMut(Event<'_>)>(
        &mut self,
        input: &'c [u8],
        sink: &mut F,
    ) -> &'c [u8] {
        let carried = self.utf8_len as usize;
        let mut tmp = [0u8; 8];
        tmp[..carried].copy_from_slice(&self.utf8[..carried]);
        let take = input.len().min(4 - carried);
        tmp[carried..carried + take].copy_from_slice(&input[..take]);
        let len = carried + take;
        self.utf8_len = 0;
        match std::str::from_utf8(&tmp[..len]) {
            Ok(_) => {}
            Err(e) if e.valid_up_to() > 0 => {}
            Err(e) => match e.error_len() {
                Some(k) => {
                    self.run("\u{fffd}", sink);
                    return &input[k.saturating_sub(carried)..];
                }
                None => {
                    // Still incomplete: the whole chunk was part of the sequence.
                    self.utf8[..len].copy_from_slice(&tmp[..len]);
                    self.utf8_len = len as u8;
                    return &input[take..];
                }
            },
        }
        // The first char is complete and valid.
        let valid = match std::str::from_utf8(&tmp[..len]) {
            Ok(s) => s,
            Err(e) => std::str::from_utf8(&tmp[..e.valid_up_to()]).unwrap_or_default(),
        };
        let ch_len = valid.chars().next().map_or(1, char::len_utf8);
        let mut buf = [0u8; 4];
        buf[..ch_len].copy_from_slice(&tmp[..ch_len]);
        if let Ok(s) = std::str::from_utf8(&buf[..ch_len]) {
            self.run(s, sink);
        }
        &input[ch_len.saturating_sub(carried)..]
    }

    /// Ends the stream without copying; see [`Self::finish`].
    pub fn finish_with<F: FnMut(Event<'_>)>(&mut self, mut sink: F) {
        let sink = &mut sink;
        if self.utf8_len > 0 {
            self.utf8_len = 0;
            self.run("\u{fffd}", sink);
        }
        // A construct cut by the end of the stream is text (or raw content).
        if let Some(raw) = self.raw {
            if matches!(raw.sub, RawSub::Close { .. } | RawSub::CloseGt) && !raw.discard {
                let hold = std::mem::take(&mut self.hold);
                self.emit_run(&hold, false, sink);
                self.hold = hold;
            }
        } else {
            match self.sub {
                Sub::Lt { .. } | Sub::CloseGt { .. } | Sub::Attrs { .. } => {
                    if let Sub::CloseGt { kind } | Sub::Attrs { kind, .. } = self.sub {
                        self.diagnose(
                            self.cand_off,
                            DiagnosticKind::UnterminatedTag {
                                element: kind.name().into(),
                            },
                            sink,
                        );
                    }
                    let hold = std::mem::take(&mut self.hold);
                    self.emit_run(&hold, false, sink);
                    self.hold = hold;
                }
                _ => {}
            }
        }
        self.hold.clear();
        let end = self.pos;
        while let Some(top) = self.stack.last() {
            let id = top.id.clone();
            self.complete_top(true, end, end, sink);
            self.diagnose(end, DiagnosticKind::Truncated { id }, sink);
        }
        let opts = self.opts;
        let mut fresh = StreamParser::with_options(opts);
        // Keep the allocations for the next message.
        std::mem::swap(&mut fresh.content, &mut self.content);
        std::mem::swap(&mut fresh.hold, &mut self.hold);
        fresh.content.clear();
        fresh.stack = std::mem::take(&mut self.stack);
        *self = fresh;
    }

    fn diagnose<F: FnMut(Event<'_>)>(&mut self, offset: u64, kind: DiagnosticKind, sink: &mut F) {
        self.diag = Diagnostic { offset, kind };
        sink(Event::Diagnostic(&self.diag));
    }

    #[inline]
    fn code_flag(&self) -> bool {
        !matches!(self.md, Md::Prose) || matches!(self.sub, Sub::Ticks { .. })
    }

    /// Emits text that is content of the innermost open element, or top-level prose.
    #[inline]
    fn emit_run<F: FnMut(Event<'_>)>(&mut self, text: &str, code: bool, sink: &mut F) {
        if text.is_empty() {
            return;
        }
        let Some(top) = self.stack.last() else {
            // With no element open, a raw body being read is one that overflowed.
            if !self.raw.is_some_and(|r| r.discard) {
                sink(Event::Text { text, code });
            }
            return;
        };
        if self.content.len() + text.len() > self.opts.max_element_bytes {
            self.emit_run_overflowing(text, code, sink);
            return;
        }
        self.content.push_str(text);
        sink(Event::Update {
            id: &top.id,
            kind: top.kind,
            delta: text,
        });
    }

    #[cold]
    fn emit_run_overflowing<F: FnMut(Event<'_>)>(&mut self, text: &str, code: bool, sink: &mut F) {
        let room = self
            .opts
            .max_element_bytes
            .saturating_sub(self.content.len());
        let mut cut = room.min(text.len());
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let (fits, rest) = text.split_at(cut);
        if !fits.is_empty() {
            self.content.push_str(fits);
            if let Some(top) = self.stack.last() {
                sink(Event::Update {
                    id: &top.id,
                    kind: top.kind,
                    delta: fits,
                });
            }
        }
        self.overflow(sink);
        self.emit_run(rest, code, sink);
    }

    /// The outermost element outgrew the bound: every open element ends in an error.
    fn overflow<F: FnMut(Event<'_>)>(&mut self, sink: &mut F) {
        let limit = self.opts.max_element_bytes;
        while let Some(o) = self.stack.pop() {
            sink(Event::Error {
                id: &o.id,
                kind: o.kind,
                limit,
            });
            self.diagnose(o.start, DiagnosticKind::TooLarge { id: o.id, limit }, sink);
        }
        self.content.clear();
        if let Some(raw) = &mut self.raw {
            raw.discard = true;
        }
    }

    /// Appends tag source to the content of the open elements, if any.
    fn append_tag<F: FnMut(Event<'_>)>(&mut self, tag: &str, sink: &mut F) {
        if self.stack.is_empty() {
            return;
        }
        if self.content.len() + tag.len() > self.opts.max_element_bytes {
            self.overflow(sink);
            self.raw = None;
        } else {
            self.content.push_str(tag);
        }
    }

    fn complete_top<F: FnMut(Event<'_>)>(
        &mut self,
        truncated: bool,
        content_end: u64,
        end: u64,
        sink: &mut F,
    ) {
        let Some(o) = self.stack.pop() else { return };
        let span = Span {
            start: o.start,
            content_start: o.content_start_off,
            content_end,
            end,
        };
        sink(Event::Complete {
            id: &o.id,
            kind: o.kind,
            attributes: &o.attributes,
            content: self.content.get(o.content_start..).unwrap_or(""),
            truncated,
            span,
        });
        if self.stack.is_empty() {
            self.content.clear();
        }
    }

    fn assign_id(&mut self, attrs: &Attributes) -> String {
        self.ordinal += 1;
        let n = self.ordinal;
        let explicit = attrs
            .iter()
            .find(|(k, _)| k == "id")
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty());
        let mut id = match explicit {
            Some(v) if !looks_auto(v, n) => v.to_owned(),
            Some(v) => {
                let mut id = String::with_capacity(v.len() + 8);
                id.push_str(v);
                id.push('-');
                push_u64(&mut id, n);
                id
            }
            None => {
                let mut auto = String::with_capacity(8);
                auto.push('e');
                push_u64(&mut auto, n);
                // Hashing every id would cost more than the rest of the tag; only an
                // explicit id of the form `e<n>` can collide with an auto id.
                if !self.explicit_auto_like || !self.explicit_ids.contains(&auto) {
                    return auto;
                }
                auto
            }
        };
        while self.explicit_ids.contains(&id) {
            id.push('-');
            push_u64(&mut id, n);
        }
        if id.starts_with('e') {
            self.explicit_auto_like = true;
        }
        self.explicit_ids.insert(id.clone());
        id
    }

    /// Handles a complete start tag; returns false if it is prose after all.
    fn open<F: FnMut(Event<'_>)>(
        &mut self,
        kind: ElementKind,
        name_len: u8,
        tag: &str,
        at: u64,
        sink: &mut F,
    ) -> bool {
        if let Some(parent) = kind.required_parent() {
            let Some(pi) = self.stack.iter().rposition(|o| o.kind == parent) else {
                self.diagnose(
                    at,
                    DiagnosticKind::Misplaced {
                        element: kind.name().into(),
                    },
                    sink,
                );
                return false;
            };
            while self.stack.len() > pi + 1 {
                let id = self.stack.last().map(|o| o.id.clone()).unwrap_or_default();
                self.complete_top(false, at, at, sink);
                self.diagnose(at, DiagnosticKind::ImplicitlyClosed { id }, sink);
            }
        }
        if self.stack.len() >= self.opts.max_depth {
            let limit = self.opts.max_depth;
            self.diagnose(
                at,
                DiagnosticKind::TooDeep {
                    element: kind.name().into(),
                    limit,
                },
                sink,
            );
            return false;
        }
        let inner = tag.get(1 + name_len as usize..tag.len() - 1).unwrap_or("");
        let (attributes, self_closing) = parse_attributes(inner);
        self.append_tag(tag, sink);
        if kind.required_parent().is_some() && self.stack.is_empty() {
            // The parent was lost to an overflow just now.
            return false;
        }
        let id = self.assign_id(&attributes);
        let end = at + tag.len() as u64;
        let parent = self.stack.last().map(|o| o.id.as_str());
        sink(Event::Start {
            id: &id,
            kind,
            parent,
            attributes: &attributes,
            offset: at,
        });
        self.stack.push(Open {
            id,
            kind,
            attributes,
            content_start: self.content.len(),
            start: at,
            content_start_off: end,
        });
        let body = kind.body();
        if self_closing || body == Body::Void {
            self.complete_top(false, end, end, sink);
            self.sub = Sub::Mid;
        } else {
            match body {
                Body::Raw | Body::Json => {
                    self.raw = Some(Raw {
                        kind,
                        json: body == Body::Json,
                        sub: RawSub::Body,
                        discard: false,
                    });
                    self.sub = Sub::Mid;
                }
                _ => self.sub = Sub::LineStart { spaces: 0 },
            }
        }
        true
    }

    fn close<F: FnMut(Event<'_>)>(&mut self, kind: ElementKind, tag: &str, at: u64, sink: &mut F) {
        let end = at + tag.len() as u64;
        let Some(x) = self.stack.iter().rposition(|o| o.kind == kind) else {
            self.diagnose(
                at,
                DiagnosticKind::StrayCloseTag {
                    element: kind.name().into(),
                },
                sink,
            );
            return;
        };
        while self.stack.len() > x + 1 {
            let id = self.stack.last().map(|o| o.id.clone()).unwrap_or_default();
            self.complete_top(false, at, at, sink);
            self.diagnose(at, DiagnosticKind::ImplicitlyClosed { id }, sink);
        }
        self.complete_top(false, at, end, sink);
        self.append_tag(tag, sink);
    }

    /// Takes the text of a completed construct: the held start plus `s[cand..=j]`.
    fn take_construct<'s>(&mut self, s: &'s str, cand: usize, j: usize) -> ConstructText<'s> {
        if self.hold.is_empty() {
            ConstructText::Borrowed(&s[cand..=j])
        } else {
            let mut h = std::mem::take(&mut self.hold);
            h.push_str(&s[..=j]);
            ConstructText::Held(h)
        }
    }

    fn give_back(&mut self, c: ConstructText<'_>) {
        if let ConstructText::Held(mut h) = c {
            h.clear();
            self.hold = h;
        }
    }

    /// Emits the held start of a construct that turned out to be text.
    fn release_hold<F: FnMut(Event<'_>)>(&mut self, code: bool, sink: &mut F) {
        if !self.hold.is_empty() {
            let hold = std::mem::take(&mut self.hold);
            self.emit_run(&hold, code, sink);
            self.hold = hold;
            self.hold.clear();
        }
    }

    /// The byte classes that would change the current state; `C_ALWAYS` when the state
    /// is one the quiet path does not handle.
    #[inline(always)]
    fn quiet_mask(&self) -> u8 {
        match (self.raw, self.sub, self.md) {
            (None, Sub::Mid, Md::Prose) => C_PROSE,
            (None, Sub::Mid, Md::Fence { .. }) => C_NEWLINE,
            (None, Sub::Mid, Md::Code(_)) => C_CODE,
            (
                Some(Raw {
                    sub: RawSub::Body,
                    json: false,
                    ..
                }),
                _,
                _,
            ) => C_LT,
            (
                Some(Raw {
                    sub: RawSub::Body,
                    json: true,
                    ..
                }),
                _,
                _,
            ) => C_JSON,
            (
                Some(Raw {
                    sub: RawSub::InStr, ..
                }),
                _,
                _,
            ) => C_IN_STR,
            _ => C_ALWAYS,
        }
    }

    /// The scanner: consumes all of `s`, carrying an unfinished construct in `hold`.
    #[inline(always)]
    fn run<F: FnMut(Event<'_>)>(&mut self, s: &str, sink: &mut F) {
        self.scan(s, sink);
    }

    // Out of line, so that the quiet path above stays small where it is inlined.
    #[inline(never)]
    fn scan<F: FnMut(Event<'_>)>(&mut self, s: &str, sink: &mut F) {
        let b = s.as_bytes();
        let n = b.len();
        let mut i = 0usize;
        // Start of the text not yet emitted, and of the construct being read.
        let mut run_start = 0usize;
        let mut cand = 0usize;
        while i < n {
            if let Some(raw) = self.raw {
                self.run_raw(s, raw, &mut i, &mut run_start, &mut cand, sink);
                continue;
            }
            match self.sub {
                Sub::Mid => match self.md {
                    Md::Prose => match find3(b'<', b'`', b'\n', &b[i..]) {
                        None => i = n,
                        Some(k) => {
                            i += k;
                            if b[i] == b'\n'
                                && i + 1 < n
                                && !matches!(b[i + 1], b' ' | b'`' | b'~' | b'\n')
                            {
                                // The common newline: the next line cannot open a fence.
                                i += 1;
                                continue;
                            }
                            match b[i] {
                                b'<' => {
                                    // Fast path: the name and the byte after it are in this
                                    // chunk, so decide here instead of byte by byte.
                                    let mut j = i + 1;
                                    let close = j < n && b[j] == b'/';
                                    j += close as usize;
                                    let name_start = j;
                                    while j < n
                                        && j - name_start <= ElementKind::MAX_NAME_LEN
                                        && (b[j].is_ascii_alphanumeric() || b[j] == b'-')
                                    {
                                        j += 1;
                                    }
                                    if j < n {
                                        let name = &b[name_start..j];
                                        let kind =
                                            if name.first().is_some_and(u8::is_ascii_alphabetic)
                                                && (is_ws(b[j]) || b[j] == b'/' || b[j] == b'>')
                                            {
                                                ElementKind::from_name(name)
                                            } else {
                                                None
                                            };
                                        if let Some(kind) = kind {
                                            cand = i;
                                            self.cand_off = self.pos + i as u64;
                                            self.sub = if close {
                                                Sub::CloseGt { kind }
                                            } else {
                                                let len = name.len() as u8;
                                                Sub::Attrs {
                                                    kind,
                                                    name_len: len,
                                                    quote: Quote::None,
                                                    len: 1 + len as usize,
                                                }
                                            };
                                        }
                                        // Not HML: the bytes skipped are prose, none special.
                                        i = j;
                                        continue;
                                    }
                                    cand = i;
                                    self.cand_off = self.pos + i as u64;
                                    self.sub = Sub::Lt {
                                        close: false,
                                        name: [0; ElementKind::MAX_NAME_LEN],
                                        len: 0,
                                    };
                                    i += 1;
                                }
                                b'`' => {
                                    self.emit_run(&s[run_start..i], false, sink);
                                    run_start = i;
                                    self.sub = Sub::Ticks {
                                        count: 0,
                                        line_start: false,
                                    };
                                }
                                _ => {
                                    i += 1;
                                    self.sub = Sub::LineStart { spaces: 0 };
                                }
                            }
                        }
                    },
                    Md::Code(_) => match find2(b'`', b'\n', &b[i..]) {
                        None => i = n,
                        Some(k) => {
                            i += k;
                            if b[i] == b'`' {
                                self.sub = Sub::Ticks {
                                    count: 0,
                                    line_start: false,
                                };
                            } else {
                                // A code span ends with its line.
                                self.emit_run(&s[run_start..i], true, sink);
                                run_start = i;
                                self.md = Md::Prose;
                                i += 1;
                                self.sub = Sub::LineStart { spaces: 0 };
                            }
                        }
                    },
                    Md::Fence { tilde, .. } => match find1(b'\n', &b[i..]) {
                        None => i = n,
                        Some(k) => {
                            i += k + 1;
                            let fence_char = if tilde { b'~' } else { b'`' };
                            if i < n && b[i] != b' ' && b[i] != fence_char {
                                continue;
                            }
                            self.sub = Sub::LineStart { spaces: 0 };
                        }
                    },
                },
                Sub::LineStart { spaces } => {
                    let c = b[i];
                    match self.md {
                        Md::Fence { tilde, .. } => {
                            if c == b' ' && spaces < 3 {
                                self.sub = Sub::LineStart { spaces: spaces + 1 };
                                i += 1;
                            } else if (c == b'~' && tilde) || (c == b'`' && !tilde) {
                                self.sub = Sub::FenceRun { count: 0 };
                            } else {
                                self.sub = Sub::Mid;
                            }
                        }
                        _ => {
                            if c == b' ' && spaces < 3 {
                                self.sub = Sub::LineStart { spaces: spaces + 1 };
                                i += 1;
                            } else if c == b'\n' {
                                self.sub = Sub::LineStart { spaces: 0 };
                                i += 1;
                            } else if c == b'`' {
                                self.emit_run(&s[run_start..i], false, sink);
                                run_start = i;
                                self.sub = Sub::Ticks {
                                    count: 0,
                                    line_start: true,
                                };
                            } else if c == b'~' {
                                self.sub = Sub::Tildes { count: 0 };
                            } else {
                                self.sub = Sub::Mid;
                            }
                        }
                    }
                }
                Sub::Ticks { count, line_start } => {
                    let k = b[i..].iter().position(|&c| c != b'`').unwrap_or(n - i);
                    let count = count + k as u32;
                    i += k;
                    if i == n {
                        self.sub = Sub::Ticks { count, line_start };
                        break;
                    }
                    self.end_ticks(count, line_start, s, &mut run_start, i, sink);
                }
                Sub::Tildes { count } => {
                    if b[i] == b'~' {
                        self.sub = Sub::Tildes { count: count + 1 };
                        i += 1;
                    } else {
                        if count >= 3 {
                            self.emit_run(&s[run_start..i], false, sink);
                            run_start = i;
                            self.md = Md::Fence {
                                tilde: true,
                                len: count,
                            };
                        }
                        self.sub = Sub::Mid;
                    }
                }
                Sub::FenceRun { count } => {
                    let Md::Fence { tilde, len } = self.md else {
                        self.sub = Sub::Mid;
                        continue;
                    };
                    let ch = if tilde { b'~' } else { b'`' };
                    if b[i] == ch {
                        self.sub = Sub::FenceRun { count: count + 1 };
                        i += 1;
                    } else if count >= len {
                        self.sub = Sub::FenceTail;
                    } else {
                        self.sub = Sub::Mid;
                    }
                }
                Sub::FenceTail => match b[i] {
                    b' ' | b'\t' | b'\r' => i += 1,
                    b'\n' | b'<' => {
                        self.emit_run(&s[run_start..i], true, sink);
                        run_start = i;
                        self.md = Md::Prose;
                        self.sub = Sub::Mid;
                    }
                    _ => self.sub = Sub::Mid,
                },
                Sub::Lt {
                    close,
                    mut name,
                    len,
                } => {
                    let c = b[i];
                    if c == b'/' && !close && len == 0 {
                        self.sub = Sub::Lt {
                            close: true,
                            name,
                            len,
                        };
                        i += 1;
                    } else if c.is_ascii_alphabetic()
                        || (len > 0 && (c.is_ascii_digit() || c == b'-'))
                    {
                        if len as usize == ElementKind::MAX_NAME_LEN {
                            self.reject_tag(sink);
                        } else {
                            name[len as usize] = c;
                            self.sub = Sub::Lt {
                                close,
                                name,
                                len: len + 1,
                            };
                            i += 1;
                        }
                    } else if len > 0 && (is_ws(c) || c == b'/' || c == b'>') {
                        match ElementKind::from_name(&name[..len as usize]) {
                            None => self.reject_tag(sink),
                            Some(kind) if close => self.sub = Sub::CloseGt { kind },
                            Some(kind) => {
                                self.sub = Sub::Attrs {
                                    kind,
                                    name_len: len + close as u8,
                                    quote: Quote::None,
                                    len: 1 + len as usize,
                                }
                            }
                        }
                    } else {
                        self.reject_tag(sink);
                    }
                }
                Sub::CloseGt { kind } => {
                    let c = b[i];
                    if is_ws(c) {
                        i += 1;
                    } else if c == b'>' {
                        self.tag_done(TagEnd::Close { kind }, s, cand, &mut run_start, i, sink);
                        i += 1;
                    } else {
                        self.reject_tag(sink);
                    }
                }
                Sub::Attrs {
                    kind,
                    name_len,
                    mut quote,
                    mut len,
                } => {
                    let mut done = None;
                    while i < n {
                        let c = b[i];
                        len += 1;
                        if len > self.opts.max_tag_bytes {
                            done = Some(false);
                            break;
                        }
                        match quote {
                            Quote::In(q) => {
                                if c == q {
                                    quote = Quote::None;
                                }
                            }
                            Quote::AfterEq if is_ws(c) => {}
                            Quote::AfterEq if c == b'"' || c == b'\'' => quote = Quote::In(c),
                            _ => match c {
                                b'>' => {
                                    done = Some(true);
                                    break;
                                }
                                b'<' => {
                                    done = Some(false);
                                    break;
                                }
                                b'=' => quote = Quote::AfterEq,
                                _ => quote = Quote::None,
                            },
                        }
                        i += 1;
                    }
                    match done {
                        None => {
                            self.sub = Sub::Attrs {
                                kind,
                                name_len,
                                quote,
                                len,
                            }
                        }
                        Some(true) => {
                            self.tag_done(
                                TagEnd::Start { kind, name_len },
                                s,
                                cand,
                                &mut run_start,
                                i,
                                sink,
                            );
                            i += 1;
                        }
                        Some(false) => {
                            // Text before the tag goes first, whatever the chunking was.
                            let start = cand.max(run_start);
                            self.emit_run(&s[run_start..start], false, sink);
                            run_start = start;
                            self.diagnose(
                                self.cand_off,
                                DiagnosticKind::UnterminatedTag {
                                    element: kind.name().into(),
                                },
                                sink,
                            );
                            self.reject_tag(sink)
                        }
                    }
                }
            }
        }
        // End of chunk: emit the text, keep an unfinished construct.
        let in_construct = match self.raw {
            Some(r) => matches!(r.sub, RawSub::Close { .. } | RawSub::CloseGt),
            None => matches!(
                self.sub,
                Sub::Lt { .. } | Sub::CloseGt { .. } | Sub::Attrs { .. }
            ),
        };
        let code = self.raw.is_none() && self.code_flag();
        if in_construct {
            self.emit_run(&s[run_start..cand.max(run_start)], code, sink);
            self.hold.push_str(&s[cand.max(run_start)..]);
        } else {
            self.emit_run(&s[run_start..], code, sink);
        }
        self.pos += n as u64;
    }

    /// The candidate `<...` is prose; its bytes stay in the current text run.
    fn reject_tag<F: FnMut(Event<'_>)>(&mut self, sink: &mut F) {
        self.sub = Sub::Mid;
        self.release_hold(false, sink);
    }

    fn end_ticks<F: FnMut(Event<'_>)>(
        &mut self,
        count: u32,
        line_start: bool,
        s: &str,
        run_start: &mut usize,
        i: usize,
        sink: &mut F,
    ) {
        self.sub = Sub::Mid;
        match self.md {
            Md::Prose => {
                self.md = if line_start && count >= 3 {
                    Md::Fence {
                        tilde: false,
                        len: count,
                    }
                } else {
                    Md::Code(count)
                };
            }
            Md::Code(open) if open == count => {
                self.emit_run(&s[*run_start..i], true, sink);
                *run_start = i;
                self.md = Md::Prose;
            }
            _ => {}
        }
    }

    fn tag_done<F: FnMut(Event<'_>)>(
        &mut self,
        end: TagEnd,
        s: &str,
        cand: usize,
        run_start: &mut usize,
        j: usize,
        sink: &mut F,
    ) {
        let at = self.cand_off;
        let start = cand.max(*run_start);
        self.emit_run(&s[*run_start..start], false, sink);
        *run_start = j + 1;
        let tag = self.take_construct(s, start, j);
        self.sub = Sub::Mid;
        match end {
            TagEnd::Start { kind, name_len } => {
                // A misplaced `item`/`data`/`response` tag is dropped, like a stray close tag.
                let misplaced = kind
                    .required_parent()
                    .is_some_and(|p| !self.stack.iter().any(|o| o.kind == p));
                if misplaced {
                    self.diagnose(
                        at,
                        DiagnosticKind::Misplaced {
                            element: kind.name().into(),
                        },
                        sink,
                    );
                } else if !self.open(kind, name_len, tag.as_str(), at, sink) {
                    // Too deep, or its parent lost to an overflow: the tag is text.
                    self.emit_run(tag.as_str(), false, sink);
                }
            }
            TagEnd::Close { kind } => self.close(kind, tag.as_str(), at, sink),
        }
        self.give_back(tag);
    }

    /// Scans a raw or JSON body up to its close tag.
    fn run_raw<F: FnMut(Event<'_>)>(
        &mut self,
        s: &str,
        mut raw: Raw,
        i: &mut usize,
        run_start: &mut usize,
        cand: &mut usize,
        sink: &mut F,
    ) {
        let b = s.as_bytes();
        let n = b.len();
        let name = raw.kind.name().as_bytes();
        while *i < n {
            match raw.sub {
                RawSub::Body => {
                    let hit = if raw.json {
                        find2(b'"', b'<', &b[*i..])
                    } else {
                        find1(b'<', &b[*i..])
                    };
                    match hit {
                        None => *i = n,
                        Some(k) => {
                            *i += k;
                            if b[*i] == b'"' {
                                raw.sub = RawSub::InStr;
                            } else {
                                *cand = *i;
                                self.cand_off = self.pos + *i as u64;
                                raw.sub = RawSub::Close { matched: 0 };
                            }
                            *i += 1;
                        }
                    }
                }
                RawSub::InStr => match find3(b'"', b'\\', b'\n', &b[*i..]) {
                    None => *i = n,
                    Some(k) => {
                        *i += k;
                        raw.sub = if b[*i] == b'\\' {
                            RawSub::Esc
                        } else {
                            RawSub::Body
                        };
                        *i += 1;
                    }
                },
                RawSub::Esc => {
                    raw.sub = RawSub::InStr;
                    *i += 1;
                }
                RawSub::Close { matched } => {
                    let c = b[*i].to_ascii_lowercase();
                    let want = if matched == 0 {
                        b'/'
                    } else {
                        name[matched as usize - 1]
                    };
                    if c == want {
                        *i += 1;
                        raw.sub = if matched as usize == name.len() {
                            RawSub::CloseGt
                        } else {
                            RawSub::Close {
                                matched: matched + 1,
                            }
                        };
                    } else {
                        raw.sub = RawSub::Body;
                        self.raw = Some(raw);
                        self.release_hold(false, sink);
                    }
                }
                RawSub::CloseGt => {
                    let c = b[*i];
                    if is_ws(c) {
                        *i += 1;
                    } else if c == b'>' {
                        let at = self.cand_off;
                        let start = (*cand).max(*run_start);
                        self.raw = Some(raw);
                        self.emit_run(&s[*run_start..start], false, sink);
                        *run_start = *i + 1;
                        let tag = self.take_construct(s, start, *i);
                        *i += 1;
                        let discard = self.raw.is_some_and(|r| r.discard);
                        self.raw = None;
                        self.sub = Sub::Mid;
                        if !discard {
                            let end = at + tag.as_str().len() as u64;
                            self.complete_top(false, at, end, sink);
                            self.append_tag(tag.as_str(), sink);
                        }
                        self.give_back(tag);
                        return;
                    } else {
                        raw.sub = RawSub::Body;
                        self.raw = Some(raw);
                        self.release_hold(false, sink);
                    }
                }
            }
            // `emit_run` may have discarded the element (overflow): keep that.
            if let Some(cur) = self.raw {
                raw.discard = cur.discard;
            }
        }
        self.raw = Some(raw);
    }
}

fn push_u64(s: &mut String, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &buf[i..] {
        s.push(d as char);
    }
}

/// The first of three bytes in `hay`; short haystacks (small chunks) skip the SIMD setup.
#[inline(always)]
fn find3(a: u8, b: u8, c: u8, hay: &[u8]) -> Option<usize> {
    if hay.len() < 16 {
        hay.iter().position(|&x| x == a || x == b || x == c)
    } else {
        memchr3(a, b, c, hay)
    }
}

#[inline(always)]
fn find2(a: u8, b: u8, hay: &[u8]) -> Option<usize> {
    if hay.len() < 16 {
        hay.iter().position(|&x| x == a || x == b)
    } else {
        memchr2(a, b, hay)
    }
}

#[inline(always)]
fn find1(a: u8, hay: &[u8]) -> Option<usize> {
    if hay.len() < 16 {
        hay.iter().position(|&x| x == a)
    } else {
        memchr(a, hay)
    }
}

/// Returns true if `v` could be an id this parser generates (`e<number>`, up to `n`).
fn looks_auto(v: &str, n: u64) -> bool {
    v.strip_prefix('e')
        .and_then(|d| d.parse::<u64>().ok())
        .is_some_and(|k| k <= n && !v[1..].starts_with('0'))
}

enum ConstructText<'s> {
    Borrowed(&'s str),
    Held(String),
}

impl ConstructText<'_> {
    fn as_str(&self) -> &str {
        match self {
            ConstructText::Borrowed(s) => s,
            ConstructText::Held(h) => h,
        }
    }
}

fn push_merged(out: &mut Vec<OwnedEvent>, e: Event<'_>) {
    match (out.last_mut(), e) {
        (Some(OwnedEvent::Text { text, code }), Event::Text { text: t, code: c }) if *code == c => {
            text.push_str(t)
        }
        (
            Some(OwnedEvent::Update { id, delta, .. }),
            Event::Update {
                id: i, delta: d, ..
            },
        ) if id == i => delta.push_str(d),
        _ => out.push(e.to_owned()),
    }
}
