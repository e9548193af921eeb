//! A reply while it streams, rendered through the shared parser in the browser. The raw
//! text is fed chunk by chunk; top-level prose grows markdown blocks (a new block after each
//! paragraph break outside code, so re-rendering costs the current paragraph, not the
//! message) and each top-level element re-renders only itself from its own source. The
//! work per chunk is bounded by the chunk plus the block it lands in, never the whole reply.

use hero_shared::hml::{DynSink, Event, StreamParser};
use leptos::prelude::*;

#[derive(Clone, Copy)]
pub enum LiveBlock {
    Text(RwSignal<String>),
    /// The element's id in the reply, its source so far, and whether it has closed.
    Element {
        id: RwSignal<String>,
        src: RwSignal<String>,
        done: RwSignal<bool>,
    },
}

pub struct LiveReply {
    /// Owns every signal of this reply (its blocks, made as chunks arrive, included): the
    /// chat disposes it ([`LiveReply::dispose`]) once the reply's bubble is gone, so a long
    /// session does not keep the signals of every reply it streamed.
    owner: Owner,
    pub message_id: String,
    pub agent_name: String,
    pub blocks: RwSignal<Vec<LiveBlock>>,
    pub error: RwSignal<Option<String>>,
    pub finished: RwSignal<bool>,
    parser: StreamParser,
    raw: String,
    depth: usize,
    /// Index in `blocks` and byte offset in `raw` of the top-level element being written.
    open_top: Option<(usize, usize)>,
    /// The last text block ended a paragraph outside code: the next text starts a new one.
    split_next: bool,
}

impl LiveReply {
    pub fn new(message_id: String, agent_name: String) -> Self {
        let owner = Owner::current().map_or_else(Owner::new, |o| o.child());
        let (blocks, error, finished) = owner.with(|| {
            (
                RwSignal::new(Vec::new()),
                RwSignal::new(None),
                RwSignal::new(false),
            )
        });
        LiveReply {
            owner,
            message_id,
            agent_name,
            blocks,
            error,
            finished,
            parser: StreamParser::new(),
            raw: String::new(),
            depth: 0,
            open_top: None,
            split_next: false,
        }
    }

    pub fn feed(&mut self, delta: &str) {
        self.raw.push_str(delta);
        let mut parser = std::mem::replace(&mut self.parser, StreamParser::new());
        // Blocks made now belong to this reply, whatever owner (if any) the caller runs under.
        let owner = self.owner.clone();
        // Through `DynSink`, as `hml::parse` does: one copy of the parser in the wasm.
        owner.with(|| {
            let sink: DynSink<'_> = &mut |ev| self.on_event(ev);
            parser.feed_str_with(delta, sink)
        });
        self.parser = parser;
        self.refresh_open();
    }

    pub fn finish(&mut self) {
        let mut parser = std::mem::replace(&mut self.parser, StreamParser::new());
        let owner = self.owner.clone();
        owner.with(|| {
            let sink: DynSink<'_> = &mut |ev| self.on_event(ev);
            parser.finish_with(sink)
        });
        self.refresh_open();
        self.finished.set(true);
    }

    /// A value owned by this reply (gone with it, as its signals are).
    pub fn own<T: Send + Sync + 'static>(&self, value: T) -> StoredValue<T> {
        self.owner.with(|| StoredValue::new(value))
    }

    /// Drops every signal of this reply. Only once nothing shows it any more.
    pub fn dispose(self) {
        self.owner.cleanup();
    }

    fn refresh_open(&self) {
        if let Some((idx, start)) = self.open_top
            && let Some(LiveBlock::Element { src, .. }) =
                self.blocks.read_untracked().get(idx).copied()
        {
            src.set(self.raw.get(start..).unwrap_or_default().to_owned());
        }
    }

    fn on_event(&mut self, ev: Event<'_>) {
        match ev {
            Event::Text { text, code } if self.depth == 0 => {
                let last = self.blocks.read_untracked().last().copied();
                match last {
                    Some(LiveBlock::Text(s)) if !self.split_next => s.update(|t| t.push_str(text)),
                    _ => self
                        .blocks
                        .update(|b| b.push(LiveBlock::Text(RwSignal::new(text.to_owned())))),
                }
                self.split_next = !code && text.ends_with("\n\n");
            }
            Event::Start { id, offset, .. } => {
                if self.depth == 0 {
                    let block = LiveBlock::Element {
                        id: RwSignal::new(id.to_owned()),
                        src: RwSignal::new(String::new()),
                        done: RwSignal::new(false),
                    };
                    let idx = self.blocks.read_untracked().len();
                    self.blocks.update(|b| b.push(block));
                    self.open_top = Some((idx, offset as usize));
                }
                self.depth += 1;
            }
            Event::Complete { span, .. } => {
                self.depth = self.depth.saturating_sub(1);
                if self.depth == 0 {
                    self.close_top(Some((span.start as usize, span.end as usize)));
                }
            }
            Event::Error { .. } => {
                self.depth = self.depth.saturating_sub(1);
                if self.depth == 0 {
                    self.close_top(None);
                }
            }
            _ => {}
        }
    }

    fn close_top(&mut self, range: Option<(usize, usize)>) {
        if let Some((idx, start)) = self.open_top.take()
            && let Some(LiveBlock::Element { src, done, .. }) =
                self.blocks.read_untracked().get(idx).copied()
        {
            let end = range.map_or(self.raw.len(), |(_, e)| e.min(self.raw.len()));
            src.set(self.raw.get(start..end).unwrap_or_default().to_owned());
            done.set(true);
        }
        self.split_next = true;
    }
}

