//! What the process counts for its operator ([`Metrics`]), written as Prometheus text
//! (OpenMetrics) for `GET /metrics` on the metrics address (`metrics_addr`), never on the
//! public one. A leaf: the rest of the backend and the server record into it; what is
//! counted elsewhere already (turns in flight, open streams, the pool's connections) is
//! handed to [`Metrics::render`] when scraped ([`Now`]), not kept twice.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The content type of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// One answered HTTP request: its route as the router matched it (a template such as
/// `/api/sessions/{id}`, never the path itself, so the labels stay few), or `unmatched`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Request {
    pub route: String,
    pub method: &'static str,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Provider {
    provider: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Tokens {
    provider: &'static str,
    kind: &'static str,
}

/// A routed call's function: a registered function's name (the registry's few), never
/// a name an agent wrote that matched none.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Function {
    function: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Connections {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Direction {
    direction: &'static str,
}

type Seconds = Family<Provider, Histogram, fn() -> Histogram>;

/// Time to a provider's first token: 10 ms to about 82 s.
fn first_token_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 2.0, 14))
}

/// A reply's whole time: 50 ms to about 27 minutes.
fn reply_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.05, 2.0, 16))
}

/// What is counted where it happens. Every recording is a lookup and an atomic add: cheap
/// enough for each request and each reply, never made per token.
pub struct Metrics {
    registry: Registry,
    requests: Family<Request, Counter>,
    first_token: Seconds,
    reply: Seconds,
    tokens: Family<Tokens, Counter>,
    calls: Family<Function, Counter>,
    turns: Gauge,
    streams: Gauge,
    connections: Family<Connections, Gauge>,
    lagged: Counter,
    between: Histogram,
    between_events: Family<Direction, Counter>,
    between_lost: Counter,
}

/// What is counted elsewhere, read when scraped.
pub struct Now {
    /// Replies in flight, and calls running outside one.
    pub turns: usize,
    /// Open event streams and WebSockets.
    pub streams: usize,
    /// The database pool's connections, and how many of them are idle.
    pub pool_size: u32,
    pub pool_idle: usize,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("hero");
        let requests = Family::<Request, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by route, method and status",
            requests.clone(),
        );
        let first_token = Seconds::new_with_constructor(first_token_buckets);
        registry.register(
            "provider_first_token_seconds",
            "Time from a provider call's start to its first token",
            first_token.clone(),
        );
        let reply = Seconds::new_with_constructor(reply_buckets);
        registry.register(
            "provider_reply_seconds",
            "Time from a provider call's start to the end of its reply, for calls whose stream opened",
            reply.clone(),
        );
        let tokens = Family::<Tokens, Counter>::default();
        registry.register(
            "tokens",
            "Tokens the providers counted, by provider and kind (input or output)",
            tokens.clone(),
        );
        let calls = Family::<Function, Counter>::default();
        registry.register(
            "calls",
            "Calls the gate let through to their function (the bus routed them), by function",
            calls.clone(),
        );
        let turns = Gauge::default();
        registry.register(
            "turns_in_flight",
            "Replies in flight, and calls running outside one",
            turns.clone(),
        );
        let streams = Gauge::default();
        registry.register(
            "live_streams",
            "Open event streams and WebSockets",
            streams.clone(),
        );
        let connections = Family::<Connections, Gauge>::default();
        registry.register(
            "db_pool_connections",
            "The database pool's connections, by state (busy or idle)",
            connections.clone(),
        );
        let lagged = Counter::default();
        registry.register(
            "fanout_lagged",
            "Live readers (event streams, WebSockets) closed for falling too far behind the session's events",
            lagged.clone(),
        );
        // Half a millisecond to about 8 s.
        let between = Histogram::new(exponential_buckets(0.0005, 2.0, 15));
        registry.register(
            "fanout_between_instances_seconds",
            "Time from a batch of live events leaving another instance to its arrival here (by the two clocks)",
            between.clone(),
        );
        let between_events = Family::<Direction, Counter>::default();
        registry.register(
            "fanout_between_instances_events",
            "Live events sent to the other instances, and received from them",
            between_events.clone(),
        );
        let between_lost = Counter::default();
        registry.register(
            "fanout_between_instances_lost",
            "Times live events between instances were lost (readers here were told to reconnect)",
            between_lost.clone(),
        );
        Metrics {
            between,
            between_events,
            between_lost,
            registry,
            requests,
            first_token,
            reply,
            tokens,
            calls,
            turns,
            streams,
            connections,
            lagged,
        }
    }
}

