//! The `scripted` provider: plays a built-in showcase in-process, with no key and no
//! network, so a newcomer's first session shows every display element of HML while it
//! streams. It is labelled as the offline demo wherever it appears. On a user's first
//! conversation with it (its BOOTSTRAP.md in the prompt) it plays the first-run ritual
//! instead: it asks who the user is, writes the answer to USER.md and ends the ritual.

use std::time::Duration;

use super::{Call, Delta, DeltaStream, ProviderError, Role};

/// Bytes per piece and the pause between pieces: fast enough not to bore, slow enough to
/// watch the elements build up.
const CHUNK_BYTES: usize = 24;
const PAUSE: Duration = Duration::from_millis(12);

pub fn showcase(user_text: &str) -> String {
    let quoted: String = user_text
        .chars()
        .take(200)
        .collect::<String>()
        .replace(['<', '>'], "");
    format!(
        r#"<thinking>Reading your message and picking something to show.</thinking>

**This is Hero's offline demo agent.** It plays a fixed script, so you can see how agents
answer in *Hero Markup Language* without an API key. You wrote: “{quoted}”.

To talk to a real model, add an agent on the **Agents** page (Anthropic, OpenAI, or any
OpenAI-compatible server such as Ollama) and pick it for this session.

<todo title="What this demo shows">
<item status="done">Markdown prose, rendered as it streams</item>
<item status="done">A thinking indicator</item>
<item status="in_progress">Display elements: todo, progress, link, copy, result</item>
<item status="pending">Executable elements, shown as cards</item>
</todo>

<progress value="3" max="4" status="Showing elements"/>

Read more in the <link href="https://github.com/">project documentation</link>.

A command you could copy: <copy label="Copy the command">cargo leptos build --release</copy>

A shell command runs in a sandbox of your own once you approve it:

<bash cwd="/tmp" timeout="10000">echo "hello from Hero" > greeting.txt && cat greeting.txt</bash>

<result for="demo" status="ok">hello from Hero</result>

```rust
// Tags inside code are just text: <bash>rm -rf /</bash> does nothing here.
fn main() {{ println!("Vec<T> stays text"); }}
```

<hml-prompt id="demo-color" type="select">Which colour do you like best?<data>["blue", "green", "orange"]</data></hml-prompt>

Agents act by calling functions. This one runs at once: @system(help, {{function: "websearch"}})
and this one waits for your approval (the card below asks you):

<websearch>rust leptos hydration</websearch>

And an agent can ask you something and wait for your answer before it goes on:

<ask options="yes,no">Shall I sum up what my calls found once they are done?</ask>
"#
    )
}

/// The demo's reply once it is given the results of its calls.
pub fn follow_up(results: &[&str]) -> String {
    // The first lines of each result, so that every one of them shows.
    let quoted: String = results
        .iter()
        .flat_map(|r| r.lines().take(4))
        .map(|l| format!("> {}\n", l.replace(['<', '>'], "")))
        .collect();
    format!(
        "The results of my calls came back to me:\n\n{quoted}\nThat is the whole loop: I asked \
         for the calls in my reply, Hero checked each against your permissions (asking you where \
         it must), ran them, waited for your answer to my question, and gave me all of it in this \
         follow-up."
    )
}

/// The first-run ritual (BOOTSTRAP.md in the prompt), scripted: the demo introduces itself
/// and asks who the user is (a question that waits for the answer).
pub const RITUAL_ASK: &str = r#"Hello! I'm Hero's **offline demo agent**. This is our first conversation, so I follow
my first-run ritual (my BOOTSTRAP.md file) and get to know you before anything else.

<ask>What should I call you, and which timezone are you in?</ask>
"#;

/// The ritual's second step, given the user's answer: write it to USER.md and empty
/// BOOTSTRAP.md, so that the ritual never repeats.
pub fn ritual_write(answer: &str) -> String {
    let answer: String = answer
        .chars()
        .take(500)
        .filter(|c| !matches!(c, '<' | '>'))
        .collect();
    let user_md = format!("# User\n\n- In their words: {}\n", answer.trim());
    let call = |name: &str, content: &str| {
        serde_json::json!({
            "target_id": "@system",
            "target_property": "context_file",
            "payload": {"name": name, "content": content},
        })
    };
    format!(
        "Thank you! I'll keep that in my USER.md file, and empty BOOTSTRAP.md so that this ritual does not repeat.\n\n<interaction>{}</interaction>\n\n<interaction>{}</interaction>\n",
        call("USER.md", &user_md),
        call("BOOTSTRAP.md", "")
    )
}

