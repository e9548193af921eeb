//! Per-request instructions written into the last user message: `[[mock fault=429 times=1]]`.
//!
//! A directive is `[[mock` followed by space-separated items and `]]`. An item is a flag
//! (`echo`) or `key=value`; a value is a bare word (`429`, `max_tokens`) or JSON starting with
//! `"`, `{` or `[` (`text="a \"quoted\" line\n"`, `input={"city": "Paris"}`). Several
//! directives in one message combine, later items winning. An unknown key is an error, so a
//! typo in a test fails loudly instead of silently playing the default.

use serde_json::Value;

use crate::script::{FaultKind, FaultSpec, StopReason, ToolCall};

/// What one request's directives ask for.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Directive {
    /// The directives' source text: requests carrying the same text share a `times` counter.
    pub key: String,
    pub fault: Option<FaultSpec>,
    /// Serve the fault to the first `times` requests with this directive only.
    pub times: Option<u64>,
    pub echo: bool,
    /// Answer a streaming request with the whole message as one JSON body, as some
    /// compatible proxies do.
    pub whole: bool,
    pub chunk: Option<usize>,
    pub delay_ms: Option<u64>,
    pub tokens_per_sec: Option<f64>,
    pub text: Option<String>,
    pub thinking: Option<String>,
    pub tools: Vec<ToolCall>,
    pub stop: Option<StopReason>,
    pub usage_input: Option<u64>,
    pub usage_output: Option<u64>,
    /// Tokens read from and written to the prompt cache.
    pub usage_cache_read: Option<u64>,
    pub usage_cache_write: Option<u64>,
    /// The answer once the model has replied to the directive's message (a follow-up after
    /// tool results): `then="text"`, or `then_echo`.
    pub then: Option<String>,
    pub then_echo: bool,
    /// Apply the directive again on every follow-up (a model that calls tools forever).
    pub repeat: bool,
    /// How a later memory flush of Hero's is played ([`crate::flush`]).
    pub flush: Option<String>,
}

impl Directive {
    /// The directive for a request that comes `rounds` replies after the directive's
    /// message: itself with `repeat`, its `then` answer (keeping the pacing), or none.
    pub fn later(self, rounds: usize) -> Directive {
        if rounds == 0 || self.repeat {
            return self;
        }
        if self.then.is_none() && !self.then_echo {
            return Directive::default();
        }
        Directive {
            key: self.key,
            text: self.then,
            echo: self.then_echo,
            chunk: self.chunk,
            delay_ms: self.delay_ms,
            tokens_per_sec: self.tokens_per_sec,
            ..Directive::default()
        }
    }

    /// Whether the directive writes the answer itself rather than taking the script's next.
    pub fn has_answer(&self) -> bool {
        self.text.is_some() || self.thinking.is_some() || !self.tools.is_empty()
    }
}

const OPEN: &str = "[[mock";

/// Finds and reads every directive in `text`; `Ok(None)` when there is none.
pub(crate) fn parse(text: &str) -> Result<Option<Directive>, String> {
    let mut d = Directive::default();
    let mut found = false;
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        let after = &rest[at + OPEN.len()..];
        // `[[mockery]]` is not a directive.
        if !(after.starts_with(char::is_whitespace) || after.starts_with("]]")) {
            rest = after;
            continue;
        }
        let len = parse_items(after, &mut d)?;
        if !d.key.is_empty() {
            d.key.push(' ');
        }
        d.key.push_str(&rest[at..at + OPEN.len() + len]);
        rest = &after[len..];
        found = true;
    }
    if d.fault.is_none() && d.times.is_some() {
        return Err("times= needs a fault=".into());
    }
    Ok(found.then_some(d))
}

/// A value as written: a bare word or a JSON value.
enum Raw<'a> {
    Bare(&'a str),
    Json(Value),
}

impl Raw<'_> {
    fn string(self, key: &str) -> Result<String, String> {
        match self {
            Raw::Bare(s) => Ok(s.to_string()),
            Raw::Json(Value::String(s)) => Ok(s),
            Raw::Json(_) => Err(format!("{key}= takes a word or a \"string\"")),
        }
    }

    fn number<T: std::str::FromStr>(self, key: &str) -> Result<T, String> {
        let s = match self {
            Raw::Bare(s) => s.to_string(),
            Raw::Json(Value::Number(n)) => n.to_string(),
            Raw::Json(Value::String(s)) => s,
            Raw::Json(_) => String::new(),
        };
        s.parse()
            .map_err(|_| format!("{key}= takes a number, not `{s}`"))
    }
}

