//! Conditional abilities (reference 000, "Conditional Abilities"): instructions the agent is
//! given only when they apply, checked on every input it receives (the user's message, the
//! results of its calls) and added to that input, never stored. Each has a name, a sentence
//! saying when it applies, a matcher over the conversation, and the message it injects.
//!
//! Adding one: a `Conditional` value and a line in [`builtin`].
//!
//! The built-in `prompt_response_handler` matches when the user writes in chat while
//! prompts of the agent's wait for an answer: the user may be answering one of them there,
//! and the agent can mark it answered with `update_prompt`.

use hero_shared::frame::{CompiledMessage, FrameType, Role};
use hero_shared::hml::{Prompt, parse};
use serde_json::{Value, json};

/// What the matchers look at: the conversation as the agent is about to read it.
pub struct Situation<'a> {
    pub messages: &'a [&'a CompiledMessage],
}

impl Situation<'_> {
    /// The input the agent is about to answer: the last user-side entry, if the user wrote
    /// it (not a call's result, a note of the system's, or a message another agent queued).
    pub fn user_input(&self) -> Option<&CompiledMessage> {
        self.messages
            .iter()
            .rev()
            .find(|m| m.role != Role::Agent && m.frame_type != FrameType::Request)
            .copied()
            .filter(|m| m.role == Role::User && m.frame_type == FrameType::Message)
            .filter(|m| m.payload.get("queued").is_none())
    }

    /// The agent's prompts without an answer, oldest first (at most [`MAX_LISTED`]: the
    /// newest), as `{message_id, prompt_id, question}`.
    pub fn unanswered_prompts(&self) -> Vec<Value> {
        let mut out: Vec<Value> = Vec::new();
        for m in self
            .messages
            .iter()
            .filter(|m| m.role == Role::Agent && m.content.contains("<hml-prompt"))
        {
            let doc = parse(&m.content);
            for p in doc.elements().filter_map(Prompt::from_element) {
                if !p.answered {
                    out.push(json!({"message_id": m.frame_id, "prompt_id": p.id, "question": p.question}));
                }
            }
        }
        let skip = out.len().saturating_sub(MAX_LISTED);
        out.split_off(skip)
    }
}

/// The most prompts one injection lists.
pub const MAX_LISTED: usize = 10;

/// One conditional ability.
pub struct Conditional {
    pub name: &'static str,
    /// When it applies, in a sentence.
    pub applies: &'static str,
    /// `Some(details)` when it applies now.
    pub matches: fn(&Situation<'_>) -> Option<Value>,
    /// What the agent is told when it applies.
    pub message: &'static str,
}

/// The conditional abilities Hero ships with.
pub fn builtin() -> &'static [Conditional] {
    &[PROMPT_RESPONSE_HANDLER]
}

const PROMPT_RESPONSE_HANDLER: Conditional = Conditional {
    name: "prompt_response_handler",
    applies: "The user responds to an hml-prompt question in chat instead of in the prompt",
    matches: |s| {
        let input = s.user_input()?;
        // A message making calls of its own is not an answer in words.
        if input.content.contains("<interaction") {
            return None;
        }
        let open = s.unanswered_prompts();
        (!open.is_empty()).then(|| {
            json!({
                "unansweredPrompts": open,
                "hint": "The user may be responding to one of these prompts."
            })
        })
    },
    message: "The user may be answering an hml-prompt question in regular chat instead of in the prompt. \
If their message answers one of the prompts below, call update_prompt with its message_id, prompt_id \
and the answer, so that the prompt shows it; then reply as usual. If it answers none, ignore this.",
};

