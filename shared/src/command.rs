//! Commands (reference 000 "Command Abilities", 003): a message that begins with `/` and a
//! command's name asks Hero, not the agent. Each command is a builtin function
//! (`command_session`, …); [`parse`] reads the typed form into that function's arguments, so
//! a typed command and one the agent calls (`@system(command_session, {…})`) are the same
//! call. The browser's `/` menu lists [`COMMANDS`].
//!
//! The typed form: the command, then words; `--flag value` sets a named argument; a word in
//! double quotes may hold spaces; the lines after the first are the text (a process's, for
//! `/ability create` and `/ability edit`; `/skill NAME` takes the rest of its line too).

use serde_json::{Map, Value, json};

/// One command: its typed name, its function, its usage and a line of help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Command {
    pub name: &'static str,
    pub function: &'static str,
    pub usage: &'static str,
    pub help: &'static str,
    /// Asks every time the agent calls it, with no "Always allow" (003 "Ask Always").
    pub ask_always: bool,
}

/// Every command, in the order the `/` menu lists them.
pub const COMMANDS: &[Command] = &[
    Command {
        name: "ability",
        function: "command_ability",
        usage: "/ability list | show NAME | create NAME [--description TEXT] | edit NAME [--description TEXT] | delete NAME, a process's text on the lines after",
        help: "List, show, create, edit or delete your processes.",
        ask_always: true,
    },
    Command {
        name: "session",
        function: "command_session",
        usage: "/session new NAME [--agent AGENT] | rename NAME | archive [ID] | restore [ID]",
        help: "Start, rename, archive or restore a session.",
        ask_always: true,
    },
    Command {
        name: "agent",
        function: "command_agent",
        usage: "/agent create NAME --provider PROVIDER --model MODEL [--url URL] | configure NAME [--model MODEL] [--provider PROVIDER] [--url URL] [--rename NEW]",
        help: "Create or configure an agent (keys are set on the Agents page).",
        ask_always: true,
    },
    Command {
        name: "skill",
        function: "command_skill",
        usage: "/skill NAME TEXT",
        help: "Save a text as a process of yours, by name.",
        ask_always: true,
    },
    Command {
        name: "start",
        function: "command_start",
        usage: "/start",
        help: "Send the startup processes to the agent again.",
        ask_always: false,
    },
    Command {
        name: "compact",
        function: "command_compact",
        usage: "/compact",
        help: "Summarise the conversation now.",
        ask_always: false,
    },
    Command {
        name: "stream",
        function: "command_stream",
        usage: "/stream on | off",
        help: "Stream replies as they come, or send them whole.",
        ask_always: false,
    },
    Command {
        name: "update_usage",
        function: "command_update_usage",
        usage: "/update_usage COST",
        help: "Match this agent's spend to your bill, in dollars.",
        ask_always: true,
    },
];

/// The command whose function is `function`.
pub fn by_function(function: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.function == function)
}

/// What the `/` menu of the composer lists for what is typed: `None` (the menu is closed)
/// unless the text is `/` and the start of a command's name, with nothing after it; else the
/// commands whose names begin so, in menu order.
pub fn menu(typed: &str) -> Option<Vec<&'static Command>> {
    let start = typed.strip_prefix('/')?;
    if start.contains(char::is_whitespace) {
        return None;
    }
    let found: Vec<&'static Command> = COMMANDS
        .iter()
        .filter(|c| c.name.starts_with(start))
        .collect();
    (!found.is_empty()).then_some(found)
}

/// What a message that is a command asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// The command's function and its arguments.
    Call {
        command: &'static Command,
        args: Value,
    },
    /// Arguments the command does not take: why, and its usage (nothing is run).
    Bad {
        command: &'static Command,
        why: String,
    },
}

/// What refuses a command carrying something like a key: it is never stored.
pub const KEY_REFUSED: &str =
    "this looks like an API key; set keys on the Agents page, never in a command";

/// Whether text holds something like an API key (`api_key=`, `sk-…`, `--key`): a command
/// with one is refused before it is stored.
pub fn looks_like_key(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    let named = [
        "api_key", "api-key", "apikey", "--key", "key=", "secret=", "token=",
    ]
    .iter()
    .any(|k| lower.contains(k));
    // The shapes providers' keys take: a known prefix, then a long run with digits in it
    // (an agent named `sk-research-team` is none).
    let shaped = |w: &str| {
        ["sk-", "sk_", "gsk_", "xai-", "aiza"].iter().any(|p| {
            w.to_ascii_lowercase().starts_with(p)
                && w.len() >= 20
                && w.bytes().any(|b| b.is_ascii_digit())
        })
    };
    named
        || text
            .split(|c: char| c.is_whitespace() || c == '"' || c == '=' || c == ':')
            .any(shaped)
}

