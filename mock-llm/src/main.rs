//! The `mock-llm` binary: flags to a `Config`, one line with the address, then serve.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode, time::Duration};

use clap::Parser;
use mock_llm::{Answer, Config, Corpus, FaultKind};

/// A mock LLM server for tests, browser tests and benchmarks.
///
/// Speaks Anthropic's Messages API (POST /v1/messages, key in x-api-key) and OpenAI's Chat
/// Completions API (POST /v1/chat/completions, key as Authorization: Bearer), streaming
/// (stream: true) or not, plus GET /v1/models and POST /v1/embeddings (OpenAI's shape). Introspection: GET /mock/requests (last 100
/// requests, key values redacted), GET /mock/stats (requests per path, faults served, streams
/// started / open / left by their client), POST /mock/reset (clears them and restarts the
/// script at its first answer).
///
/// The last user message may carry directives that override the flags for that request:
///   [[mock fault=429 times=1 retry_after=1]]  the first `times` requests with this exact
///                                             directive get 429, later ones are answered
///   [[mock fault=500]] [[mock fault=401]] [[mock fault=529]]
///   [[mock fault=cut after_bytes=40]]         stream 40 content bytes, then drop the connection
///   [[mock fault=stall after_bytes=20]]       stream 20 content bytes, then send nothing
///                                             until the client goes away
///   [[mock fault=overloaded_midstream after_bytes=30]]  then an error event
///   [[mock echo]]                             answer with the JSON of the messages received
///   [[mock chunk=4 delay_ms=5]]  [[mock tokens_per_sec=50]]
///   [[mock text="answer exactly this" thinking="..." tool=NAME input={"k":1} stop=max_tokens]]
///   [[mock usage_input=10 usage_output=20 usage_cache_read=30 usage_cache_write=40]]
/// Items combine: [[mock chunk=3 fault=cut after_bytes=10]].
///
/// Prints `mock-llm listening on http://ADDR` once listening.
#[derive(Parser, Debug)]
#[command(name = "mock-llm", version, verbatim_doc_comment)]
struct Args {
    /// Address to listen on; port 0 picks a free port (the line printed on start shows it).
    #[arg(long, default_value = "127.0.0.1:0")]
    addr: SocketAddr,

    /// JSON array of scripted answers, played in order and cycling. Each is a string (the
    /// text) or {"text", "thinking", "tool_calls": [{"name", "input"}], "stop", "fault",
    /// "chunk_bytes", "delay_ms", "usage": {"input", "output"}}; "fault" is a name from --fault
    /// or {"kind", "retry_after", "after_bytes"}.
    #[arg(long, value_name = "FILE", conflicts_with = "corpus")]
    answers: Option<PathBuf>,

    /// Benchmark corpus: a file of replies, one response per request in index order,
    /// cycling. Needs --index.
    #[arg(long, value_name = "FILE", requires = "index")]
    corpus: Option<PathBuf>,

    /// The corpus index: a JSON array of [start, end) byte ranges, one per response.
    #[arg(long, value_name = "FILE", requires = "corpus")]
    index: Option<PathBuf>,

    /// Answer every request with the JSON of the messages it received (role and content;
    /// an Anthropic system prompt comes first as a "system" message).
    #[arg(long)]
    echo: bool,

    /// Bytes of content per streamed delta; a UTF-8 sequence is never split.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    chunk_bytes: u64,

    /// Milliseconds between two deltas.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    delay_ms: u64,

    /// Stream at this many tokens per second, a token being 4 bytes: sets --chunk-bytes 4 and
    /// the delay (50 = one 4-byte delta every 20 ms).
    #[arg(long, value_name = "R", conflicts_with_all = ["chunk_bytes", "delay_ms"])]
    tokens_per_sec: Option<f64>,

    /// Start each paced stream's beat at its own offset within one pause, as independent
    /// streams from a real provider do, instead of all in step.
    #[arg(long)]
    stagger: bool,

    /// Input tokens to report, instead of prompt characters / 4 (at least 1).
    #[arg(long, value_name = "N")]
    usage_input: Option<u64>,

    /// Output tokens to report, instead of answer characters / 4 (at least 1).
    #[arg(long, value_name = "N")]
    usage_output: Option<u64>,

    /// Serve this fault on every request: 401, 429, 500, 529 (503 on OpenAI), cut (drop the
    /// connection mid-stream), stall (stop sending, keep the connection), overloaded_midstream
    /// (an error event mid-stream).
    #[arg(long, value_name = "KIND", value_parser = parse_fault)]
    fault: Option<FaultKind>,

    /// Seconds in the retry-after header of a 429 that does not name its own.
    #[arg(long, value_name = "SECS", default_value_t = 1)]
    retry_after: u64,

    /// Content bytes streamed before a cut, stall or mid-stream error that does not name its own.
    #[arg(long, value_name = "N", default_value_t = 32)]
    cut_after_bytes: usize,

    /// The only API key accepted (any other gets 401). Unset: any non-empty key is accepted,
    /// a missing one gets 401.
    #[arg(
        long,
        value_name = "KEY",
        env = "MOCK_LLM_API_KEY",
        hide_env_values = true
    )]
    api_key: Option<String>,

    /// A model name for GET /v1/models (repeat for more). Requests may name any model.
    #[arg(long = "model", value_name = "NAME", default_value = "mock-model")]
    models: Vec<String>,

    /// How many numbers each vector of POST /v1/embeddings has (deterministic: hashed
    /// tokens and a small table of synonyms, of length 1).
    #[arg(long, default_value_t = 64)]
    embedding_dimensions: usize,
}

fn parse_fault(s: &str) -> Result<FaultKind, String> {
    FaultKind::parse(s).ok_or_else(|| format!("expected one of {}", FaultKind::NAMES.join(", ")))
}

fn config(args: Args) -> Result<Config, mock_llm::LoadError> {
    let mut config = Config::default()
        .echo(args.echo)
        .stagger(args.stagger)
        .usage(args.usage_input, args.usage_output)
        .fault(args.fault)
        .retry_after(args.retry_after)
        .cut_after_bytes(args.cut_after_bytes)
        .api_key(args.api_key)
        .models(args.models)
        .embedding_dimensions(args.embedding_dimensions);
    config = match args.tokens_per_sec {
        Some(rate) => config.tokens_per_sec(rate),
        None => config
            .chunk_bytes(args.chunk_bytes as usize)
            .delay(Duration::from_millis(args.delay_ms)),
    };
    if let Some(path) = args.answers {
        config = config.answers(Answer::load_file(&path)?);
    }
    if let (Some(corpus), Some(index)) = (args.corpus, args.index) {
        config = config.corpus(Corpus::load(&corpus, &index)?);
    }
    Ok(config)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let addr = args.addr;
    let config = match config(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mock-llm: {e}");
            return ExitCode::from(2);
        }
    };
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("mock-llm: cannot listen on {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    match listener.local_addr() {
        Ok(real) => println!("mock-llm listening on http://{real}"),
        Err(e) => {
            eprintln!("mock-llm: {e}");
            return ExitCode::FAILURE;
        }
    }
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    match mock_llm::serve_until(config, listener, stop).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mock-llm: {e}");
            ExitCode::FAILURE
        }
    }
}
