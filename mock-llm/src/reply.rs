//! The reply to one request, independent of wire format, and the cursor that walks it as
//! events (block start, content delta, block stop) in the chunk size asked for.
//!
//! The cursor is lazy on purpose: a benchmark holds a thousand 24 KB answers in flight at
//! 4-byte chunks, and materialising every frame up front would cost about a megabyte each.

use crate::script::StopReason;

/// Anthropic's thinking blocks carry a signature the client must send back; any opaque
/// base64 string does for a mock ("mock-llm-signature").
pub(crate) const SIGNATURE: &str = "bW9jay1sbG0tc2lnbmF0dXJl";

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Block {
    Thinking(String),
    Text(String),
    /// `input` is the JSON text streamed as `input_json_delta` / `arguments` pieces.
    ToolUse {
        id: String,
        name: String,
        input: String,
    },
}

impl Block {
    /// The bytes this block streams as deltas.
    pub fn content(&self) -> &str {
        match self {
            Block::Thinking(s) | Block::Text(s) => s,
            Block::ToolUse { input, .. } => input,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Input tokens not read from or written to the prompt cache (Anthropic's
    /// `input_tokens`; OpenAI's `prompt_tokens` counts the cached ones too).
    pub input: u64,
    pub output: u64,
    /// Anthropic's `cache_read_input_tokens`, OpenAI's `prompt_tokens_details.cached_tokens`.
    pub cache_read: u64,
    /// Anthropic's `cache_creation_input_tokens` (OpenAI reports none).
    pub cache_write: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Reply {
    /// Request's model, echoed back as the real APIs do.
    pub model: String,
    pub blocks: Vec<Block>,
    pub stop: StopReason,
    pub usage: Usage,
}

impl Reply {
    pub fn text(&self) -> String {
        self.blocks
            .iter()
            .filter_map(|b| {
                if let Block::Text(t) = b {
                    Some(t.as_str())
                } else {
                    None
                }
            })
            .collect()
    }

    pub fn thinking(&self) -> Option<&str> {
        self.blocks.iter().find_map(|b| {
            if let Block::Thinking(t) = b {
                Some(t.as_str())
            } else {
                None
            }
        })
    }

    /// The index among tool blocks only (OpenAI numbers tool calls from 0).
    pub fn tool_index(&self, block: usize) -> usize {
        self.blocks[..block]
            .iter()
            .filter(|b| matches!(b, Block::ToolUse { .. }))
            .count()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event<'a> {
    BlockStart(usize),
    Delta(usize, &'a str),
    BlockStop(usize),
}

#[derive(Clone, Copy, Debug)]
enum Phase {
    Start,
    Delta(usize),
    Stop,
}

/// Walks a reply's blocks; with a budget, stops for good once that many content bytes went
/// out (the point where a `cut`, `stall` or mid-stream error strikes).
#[derive(Debug)]
pub(crate) struct Cursor {
    block: usize,
    phase: Phase,
    chunk: usize,
    budget: Option<usize>,
}

impl Cursor {
    pub fn new(chunk: usize, budget: Option<usize>) -> Self {
        Self {
            block: 0,
            phase: Phase::Start,
            chunk: chunk.max(1),
            budget,
        }
    }

    pub fn next<'a>(&mut self, reply: &'a Reply) -> Option<Event<'a>> {
        loop {
            if self.budget == Some(0) {
                return None;
            }
            let block = reply.blocks.get(self.block)?;
            match self.phase {
                Phase::Start => {
                    self.phase = Phase::Delta(0);
                    return Some(Event::BlockStart(self.block));
                }
                Phase::Delta(at) => {
                    let content = block.content();
                    if at >= content.len() {
                        self.phase = Phase::Stop;
                        continue;
                    }
                    let mut end = piece_end(content, at, self.chunk);
                    if let Some(budget) = self.budget {
                        if end - at > budget {
                            end = floor_boundary(content, at + budget);
                        }
                        if end == at {
                            self.budget = Some(0);
                            return None;
                        }
                        self.budget = Some(budget - (end - at));
                    }
                    self.phase = Phase::Delta(end);
                    return Some(Event::Delta(self.block, &content[at..end]));
                }
                Phase::Stop => {
                    self.phase = Phase::Start;
                    self.block += 1;
                    return Some(Event::BlockStop(self.block - 1));
                }
            }
        }
    }
}

/// End of the piece starting at `at`: `chunk` bytes, shortened to a character boundary, or
/// one whole character when that character alone is wider than `chunk`.
pub(crate) fn piece_end(s: &str, at: usize, chunk: usize) -> usize {
    let end = floor_boundary(s, at + chunk);
    if end > at {
        return end;
    }
    let mut end = at + 1;
    while !s.is_char_boundary(end) {
        end += 1;
    }
    end
}

fn floor_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::{Expect, expect};

    fn reply() -> Reply {
        Reply {
            model: "m".into(),
            blocks: vec![
                Block::Thinking("hmm".into()),
                Block::Text("né😀x".into()),
                Block::ToolUse {
                    id: "t".into(),
                    name: "f".into(),
                    input: r#"{"a":1}"#.into(),
                },
            ],
            stop: StopReason::ToolUse,
            usage: Usage {
                input: 1,
                output: 1,
                cache_read: 0,
                cache_write: 0,
            },
        }
    }

    fn check(chunk: usize, budget: Option<usize>, expect: Expect) {
        let r = reply();
        let mut c = Cursor::new(chunk, budget);
        let mut out = Vec::new();
        while let Some(e) = c.next(&r) {
            out.push(match e {
                Event::BlockStart(i) => format!("<{i}"),
                Event::Delta(_, s) => format!("{s:?}"),
                Event::BlockStop(i) => format!("{i}>"),
            });
        }
        expect.assert_eq(&out.join(" "));
    }

    #[test]
    fn cursor() {
        check(
            16,
            None,
            expect![[r#"<0 "hmm" 0> <1 "né😀x" 1> <2 "{\"a\":1}" 2>"#]],
        );
        // The 4-byte emoji is never split, even with 1- or 3-byte chunks.
        check(
            1,
            None,
            expect![[
                r#"<0 "h" "m" "m" 0> <1 "n" "é" "😀" "x" 1> <2 "{" "\"" "a" "\"" ":" "1" "}" 2>"#
            ]],
        );
        check(
            3,
            None,
            expect![[r#"<0 "hmm" 0> <1 "né" "😀" "x" 1> <2 "{\"a" "\":1" "}" 2>"#]],
        );
        check(4, Some(0), expect![[r#""#]]);
        check(4, Some(5), expect![[r#"<0 "hmm" 0> <1 "n""#]]);
        // A budget ending inside the emoji stops before it.
        check(4, Some(7), expect![[r#"<0 "hmm" 0> <1 "né""#]]);
        check(
            4,
            Some(100),
            expect![[r#"<0 "hmm" 0> <1 "né" "😀" "x" 1> <2 "{\"a\"" ":1}" 2>"#]],
        );
    }
}
