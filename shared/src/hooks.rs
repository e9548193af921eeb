//! The chat page's contract between its markup and the browser's client: the classes and
//! data attributes the client finds the page's parts by ([`Hook`]), and what a button in a
//! message can ask for ([`Action`], its `data-action`). The server's markup and
//! [`crate::html`] write them; `app::chat::client` and `app::chat::actions` read them, by
//! these names only. `server/tests/chat.rs` checks that every hook of [`CHAT_PAGE`] is in
//! the page the server renders, so a name that drifts fails a test instead of leaving a
//! chat that never starts.

/// A part of the page, found by a class or a data attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// `class="… name …"`.
    Class(&'static str),
    /// `name="…"` (a data attribute, whatever its value).
    Attr(&'static str),
}

impl Hook {
    /// Its CSS selector.
    pub fn selector(self) -> String {
        match self {
            Hook::Class(c) => format!(".{c}"),
            Hook::Attr(a) => format!("[{a}]"),
        }
    }

    /// Whether HTML this project writes carries it: the class among some element's
    /// classes, or the attribute (with a value, or bare). For the tests that tie the
    /// markup to the client; not a parser of any HTML.
    pub fn is_in(self, html: &str) -> bool {
        match self {
            Hook::Class(name) => html.split("class=\"").skip(1).any(|rest| {
                let value = &rest[..rest.find('"').unwrap_or(0)];
                value.split_whitespace().any(|c| c == name)
            }),
            Hook::Attr(name) => [" {}=\"", " {}>", " {} "]
                .iter()
                .any(|form| html.contains(&form.replace("{}", name))),
        }
    }

    /// Its class or attribute name.
    pub fn name(self) -> &'static str {
        match self {
            Hook::Class(n) | Hook::Attr(n) => n,
        }
    }
}

/// The chat: its root.
pub const CHAT: Hook = Hook::Attr("data-chat");
/// The header: the agent picker, the links, the mode badge.
pub const HEADER: Hook = Hook::Class("chat-agent");
/// The session's agent.
pub const AGENT_PICKER: Hook = Hook::Attr("data-chat-agent");
/// The link to the session's agent's files (present while the session has an agent).
pub const AGENT_FILES: Hook = Hook::Class("agent-files");
/// The link to the Permissions page, after which the Files link goes.
pub const PERMISSIONS_LINK: Hook = Hook::Class("manage-permissions");
/// "batch mode", while the session's replies arrive whole.
pub const BATCH_BADGE: Hook = Hook::Class("batch");
/// The spend lines (reference 003), filled and kept up to date by the client.
pub const SPEND: Hook = Hook::Class("spend");
/// "View system prompt".
pub const PROMPT_BUTTON: Hook = Hook::Attr("data-chat-prompt");
/// "Show hidden messages".
pub const SHOW_HIDDEN: Hook = Hook::Attr("data-chat-hidden");
/// The message list, which scrolls.
pub const MESSAGES: Hook = Hook::Class("messages");
/// The pages paged in above the stored messages.
pub const EARLIER_PAGES: Hook = Hook::Class("earlier-pages");
/// The stored messages, one slot each.
pub const STORED: Hook = Hook::Class("stored");
/// One stored message's slot (its value: the message's id).
pub const SLOT: Hook = Hook::Attr("data-slot");
/// The reply in flight.
pub const LIVE_SLOT: Hook = Hook::Class("live-slot");
/// The cards of the reply in flight's calls, under it (in [`crate::html::live_reply_html`]).
pub const LIVE_CALLS: Hook = Hook::Class("live-calls");
/// The reply in flight's bubble, and a message's body (in it, the blocks as they stream).
pub const LIVE: Hook = Hook::Class("live");
pub const BODY: Hook = Hook::Class("msg-body");
/// "Show earlier messages" at the top of the list, and the seq a "Show earlier" button
/// pages in before.
pub const EARLIER_TOP: Hook = Hook::Attr("data-earlier-top");
pub const SEQ: Hook = Hook::Attr("data-seq");
/// What the list shows before the first message ([`crate::html::EMPTY`]).
pub const EMPTY_NOTE: Hook = Hook::Class("empty");
/// The banner above the message box while a question is answered from it, and its
/// "Dismiss" ([`crate::html::answering_banner_html`]; the editing banner's "Cancel" too).
pub const ANSWERING: Hook = Hook::Class("composer-answering");
pub const DISMISS: Hook = Hook::Class("dismiss");
/// The way down to the newest message.
pub const JUMP_DOWN: Hook = Hook::Class("jump-down");
/// The message box's form.
pub const COMPOSER: Hook = Hook::Class("composer");
/// Send, in the composer.
pub const SEND: Hook = Hook::Class("send");
/// Stop, in the composer.
pub const STOP: Hook = Hook::Class("stop");
/// "Private", in the composer.
pub const PRIVATE: Hook = Hook::Attr("data-chat-private");
/// The composer's `/` menu (hidden until `/` is typed), and each command in it (its value:
/// what choosing it puts in the box).
pub const COMMAND_MENU: Hook = Hook::Class("command-menu");
pub const COMMAND: Hook = Hook::Attr("data-command");

