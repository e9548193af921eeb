//! What the mock says: scripted answers, the benchmark corpus, faults and pacing.
//!
//! Everything here is plain data with no I/O except the two loaders, so a test can build a
//! script in code exactly as the binary builds one from `--answers` or `--corpus`.

use std::{ops::Range, path::Path, time::Duration};

use serde::Deserialize;
use serde_json::Value;

/// Why an answers file or a corpus could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// The file is not the JSON the mock expects (answers array, or index of `[start, end)`).
    #[error("{path} is not valid: {source}")]
    Json {
        path: String,
        source: serde_json::Error,
    },
    /// The content parsed but makes no sense (empty list, range outside the corpus, …).
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

/// An error status or a broken stream the mock serves instead of (or in the middle of) an
/// answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// 401: the key is refused.
    Unauthorized,
    /// 429 with a `retry-after` header.
    RateLimited,
    /// 500: the provider failed.
    ServerError,
    /// 529 on Anthropic (503 on OpenAI, which has no 529).
    Overloaded,
    /// Stream `after_bytes` of content, then drop the connection without the closing events.
    Cut,
    /// Stream `after_bytes` of content, then send nothing until the client goes away.
    Stall,
    /// Stream `after_bytes` of content, then an error event (Anthropic `event: error`,
    /// OpenAI a `data: {"error":…}` line) and end the body.
    OverloadedMidstream,
}

impl FaultKind {
    /// The names used by `--fault`, directives and answer files.
    pub const NAMES: &'static [&'static str] = &[
        "401",
        "429",
        "500",
        "529",
        "cut",
        "stall",
        "overloaded_midstream",
    ];

    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "401" => Self::Unauthorized,
            "429" => Self::RateLimited,
            "500" => Self::ServerError,
            "529" | "overloaded" => Self::Overloaded,
            "cut" => Self::Cut,
            "stall" => Self::Stall,
            "overloaded_midstream" => Self::OverloadedMidstream,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Unauthorized => "401",
            Self::RateLimited => "429",
            Self::ServerError => "500",
            Self::Overloaded => "529",
            Self::Cut => "cut",
            Self::Stall => "stall",
            Self::OverloadedMidstream => "overloaded_midstream",
        }
    }

    /// Faults that answer with an error status before any body byte.
    pub fn is_status(self) -> bool {
        matches!(
            self,
            Self::Unauthorized | Self::RateLimited | Self::ServerError | Self::Overloaded
        )
    }
}

/// A fault as written in an answer or a directive: the numbers it leaves out come from the
/// server's `--retry-after` / `--cut-after-bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultSpec {
    pub kind: FaultKind,
    pub retry_after: Option<u64>,
    pub after_bytes: Option<usize>,
}

impl FaultSpec {
    pub fn new(kind: FaultKind) -> Self {
        Self {
            kind,
            retry_after: None,
            after_bytes: None,
        }
    }
}

/// A fault with every number decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fault {
    pub kind: FaultKind,
    pub retry_after: u64,
    pub after_bytes: usize,
}

/// How the content is cut into deltas and how fast they go out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pacing {
    /// Bytes of content per delta; a UTF-8 sequence is never split, so a piece may be shorter
    /// (or, for one character wider than this, longer).
    pub chunk_bytes: usize,
    /// Pause between two deltas.
    pub delay: Duration,
}

impl Default for Pacing {
    fn default() -> Self {
        Self {
            chunk_bytes: 16,
            delay: Duration::ZERO,
        }
    }
}

impl Pacing {
    /// A "token" is 4 bytes of text: 50 tokens/s is one 4-byte delta every 20 ms.
    pub fn tokens_per_sec(rate: f64) -> Self {
        let delay = if rate > 0.0 {
            Duration::from_secs_f64(1.0 / rate)
        } else {
            Duration::ZERO
        };
        Self {
            chunk_bytes: 4,
            delay,
        }
    }
}

/// Why the answer ended, in Anthropic's words (mapped to OpenAI's `finish_reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
}

impl StopReason {
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "end_turn" | "stop" => Self::EndTurn,
            "tool_use" | "tool_calls" => Self::ToolUse,
            "max_tokens" | "length" => Self::MaxTokens,
            _ => return None,
        })
    }
}