impl Metrics {
    pub fn request(&self, labels: &Request) {
        self.requests.get_or_create(labels).inc();
    }

    /// A provider call's reply: how long its first text, thinking or tool call took (none
    /// if none came) and the whole call.
    pub fn reply(&self, provider: &'static str, first_token: Option<Duration>, whole: Duration) {
        let p = Provider { provider };
        if let Some(t) = first_token {
            self.first_token.get_or_create(&p).observe(t.as_secs_f64());
        }
        self.reply.get_or_create(&p).observe(whole.as_secs_f64());
    }

    /// The tokens a provider counted for one call.
    pub fn tokens(&self, provider: &'static str, input: u64, output: u64) {
        for (kind, n) in [("input", input), ("output", output)] {
            let labels = Tokens { provider, kind };
            self.tokens.get_or_create(&labels).inc_by(n);
        }
    }

    /// A call routed to its function (`execution::functions::bus`).
    pub fn call(&self, function: &str) {
        let labels = Function {
            function: function.to_owned(),
        };
        self.calls.get_or_create(&labels).inc();
    }

    /// A live reader was closed for falling too far behind (the hub's channel bound).
    pub fn lagged(&self) {
        self.lagged.inc();
    }

    /// A batch of `events` live events sent to the other instances.
    pub fn sent_between(&self, events: usize) {
        let d = Direction { direction: "sent" };
        self.between_events.get_or_create(&d).inc_by(events as u64);
    }

    /// A batch of `events` live events received from another instance, `delay` after it
    /// left (`None` if the clocks disagree so far that it seems to come from the future).
    pub fn received_between(&self, events: usize, delay: Option<Duration>) {
        let d = Direction {
            direction: "received",
        };
        self.between_events.get_or_create(&d).inc_by(events as u64);
        if let Some(delay) = delay {
            self.between.observe(delay.as_secs_f64());
        }
    }

    /// Live events between instances were lost.
    pub fn lost_between(&self) {
        self.between_lost.inc();
    }

    /// Everything, as Prometheus reads it.
    pub fn render(&self, now: Now) -> String {
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.turns.set(gauge(now.turns));
        self.streams.set(gauge(now.streams));
        let size = gauge(now.pool_size as usize);
        let idle = gauge(now.pool_idle).min(size);
        let state = |state| Connections { state };
        self.connections.get_or_create(&state("idle")).set(idle);
        self.connections
            .get_or_create(&state("busy"))
            .set(size - idle);
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_recorded_is_rendered_with_its_labels() {
        let m = Metrics::default();
        let get = Request {
            route: "/api/sessions/{id}".into(),
            method: "GET",
            status: 200,
        };
        m.request(&get);
        m.request(&get);
        m.reply(
            "anthropic",
            Some(Duration::from_millis(30)),
            Duration::from_secs(2),
        );
        m.reply("anthropic", None, Duration::from_millis(40));
        m.tokens("anthropic", 120, 45);
        m.lagged();
        m.call("websearch");
        m.call("websearch");
        let text = m.render(Now {
            turns: 3,
            streams: 2,
            pool_size: 5,
            pool_idle: 4,
        });
        for line in [
            r#"hero_http_requests_total{route="/api/sessions/{id}",method="GET",status="200"} 2"#,
            r#"hero_provider_first_token_seconds_count{provider="anthropic"} 1"#,
            r#"hero_calls_total{function="websearch"} 2"#,
            r#"hero_provider_reply_seconds_count{provider="anthropic"} 2"#,
            r#"hero_tokens_total{provider="anthropic",kind="input"} 120"#,
            r#"hero_tokens_total{provider="anthropic",kind="output"} 45"#,
            "hero_turns_in_flight 3",
            "hero_live_streams 2",
            r#"hero_db_pool_connections{state="idle"} 4"#,
            r#"hero_db_pool_connections{state="busy"} 1"#,
            "hero_fanout_lagged_total 1",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