/// Every hook the chat page of a session with an agent carries from the start (the Files
/// link and the badge hidden when they do not apply).
pub const CHAT_PAGE: &[Hook] = &[
    CHAT,
    HEADER,
    AGENT_PICKER,
    AGENT_FILES,
    PERMISSIONS_LINK,
    BATCH_BADGE,
    PROMPT_BUTTON,
    SHOW_HIDDEN,
    MESSAGES,
    EARLIER_PAGES,
    STORED,
    LIVE_SLOT,
    JUMP_DOWN,
    COMPOSER,
    SEND,
    STOP,
    PRIVATE,
    COMMAND_MENU,
    SPEND,
];

/// A button's action ([`Action`]).
pub const ACTION: Hook = Hook::Attr("data-action");
/// A call's card (its value: the request's id).
pub const CALL: Hook = Hook::Attr("data-call");
/// The function of a call's card.
pub const FUNCTION: Hook = Hook::Attr("data-function");
/// An HML element drawn in a message (its value: its kind).
pub const HML: Hook = Hook::Attr("data-hml");
/// The element's id in its message.
pub const HML_ID: Hook = Hook::Attr("data-hml-id");
/// The message an element belongs to.
pub const MESSAGE: Hook = Hook::Attr("data-message");
/// A message's id, on its outer element.
pub const MESSAGE_ID: Hook = Hook::Attr("data-message-id");
/// A field whose typed text is carried across a redraw (its value: its key).
pub const KEEP: Hook = Hook::Attr("data-keep");
/// A timed question: when it takes its default (Unix milliseconds).
pub const EXPIRES_AT: Hook = Hook::Attr("data-expires-at");
/// A timed question's default.
pub const DEFAULT: Hook = Hook::Attr("data-default");
/// A prompt's type (`text`, `select`, …).
pub const TYPE: Hook = Hook::Attr("data-type");
/// The answer a question's option button gives (drawn while its call asks: not in the
/// sample [`MESSAGE_HOOKS`] is checked on).
pub const ANSWER: Hook = Hook::Attr("data-answer");
/// The frame a message's menu hides, and whether it is hidden.
pub const FRAME: Hook = Hook::Attr("data-frame");
/// The version a version switch shows (from 1).
pub const VERSION: Hook = Hook::Attr("data-version");
/// The message box while it holds an edit of a message: the message's frame id.
pub const EDITING: Hook = Hook::Attr("data-editing");
/// The banner above the message box while it holds an edit.
pub const EDITING_BANNER: Hook = Hook::Class("composer-editing");
/// The composer's file picker, the chips of the files chosen for the next message, and
/// each chip (its key; its attachment's id once uploaded, in [`ATTACHMENT_ID`]).
pub const ATTACH: Hook = Hook::Attr("data-attach");
pub const ATTACHED: Hook = Hook::Attr("data-attached");
pub const ATTACHMENT: Hook = Hook::Attr("data-attachment");
pub const ATTACHMENT_ID: Hook = Hook::Attr("data-attachment-id");
pub const HIDDEN: Hook = Hook::Attr("data-hidden");
/// A button whose action is first confirmed: the question asked (letting a dangerous
/// function run without asking).
pub const CONFIRM: Hook = Hook::Attr("data-confirm");
/// A copy button's label, put back after "Copied".
pub const LABEL: Hook = Hook::Attr("data-label");
/// A code block, and a `<copy>` element: what a copy button copies from.
pub const CODE_BLOCK: Hook = Hook::Class("code-block");
pub const HML_COPY: Hook = Hook::Class("hml-copy");
/// What the agent read of its configuration, on its call's card: the panel the chat opens
/// beside it when the read arrives.
pub const CONFIG_READ: Hook = Hook::Class("config-read");
/// A code block's language (as its fence named it): what it is highlighted as.
pub const CODE_LANG: Hook = Hook::Class("code-lang");