/// A block's HTML from the shared renderer, reading its signals (an effect that calls it
/// runs again when the block grows). An element that closed shows where its call stands
/// (`calls`: the reply's calls so far, which run as their elements close).
pub fn block_html(b: LiveBlock, calls: &[hero_shared::calls::CallView]) -> String {
    match b {
        LiveBlock::Text(s) => s.with(|t| hero_shared::html::markdown_html(t)),
        LiveBlock::Element { id, src, done } => {
            let mut doc = hero_shared::hml::parse(&src.get());
            // Parsed alone, the element would be the first of its text: it is the one the
            // reply's parser named, which its call names too.
            if let Some(hero_shared::hml::Node::Element(e)) = doc.nodes.first_mut() {
                e.id = id.get();
            }
            let place = hero_shared::html::Place {
                live: !done.get(),
                message_id: None,
                calls,
            };
            hero_shared::html::nodes_html(&doc.nodes, place)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An element that closed while the reply streams is named as the reply's parser named
    /// it, so it shows where its call stands (which runs as it closes): waiting, then done.
    #[test]
    fn a_closed_element_shows_where_its_call_stands() {
        use hero_shared::calls::{CallOrigin, CallRequest, CallStatus, CallView};
        let mut r = LiveReply::new("m".into(), "Agent".into());
        r.feed("First <thinking>hmm</thinking> then <websearch>rust</webs");
        r.feed("earch> and more");
        let blocks = r.blocks.get_untracked();
        let search = blocks[3];
        let LiveBlock::Element { id, .. } = search else {
            panic!("the search is the fourth block")
        };
        assert_eq!(id.get_untracked(), "e2");
        let mut call = CallView {
            request_id: "q1".into(),
            message_id: "m".into(),
            request: CallRequest {
                function: "websearch".into(),
                args: serde_json::json!({"query": "rust"}),
                origin: CallOrigin::Element {
                    element_id: "e2".into(),
                    kind: "websearch".into(),
                },
                status: CallStatus::Pending,
                decided_by: None,
                sender_id: None,
                problem: None,
                content: "websearch(rust)".into(),
                expires_at: None,
                permissions: None,
                change: None,
            },
            result: None,
        };
        assert!(block_html(search, &[]).contains("recognised: not run"));
        let waiting = block_html(search, std::slice::from_ref(&call));
        assert!(waiting.contains("waiting for your approval"), "{waiting}");
        call.request.status = CallStatus::Approved;
        assert!(block_html(search, &[call]).contains("running"));
        r.dispose();
    }

    /// Every signal a reply made, its blocks included, is gone once it is disposed: a long
    /// session does not keep one set per reply.
    #[test]
    fn a_disposed_reply_leaves_no_signal_behind() {
        let mut r = LiveReply::new("m".into(), "Agent".into());
        r.feed("Hello <thinking>some ");
        r.feed("thought</thinking> world\n\nand more");
        r.finish();
        let blocks = r.blocks;
        let made = blocks.get_untracked();
        assert!(made.len() >= 3, "text, element, text: {}", made.len());
        assert!(r.finished.get_untracked());
        let (error, finished) = (r.error, r.finished);
        r.dispose();
        assert!(blocks.try_get_untracked().is_none());
        assert!(error.try_get_untracked().is_none() && finished.try_get_untracked().is_none());
        for b in made {
            match b {
                LiveBlock::Text(s) => assert!(s.try_get_untracked().is_none()),
                LiveBlock::Element { id, src, done } => assert!(
                    id.try_get_untracked().is_none()
                        && src.try_get_untracked().is_none()
                        && done.try_get_untracked().is_none()
                ),
            }
        }
    }
}