/// One tool call the answer makes.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub name: String,
    #[serde(default = "empty_object")]
    pub input: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// One scripted answer. Fields left `None` fall back to the server's flags.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Answer {
    pub text: String,
    pub thinking: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    /// Forces the stop reason (`max_tokens`); otherwise `tool_use` when there are tool calls,
    /// else `end_turn`.
    pub stop: Option<StopReason>,
    pub fault: Option<FaultSpec>,
    pub chunk_bytes: Option<usize>,
    pub delay_ms: Option<u64>,
    pub usage_input: Option<u64>,
    pub usage_output: Option<u64>,
}

impl Answer {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// Reads a JSON array whose items are a string (the text) or an object
    /// `{text, thinking, tool_calls, stop, fault, chunk_bytes, delay_ms, usage: {input, output}}`.
    pub fn load_file(path: &Path) -> Result<Vec<Answer>, LoadError> {
        let shown = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| LoadError::Io {
            path: shown.clone(),
            source,
        })?;
        let answers = Self::parse_list(&bytes).map_err(|source| LoadError::Json {
            path: shown.clone(),
            source,
        })?;
        if answers.is_empty() {
            return Err(LoadError::Invalid {
                path: shown,
                message: "the answers array is empty".into(),
            });
        }
        Ok(answers)
    }

    pub fn parse_list(json: &[u8]) -> Result<Vec<Answer>, serde_json::Error> {
        let raw: Vec<RawAnswer> = serde_json::from_slice(json)?;
        raw.into_iter().map(Answer::try_from).collect()
    }
}

/// The answer file's shape; `Answer` is what the rest of the crate uses.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawAnswer {
    Text(String),
    Full(RawAnswerObject),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAnswerObject {
    #[serde(default)]
    text: String,
    thinking: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCall>,
    stop: Option<String>,
    fault: Option<RawFault>,
    chunk_bytes: Option<usize>,
    delay_ms: Option<u64>,
    usage: Option<RawUsage>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUsage {
    input: Option<u64>,
    output: Option<u64>,
}

/// `"fault": 429`, `"fault": "cut"` or `"fault": {"kind": "cut", "after_bytes": 40}`.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawFault {
    Code(u16),
    Name(String),
    Full {
        kind: Value,
        retry_after: Option<u64>,
        after_bytes: Option<usize>,
    },
}

fn fault_kind(v: &Value) -> Option<FaultKind> {
    match v {
        Value::String(s) => FaultKind::parse(s),
        Value::Number(n) => FaultKind::parse(&n.to_string()),
        _ => None,
    }
}

impl TryFrom<RawAnswer> for Answer {
    type Error = serde_json::Error;

    fn try_from(raw: RawAnswer) -> Result<Self, Self::Error> {
        use serde::de::Error;
        let o = match raw {
            RawAnswer::Text(text) => return Ok(Answer::text(text)),
            RawAnswer::Full(o) => o,
        };
        let bad_fault = || {
            serde_json::Error::custom(format!(
                "fault must be one of {}",
                FaultKind::NAMES.join(", ")
            ))
        };
        let fault = match o.fault {
            None => None,
            Some(RawFault::Code(c)) => Some(FaultSpec::new(
                FaultKind::parse(&c.to_string()).ok_or_else(bad_fault)?,
            )),
            Some(RawFault::Name(n)) => {
                Some(FaultSpec::new(FaultKind::parse(&n).ok_or_else(bad_fault)?))
            }
            Some(RawFault::Full {
                kind,
                retry_after,
                after_bytes,
            }) => Some(FaultSpec {
                kind: fault_kind(&kind).ok_or_else(bad_fault)?,
                retry_after,
                after_bytes,
            }),
        };
        let stop = match o.stop {
            None => None,
            Some(s) => Some(
                StopReason::parse(&s)
                    .ok_or_else(|| serde_json::Error::custom(format!("unknown stop `{s}`")))?,
            ),
        };
        if o.chunk_bytes == Some(0) {
            return Err(serde_json::Error::custom("chunk_bytes must be at least 1"));
        }
        Ok(Answer {
            text: o.text,
            thinking: o.thinking,
            tool_calls: o.tool_calls,
            stop,
            fault,
            chunk_bytes: o.chunk_bytes,
            delay_ms: o.delay_ms,
            usage_input: o.usage.as_ref().and_then(|u| u.input),
            usage_output: o.usage.as_ref().and_then(|u| u.output),
        })
    }
}

/// A benchmark corpus: one file of responses and an
/// index, a JSON array of `[start, end)` byte ranges, one per response.
#[derive(Clone, Debug)]
pub struct Corpus {
    text: String,
    ranges: Vec<Range<usize>>,
}

