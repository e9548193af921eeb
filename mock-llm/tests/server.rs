//! Real-socket tests: start the mock on 127.0.0.1:0 and talk to it with reqwest and the
//! `sseer` decoder, the same client stack Hero's providers use.

use std::time::{Duration, Instant};

use expect_test::{Expect, expect};
use futures_util::StreamExt;
use mock_llm::{Answer, Config, Corpus, FaultKind, MockServer, ToolCall};
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Wire {
    Anthropic,
    OpenAi,
}

const BOTH: [Wire; 2] = [Wire::Anthropic, Wire::OpenAi];

async fn start(config: Config) -> MockServer {
    mock_llm::spawn(config).await.expect("mock starts")
}

/// A request body for `wire` whose last user message is `text`.
fn body(wire: Wire, text: &str, stream: bool) -> Value {
    match wire {
        Wire::Anthropic => json!({
            "model": "claude-mock", "max_tokens": 1024, "stream": stream,
            "messages": [{"role": "user", "content": text}],
        }),
        Wire::OpenAi => json!({
            "model": "gpt-mock", "stream": stream, "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": text}],
        }),
    }
}

async fn send(server: &MockServer, wire: Wire, body: &Value) -> reqwest::Response {
    send_with(&reqwest::Client::new(), server, wire, body).await
}

async fn send_with(
    client: &reqwest::Client,
    server: &MockServer,
    wire: Wire,
    body: &Value,
) -> reqwest::Response {
    let req = match wire {
        Wire::Anthropic => client
            .post(format!("{}/v1/messages", server.url()))
            .header("x-api-key", "sk-test")
            .header("anthropic-version", "2023-06-01"),
        Wire::OpenAi => client
            .post(format!("{}/v1/chat/completions", server.url()))
            .bearer_auth("sk-test"),
    };
    req.json(body).send().await.expect("request sent")
}

/// The decoded SSE events of a response, and the error that ended the stream, if any.
async fn events(resp: reqwest::Response) -> (Vec<(String, Value)>, Option<String>) {
    let mut stream = sseer::EventStream::new(resp.bytes_stream());
    let mut out = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(ev) => {
                let mut data =
                    serde_json::from_str(&ev.data).unwrap_or(Value::String(ev.data.to_string()));
                // Snapshots do not depend on whether serde_json keeps the wire's key order.
                data.sort_all_objects();
                // The only field that changes from run to run.
                if data.get("created").is_some() {
                    data["created"] = json!(0);
                }
                out.push((ev.event.to_string(), data));
            }
            Err(e) => return (out, Some(e.to_string())),
        }
    }
    (out, None)
}

/// Compact JSON with keys sorted, whatever serde_json's `preserve_order` feature says.
fn sorted(mut v: Value) -> String {
    v.sort_all_objects();
    v.to_string()
}

fn render(events: &[(String, Value)]) -> String {
    events
        .iter()
        .map(|(name, data)| format!("{name} {data}\n"))
        .collect()
}

/// The text, thinking and tool inputs a client would assemble from the deltas.
fn assemble(wire: Wire, events: &[(String, Value)]) -> (String, String, String) {
    let (mut text, mut thinking, mut tools) = (String::new(), String::new(), String::new());
    for (_, d) in events {
        let s = |v: &Value| v.as_str().unwrap_or("").to_string();
        match wire {
            Wire::Anthropic => {
                text += &s(&d["delta"]["text"]);
                thinking += &s(&d["delta"]["thinking"]);
                tools += &s(&d["delta"]["partial_json"]);
            }
            Wire::OpenAi => {
                let delta = &d["choices"][0]["delta"];
                text += &s(&delta["content"]);
                thinking += &s(&delta["reasoning_content"]);
                tools += &s(&delta["tool_calls"][0]["function"]["arguments"]);
            }
        }
    }
    (text, thinking, tools)
}

// ---------------------------------------------------------------- wire formats

async fn check_stream(wire: Wire, config: Config, user: &str, expect: Expect) {
    let server = start(config).await;
    let resp = send(&server, wire, &body(wire, user, true)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["content-type"],
        "text/event-stream; charset=utf-8"
    );
    let (events, err) = events(resp).await;
    assert_eq!(err, None);
    expect.assert_eq(&render(&events));
}