/// Every hook a conversation's messages carry for the client ([`crate::html`] writes them),
/// found in a sample conversation by `html`'s tests.
pub const MESSAGE_HOOKS: &[Hook] = &[
    ACTION, CALL, FUNCTION, HML, HML_ID, MESSAGE, MESSAGE_ID, KEEP, TYPE, FRAME, HIDDEN, LABEL,
    CODE_BLOCK, HML_COPY, CONFIRM, CODE_LANG, VERSION,
];

/// What a button in the conversation asks for: its `data-action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Copies the code beside it.
    Copy,
    /// Sends a prompt's answer.
    Prompt,
    /// Answers a question of the agent's.
    Ask,
    /// Approves a call waiting for the user.
    Approve,
    /// Denies it.
    Deny,
    /// Sets the call's function to `always`, then approves the call.
    Always,
    /// Hides a message, or shows it again.
    Hide,
    /// Brings in the page before.
    Earlier,
    /// Opens a new session holding the conversation up to this message.
    Branch,
    /// Puts the user's message in the message box, to send changed as a new version.
    Edit,
    /// Asks the agent for a new version of its reply.
    Regenerate,
    /// Shows another version of a message.
    Version,
    /// Closes the panel beside the chat (what the agent read of its configuration).
    ClosePanel,
}

impl Action {
    pub const ALL: [Action; 13] = [
        Action::Copy,
        Action::Prompt,
        Action::Ask,
        Action::Approve,
        Action::Deny,
        Action::Always,
        Action::Hide,
        Action::Earlier,
        Action::Branch,
        Action::Edit,
        Action::Regenerate,
        Action::Version,
        Action::ClosePanel,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Copy => "copy",
            Action::Prompt => "prompt",
            Action::Ask => "ask",
            Action::Approve => "approve",
            Action::Deny => "deny",
            Action::Always => "always",
            Action::Hide => "hide",
            Action::Earlier => "earlier",
            Action::Branch => "branch",
            Action::Edit => "edit",
            Action::Regenerate => "regenerate",
            Action::Version => "version",
            Action::ClosePanel => "close-panel",
        }
    }

    /// The action a `data-action` value names, if any.
    pub fn parse(s: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_reads_back_as_itself() {
        for a in Action::ALL {
            assert_eq!(Action::parse(a.as_str()), Some(a));
        }
        assert_eq!(Action::parse("launch"), None);
    }

    #[test]
    fn selectors_are_the_names_they_stand_for() {
        assert_eq!(MESSAGES.selector(), ".messages");
        assert_eq!(CHAT.selector(), "[data-chat]");
        assert_eq!(AGENT_PICKER.name(), "data-chat-agent");
    }
}