impl Corpus {
    pub fn load(corpus: &Path, index: &Path) -> Result<Self, LoadError> {
        let read = |p: &Path| {
            std::fs::read(p).map_err(|source| LoadError::Io {
                path: p.display().to_string(),
                source,
            })
        };
        let text = read(corpus)?;
        let index_bytes = read(index)?;
        let ranges: Vec<(usize, usize)> =
            serde_json::from_slice(&index_bytes).map_err(|source| LoadError::Json {
                path: index.display().to_string(),
                source,
            })?;
        let text = String::from_utf8(text).map_err(|e| LoadError::Invalid {
            path: corpus.display().to_string(),
            message: format!("not UTF-8: {e}"),
        })?;
        Self::new(text, ranges).map_err(|message| LoadError::Invalid {
            path: index.display().to_string(),
            message,
        })
    }

    pub fn new(text: String, ranges: Vec<(usize, usize)>) -> Result<Self, String> {
        if ranges.is_empty() {
            return Err("the index has no responses".into());
        }
        for (i, &(s, e)) in ranges.iter().enumerate() {
            if s > e || e > text.len() || !text.is_char_boundary(s) || !text.is_char_boundary(e) {
                return Err(format!(
                    "response {i}: [{s}, {e}) is not a range of whole characters in a {}-byte corpus",
                    text.len()
                ));
            }
        }
        Ok(Self {
            text,
            ranges: ranges.into_iter().map(|(s, e)| s..e).collect(),
        })
    }

    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Response `i` (modulo the number of responses).
    pub fn response(&self, i: usize) -> &str {
        &self.text[self.ranges[i % self.ranges.len()].clone()]
    }
}

/// Where answers come from when a request does not say.
#[derive(Clone, Debug, Default)]
pub enum Script {
    /// A short fixed answer saying it is the mock.
    #[default]
    Default,
    /// Played in order, cycling.
    Answers(Vec<Answer>),
    /// One corpus response per request, in index order, cycling.
    Corpus(Corpus),
}

pub const DEFAULT_ANSWER: &str =
    "Hello from mock-llm: this answer comes from a mock LLM server, not a real model.";

impl Script {
    /// The `n`th answer of the script.
    pub(crate) fn answer(&self, n: usize) -> Answer {
        match self {
            Script::Default => Answer::text(DEFAULT_ANSWER),
            Script::Answers(list) => list[n % list.len()].clone(),
            Script::Corpus(c) => Answer::text(c.response(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_file_shapes() {
        let list = Answer::parse_list(
            br#"["plain", {"text": "t", "thinking": "th", "tool_calls": [{"name": "f", "input": {"a": 1}}],
                 "fault": {"kind": "cut", "after_bytes": 3}, "chunk_bytes": 2, "delay_ms": 5,
                 "usage": {"input": 7, "output": 8}, "stop": "max_tokens"}, {"fault": 429}, {"fault": "stall"}]"#,
        )
        .unwrap();
        assert_eq!(list[0], Answer::text("plain"));
        assert_eq!(
            list[1].fault,
            Some(FaultSpec {
                kind: FaultKind::Cut,
                retry_after: None,
                after_bytes: Some(3)
            })
        );
        assert_eq!(list[1].tool_calls[0].input, serde_json::json!({"a": 1}));
        assert_eq!(
            (list[1].usage_input, list[1].usage_output, list[1].stop),
            (Some(7), Some(8), Some(StopReason::MaxTokens))
        );
        assert_eq!(list[2].fault.unwrap().kind, FaultKind::RateLimited);
        assert_eq!(list[3].fault.unwrap().kind, FaultKind::Stall);
        assert!(Answer::parse_list(br#"[{"txt": "typo"}]"#).is_err());
        assert!(Answer::parse_list(br#"[{"fault": 418}]"#).is_err());
    }

    #[test]
    fn corpus_ranges_are_checked() {
        assert!(Corpus::new("héllo".into(), vec![(0, 2)]).is_err());
        assert!(Corpus::new("héllo".into(), vec![(0, 9)]).is_err());
        let c = Corpus::new("ab\n\ncd".into(), vec![(0, 2), (4, 6)]).unwrap();
        assert_eq!(
            [c.response(0), c.response(1), c.response(2)],
            ["ab", "cd", "ab"]
        );
    }
}
