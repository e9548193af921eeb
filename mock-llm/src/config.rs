//! The server's settings: one `Config`, built in code by tests and from flags by the binary.

use std::{fmt, time::Duration};

use crate::script::{Answer, Corpus, FaultKind, FaultSpec, Pacing, Script};

/// Everything the mock decides without being told per request. Build with the methods:
/// `Config::default().answers(vec![Answer::text("hi")]).chunk_bytes(4)`.
///
/// Holds an API key, so it implements neither `Serialize` nor a `Debug` that prints it.
#[derive(Clone)]
pub struct Config {
    pub(crate) script: Script,
    pub(crate) echo: bool,
    pub(crate) pacing: Pacing,
    pub(crate) stagger: bool,
    pub(crate) usage_input: Option<u64>,
    pub(crate) usage_output: Option<u64>,
    pub(crate) fault: Option<FaultKind>,
    pub(crate) retry_after: u64,
    pub(crate) cut_after_bytes: usize,
    pub(crate) api_key: Option<String>,
    pub(crate) models: Vec<String>,
    /// How many numbers `POST /v1/embeddings` answers each input with.
    pub(crate) embedding_dimensions: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            script: Script::Default,
            echo: false,
            pacing: Pacing::default(),
            stagger: false,
            usage_input: None,
            usage_output: None,
            fault: None,
            retry_after: 1,
            cut_after_bytes: 32,
            api_key: None,
            models: vec!["mock-model".to_string()],
            embedding_dimensions: 64,
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("script", &self.script)
            .field("echo", &self.echo)
            .field("pacing", &self.pacing)
            .field("stagger", &self.stagger)
            .field("usage_input", &self.usage_input)
            .field("usage_output", &self.usage_output)
            .field("fault", &self.fault)
            .field("retry_after", &self.retry_after)
            .field("cut_after_bytes", &self.cut_after_bytes)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("models", &self.models)
            .finish()
    }
}

impl Config {
    /// Scripted answers, played in order and cycling. An empty list keeps the default answer.
    pub fn answers(mut self, answers: Vec<Answer>) -> Self {
        self.script = if answers.is_empty() {
            Script::Default
        } else {
            Script::Answers(answers)
        };
        self
    }

    /// One corpus response per request, in index order, cycling.
    pub fn corpus(mut self, corpus: Corpus) -> Self {
        self.script = Script::Corpus(corpus);
        self
    }

    /// Answer every request with the JSON of the messages it carried.
    pub fn echo(mut self, on: bool) -> Self {
        self.echo = on;
        self
    }

    /// Bytes of content per delta (at least 1; UTF-8 sequences are never split).
    pub fn chunk_bytes(mut self, n: usize) -> Self {
        self.pacing.chunk_bytes = n.max(1);
        self
    }

    /// Pause between deltas.
    pub fn delay(mut self, d: Duration) -> Self {
        self.pacing.delay = d;
        self
    }

    /// 4-byte deltas at `rate` per second (sets chunk size and delay).
    pub fn tokens_per_sec(mut self, rate: f64) -> Self {
        self.pacing = Pacing::tokens_per_sec(rate);
        self
    }

    /// Paced streams start their beat at spread-out offsets within one pause (the first
    /// delta waits a fraction of it, different for each request), as independent streams
    /// from a real provider do. Without it, streams asked for in the same instant send
    /// their deltas in step: bursts that flatter whatever reads them.
    pub fn stagger(mut self, on: bool) -> Self {
        self.stagger = on;
        self
    }

    /// Fixed usage numbers instead of the computed ones (chars / 4, at least 1).
    pub fn usage(mut self, input: Option<u64>, output: Option<u64>) -> Self {
        self.usage_input = input;
        self.usage_output = output;
        self
    }

    /// A fault served on every request.
    pub fn fault(mut self, kind: Option<FaultKind>) -> Self {
        self.fault = kind;
        self
    }

    /// The `retry-after` seconds of a 429 that does not name its own.
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = secs;
        self
    }

    /// Content bytes before a cut, stall or mid-stream error that does not name its own.
    pub fn cut_after_bytes(mut self, n: usize) -> Self {
        self.cut_after_bytes = n;
        self
    }

    /// The only key accepted; without one, any non-empty key is.
    pub fn api_key(mut self, key: Option<String>) -> Self {
        self.api_key = key;
        self
    }

    /// The names `GET /v1/models` lists.
    /// How many numbers each embedding has (at least 1).
    pub fn embedding_dimensions(mut self, n: usize) -> Self {
        self.embedding_dimensions = n.max(1);
        self
    }

    pub fn models(mut self, models: Vec<String>) -> Self {
        if !models.is_empty() {
            self.models = models;
        }
        self
    }

    pub(crate) fn resolve(&self, spec: FaultSpec) -> crate::script::Fault {
        crate::script::Fault {
            kind: spec.kind,
            retry_after: spec.retry_after.unwrap_or(self.retry_after),
            after_bytes: spec.after_bytes.unwrap_or(self.cut_after_bytes),
        }
    }

    pub(crate) fn pacing(&self) -> Pacing {
        self.pacing
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn debug_hides_the_key() {
        let c = super::Config::default().api_key(Some("sk-secret".into()));
        assert!(!format!("{c:?}").contains("sk-secret"));
    }

    #[test]
    fn fifty_tokens_per_second_is_four_bytes_every_20ms() {
        let c = super::Config::default().tokens_per_sec(50.0);
        assert_eq!(
            (c.pacing.chunk_bytes, c.pacing.delay),
            (4, std::time::Duration::from_millis(20))
        );
    }
}