#[tokio::test]
async fn anthropic_stream_text() {
    check_stream(
        Wire::Anthropic,
        Config::default().answers(vec![Answer::text("Hello, world!")]).chunk_bytes(6),
        "hi",
        expect![[r#"
            message_start {"message":{"content":[],"id":"msg_mock0000000000000001","model":"claude-mock","role":"assistant","stop_reason":null,"stop_sequence":null,"type":"message","usage":{"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"input_tokens":1,"output_tokens":1}},"type":"message_start"}
            ping {"type":"ping"}
            content_block_start {"content_block":{"text":"","type":"text"},"index":0,"type":"content_block_start"}
            content_block_delta {"delta":{"text":"Hello,","type":"text_delta"},"index":0,"type":"content_block_delta"}
            content_block_delta {"delta":{"text":" world","type":"text_delta"},"index":0,"type":"content_block_delta"}
            content_block_delta {"delta":{"text":"!","type":"text_delta"},"index":0,"type":"content_block_delta"}
            content_block_stop {"index":0,"type":"content_block_stop"}
            message_delta {"delta":{"stop_reason":"end_turn","stop_sequence":null},"type":"message_delta","usage":{"output_tokens":3}}
            message_stop {"type":"message_stop"}
        "#]],
    )
    .await;
}

#[tokio::test]
async fn anthropic_stream_thinking_and_tool_use() {
    check_stream(
        Wire::Anthropic,
        Config::default().chunk_bytes(8),
        r#"weather? [[mock thinking="Paris, then." text="Checking." tool=get_weather input={"city":"Paris"} usage_input=12]]"#,
        expect![[r#"
            message_start {"message":{"content":[],"id":"msg_mock0000000000000002","model":"claude-mock","role":"assistant","stop_reason":null,"stop_sequence":null,"type":"message","usage":{"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"input_tokens":12,"output_tokens":1}},"type":"message_start"}
            ping {"type":"ping"}
            content_block_start {"content_block":{"thinking":"","type":"thinking"},"index":0,"type":"content_block_start"}
            content_block_delta {"delta":{"thinking":"Paris, t","type":"thinking_delta"},"index":0,"type":"content_block_delta"}
            content_block_delta {"delta":{"thinking":"hen.","type":"thinking_delta"},"index":0,"type":"content_block_delta"}
            content_block_delta {"delta":{"signature":"bW9jay1sbG0tc2lnbmF0dXJl","type":"signature_delta"},"index":0,"type":"content_block_delta"}
            content_block_stop {"index":0,"type":"content_block_stop"}
            content_block_start {"content_block":{"text":"","type":"text"},"index":1,"type":"content_block_start"}
            content_block_delta {"delta":{"text":"Checking","type":"text_delta"},"index":1,"type":"content_block_delta"}
            content_block_delta {"delta":{"text":".","type":"text_delta"},"index":1,"type":"content_block_delta"}
            content_block_stop {"index":1,"type":"content_block_stop"}
            content_block_start {"content_block":{"id":"toolu_mock000000000001","input":{},"name":"get_weather","type":"tool_use"},"index":2,"type":"content_block_start"}
            content_block_delta {"delta":{"partial_json":"{\"city\":","type":"input_json_delta"},"index":2,"type":"content_block_delta"}
            content_block_delta {"delta":{"partial_json":"\"Paris\"}","type":"input_json_delta"},"index":2,"type":"content_block_delta"}
            content_block_stop {"index":2,"type":"content_block_stop"}
            message_delta {"delta":{"stop_reason":"tool_use","stop_sequence":null},"type":"message_delta","usage":{"output_tokens":9}}
            message_stop {"type":"message_stop"}
        "#]],
    )
    .await;
}

#[tokio::test]
async fn openai_stream_with_tool_calls_and_usage() {
    check_stream(
        Wire::OpenAi,
        Config::default().chunk_bytes(8),
        r#"[[mock text="Sure." tool=get_weather input={"city":"Paris"} tool=get_time input={"tz":"CET"} usage_output=9]]"#,
        expect![[r#"
            message {"choices":[{"delta":{"content":"","role":"assistant"},"finish_reason":null,"index":0,"logprobs":null}],"created":0,"id":"chatcmpl-mock0000000000000003","model":"gpt-mock","object":"chat.completion.chunk","system_fingerprint":null,"usage":null}
            message {"choices":[{"delta":{"content":"Sure."},"finish_reason":null,"index":0,"logprobs":null}],"created":0,"id":"chatcmpl-mock0000000000000003","model":"gpt-mock","object":"chat.completion.chunk","system_fingerprint":null,"usage":null}
            message {"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"","name":"get_weather"},"id":"call_mock000000000001","index":0,"type":"function"}]},"finish_reason":null,"index":0,"logprobs":null}],"created":0,"id":"chatcmpl-mock0000000000000003","model":"gpt-mock","object":"chat.completion.chunk","system_fingerprint":null,"usage":null}
            message {"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{\"city\":"},"index":0}]},"finish_reason":null,"index":0,"logprobs":null}],"created":0,"id":"chatcmpl-mock0000000000000003","model":"gpt-mock","object":"chat.completion.chunk","system_fingerprint":null,"usage":null}
            message {"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"\"Paris\"}"},"index":0}]},"finish_reason":null,"index":0,"logprobs":null}],"created":0,"id":"chatcmpl-mock0000000000000003","model":"gpt-mock","object":"chat.completion.chunk","system_fingerprint":null,"usage":null}
            message {"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"","name":"get_time"},"id":"call_mock000000000002","index":1,"type":"function"}]},"finish_reason":null,"index":0,"logprobs":null}],"created":0,"id":"chatcmpl-mock0000000000000003","model":"gpt-mock","object":"chat.completion.chunk","system_fingerprint":null,"usage":null}
            message {"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{\"tz\":\"C"},"index":1}]},"finish_reason":null,"index":0,"logprobs":null}],"created":0,"id":"chatcmpl-mock0000000000000003","model":"gpt-mock","object":"chat.completion.chunk","system_fingerprint":null,"usage":null}
            message {"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"ET\"}"},"index":1}]},"finish_reason":null,"index":0,"logprobs":null}],"created":0,"id":"chatcmpl-mock0000000000000003","model":"gpt-mock","object":"chat.completion.chunk","system_fingerprint":null,"usage":null}
            message {"choices":[{"delta":{},"finish_reason":"tool_calls","index":0,"logprobs":null}],"created":0,"id":"chatcmpl-mock0000000000000003","model":"gpt-mock","object":"chat.completion.chunk","system_fingerprint":null,"usage":null}
            message {"choices":[],"created":0,"id":"chatcmpl-mock0000000000000003","model":"gpt-mock","object":"chat.completion.chunk","system_fingerprint":null,"usage":{"completion_tokens":9,"prompt_tokens":27,"prompt_tokens_details":{"cached_tokens":0},"total_tokens":36}}
            message "[DONE]"
        "#]],
    )
    .await;
}