/// The ritual's end, once the files are written.
pub const RITUAL_DONE: &str = "All set: what you told me is in USER.md (see the agent's **Files** page, or \
**View system prompt**), and BOOTSTRAP.md is gone, so the ritual is over for good. Send me anything \
to see what Hero's agents can show you.";

/// What the scripted demo answers a summoning call with (no model, no key): a persona made
/// from the description's own words.
pub fn summoned(description: &str) -> String {
    let d: String = description
        .chars()
        .take(300)
        .filter(|c| !matches!(c, '<' | '>'))
        .collect();
    let d = d.trim();
    format!(
        "<file name=\"SOUL.md\">\n# Soul\n\nYou are {d}. You stay in that character in every answer, and you are still honest and helpful.\n</file>\n\
<file name=\"IDENTITY.md\">\n# Identity\n\n- Name: a name that suits {d}\n- Manner: as {d} would be\n- Emoji: ✨\n</file>\n\
<file name=\"AGENTS.md\">\n# How you work\n\nAnswer in Markdown, briefly, in the voice of {d}. Ask when something is unclear.\n</file>\n\
<file name=\"TOOLS.md\">\n# Tools\n\nUse bash in /workspace and websearch when they help with the work of {d}.\n</file>\n"
    )
}

pub fn stream(call: &Call<'_>) -> DeltaStream {
    let last_user = call
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .map(|m| m.content.clone())
        .unwrap_or_default();
    // Given the results of its calls (a tool result, or the system's line for each), the
    // demo answers with them instead of playing its script again.
    let results: Vec<String> = call
        .messages
        .iter()
        .rev()
        .take_while(|m| m.role == Role::User)
        .flat_map(|m| {
            m.tool_results
                .iter()
                .map(|r| r.content.clone())
                .chain(quoted_result(&m.content))
        })
        .collect();
    let results: Vec<&str> = results.iter().map(String::as_str).collect();
    // A summoning call: the persona comes from the description's own words.
    if *call.system == *crate::agents::prompt::SUMMON {
        let description = last_user
            .strip_prefix("Description: ")
            .unwrap_or(&last_user);
        return play(summoned(description), call);
    }
    // A memory flush: the demo notes the conversation's start in the day's file, once.
    if let Some(at) = call.messages.iter().rposition(|m| {
        m.role == Role::User && m.content.contains(crate::agents::prompt::MEMORY_FLUSH)
    }) {
        let answered = call.messages[at..]
            .iter()
            .any(|m| m.role == Role::Assistant);
        let text = if answered {
            "Saved what should last.".to_owned()
        } else {
            flush_write(&call.messages[at].content, call)
        };
        return play(text, call);
    }
    let first_run = call.system.contains("\n## First run\n");
    let answer = results.iter().find_map(|r| {
        r.split_once("The user's answer to your question ")
            .and_then(|(_, rest)| rest.split_once("\": ").map(|(_, a)| a))
    });
    let text = match (first_run, answer, results.is_empty()) {
        (true, Some(a), _) => ritual_write(a),
        (true, None, true) => RITUAL_ASK.to_owned(),
        (false, _, false)
            if results
                .iter()
                .any(|r| r.contains("BOOTSTRAP.md is deleted")) =>
        {
            RITUAL_DONE.to_owned()
        }
        (_, _, true) => showcase(&last_user),
        (_, _, false) => follow_up(&results),
    };
    play(text, call)
}

