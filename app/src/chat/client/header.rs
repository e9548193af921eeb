//! The header's binding: the agent picker (the Files link follows the agent in force, a
//! refusal says why), "View system prompt", "Show hidden messages", the "batch mode"
//! badge that follows the session's mode, and the spend lines, fetched again as each reply
//! is stored.

use leptos::prelude::*;
use wasm_bindgen::JsCast;

use super::dom::*;
use super::*;

impl Chat {
    pub(super) fn header(&self, conversation: RwSignal<CompiledView>) {
        let session_id = self.session_id;
        // The spend lines: at the start, and again as each reply is stored.
        if let Some(line) = find(&self.root, &hooks::SPEND.selector()) {
            Effect::new(move |last: Option<usize>| {
                let replies = conversation.with(|v| {
                    v.messages
                        .iter()
                        .filter(|m| m.role == hero_shared::frame::Role::Agent)
                        .count()
                });
                if last != Some(replies) {
                    let line = line.clone();
                    leptos::task::spawn_local(async move {
                        if let Ok(s) =
                            crate::rpc::call(crate::chat::SpendLines { session_id }).await
                        {
                            let (text, tokens) = hero_shared::api::spend_line(&s);
                            line.set_text_content(Some(&text));
                            let _ = line.set_attribute("title", &tokens);
                        }
                    });
                }
                replies
            });
        }
        // The header: "batch mode" while the session's replies arrive whole.
        if let Some(badge) = find(&self.root, &hooks::BATCH_BADGE.selector()) {
            let streaming = self.streaming;
            Effect::new(move |_| set_hidden(&badge, streaming.get()));
        }

        // Show hidden messages.
        if let Some(b) = find(&self.root, &hooks::SHOW_HIDDEN.selector()) {
            let show = self.show_hidden;
            listen(&b, "change", move |ev: web_sys::Event| {
                if let Some(i) = ev
                    .target()
                    .and_then(|t| t.dyn_into::<HtmlInputElement>().ok())
                {
                    show.set(i.checked());
                }
            });
        }
        // The session's agent: once the server took it, the header names it (the Files
        // link); if it refused, the picker goes back and says why.
        if let Some(s) = find(&self.root, &hooks::AGENT_PICKER.selector())
            .and_then(|s| s.dyn_into::<web_sys::HtmlSelectElement>().ok())
        {
            let in_force = Rc::new(RefCell::new(s.value()));
            let (c, picker) = (self.clone(), s.clone());
            listen(&s, "change", move |_: web_sys::Event| {
                let Ok(agent_id) = picker.value().parse::<i64>() else {
                    return;
                };
                let (c, picker, in_force) = (c.clone(), picker.clone(), in_force.clone());
                leptos::task::spawn_local(async move {
                    match crate::rpc::call(crate::chat::SetSessionAgent {
                        session_id,
                        agent_id,
                    })
                    .await
                    {
                        Ok(s) => {
                            *in_force.borrow_mut() = picker.value();
                            c.draw_agent(s.agent_id, None);
                        }
                        Err(e) => {
                            picker.set_value(&in_force.borrow());
                            let why = format!("This agent could not be chosen: {}", error_text(&e));
                            c.draw_agent(in_force.borrow().parse().ok(), Some(why));
                        }
                    }
                });
            });
        }
        // "View system prompt": what the agent is told, fetched when asked for.
        if let Some(b) = find(&self.root, &hooks::PROMPT_BUTTON.selector()) {
            let button = b.clone();
            listen(&b, "click", move |_: web_sys::Event| {
                if let Some(open) = button
                    .next_element_sibling()
                    .filter(|s| s.class_list().contains("system-prompt"))
                {
                    open.remove();
                    button.set_text_content(Some("View system prompt"));
                    return;
                }
                button.set_text_content(Some("Hide system prompt"));
                let html = hero_shared::html::system_prompt_html(None);
                let _ = button.insert_adjacent_html("afterend", &html);
                let Some(section) = button.next_element_sibling() else {
                    return;
                };
                leptos::task::spawn_local(async move {
                    let html = match crate::rpc::call(crate::chat::SystemPrompt { session_id })
                        .await
                    {
                        Ok(p) => hero_shared::html::system_prompt_html(Some(Ok(&p))),
                        Err(e) => hero_shared::html::system_prompt_html(Some(Err(&error_text(&e)))),
                    };
                    section.set_outer_html(&html);
                });
            });
        }
    }

    /// The header's agent part: the Files link names the session's agent; `error` is the
    /// line that says why a change was refused (none clears it).
    fn draw_agent(&self, agent_id: Option<i64>, error: Option<String>) {
        let Some(head) = find(&self.root, &hooks::HEADER.selector()) else {
            return;
        };
        if let Some(a) = find(&head, &hooks::AGENT_FILES.selector()) {
            if let Some(id) = agent_id {
                let _ = a.set_attribute("href", &crate::base::href(&format!("/agents/{id}/files")));
            }
            set_hidden(&a, agent_id.is_none());
        }
        // The placeholder option goes once the session has an agent.
        if agent_id.is_some()
            && let Some(o) = find(&head, "option[value='']")
        {
            o.remove();
        }
        error_line(&head, "form-error", error.as_deref(), None);
    }
}