/// Reads items up to and including `]]`; returns the bytes consumed.
fn parse_items(s: &str, d: &mut Directive) -> Result<usize, String> {
    let mut i = 0;
    loop {
        i += s[i..].len() - s[i..].trim_start().len();
        if s[i..].starts_with("]]") {
            return Ok(i + 2);
        }
        if i >= s.len() {
            return Err("a [[mock directive is not closed with ]]".into());
        }
        let key_len = s[i..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(s.len() - i);
        if key_len == 0 {
            return Err(format!(
                "unexpected `{}` in a [[mock directive",
                s[i..].chars().next().unwrap_or(' ')
            ));
        }
        let key = &s[i..i + key_len];
        i += key_len;
        let value = if s[i..].starts_with('=') {
            i += 1;
            let (raw, len) = value(&s[i..])?;
            i += len;
            Some(raw)
        } else {
            None
        };
        apply(d, key, value)?;
    }
}

fn value(s: &str) -> Result<(Raw<'_>, usize), String> {
    if s.starts_with(['"', '{', '[']) {
        let mut it = serde_json::Deserializer::from_str(s).into_iter::<Value>();
        let v = it
            .next()
            .ok_or("a value is missing")?
            .map_err(|e| format!("bad JSON value: {e}"))?;
        return Ok((Raw::Json(v), it.byte_offset()));
    }
    let end = s.find(|c: char| c.is_whitespace()).unwrap_or(s.len());
    let end = s[..end].find("]]").unwrap_or(end);
    Ok((Raw::Bare(&s[..end]), end))
}

fn apply(d: &mut Directive, key: &str, value: Option<Raw<'_>>) -> Result<(), String> {
    let Some(v) = value else {
        return match key {
            "echo" => {
                d.echo = true;
                Ok(())
            }
            "whole" => {
                d.whole = true;
                Ok(())
            }
            "then_echo" => {
                d.then_echo = true;
                Ok(())
            }
            "repeat" => {
                d.repeat = true;
                Ok(())
            }
            _ => Err(format!("`{key}` needs a value (`{key}=…`)")),
        };
    };
    match key {
        "fault" => {
            let name = v.string(key)?;
            let kind = FaultKind::parse(&name).ok_or_else(|| {
                format!("fault={name} is not one of {}", FaultKind::NAMES.join(", "))
            })?;
            let old = d.fault.unwrap_or(FaultSpec::new(kind));
            d.fault = Some(FaultSpec { kind, ..old });
        }
        "times" => d.times = Some(v.number(key)?),
        "retry_after" => fault_mut(d, key)?.retry_after = Some(v.number(key)?),
        "after_bytes" => fault_mut(d, key)?.after_bytes = Some(v.number(key)?),
        "echo" => d.echo = v.string(key)? != "false",
        "whole" => d.whole = v.string(key)? != "false",
        "chunk" | "chunk_bytes" => {
            let n: usize = v.number(key)?;
            if n == 0 {
                return Err("chunk= must be at least 1".into());
            }
            d.chunk = Some(n);
        }
        "delay_ms" => d.delay_ms = Some(v.number(key)?),
        "tokens_per_sec" => d.tokens_per_sec = Some(v.number(key)?),
        "text" => d.text = Some(v.string(key)?),
        "thinking" => d.thinking = Some(v.string(key)?),
        "tool" => d.tools.push(ToolCall {
            name: v.string(key)?,
            input: Value::Object(Default::default()),
        }),
        "input" => {
            let input = match v {
                Raw::Json(j) => j,
                Raw::Bare(s) => return Err(format!("input= takes a JSON value, not `{s}`")),
            };
            d.tools
                .last_mut()
                .ok_or("input= must follow a tool=")?
                .input = input;
        }
        "stop" => {
            let s = v.string(key)?;
            d.stop = Some(
                StopReason::parse(&s)
                    .ok_or_else(|| format!("stop={s} is not end_turn, tool_use or max_tokens"))?,
            );
        }
        "usage_input" => d.usage_input = Some(v.number(key)?),
        "usage_output" => d.usage_output = Some(v.number(key)?),
        "usage_cache_read" => d.usage_cache_read = Some(v.number(key)?),
        "usage_cache_write" => d.usage_cache_write = Some(v.number(key)?),
        "then" => d.then = Some(v.string(key)?),
        "flush" => {
            let play = v.string(key)?;
            if !crate::flush::PLAYS.contains(&play.as_str()) {
                return Err(format!(
                    "flush={play} is not one of {}",
                    crate::flush::PLAYS.join(", ")
                ));
            }
            d.flush = Some(play);
        }
        _ => return Err(format!("unknown [[mock key `{key}`")),
    }
    Ok(())
}

fn fault_mut<'d>(d: &'d mut Directive, key: &str) -> Result<&'d mut FaultSpec, String> {
    d.fault
        .as_mut()
        .ok_or_else(|| format!("{key}= must follow a fault="))
}

