//! The composer's attachments: files picked ("Attach") or dropped on the composer are
//! uploaded at once (`POST /api/sessions/{id}/attachments`), each a chip above the message
//! box until the message that carries them is sent; a file refused says why under the box.

use leptos::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{Element, File, FileList};

use super::dom::*;
use super::*;

impl Chat {
    /// Binds the file picker, dropping on the composer, and the chips' remove buttons.
    pub(super) fn attachments(&self) {
        let (Some(input), Some(list), Some(form)) = (
            find(&self.root, &hooks::ATTACH.selector())
                .and_then(|i| i.dyn_into::<HtmlInputElement>().ok()),
            find(&self.root, &hooks::ATTACHED.selector()),
            find(&self.root, &hooks::COMPOSER.selector()),
        ) else {
            return;
        };
        let (session_id, error) = (self.session_id, self.error);
        let (picked, to) = (input.clone(), list.clone());
        listen(&input, "change", move |_: web_sys::Event| {
            if let Some(files) = picked.files() {
                add(session_id, &to, error, &files);
            }
            picked.set_value("");
        });
        listen(&form, "dragover", |ev: web_sys::DragEvent| {
            ev.prevent_default()
        });
        let to = list.clone();
        listen(&form, "drop", move |ev: web_sys::DragEvent| {
            ev.prevent_default();
            if let Some(files) = ev.data_transfer().and_then(|d| d.files()) {
                add(session_id, &to, error, &files);
            }
        });
        let from = list.clone();
        listen(&list, "click", move |ev: web_sys::Event| {
            let chip = ev
                .target()
                .and_then(|t| t.dyn_into::<Element>().ok())
                .filter(|t| t.closest(".remove").ok().flatten().is_some())
                .and_then(|t| t.closest(&hooks::ATTACHMENT.selector()).ok().flatten());
            if let Some(chip) = chip {
                chip.remove();
                set_hidden(&from, from.child_element_count() == 0);
            }
        });
    }
}

/// The attachments the next message carries, by id, or why it cannot go yet.
pub(super) fn ready(root: &Element) -> Result<Vec<String>, String> {
    let chips = all(root, &hooks::ATTACHMENT.selector());
    if chips
        .iter()
        .any(|c| !c.has_attribute(hooks::ATTACHMENT_ID.name()))
    {
        return Err("Wait until the files have uploaded, then send.".into());
    }
    Ok(chips
        .iter()
        .filter_map(|c| c.get_attribute(hooks::ATTACHMENT_ID.name()))
        .collect())
}

/// Takes the chips off once their message is sent.
pub(super) fn clear(root: &Element) {
    for chip in all(root, &hooks::ATTACHMENT.selector()) {
        chip.remove();
    }
    if let Some(list) = find(root, &hooks::ATTACHED.selector()) {
        set_hidden(&list, true);
    }
}

thread_local! {
    static NEXT_KEY: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Each file a chip, uploaded at once.
fn add(session_id: i64, list: &Element, error: RwSignal<Option<String>>, files: &FileList) {
    for file in (0..files.length()).filter_map(|i| files.get(i)) {
        let key = NEXT_KEY.with(|k| {
            k.set(k.get() + 1);
            k.get().to_string()
        });
        let size = file.size() as u64;
        let html = hero_shared::html::pending_attachment_html(&key, &file.name(), size);
        let _ = list.insert_adjacent_html("beforeend", &html);
        set_hidden(list, false);
        let Some(chip) = find(list, &format!("[{}=\"{key}\"]", hooks::ATTACHMENT.name())) else {
            continue;
        };
        let list = list.clone();
        leptos::task::spawn_local(async move {
            match upload(session_id, &file).await {
                Ok(id) => {
                    let _ = chip.set_attribute(hooks::ATTACHMENT_ID.name(), &id);
                    let _ = chip.remove_attribute("aria-busy");
                }
                Err(why) => {
                    chip.remove();
                    set_hidden(&list, list.child_element_count() == 0);
                    error.set(Some(why));
                }
            }
        });
    }
}

/// `POST /api/sessions/{id}/attachments` with the file: its attachment's id, or the
/// refusal's sentence.
async fn upload(session_id: i64, file: &File) -> Result<String, String> {
    let unreachable = || crate::enhance::error_sentence(0, "");
    let form = web_sys::FormData::new().map_err(|_| unreachable())?;
    form.append_with_blob_and_filename("file", file, &file.name())
        .map_err(|_| unreachable())?;
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    init.set_body(&form);
    let url = crate::base::href(&format!("/api/sessions/{session_id}/attachments"));
    let (ok, status, text) = crate::http::fetch(&url, &init)
        .await
        .ok_or_else(unreachable)?;
    if !ok {
        return Err(crate::skills::api_error(status, &text));
    }
    serde_json::from_str::<hero_shared::api::AttachmentDto>(&text)
        .map(|a| a.attachment_id)
        .map_err(|_| unreachable())
}