/// Reads a message as a command: `None` when it is not one (it does not begin with `/` and
/// a command's name, followed by a space, a line's end or its end).
pub fn parse(text: &str) -> Option<Parsed> {
    let text = text.trim_start();
    let rest = text.strip_prefix('/')?;
    // The text after the first line keeps its first line's indentation.
    let (first, body) = match rest.split_once('\n') {
        Some((first, body)) => (
            first.trim_end_matches('\r'),
            body.trim_start_matches(['\r', '\n']).trim_end(),
        ),
        None => (rest, ""),
    };
    let name_end = first.find(char::is_whitespace).unwrap_or(first.len());
    let command = COMMANDS.iter().find(|c| c.name == &first[..name_end])?;
    let line = first[name_end..].trim();
    Some(match read(command, line, body) {
        Ok(args) => Parsed::Call { command, args },
        Err(why) => Parsed::Bad { command, why },
    })
}

/// The words of a line and its `--flag value` pairs.
struct Words {
    words: Vec<String>,
    flags: Map<String, Value>,
}

fn split(line: &str) -> Result<Words, String> {
    let mut tokens: Vec<String> = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut token = String::new();
        if c == '"' {
            chars.next();
            let mut closed = false;
            for c in chars.by_ref() {
                if c == '"' {
                    closed = true;
                    break;
                }
                token.push(c);
            }
            if !closed {
                return Err("a quote is not closed".into());
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                token.push(c);
                chars.next();
            }
        }
        tokens.push(token);
    }
    let mut words = Vec::new();
    let mut flags = Map::new();
    let mut it = tokens.into_iter();
    while let Some(t) = it.next() {
        match t.strip_prefix("--") {
            Some(flag) if !flag.is_empty() => {
                let value = it.next().ok_or_else(|| format!("--{flag} needs a value"))?;
                flags.insert(flag.to_owned(), Value::String(value));
            }
            _ => words.push(t),
        }
    }
    Ok(Words { words, flags })
}

/// The flags a command takes, by their names in its arguments.
fn take_flags(
    w: &mut Words,
    allowed: &[(&str, &str)],
    args: &mut Map<String, Value>,
) -> Result<(), String> {
    for (flag, value) in std::mem::take(&mut w.flags) {
        let Some((_, key)) = allowed.iter().find(|(f, _)| *f == flag) else {
            return Err(format!("--{flag} is not an option of this command"));
        };
        args.insert((*key).to_owned(), value);
    }
    Ok(())
}