#[cfg(test)]
mod tests {
    use expect_test::{Expect, expect};

    fn check(text: &str, expect: Expect) {
        let got = match super::parse(text) {
            Ok(Some(d)) => format!("{d:?}"),
            Ok(None) => "none".to_string(),
            Err(e) => format!("error: {e}"),
        };
        expect.assert_eq(&got);
    }

    #[test]
    fn directives() {
        check("hello [[mockery]] there", expect![[r#"none"#]]);
        check(
            "go [[mock fault=429 times=1 retry_after=2]] now",
            expect![[
                r#"Directive { key: "[[mock fault=429 times=1 retry_after=2]]", fault: Some(FaultSpec { kind: RateLimited, retry_after: Some(2), after_bytes: None }), times: Some(1), echo: false, whole: false, chunk: None, delay_ms: None, tokens_per_sec: None, text: None, thinking: None, tools: [], stop: None, usage_input: None, usage_output: None, usage_cache_read: None, usage_cache_write: None, then: None, then_echo: false, repeat: false, flush: None }"#
            ]],
        );
        check(
            "[[mock chunk=3 fault=cut after_bytes=10]][[mock echo]]",
            expect![[
                r#"Directive { key: "[[mock chunk=3 fault=cut after_bytes=10]] [[mock echo]]", fault: Some(FaultSpec { kind: Cut, retry_after: None, after_bytes: Some(10) }), times: None, echo: true, whole: false, chunk: Some(3), delay_ms: None, tokens_per_sec: None, text: None, thinking: None, tools: [], stop: None, usage_input: None, usage_output: None, usage_cache_read: None, usage_cache_write: None, then: None, then_echo: false, repeat: false, flush: None }"#
            ]],
        );
        check(
            r#"[[mock text="say \"hi\" ]] <b>\n" thinking=hmm tool=get_weather input={"city": "Paris"} stop=max_tokens]]"#,
            expect![[
                r#"Directive { key: "[[mock text=\"say \\\"hi\\\" ]] <b>\\n\" thinking=hmm tool=get_weather input={\"city\": \"Paris\"} stop=max_tokens]]", fault: None, times: None, echo: false, whole: false, chunk: None, delay_ms: None, tokens_per_sec: None, text: Some("say \"hi\" ]] <b>\n"), thinking: Some("hmm"), tools: [ToolCall { name: "get_weather", input: Object {"city": String("Paris")} }], stop: Some(MaxTokens), usage_input: None, usage_output: None, usage_cache_read: None, usage_cache_write: None, then: None, then_echo: false, repeat: false, flush: None }"#
            ]],
        );
        check(
            "[[mock text=plain]]",
            expect![[
                r#"Directive { key: "[[mock text=plain]]", fault: None, times: None, echo: false, whole: false, chunk: None, delay_ms: None, tokens_per_sec: None, text: Some("plain"), thinking: None, tools: [], stop: None, usage_input: None, usage_output: None, usage_cache_read: None, usage_cache_write: None, then: None, then_echo: false, repeat: false, flush: None }"#
            ]],
        );
        check(
            "[[mock fualt=429]]",
            expect![[r#"error: unknown [[mock key `fualt`"#]],
        );
        check(
            "[[mock fault=418]]",
            expect![[
                r#"error: fault=418 is not one of 401, 429, 500, 529, cut, stall, overloaded_midstream"#
            ]],
        );
        check(
            "[[mock fault=500",
            expect![[r#"error: a [[mock directive is not closed with ]]"#]],
        );
        check(
            "[[mock after_bytes=3 fault=cut]]",
            expect![[r#"error: after_bytes= must follow a fault="#]],
        );
        check(
            "[[mock chunk=0]]",
            expect![[r#"error: chunk= must be at least 1"#]],
        );
        check(
            "[[mock times=2]]",
            expect![[r#"error: times= needs a fault="#]],
        );
    }
}