/// The demo's memory flush: a line on the conversation's first message, appended to the
/// file the prompt names for today.
fn flush_write(prompt: &str, call: &Call<'_>) -> String {
    let path = prompt
        .find("memory/")
        .and_then(|at| {
            let rest = &prompt[at..];
            rest.find(".md").map(|end| rest[..end + 3].to_owned())
        })
        .unwrap_or_else(|| "memory/notes.md".into());
    let first: String = call
        .messages
        .iter()
        .find(|m| m.role == Role::User && !m.content.starts_with("[System]"))
        .map(|m| m.content.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
        .chars()
        .take(200)
        .filter(|c| !matches!(c, '<' | '>'))
        .collect();
    let payload = serde_json::json!({
        "target_id": "@system",
        "target_property": "memory_write",
        "payload": {"path": path, "content": format!("- The conversation began with: {first}"), "append": true},
    });
    format!(
        "I'll keep a note of this conversation in my memory.\n\n<interaction>{payload}</interaction>\n"
    )
}

/// A call's result as the demo reads it: Hero's note (its first sentence), then what the
/// call returned, from the block Hero quotes it in ([`crate::conversation::context::told`]).
fn quoted_result(text: &str) -> Option<String> {
    let tag = crate::contain::RESULT_TAG;
    let rest = text.strip_prefix("[System] ")?;
    let (note, rest) = rest.split_once(&format!("\n<{tag} "))?;
    let (_, body) = rest.split_once(">\n")?;
    let body = body.strip_suffix(&format!("\n</{tag}>"))?;
    let said = note.split_once(". ").map_or(note, |(first, _)| first);
    Some(format!("{said}: {body}"))
}

/// Streams `text` as the demo's reply to `call`, piece by piece.
fn play(text: String, call: &Call<'_>) -> DeltaStream {
    let input = (call.messages.iter().map(|m| m.content.len()).sum::<usize>() / 4).max(1) as u64;
    let output = (text.len() / 4).max(1) as u64;
    Box::pin(async_stream_like(move |mut emit| async move {
        emit.ok(Delta::Usage(super::Tokens::input(input))).await;
        let mut rest = text.as_str();
        while !rest.is_empty() {
            let mut cut = CHUNK_BYTES.min(rest.len());
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            let (piece, tail) = rest.split_at(cut);
            if emit.is_closed() {
                return;
            }
            emit.ok(Delta::Text(piece.to_owned())).await;
            rest = tail;
            tokio::time::sleep(PAUSE).await;
        }
        emit.ok(Delta::Usage(super::Tokens::output(output))).await;
        emit.ok(Delta::Done {
            stop_reason: Some("end_turn".into()),
        })
        .await;
    }))
}

/// Runs the demo's script in its own task (it sleeps between pieces), feeding a stream.
fn async_stream_like<F, Fut>(
    f: F,
) -> impl futures::Stream<Item = Result<Delta, ProviderError>> + Send
where
    F: FnOnce(Emitter) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(f(Emitter(tx)));
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// Sends the demo's pieces to the stream; it stops when the reader has gone.
struct Emitter(tokio::sync::mpsc::Sender<Result<Delta, ProviderError>>);

impl Emitter {
    fn is_closed(&self) -> bool {
        self.0.is_closed()
    }

    async fn ok(&mut self, d: Delta) {
        let _ = self.0.send(Ok(d)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hero_shared::hml::{ElementKind, StreamParser};

    /// The showcase, cut as the demo streams it, parses to the same elements as whole: every
    /// display element, and the bash card complete (shown, never run by the demo).
    #[test]
    fn the_showcase_shows_every_display_element_however_it_is_cut() {
        for user in [
            "Hello demo",
            "show me",
            "",
            "a much longer message with ünïcödé — to move the cuts",
        ] {
            let text = showcase(user);
            let whole = hero_shared::hml::parse(&text);
            let kinds: std::collections::BTreeSet<ElementKind> =
                whole.elements().map(|e| e.kind).collect();
            for k in [
                ElementKind::Thinking,
                ElementKind::Todo,
                ElementKind::Item,
                ElementKind::Progress,
                ElementKind::Link,
                ElementKind::Copy,
                ElementKind::Result,
                ElementKind::HmlPrompt,
                ElementKind::Data,
                ElementKind::Bash,
                ElementKind::Websearch,
            ] {
                assert!(kinds.contains(&k), "{k:?} missing for {user:?}");
            }
            assert!(whole.elements().all(|e| !e.truncated), "{user:?}");
            for chunk in [1, 3, CHUNK_BYTES, 100] {
                let mut p = StreamParser::new();
                let mut tree = hero_shared::hml::TreeBuilder::new();
                let mut rest = text.as_str();
                while !rest.is_empty() {
                    let mut cut = chunk.min(rest.len());
                    while !rest.is_char_boundary(cut) {
                        cut += 1;
                    }
                    let (piece, tail) = rest.split_at(cut);
                    p.feed_str_with(piece, |e| tree.event(e));
                    rest = tail;
                }
                p.finish_with(|e| tree.event(e));
                assert_eq!(
                    tree.finish().nodes,
                    whole.nodes,
                    "{user:?} in {chunk}-byte pieces"
                );
            }
        }
    }
}