/// The instructions of every ability of `list` that applies, as the agent reads them
/// ("[System: Conditional Ability Triggered]" and each one's message and details); `None`
/// when none does.
pub fn instructions(list: &[Conditional], s: &Situation<'_>) -> Option<String> {
    let mut out = String::new();
    for c in list {
        let Some(details) = (c.matches)(s) else {
            continue;
        };
        if out.is_empty() {
            out.push_str("[System: Conditional Ability Triggered]\n");
        }
        out.push_str(&format!(
            "\n**{}**: {}\nDetails:\n```json\n{}\n```\n",
            c.name,
            c.message,
            serde_json::to_string_pretty(&details).unwrap_or_default()
        ));
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hero_shared::frame::{AuthorType, Frame, TargetId, compile_frames};

    fn msg(seq: i64, id: &str, author: AuthorType, content: &str) -> Frame {
        Frame {
            id: id.into(),
            session_id: 1,
            seq,
            parent_id: None,
            target_ids: Vec::new(),
            timestamp: String::new(),
            frame_type: FrameType::Message,
            author_type: author,
            author_id: None,
            payload: json!({"content": content}),
        }
    }

    fn answer(seq: i64, parent: &str, element: &str) -> Frame {
        Frame {
            id: format!("ans{seq}"),
            session_id: 1,
            seq,
            parent_id: Some(parent.into()),
            target_ids: vec![TargetId::Element(element.into())],
            timestamp: String::new(),
            frame_type: FrameType::Result,
            author_type: AuthorType::User,
            author_id: Some(1),
            payload: json!({"answer": "blue", "element_id": element}),
        }
    }

    fn check(frames: &[Frame]) -> Option<String> {
        let compiled = compile_frames(frames);
        instructions(
            builtin(),
            &Situation {
                messages: &compiled.iter().collect::<Vec<_>>(),
            },
        )
    }

    #[test]
    fn the_prompt_handler_applies_only_to_the_users_words_with_prompts_open() {
        let asked = msg(
            2,
            "a1",
            AuthorType::Agent,
            r#"Tell me <hml-prompt id="fav">Favourite colour?</hml-prompt>"#,
        );
        let said = msg(3, "u2", AuthorType::User, "blue, I think");
        let got = check(&[
            msg(1, "u1", AuthorType::User, "hi"),
            asked.clone(),
            said.clone(),
        ])
        .expect("an open prompt and words from the user");
        assert!(
            got.starts_with("[System: Conditional Ability Triggered]"),
            "{got}"
        );
        assert!(got.contains("**prompt_response_handler**"), "{got}");
        assert!(
            got.contains(r#""prompt_id": "fav""#) && got.contains(r#""message_id": "a1""#),
            "{got}"
        );
        assert!(got.contains("Favourite colour?"), "{got}");

        // Answered in the prompt: nothing to say.
        assert_eq!(
            check(&[
                asked.clone(),
                answer(3, "a1", "fav"),
                msg(4, "u2", AuthorType::User, "thanks")
            ]),
            None
        );
        // No prompt at all, or the user's message makes calls of its own.
        assert_eq!(
            check(&[msg(1, "a0", AuthorType::Agent, "hello"), said.clone()]),
            None
        );
        assert_eq!(
            check(&[
                asked.clone(),
                msg(
                    3,
                    "u2",
                    AuthorType::User,
                    r#"<interaction>{"target_id":"@system","target_property":"help"}</interaction>"#
                )
            ]),
            None
        );
        // The last input is not the user's (a system note after their message).
        assert_eq!(
            check(&[asked.clone(), said, msg(4, "s", AuthorType::System, "note")]),
            None
        );
        // Nor is a message another agent queued, though it is read as an input.
        let mut queued = msg(3, "q", AuthorType::System, "blue, says the other agent");
        queued.payload =
            serde_json::json!({"role": "user", "content": "blue", "queued": {"chain": 1}});
        assert_eq!(check(&[asked, queued]), None);
    }

    #[test]
    fn an_injection_lists_a_bounded_number_of_prompts() {
        let mut frames: Vec<Frame> = (0..30)
            .map(|i| {
                msg(
                    i,
                    &format!("a{i}"),
                    AuthorType::Agent,
                    &format!(r#"<hml-prompt id="p{i}">Q{i}?</hml-prompt>"#),
                )
            })
            .collect();
        frames.push(msg(31, "u", AuthorType::User, "an answer"));
        let compiled = compile_frames(&frames);
        let listed = Situation {
            messages: &compiled.iter().collect::<Vec<_>>(),
        }
        .unanswered_prompts();
        assert_eq!(listed.len(), MAX_LISTED);
        assert_eq!(listed.last().unwrap()["prompt_id"], "p29");
    }
}