#[tokio::test]
async fn openai_stream_without_include_usage_and_with_thinking() {
    let server = start(Config::default()).await;
    let mut b = body(
        Wire::OpenAi,
        r#"[[mock thinking="hm" text="ok" stop=max_tokens]]"#,
        true,
    );
    b.as_object_mut().unwrap().remove("stream_options");
    let (events, err) = events(send(&server, Wire::OpenAi, &b).await).await;
    assert_eq!(err, None);
    expect![[r#"
        message {"choices":[{"delta":{"content":"","role":"assistant"},"finish_reason":null,"index":0,"logprobs":null}],"created":0,"id":"chatcmpl-mock0000000000000001","model":"gpt-mock","object":"chat.completion.chunk","system_fingerprint":null}
        message {"choices":[{"delta":{"reasoning_content":"hm"},"finish_reason":null,"index":0,"logprobs":null}],"created":0,"id":"chatcmpl-mock0000000000000001","model":"gpt-mock","object":"chat.completion.chunk","system_fingerprint":null}
        message {"choices":[{"delta":{"content":"ok"},"finish_reason":null,"index":0,"logprobs":null}],"created":0,"id":"chatcmpl-mock0000000000000001","model":"gpt-mock","object":"chat.completion.chunk","system_fingerprint":null}
        message {"choices":[{"delta":{},"finish_reason":"length","index":0,"logprobs":null}],"created":0,"id":"chatcmpl-mock0000000000000001","model":"gpt-mock","object":"chat.completion.chunk","system_fingerprint":null}
        message "[DONE]"
    "#]]
    .assert_eq(&render(&events));
}

/// The bytes on the wire, not only what a lenient decoder accepts.
#[tokio::test]
async fn frames_are_exact_on_the_wire() {
    let server = start(Config::default().answers(vec![Answer::text("ab")])).await;
    for wire in BOTH {
        let raw = send(&server, wire, &body(wire, "x", true))
            .await
            .text()
            .await
            .unwrap();
        assert!(raw.ends_with("\n\n"), "{raw}");
        for frame in raw.trim_end_matches("\n\n").split("\n\n") {
            let lines: Vec<&str> = frame.split('\n').collect();
            match wire {
                Wire::Anthropic => {
                    assert_eq!(lines.len(), 2, "{frame}");
                    let name = lines[0].strip_prefix("event: ").expect(frame);
                    let data: Value =
                        serde_json::from_str(lines[1].strip_prefix("data: ").expect(frame))
                            .unwrap();
                    assert_eq!(data["type"], name);
                }
                Wire::OpenAi => {
                    assert_eq!(lines.len(), 1, "{frame}");
                    assert!(lines[0].starts_with("data: "), "{frame}");
                }
            }
        }
        if wire == Wire::OpenAi {
            assert!(raw.ends_with("data: [DONE]\n\n"));
        }
    }
}

async fn check_whole(wire: Wire, user: &str, expect: Expect) {
    let server = start(Config::default()).await;
    let resp = send(&server, wire, &body(wire, user, false)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/json");
    assert!(resp.content_length().is_some());
    let mut v: Value = resp.json().await.unwrap();
    v.sort_all_objects();
    if v.get("created").is_some() {
        v["created"] = json!(0);
    }
    expect.assert_eq(&serde_json::to_string_pretty(&v).unwrap());
}

#[tokio::test]
async fn anthropic_whole_message() {
    check_whole(
        Wire::Anthropic,
        r#"[[mock thinking="hm" text="Checking." tool=lookup input={"q":1}]]"#,
        expect![[r#"
            {
              "content": [
                {
                  "signature": "bW9jay1sbG0tc2lnbmF0dXJl",
                  "thinking": "hm",
                  "type": "thinking"
                },
                {
                  "text": "Checking.",
                  "type": "text"
                },
                {
                  "id": "toolu_mock000000000001",
                  "input": {
                    "q": 1
                  },
                  "name": "lookup",
                  "type": "tool_use"
                }
              ],
              "id": "msg_mock0000000000000002",
              "model": "claude-mock",
              "role": "assistant",
              "stop_reason": "tool_use",
              "stop_sequence": null,
              "type": "message",
              "usage": {
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "input_tokens": 16,
                "output_tokens": 4
              }
            }"#]],
    )
    .await;
}

#[tokio::test]
async fn openai_whole_completion() {
    check_whole(
        Wire::OpenAi,
        r#"[[mock tool=lookup input={"q":1}]]"#,
        expect![[r#"
            {
              "choices": [
                {
                  "finish_reason": "tool_calls",
                  "index": 0,
                  "logprobs": null,
                  "message": {
                    "content": null,
                    "refusal": null,
                    "role": "assistant",
                    "tool_calls": [
                      {
                        "function": {
                          "arguments": "{\"q\":1}",
                          "name": "lookup"
                        },
                        "id": "call_mock000000000001",
                        "type": "function"
                      }
                    ]
                  }
                }
              ],
              "created": 0,
              "id": "chatcmpl-mock0000000000000002",
              "model": "gpt-mock",
              "object": "chat.completion",
              "system_fingerprint": null,
              "usage": {
                "completion_tokens": 1,
                "prompt_tokens": 8,
                "prompt_tokens_details": {
                  "cached_tokens": 0
                },
                "total_tokens": 9
              }
            }"#]],
    )
    .await;
    // With neither answers nor corpus, the mock says it is the mock.
    let server = start(Config::default()).await;
    let v: Value = send(&server, Wire::OpenAi, &body(Wire::OpenAi, "hi", false))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        v["choices"][0]["message"]["content"],
        mock_llm::DEFAULT_ANSWER
    );
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
}

// ---------------------------------------------------------------- chunking

async fn check_chunks(server: &MockServer, wire: Wire, text: &str, chunk: usize) {
    let user = format!("[[mock chunk={chunk} text={}]]", json!(text));
    let (events, err) = events(send(server, wire, &body(wire, &user, true)).await).await;
    assert_eq!(err, None);
    let pieces: Vec<String> = events
        .iter()
        .filter_map(|(_, d)| match wire {
            Wire::Anthropic => d["delta"]["text"].as_str(),
            Wire::OpenAi => d["choices"][0]["delta"]["content"]
                .as_str()
                .filter(|s| !s.is_empty()),
        })
        .map(str::to_string)
        .collect();
    assert_eq!(pieces.concat(), text, "{wire:?} chunk={chunk}");
    for (i, p) in pieces.iter().enumerate() {
        // Never split a character; only a single character may exceed the chunk size.
        assert!(
            p.len() <= chunk || p.chars().count() == 1,
            "{wire:?} chunk={chunk}: {p:?}"
        );
        // And each piece is as long as it can be: the next character would not have fitted.
        if let Some(next) = pieces.get(i + 1) {
            assert!(
                p.len() + next.chars().next().unwrap().len_utf8() > chunk,
                "{wire:?} chunk={chunk}: {p:?} {next:?}"
            );
        }
    }
}

#[tokio::test]
async fn chunking_never_splits_utf8() {
    let server = start(Config::default()).await;
    for wire in BOTH {
        for text in ["plain ascii text", "né — 日本語 😀👍🏽 ok", "😀😀😀"] {
            for chunk in [1, 2, 3, 4, 5, 7, 16, 1000] {
                check_chunks(&server, wire, text, chunk).await;
            }
        }
    }
}

#[tokio::test]
async fn pacing_spaces_deltas() {
    // 5 pieces with 40 ms between them: at least 160 ms; tokens_per_sec=50 over 12 bytes is
    // 3 pieces 20 ms apart.
    let server = start(Config::default()).await;
    for (directive, pieces, at_least) in [
        ("[[mock text=abcdefghij chunk=2 delay_ms=40]]", 5, 160),
        ("[[mock text=abcdefghijkl tokens_per_sec=50]]", 3, 40),
    ] {
        let started = Instant::now();
        let (events, _) = events(
            send(
                &server,
                Wire::Anthropic,
                &body(Wire::Anthropic, directive, true),
            )
            .await,
        )
        .await;
        let elapsed = started.elapsed();
        let deltas = events
            .iter()
            .filter(|(_, d)| d["delta"]["type"] == "text_delta")
            .count();
        assert_eq!(deltas, pieces, "{directive}");
        assert!(
            elapsed >= Duration::from_millis(at_least),
            "{directive}: {elapsed:?}"
        );
    }
}

#[tokio::test]
async fn staggered_streams_do_not_tick_in_step() {
    // Four streams asked for at once, 400 ms between deltas: staggered, their first deltas
    // come at offsets spread over the pause (at least 0.618 of it for any four requests);
    // in step, all at once.
    async fn first_delta_ms(server: &MockServer) -> Vec<f64> {
        let started = Instant::now();
        let firsts = (0..4).map(|_| async {
            let resp = send(server, Wire::Anthropic, &body(Wire::Anthropic, "go", true)).await;
            let mut events = sseer::EventStream::new(resp.bytes_stream());
            while let Some(Ok(ev)) = events.next().await {
                if &*ev.event == "content_block_delta" {
                    return started.elapsed().as_secs_f64() * 1000.0;
                }
            }
            panic!("no delta");
        });
        futures_util::future::join_all(firsts).await
    }
    let spread = |t: &[f64]| {
        t.iter().cloned().fold(f64::MIN, f64::max) - t.iter().cloned().fold(f64::MAX, f64::min)
    };
    let config = Config::default()
        .answers(vec![Answer::text("abcdefgh")])
        .chunk_bytes(4)
        .delay(Duration::from_millis(400));
    let staggered = first_delta_ms(&start(config.clone().stagger(true)).await).await;
    assert!(spread(&staggered) >= 150.0, "{staggered:?}");
    assert!(
        staggered.iter().all(|&t| t < 800.0),
        "within one pause: {staggered:?}"
    );
    let in_step = first_delta_ms(&start(config).await).await;
    assert!(spread(&in_step) < 150.0, "{in_step:?}");
}

// ---------------------------------------------------------------- faults

/// A status fault: the status, the error body's type, and `retry-after` for 429.
async fn check_status(
    server: &MockServer,
    wire: Wire,
    user: &str,
    status: u16,
    kind: &str,
    retry_after: Option<&str>,
) {
    for stream in [true, false] {
        let resp = send(server, wire, &body(wire, user, stream)).await;
        assert_eq!(resp.status().as_u16(), status, "{wire:?} {user}");
        assert_eq!(
            resp.headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap()),
            retry_after,
            "{wire:?} {user}"
        );
        let v: Value = resp.json().await.unwrap();
        match wire {
            Wire::Anthropic => {
                assert_eq!(v["type"], "error");
                assert_eq!(v["error"]["type"], kind, "{v}");
                assert!(v["error"]["message"].is_string());
            }
            Wire::OpenAi => {
                assert_eq!(v["error"]["type"], kind, "{v}");
                assert!(v["error"]["message"].is_string());
                assert!(
                    v["error"].get("param").is_some() && v["error"].get("code").is_some(),
                    "{v}"
                );
            }
        }
    }
}

#[tokio::test]
async fn status_faults_from_directives() {
    let server = start(Config::default().retry_after(3)).await;
    for (user, a_status, a_kind, o_status, o_kind, retry) in [
        (
            "[[mock fault=401]]",
            401,
            "authentication_error",
            401,
            "invalid_request_error",
            None,
        ),
        (
            "[[mock fault=429 retry_after=7]]",
            429,
            "rate_limit_error",
            429,
            "rate_limit_exceeded",
            Some("7"),
        ),
        (
            "[[mock fault=429]]",
            429,
            "rate_limit_error",
            429,
            "rate_limit_exceeded",
            Some("3"),
        ),
        (
            "[[mock fault=500]]",
            500,
            "api_error",
            500,
            "server_error",
            None,
        ),
        (
            "[[mock fault=529]]",
            529,
            "overloaded_error",
            503,
            "server_error",
            None,
        ),
    ] {
        check_status(&server, Wire::Anthropic, user, a_status, a_kind, retry).await;
        check_status(&server, Wire::OpenAi, user, o_status, o_kind, retry).await;
    }
    let v: Value = send(
        &server,
        Wire::OpenAi,
        &body(Wire::OpenAi, "[[mock fault=401]]", false),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(v["error"]["code"], "invalid_api_key");
}

#[tokio::test]
async fn rate_limit_times_then_success() {
    let server =
        start(Config::default().answers(vec![Answer::text("first"), Answer::text("second")])).await;
    for wire in BOTH {
        let user = format!("[[mock fault=429 times=2 retry_after=1]] {wire:?}");
        for _ in 0..2 {
            let resp = send(&server, wire, &body(wire, &user, true)).await;
            assert_eq!(resp.status(), 429);
            assert_eq!(resp.headers()["retry-after"], "1");
        }
        let (events, err) = events(send(&server, wire, &body(wire, &user, true)).await).await;
        assert_eq!(err, None);
        // Refused requests take no answer: the success gets the script's first one.
        assert_eq!(assemble(wire, &events).0, "first");
        // The counter is per directive text, whichever wire format carried it.
        server.reset();
    }
    // Another directive text has its own counter; reset clears them all.
    let other = body(Wire::Anthropic, "[[mock fault=429 times=1]]", false);
    assert_eq!(send(&server, Wire::Anthropic, &other).await.status(), 429);
    assert_eq!(send(&server, Wire::Anthropic, &other).await.status(), 200);
    server.reset();
    assert_eq!(send(&server, Wire::Anthropic, &other).await.status(), 429);
}

#[tokio::test]
async fn status_faults_from_flag_and_answers() {
    let server = start(Config::default().fault(Some(FaultKind::ServerError))).await;
    check_status(&server, Wire::Anthropic, "hi", 500, "api_error", None).await;
    let answers = Answer::parse_list(
        br#"[{"fault": 429}, "after the 429", {"fault": {"kind": "529"}}, "after the 529"]"#,
    )
    .unwrap();
    let server = start(Config::default().answers(answers)).await;
    for (status, text) in [
        (429, None),
        (200, Some("after the 429")),
        (529, None),
        (200, Some("after the 529")),
    ] {
        let resp = send(
            &server,
            Wire::Anthropic,
            &body(Wire::Anthropic, "hi", false),
        )
        .await;
        assert_eq!(resp.status().as_u16(), status);
        if let Some(t) = text {
            let v: Value = resp.json().await.unwrap();
            assert_eq!(v["content"][0]["text"], t);
        }
    }
}

/// A broken stream: what a client assembles before the break, whether the stream ended in
/// an error, and whether the terminating events came.
async fn check_broken(
    server: &MockServer,
    client: &reqwest::Client,
    wire: Wire,
    user: &str,
    want_text: &str,
    want_error: bool,
) -> Vec<(String, Value)> {
    let started = Instant::now();
    let (events, err) =
        events(send_with(client, server, wire, &body(wire, user, true)).await).await;
    assert_eq!(assemble(wire, &events).0, want_text, "{wire:?} {user}");
    assert_eq!(err.is_some(), want_error, "{wire:?} {user}: {err:?}");
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        !names.contains(&"message_stop") && !names.contains(&"message_delta"),
        "{names:?}"
    );
    assert!(!events.iter().any(|(_, d)| d == "[DONE]"
        || !d["choices"][0]["finish_reason"].is_null() && wire == Wire::OpenAi));
    assert!(started.elapsed() < Duration::from_secs(5));
    events
}

const LONG: &str =
    "The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs.";

#[tokio::test]
async fn cut_drops_the_connection() {
    let server = start(Config::default().answers(vec![Answer::text(LONG)])).await;
    let client = reqwest::Client::new();
    for wire in BOTH {
        check_broken(
            &server,
            &client,
            wire,
            "[[mock fault=cut after_bytes=40]]",
            &LONG[..40],
            true,
        )
        .await;
        check_broken(
            &server,
            &client,
            wire,
            "[[mock chunk=3 fault=cut after_bytes=10]]",
            &LONG[..10],
            true,
        )
        .await;
        check_broken(
            &server,
            &client,
            wire,
            "[[mock fault=cut after_bytes=0]]",
            "",
            true,
        )
        .await;
    }
    // A whole (non-streaming) answer is cut mid-JSON.
    let resp = send(
        &server,
        Wire::Anthropic,
        &body(Wire::Anthropic, "[[mock fault=cut after_bytes=20]]", false),
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert!(resp.bytes().await.is_err());
}

#[tokio::test]
async fn stall_keeps_the_connection_silent() {
    let server = start(Config::default().answers(vec![Answer::text(LONG)])).await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(600))
        .build()
        .unwrap();
    for wire in BOTH {
        let started = Instant::now();
        check_broken(
            &server,
            &client,
            wire,
            "[[mock fault=stall after_bytes=20]]",
            &LONG[..20],
            true,
        )
        .await;
        assert!(
            started.elapsed() >= Duration::from_millis(550),
            "the stall ended early"
        );
    }
}

#[tokio::test]
async fn overloaded_midstream_sends_an_error_event() {
    let server = start(Config::default().answers(vec![Answer::text(LONG)])).await;
    let client = reqwest::Client::new();
    let user = "[[mock fault=overloaded_midstream after_bytes=30]]";
    let events = check_broken(&server, &client, Wire::Anthropic, user, &LONG[..30], false).await;
    expect![[
        r#"error {"error":{"message":"Overloaded","type":"overloaded_error"},"type":"error"}"#
    ]]
    .assert_eq(&format!(
        "{} {}",
        events.last().unwrap().0,
        events.last().unwrap().1
    ));
    let events = check_broken(&server, &client, Wire::OpenAi, user, &LONG[..30], false).await;
    expect![[
        r#"{"error":{"code":null,"message":"Overloaded","param":null,"type":"server_error"}}"#
    ]]
    .assert_eq(&events.last().unwrap().1.to_string());
    assert_eq!(server.stats()["faults"]["overloaded_midstream"], 2);
}

/// Waits until `/mock/stats` says no body is open; returns how many clients left early.
async fn settle(server: &MockServer) -> u64 {
    for _ in 0..500 {
        let stats = server.stats();
        if stats["streams"]["open"] == 0 {
            return stats["streams"]["client_gone"].as_u64().unwrap();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("a stream stayed open: {}", server.stats());
}

#[tokio::test]
async fn a_client_leaving_is_seen() {
    let server = start(Config::default().answers(vec![Answer::text(LONG)])).await;
    for wire in BOTH {
        server.reset();
        // Complete, cut and mid-stream-error streams are ended by the server.
        for user in [
            "hi",
            "[[mock fault=cut]]",
            "[[mock fault=overloaded_midstream]]",
        ] {
            events(send(&server, wire, &body(wire, user, true)).await).await;
        }
        assert_eq!(settle(&server).await, 0, "{wire:?}");
        // A client that stops reading a slow stream, or leaves a stalled one, is noticed.
        for user in [
            "[[mock chunk=1 delay_ms=20]]",
            "[[mock fault=stall after_bytes=5]]",
        ] {
            server.reset();
            let resp = send(&server, wire, &body(wire, user, true)).await;
            let mut stream = resp.bytes_stream();
            stream.next().await.unwrap().unwrap();
            drop(stream);
            assert_eq!(
                settle(&server).await,
                1,
                "{wire:?} {user} {}",
                server.stats()
            );
        }
    }
}

#[tokio::test]
async fn shutdown_ends_stalled_streams() {
    let server = start(Config::default().fault(Some(FaultKind::Stall))).await;
    let resp = send(&server, Wire::Anthropic, &body(Wire::Anthropic, "hi", true)).await;
    let reading = tokio::spawn(events(resp));
    tokio::time::sleep(Duration::from_millis(100)).await;
    tokio::time::timeout(Duration::from_secs(5), server.shutdown())
        .await
        .expect("shutdown does not wait on the stall")
        .unwrap();
    let (_, err) = reading.await.unwrap();
    assert!(err.is_some());
}

#[tokio::test]
async fn shutdown_ends_paced_streams_at_once() {
    // 50 deltas a second (short pauses, which look at the signal when they end) and one a
    // second (long ones, raced against it): neither holds shutdown up.
    for rate in [50.0, 1.0] {
        let text = "word ".repeat(500);
        let server = start(
            Config::default()
                .answers(vec![Answer::text(text)])
                .tokens_per_sec(rate),
        )
        .await;
        let resp = send(&server, Wire::Anthropic, &body(Wire::Anthropic, "hi", true)).await;
        let reading = tokio::spawn(events(resp));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let began = std::time::Instant::now();
        tokio::time::timeout(Duration::from_secs(5), server.shutdown())
            .await
            .expect("shutdown does not wait for the answer to end")
            .unwrap();
        assert!(
            began.elapsed() < Duration::from_secs(2),
            "rate {rate}: {:?}",
            began.elapsed()
        );
        let (_, err) = reading.await.unwrap();
        assert!(err.is_some(), "rate {rate}: the stream was cut");
    }
    // Dropping the server closes and lets go of the signal at once: still seen.
    let server = start(
        Config::default()
            .answers(vec![Answer::text("word ".repeat(500))])
            .tokens_per_sec(50.0),
    )
    .await;
    let resp = send(&server, Wire::Anthropic, &body(Wire::Anthropic, "hi", true)).await;
    let reading = tokio::spawn(events(resp));
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(server);
    let (_, err) = tokio::time::timeout(Duration::from_secs(2), reading)
        .await
        .expect("a dropped server ends its paced streams")
        .unwrap();
    assert!(err.is_some());
}

// ---------------------------------------------------------------- auth and validation

#[tokio::test]
async fn authentication() {
    let open = start(Config::default()).await;
    let locked = start(Config::default().api_key(Some("sk-right".into()))).await;
    let client = reqwest::Client::new();
    for (server, wire, key, status) in [
        (&open, Wire::Anthropic, None, 401),
        (&open, Wire::Anthropic, Some(""), 401),
        (&open, Wire::Anthropic, Some("anything"), 200),
        (&open, Wire::OpenAi, None, 401),
        (&open, Wire::OpenAi, Some("anything"), 200),
        (&locked, Wire::Anthropic, Some("sk-wrong"), 401),
        (&locked, Wire::Anthropic, Some("sk-right"), 200),
        (&locked, Wire::OpenAi, Some("sk-wrong"), 401),
        (&locked, Wire::OpenAi, Some("sk-right"), 200),
    ] {
        let mut req = match wire {
            Wire::Anthropic => client.post(format!("{}/v1/messages", server.url())),
            Wire::OpenAi => client.post(format!("{}/v1/chat/completions", server.url())),
        };
        if let Some(k) = key {
            req = match wire {
                Wire::Anthropic => req.header("x-api-key", k),
                Wire::OpenAi => req.bearer_auth(k),
            };
        }
        let resp = req.json(&body(wire, "hi", false)).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "{wire:?} {key:?}");
        if status == 401 {
            let v: Value = resp.json().await.unwrap();
            let want = if wire == Wire::Anthropic {
                "authentication_error"
            } else {
                "invalid_request_error"
            };
            assert_eq!(v["error"]["type"], want);
        }
    }
}

async fn check_invalid(server: &MockServer, wire: Wire, body: Value, expect: Expect) {
    let resp = send(server, wire, &body).await;
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    expect.assert_eq(&sorted(v));
}

#[tokio::test]
async fn validation_errors() {
    let s = start(Config::default()).await;
    let a = Wire::Anthropic;
    let o = Wire::OpenAi;
    let user = json!([{"role": "user", "content": "hi"}]);
    check_invalid(&s, a, json!({"max_tokens": 5, "messages": user}), expect![[r#"{"error":{"message":"model: Field required","type":"invalid_request_error"},"type":"error"}"#]]).await;
    check_invalid(&s, a, json!({"model": "m", "messages": user}), expect![[r#"{"error":{"message":"max_tokens: Field required","type":"invalid_request_error"},"type":"error"}"#]]).await;
    check_invalid(&s, a, json!({"model": "m", "max_tokens": 0, "messages": user}), expect![[r#"{"error":{"message":"max_tokens: Input should be a valid positive integer","type":"invalid_request_error"},"type":"error"}"#]]).await;
    check_invalid(&s, a, json!({"model": "m", "max_tokens": 5}), expect![[r#"{"error":{"message":"messages: Field required","type":"invalid_request_error"},"type":"error"}"#]]).await;
    check_invalid(&s, a, json!({"model": "m", "max_tokens": 5, "messages": []}), expect![[r#"{"error":{"message":"messages: at least one message is required","type":"invalid_request_error"},"type":"error"}"#]]).await;
    check_invalid(&s, a, json!({"model": "m", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}), expect![[r#"{"error":{"message":"messages.0.role: Input should be 'user' or 'assistant'","type":"invalid_request_error"},"type":"error"}"#]]).await;
    check_invalid(&s, a, json!("not an object"), expect![[r#"{"error":{"message":"The request body is not valid JSON.","type":"invalid_request_error"},"type":"error"}"#]]).await;
    check_invalid(&s, a, body(a, "[[mock fualt=500]]", true), expect![[r#"{"error":{"message":"mock-llm directive: unknown [[mock key `fualt`","type":"invalid_request_error"},"type":"error"}"#]]).await;
    check_invalid(&s, o, json!({"messages": user}), expect![[r#"{"error":{"code":null,"message":"you must provide a model parameter","param":null,"type":"invalid_request_error"}}"#]]).await;
    check_invalid(&s, o, json!({"model": "m", "messages": []}), expect![[r#"{"error":{"code":null,"message":"Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.","param":null,"type":"invalid_request_error"}}"#]]).await;
    check_invalid(&s, o, json!({"model": "m"}), expect![[r#"{"error":{"code":null,"message":"Missing required parameter: 'messages'.","param":null,"type":"invalid_request_error"}}"#]]).await;
}

#[tokio::test]
async fn models_lists_the_configured_names() {
    let server = start(Config::default().models(vec!["a".into(), "b".into()])).await;
    let client = reqwest::Client::new();
    let url = format!("{}/v1/models", server.url());
    let v: Value = client
        .get(&url)
        .bearer_auth("k")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    expect![[r#"{"data":[{"created":0,"id":"a","object":"model","owned_by":"mock-llm"},{"created":0,"id":"b","object":"model","owned_by":"mock-llm"}],"object":"list"}"#]].assert_eq(&sorted(v));
    let v: Value = client
        .get(&url)
        .header("x-api-key", "k")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["data"][1]["id"], "b");
    assert_eq!(v["data"][0]["type"], "model");
    assert_eq!(client.get(&url).send().await.unwrap().status(), 401);
}

// ---------------------------------------------------------------- what it plays

#[tokio::test]
async fn echo_returns_the_context() {
    let messages = json!([
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": [{"type": "text", "text": "answer"}]},
        {"role": "user", "content": [{"type": "text", "text": "second [[mock echo]]"}]},
    ]);
    let server = start(Config::default()).await;
    let b = json!({"model": "m", "max_tokens": 9, "system": "be brief", "messages": messages, "stream": true});
    let (events, _) = events(send(&server, Wire::Anthropic, &b).await).await;
    let echoed: Value = serde_json::from_str(&assemble(Wire::Anthropic, &events).0).unwrap();
    let mut want = vec![json!({"role": "system", "content": "be brief"})];
    want.extend(messages.as_array().unwrap().iter().cloned());
    assert_eq!(echoed, Value::Array(want));

    // --echo: every request, OpenAI too.
    let server = start(Config::default().echo(true)).await;
    let b = json!({"model": "m", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]});
    let v: Value = send(&server, Wire::OpenAi, &b).await.json().await.unwrap();
    let echoed: Value =
        serde_json::from_str(v["choices"][0]["message"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(echoed, b["messages"]);
}

#[tokio::test]
async fn answers_file_cycles() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("answers.json");
    std::fs::write(&path, r#"["one", {"text": "two", "tool_calls": [{"name": "f", "input": {"x": 1}}], "usage": {"input": 5, "output": 6}}]"#).unwrap();
    let server = start(Config::default().answers(Answer::load_file(&path).unwrap())).await;
    let mut got = Vec::new();
    for _ in 0..3 {
        let v: Value = send(
            &server,
            Wire::Anthropic,
            &body(Wire::Anthropic, "hi", false),
        )
        .await
        .json()
        .await
        .unwrap();
        got.push(format!(
            "{} {} {}",
            v["content"][0]["text"], v["stop_reason"], v["usage"]
        ));
    }
    expect![[r#"
        "one" "end_turn" {"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"input_tokens":1,"output_tokens":1}
        "two" "tool_use" {"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"input_tokens":5,"output_tokens":6}
        "one" "end_turn" {"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"input_tokens":1,"output_tokens":1}"#]]
    .assert_eq(&got.join("\n"));
    assert_eq!(Answer::text("x").tool_calls, Vec::<ToolCall>::new());
    assert!(Answer::load_file(&dir.path().join("missing.json")).is_err());
}

/// Writes a small corpus of the project's own generator (and its index) into the target
/// directory: the mock reads a corpus from files, as a benchmark gives it.
fn small_corpus() -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("mock-llm-corpus");
    std::fs::create_dir_all(&dir).unwrap();
    let (hml, index) = (dir.join("small.hml"), dir.join("small.index.json"));
    let corpus = hero_shared::corpus::generate(7, 60_000);
    std::fs::write(&hml, &corpus.text).unwrap();
    std::fs::write(&index, serde_json::to_vec(&corpus.index()).unwrap()).unwrap();
    (hml, index)
}

#[tokio::test]
async fn corpus_replays_in_index_order() {
    let (hml, index) = small_corpus();
    let bytes = std::fs::read(&hml).unwrap();
    let ranges: Vec<(usize, usize)> =
        serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
    assert!(ranges.len() >= 3);
    let server = start(
        Config::default()
            .corpus(Corpus::load(&hml, &index).unwrap())
            .chunk_bytes(64),
    )
    .await;
    for i in 0..ranges.len() + 1 {
        let (s, e) = ranges[i % ranges.len()];
        let want = std::str::from_utf8(&bytes[s..e]).unwrap();
        let wire = BOTH[i % 2];
        let (events, err) = events(send(&server, wire, &body(wire, "go", true)).await).await;
        assert_eq!(err, None);
        assert!(assemble(wire, &events).0 == want, "response {i} differs");
    }
}

// ---------------------------------------------------------------- introspection

#[tokio::test]
async fn requests_and_stats() {
    let server = start(Config::default()).await;
    let client = reqwest::Client::new();
    send(
        &server,
        Wire::Anthropic,
        &body(Wire::Anthropic, "hello", false),
    )
    .await;
    send(
        &server,
        Wire::OpenAi,
        &body(Wire::OpenAi, "[[mock fault=500]]", false),
    )
    .await;
    client
        .post(format!("{}/v1/messages", server.url()))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let log: Vec<Value> = client
        .get(format!("{}/mock/requests", server.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(log.len(), 3);
    assert_eq!(log[0]["path"], "/v1/messages");
    assert_eq!(log[0]["headers"]["x-api-key"], "<redacted>");
    assert_eq!(log[0]["headers"]["anthropic-version"], "2023-06-01");
    assert_eq!(log[0]["auth"], json!({"present": true, "matched": true}));
    assert_eq!(log[0]["body"]["messages"][0]["content"], "hello");
    assert_eq!(log[1]["headers"]["authorization"], "<redacted>");
    assert_eq!(log[2]["auth"], json!({"present": false, "matched": false}));
    assert!(
        !serde_json::to_string(&log).unwrap().contains("sk-test"),
        "a key leaked into the log"
    );
    let mut stats: Value = client
        .get(format!("{}/mock/stats", server.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // Three clients at least; whether one of them reused its connection is up to its pool.
    let connections = stats.as_object_mut().unwrap().remove("connections_total");
    assert!(
        connections.and_then(|c| c.as_u64()).is_some_and(|c| c >= 3),
        "{stats}"
    );
    expect![[r#"{"embedded_inputs":0,"faults":{"500":1},"faults_served":1,"per_path":{"/v1/chat/completions":1,"/v1/messages":2},"requests_total":3,"streams":{"client_gone":0,"open":0,"started":0}}"#]]
        .assert_eq(&sorted(stats));
    let reset = client
        .post(format!("{}/mock/reset", server.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(reset.status(), 204);
    assert_eq!(server.requests().len(), 0);
    assert_eq!(server.stats()["requests_total"], 0);

    // Only the last 100 are kept.
    for i in 0..105 {
        send(
            &server,
            Wire::OpenAi,
            &body(Wire::OpenAi, &format!("n{i}"), false),
        )
        .await;
    }
    let log = server.requests();
    assert_eq!(log.len(), 100);
    assert_eq!(log[0]["body"]["messages"][0]["content"], "n5");
    assert_eq!(server.stats()["requests_total"], 105);
}

// ---------------------------------------------------------------- the binary

#[tokio::test]
async fn binary_prints_its_address_and_serves() {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().unwrap();
    let answers = dir.path().join("a.json");
    std::fs::write(&answers, r#"["from the binary"]"#).unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mock-llm"))
        .arg("--answers")
        .arg(&answers)
        .args(["--chunk-bytes", "4", "--api-key", "sk-bin"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let url = line.strip_prefix("mock-llm listening on ").expect(&line);
    assert!(!url.ends_with(":0"), "{line}");
    let v: Value = reqwest::Client::new()
        .post(format!("{url}/v1/messages"))
        .header("x-api-key", "sk-bin")
        .json(&body(Wire::Anthropic, "hi", false))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["content"][0]["text"], "from the binary");
    child.kill().await.unwrap();

    let help = std::process::Command::new(env!("CARGO_BIN_EXE_mock-llm"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    for flag in [
        "--addr",
        "--answers",
        "--corpus",
        "--index",
        "--echo",
        "--chunk-bytes",
        "--delay-ms",
        "--tokens-per-sec",
        "--usage-input",
        "--usage-output",
        "--fault",
        "--retry-after",
        "--cut-after-bytes",
        "--api-key",
        "--model",
        "[[mock fault=429 times=1",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
}

/// `POST /v1/embeddings`: OpenAI's shape, one unit vector per input of the configured
/// dimensions, deterministic, synonyms pointing the same way; a directive's fault served;
/// a wrong key refused; the inputs counted in the stats.
#[tokio::test]
async fn embeddings() {
    let server = start(
        Config::default()
            .embedding_dimensions(32)
            .api_key(Some("sk-test".into())),
    )
    .await;
    let client = reqwest::Client::new();
    let post = |body: Value, key: &'static str| {
        client
            .post(format!("{}/v1/embeddings", server.url()))
            .bearer_auth(key)
            .json(&body)
            .send()
    };
    let resp = post(
        json!({"model": "embed-mock", "input": ["deploy the app", "release the app", "a red car"]}),
        "sk-test",
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["object"], "list");
    assert_eq!(body["model"], "embed-mock");
    let vectors: Vec<Vec<f64>> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, d)| {
            assert_eq!(
                (d["object"].as_str(), d["index"].as_u64()),
                (Some("embedding"), Some(i as u64))
            );
            serde_json::from_value(d["embedding"].clone()).unwrap()
        })
        .collect();
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    assert!(
        vectors
            .iter()
            .all(|v| v.len() == 32 && (dot(v, v) - 1.0).abs() < 1e-5)
    );
    assert!(
        (dot(&vectors[0], &vectors[1]) - 1.0).abs() < 1e-5,
        "synonyms"
    );
    assert!(dot(&vectors[0], &vectors[2]) < 0.9);
    let again: Value = post(json!({"model": "m", "input": "deploy the app"}), "sk-test")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_value::<Vec<f64>>(again["data"][0]["embedding"].clone()).unwrap(),
        vectors[0]
    );
    let fault = post(
        json!({"model": "m", "input": ["ok", "[[mock fault=500]]"]}),
        "sk-test",
    )
    .await
    .unwrap();
    assert_eq!(fault.status(), 500);
    assert_eq!(
        post(json!({"model": "m", "input": "x"}), "wrong")
            .await
            .unwrap()
            .status(),
        401
    );
    assert_eq!(
        post(json!({"model": "m", "input": 7}), "sk-test")
            .await
            .unwrap()
            .status(),
        400
    );
    assert_eq!(
        post(json!({"input": "x"}), "sk-test")
            .await
            .unwrap()
            .status(),
        400
    );
    assert_eq!(server.stats()["embedded_inputs"], 4);
}

/// Images as each API takes them pass; a block that no API would take is a 400, as there.
#[tokio::test]
async fn image_blocks_are_checked_as_the_apis_check_them() {
    let server = start(Config::default()).await;
    let png = "iVBORw0KGgo=";
    let anthropic = |source: Value| {
        json!({"model": "claude-mock", "max_tokens": 16, "messages": [{"role": "user", "content": [
            {"type": "image", "source": source}, {"type": "text", "text": "what is this?"}
        ]}]})
    };
    let openai = |url: &str| {
        json!({"model": "gpt-mock", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": url}}
        ]}]})
    };
    let good = anthropic(json!({"type": "base64", "media_type": "image/png", "data": png}));
    assert_eq!(send(&server, Wire::Anthropic, &good).await.status(), 200);
    for bad in [
        json!({"type": "base64", "media_type": "image/tiff", "data": png}),
        json!({"type": "base64", "media_type": "image/png", "data": "not base64!"}),
        json!({"type": "url", "media_type": "image/png", "data": png}),
    ] {
        let resp = send(&server, Wire::Anthropic, &anthropic(bad.clone())).await;
        assert_eq!(resp.status(), 400, "{bad}");
    }
    let good = openai(&format!("data:image/png;base64,{png}"));
    assert_eq!(send(&server, Wire::OpenAi, &good).await.status(), 200);
    let resp = send(
        &server,
        Wire::OpenAi,
        &openai("data:text/plain;base64,aGk="),
    )
    .await;
    assert_eq!(resp.status(), 400);
}