fn read(command: &Command, line: &str, body: &str) -> Result<Value, String> {
    if command.name == "skill" {
        return skill(line, body);
    }
    let mut w = split(line)?;
    let mut args = Map::new();
    let action = |w: &Words, allowed: &[&str]| -> Result<String, String> {
        let a = w
            .words
            .first()
            .ok_or_else(|| format!("say what to do: {}", allowed.join(", ")))?;
        if allowed.contains(&a.as_str()) {
            Ok(a.clone())
        } else {
            Err(format!("{a:?} is not one of {}", allowed.join(", ")))
        }
    };
    // The words after the action, as one name.
    let rest = |w: &Words| w.words[1..].join(" ");
    match command.name {
        "ability" => {
            let a = action(&w, &["list", "show", "create", "edit", "delete"])?;
            take_flags(&mut w, &[("description", "description")], &mut args)?;
            if a != "list" {
                let name = one_word(&w, "the process's name")?;
                args.insert("name".into(), json!(name));
            } else if w.words.len() > 1 {
                return Err("list takes no name".into());
            }
            match a.as_str() {
                "create" if body.is_empty() => {
                    return Err("write the process's text on the lines after the command".into());
                }
                "create" | "edit" if !body.is_empty() => {
                    args.insert("content".into(), json!(body));
                }
                _ if !body.is_empty() => {
                    return Err(format!("{a} takes no text after the command"));
                }
                _ => {}
            }
            args.insert("action".into(), json!(a));
        }
        "session" => {
            let a = action(&w, &["new", "rename", "archive", "restore"])?;
            match a.as_str() {
                "new" | "rename" => {
                    if a == "new" {
                        take_flags(&mut w, &[("agent", "agent")], &mut args)?;
                    }
                    let name = rest(&w);
                    if name.is_empty() {
                        return Err("say the session's name".into());
                    }
                    args.insert("name".into(), json!(name));
                }
                _ => match w.words.get(1..).unwrap_or_default() {
                    [] => {}
                    [id] => {
                        let id: i64 = id
                            .trim_start_matches('#')
                            .parse()
                            .map_err(|_| format!("{id:?} is not a session's number"))?;
                        args.insert("session".into(), json!(id));
                    }
                    _ => return Err(format!("{a} takes one session's number at most")),
                },
            }
            if !w.flags.is_empty() {
                take_flags(&mut w, &[], &mut args)?;
            }
            args.insert("action".into(), json!(a));
        }
        "agent" => {
            let a = action(&w, &["create", "configure"])?;
            take_flags(
                &mut w,
                &[
                    ("provider", "provider"),
                    ("model", "model"),
                    ("url", "base_url"),
                    ("rename", "new_name"),
                ],
                &mut args,
            )?;
            let name = rest(&w);
            if name.is_empty() {
                return Err("say the agent's name".into());
            }
            if a == "create" && !(args.contains_key("provider") && args.contains_key("model")) {
                return Err("an agent is created with --provider and --model".into());
            }
            args.insert("name".into(), json!(name));
            args.insert("action".into(), json!(a));
        }
        "stream" => {
            let on = match w.words.as_slice() {
                [w] if w == "on" => true,
                [w] if w == "off" => false,
                _ => return Err("say on or off".into()),
            };
            args.insert("on".into(), json!(on));
        }
        "update_usage" => {
            let cost = match w.words.as_slice() {
                [c] => c
                    .trim_start_matches('$')
                    .parse::<f64>()
                    .ok()
                    .filter(|c| c.is_finite() && *c >= 0.0),
                _ => None,
            };
            let cost = cost.ok_or("say the bill in dollars, for example 12.34")?;
            args.insert("cost".into(), json!(cost));
        }
        // `/start`, `/compact`: nothing more.
        _ => {
            if !line.is_empty() || !body.is_empty() {
                return Err(format!("/{} takes nothing more", command.name));
            }
        }
    }
    if command.name != "ability" && !body.is_empty() {
        return Err(format!("/{} takes no lines after the first", command.name));
    }
    Ok(Value::Object(args))
}

/// `/skill NAME TEXT`: the name is the first word; the text, the rest of the line and the
/// lines after, as typed (no option or quote is read in it).
fn skill(line: &str, body: &str) -> Result<Value, String> {
    let (name, after) = line
        .split_once(char::is_whitespace)
        .map_or((line, ""), |(n, a)| (n, a.trim()));
    if name.is_empty() {
        return Err("say the process's name".into());
    }
    let content = match (after.is_empty(), body.is_empty()) {
        (true, true) => return Err("write the process's text after its name".into()),
        (false, true) => after.to_owned(),
        (true, false) => body.to_owned(),
        (false, false) => format!("{after}\n{body}"),
    };
    Ok(json!({"name": name, "content": content}))
}

/// The one word after the action.
fn one_word(w: &Words, what: &str) -> Result<String, String> {
    match w.words.get(1..).unwrap_or_default() {
        [one] => Ok(one.clone()),
        [] => Err(format!("say {what}")),
        _ => Err(format!("{what} is one word")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn call(text: &str) -> (&'static str, Value) {
        match parse(text) {
            Some(Parsed::Call { command, args }) => (command.function, args),
            other => panic!("{text}: {other:?}"),
        }
    }

    fn bad(text: &str) -> String {
        match parse(text) {
            Some(Parsed::Bad { why, .. }) => why,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn the_typed_form_reads_into_the_functions_arguments() {
        assert_eq!(
            call("/session new Research --agent Ada"),
            (
                "command_session",
                json!({"action": "new", "name": "Research", "agent": "Ada"})
            )
        );
        assert_eq!(
            call("/session new \"Weekly plan\" notes"),
            (
                "command_session",
                json!({"action": "new", "name": "Weekly plan notes"})
            )
        );
        assert_eq!(
            call("/session archive #12"),
            (
                "command_session",
                json!({"action": "archive", "session": 12})
            )
        );
        assert_eq!(
            call("/ability create tidy --description \"Tidy up\"\nTidy {{args}}."),
            (
                "command_ability",
                json!({"action": "create", "name": "tidy", "description": "Tidy up", "content": "Tidy {{args}}."})
            )
        );
        assert_eq!(
            call("/ability list"),
            ("command_ability", json!({"action": "list"}))
        );
        assert_eq!(
            call("/agent create Ada --provider anthropic --model claude-sonnet-4-5"),
            (
                "command_agent",
                json!({"action": "create", "name": "Ada", "provider": "anthropic", "model": "claude-sonnet-4-5"})
            )
        );
        // A skill's text is kept as typed: options, quotes and indentation included.
        assert_eq!(
            call("/skill fmt Run cargo fmt --all \"now\n  then check"),
            (
                "command_skill",
                json!({"name": "fmt", "content": "Run cargo fmt --all \"now\n  then check"})
            )
        );
        assert_eq!(
            call("/skill greet Say hello to {{user.name}}.\nThen ask how they are."),
            (
                "command_skill",
                json!({"name": "greet", "content": "Say hello to {{user.name}}.\nThen ask how they are."})
            )
        );
        assert_eq!(call("/start"), ("command_start", json!({})));
        assert_eq!(call("  /compact "), ("command_compact", json!({})));
        assert_eq!(
            call("/stream off"),
            ("command_stream", json!({"on": false}))
        );
        assert_eq!(
            call("/update_usage $12.5"),
            ("command_update_usage", json!({"cost": 12.5}))
        );
    }

    #[test]
    fn what_is_no_command_stays_a_message() {
        for text in [
            "hello",
            "please /compact later",
            "/update_usages 3",
            "/sessions",
            "/",
            "//start",
        ] {
            assert_eq!(parse(text), None, "{text}");
        }
    }

    #[test]
    fn bad_arguments_say_why() {
        assert!(bad("/session").contains("new, rename"));
        assert!(bad("/session fly").contains("\"fly\""));
        assert!(bad("/session new").contains("name"));
        assert!(bad("/session archive x").contains("number"));
        assert!(bad("/ability create tidy").contains("text"));
        assert!(bad("/ability show a b").contains("one word"));
        assert!(bad("/ability list --colour red").contains("--colour"));
        assert!(bad("/agent create Ada").contains("--provider"));
        assert!(bad("/stream maybe").contains("on or off"));
        assert!(bad("/update_usage lots").contains("dollars"));
        assert!(bad("/update_usage -3").contains("dollars"));
        assert!(bad("/start now").contains("nothing more"));
        assert!(bad("/session new \"open").contains("quote"));
        assert!(bad("/session new x --agent").contains("needs a value"));
    }

    #[test]
    fn anything_like_a_key_is_seen() {
        for text in [
            "/agent configure Ada api_key=abc",
            "/agent configure Ada --key sk-ant-0123456789abcdef",
            "/agent create Ada --provider openai --model gpt sk-proj-abcdefghijkl0123",
            "/agent configure Ada gsk_0123456789abcdefghijklmnop",
            "/agent configure Ada AIzaSyA0123456789abcdefghijklmn",
            "/agent configure Ada --model m APIKEY",
        ] {
            assert!(looks_like_key(text), "{text}");
        }
        for text in [
            "/agent configure Ada --model gpt-4o",
            "/session new sketches",
            "/agent create sk-research-team --provider anthropic --model claude",
        ] {
            assert!(!looks_like_key(text), "{text}");
        }
    }

    #[test]
    fn every_command_has_a_unique_name_and_function() {
        for (i, c) in COMMANDS.iter().enumerate() {
            assert_eq!(c.function, format!("command_{}", c.name));
            assert!(c.usage.starts_with(&format!("/{}", c.name)), "{}", c.usage);
            assert!(COMMANDS[i + 1..].iter().all(|d| d.name != c.name));
            assert_eq!(by_function(c.function), Some(c));
        }
    }

    #[test]
    fn the_menu_lists_the_commands_begun() {
        let names = |typed: &str| menu(typed).map(|m| m.iter().map(|c| c.name).collect::<Vec<_>>());
        assert_eq!(names("/").unwrap().len(), COMMANDS.len());
        assert_eq!(
            names("/s"),
            Some(vec!["session", "skill", "start", "stream"])
        );
        assert_eq!(names("/st"), Some(vec!["start", "stream"]));
        assert_eq!(names("/update_usage"), Some(vec!["update_usage"]));
        for closed in ["", "hello", "/x", "/session ", "/start now", " /s"] {
            assert_eq!(names(closed), None, "{closed:?}");
        }
    }

    proptest! {
        /// Any text parses without a panic, and a call's arguments are an object.
        #[test]
        fn parsing_never_panics(text in "(/(session|ability|agent|skill|stream|start|update_usage) )?[ -~\n\"é]{0,80}") {
            if let Some(Parsed::Call { args, .. }) = parse(&text) {
                prop_assert!(args.is_object());
            }
        }
    }
}
