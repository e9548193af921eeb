//! Files attached to messages: text (Markdown, code, CSV, JSON and any other UTF-8 text),
//! PDFs (their text, read with `pdf-extract` on a blocking thread) and images (PNG, JPEG,
//! GIF, WebP, for agents whose provider reads images: Anthropic's and OpenAI's).
//!
//! An attachment is uploaded to a session first ([`upload`]: checked, bounded, sealed with
//! the user's key, its name and text too), then named by the message that carries it
//! ([`for_message`]): the message's payload keeps each one's id, name, kind and size, and
//! the text of a text or a PDF, so the conversation reads it as any message is read. An
//! image's bytes stay in its row; a turn puts them in the call when it is made
//! ([`with_images`]). Only its owner reads an attachment back ([`download`]).

use std::sync::Arc;
use std::time::Duration;

use hero_shared::api::{AttachmentDto, ProviderKind};
use serde_json::{Value, json};

use crate::accounts::auth::AuthUser;
use crate::crypto::{self, SecretKey};
use crate::providers::ChatMessage;
use crate::store::attachments::AttachmentRow;
use crate::{AppState, Error, Result};

/// The most bytes one attachment holds.
pub const MAX_ATTACHMENT_BYTES: usize = 10 << 20;
/// The most bytes one image holds: Anthropic's API takes 5 MiB of base64, which is four
/// thirds of the bytes.
pub const MAX_IMAGE_BYTES: usize = (5 << 20) / 4 * 3;
/// The most images one call sends: the latest; older ones are named in words instead.
pub const MAX_IMAGES_PER_CALL: usize = 20;
/// The most bytes of attachments one user keeps.
pub const MAX_ATTACHMENT_BYTES_PER_USER: i64 = 1 << 30;
/// The most attachments one message carries.
pub const MAX_ATTACHMENTS_PER_MESSAGE: usize = 8;
/// The most attachments one session holds.
pub const MAX_ATTACHMENTS_PER_SESSION: i64 = 200;
/// The most characters of an attachment's text the agent reads; past it the text is cut,
/// and says so.
pub const MAX_ATTACHMENT_TEXT_CHARS: usize = 100_000;
/// The longest name kept.
const MAX_NAME_CHARS: usize = 200;
/// How long reading a PDF may take.
const PDF_TIMEOUT: Duration = Duration::from_secs(20);
/// The PDFs read at once.
static PDF_READS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

/// What an attachment is, as the agent reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Text,
    Pdf,
    Image,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Pdf => "pdf",
            Kind::Image => "image",
        }
    }
}

/// What `bytes` (a file named `name`) is: its kind and media type. Images and PDFs are
/// known by their first bytes, text by being UTF-8 without a NUL; anything else is refused,
/// naming what Hero takes.
pub fn classify(name: &str, bytes: &[u8]) -> Result<(Kind, &'static str)> {
    let image = |m: &'static str| Ok((Kind::Image, m));
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return image("image/png");
    }
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return image("image/jpeg");
    }
    if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        return image("image/gif");
    }
    if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        return image("image/webp");
    }
    if bytes.starts_with(b"%PDF-") {
        return Ok((Kind::Pdf, "application/pdf"));
    }
    if std::str::from_utf8(bytes).is_ok() && !bytes.contains(&0) {
        let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
        let media = match ext.as_deref() {
            Some("md" | "markdown") => "text/markdown",
            Some("csv") => "text/csv",
            Some("json") => "application/json",
            _ => "text/plain",
        };
        return Ok((Kind::Text, media));
    }
    Err(Error::Unsupported(format!(
        "{name} is not a file Hero reads: attach text (Markdown, code, CSV, JSON), a PDF, or an image (PNG, JPEG, GIF, WebP)"
    )))
}

/// Whether agents of `provider` are sent images.
pub fn reads_images(provider: ProviderKind) -> bool {
    matches!(provider, ProviderKind::Anthropic | ProviderKind::OpenAi)
}

/// Stores a file for the session's next message: checked (its size, its kind, a PDF's
/// text, an image's agent), bounded (the session's count), sealed, in one transaction.
pub async fn upload(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    name: &str,
    bytes: Vec<u8>,
) -> Result<AttachmentDto> {
    let dk = super::frames::session_key(st, user, session_id).await?;
    let name: String = name
        .trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME_CHARS)
        .collect();
    let name = if name.is_empty() {
        "attachment".to_owned()
    } else {
        name
    };
    if bytes.is_empty() {
        return Err(Error::Invalid(format!("{name} is empty")));
    }
    if bytes.len() > MAX_ATTACHMENT_BYTES {
        return Err(Error::TooLarge(format!(
            "{name} is {}: an attachment holds at most {}",
            mib(bytes.len()),
            mib(MAX_ATTACHMENT_BYTES)
        )));
    }
    let (kind, media_type) = classify(&name, &bytes)?;
    // Kept as the agent reads it: cut before it is stored.
    let text = match kind {
        Kind::Text => Some(cut(String::from_utf8_lossy(&bytes).into_owned())),
        Kind::Pdf => Some(cut(pdf_text(&name, bytes.clone()).await?)),
        Kind::Image => {
            if bytes.len() > MAX_IMAGE_BYTES {
                return Err(Error::TooLarge(format!(
                    "{name} is {}: an image holds at most {}",
                    mib(bytes.len()),
                    mib(MAX_IMAGE_BYTES)
                )));
            }
            images_read_by(st, user, session_id).await?;
            None
        }
    };
    let id = super::frames::new_id();
    let mut row = AttachmentRow {
        id: id.clone(),
        user_id: user.id(),
        session_id,
        kind: kind.as_str().to_owned(),
        media_type: media_type.to_owned(),
        size: bytes.len() as i64,
        name: Vec::new(),
        content: Vec::new(),
        text: None,
        created_at: crate::now_text(),
    };
    row.name = crypto::seal(&dk, &aad(&row, "name"), name.as_bytes());
    row.content = crypto::seal(&dk, &aad(&row, "content"), &bytes);
    row.text = text
        .as_ref()
        .map(|t| crypto::seal(&dk, &aad(&row, "text"), t.as_bytes()));
    st.db
        .write_with(async |tx| {
            crate::store::sessions::lock(tx, session_id).await?;
            let held = crate::store::attachments::count(tx, session_id).await?;
            if held >= MAX_ATTACHMENTS_PER_SESSION {
                return Err(Error::TooLarge(format!(
                    "this session holds {MAX_ATTACHMENTS_PER_SESSION} attachments, as many as a session may: start a new session for more"
                )));
            }
            let used = crate::store::attachments::bytes_of(tx, user.id()).await?;
            if used + row.size > MAX_ATTACHMENT_BYTES_PER_USER {
                return Err(Error::TooLarge(format!(
                    "your attachments would pass {} MiB, as much as one person keeps",
                    MAX_ATTACHMENT_BYTES_PER_USER >> 20
                )));
            }
            crate::store::attachments::insert(tx, &row).await
        })
        .await?;
    Ok(AttachmentDto {
        attachment_id: id,
        name,
        size: row.size as u64,
        kind: kind.as_str().to_owned(),
        media_type: media_type.to_owned(),
    })
}

/// An attachment of the user's, opened: its name, media type and bytes. 404 for one that
/// is not theirs.
pub async fn download(
    st: &AppState,
    user: &AuthUser,
    id: &str,
) -> Result<(String, String, Vec<u8>)> {
    let row = st
        .db
        .read_with(async |c| crate::store::attachments::get(c, user.id(), id).await)
        .await?
        .ok_or(Error::NotFound("attachment"))?;
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await?;
    let opened = Opened::of(&dk, &row)?;
    let content = crypto::open(&dk, &aad(&row, "content"), &row.content)?;
    Ok((opened.name, row.media_type, content))
}

/// The user's attachments, by id and session (their contents not read): what the archive of
/// everything lists.
pub async fn all_of(st: &AppState, user: &AuthUser) -> Result<Vec<(String, i64)>> {
    st.db
        .read_with(async |c| crate::store::attachments::ids_of(c, user.id()).await)
        .await
}

/// The attachments a message of the session carries, by id, as its payload keeps them:
/// `{id, name, kind, media_type, size}`, and `text` for a text or a PDF (cut at
/// [`MAX_ATTACHMENT_TEXT_CHARS`]). Each must be the user's, of this session; an image only
/// for an agent that reads images.
pub async fn for_message(
    st: &AppState,
    user: &AuthUser,
    dk: &SecretKey,
    session_id: i64,
    ids: &[String],
) -> Result<Vec<Value>> {
    if ids.len() > MAX_ATTACHMENTS_PER_MESSAGE {
        return Err(Error::TooLarge(format!(
            "a message carries at most {MAX_ATTACHMENTS_PER_MESSAGE} attachments; this one names {}",
            ids.len()
        )));
    }
    let mut out = Vec::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        if ids[..i].contains(id) {
            continue;
        }
        let row = st
            .db
            .read_with(async |c| crate::store::attachments::get(c, user.id(), id).await)
            .await?
            .filter(|r| r.session_id == session_id)
            .ok_or(Error::NotFound("attachment"))?;
        if row.kind == Kind::Image.as_str() {
            images_read_by(st, user, session_id).await?;
        }
        let opened = Opened::of(dk, &row)?;
        let mut entry = json!({
            "id": row.id,
            "name": opened.name,
            "kind": row.kind,
            "media_type": row.media_type,
            "size": row.size,
        });
        if let Some(text) = opened.text {
            entry["text"] = json!(cut(text));
        }
        out.push(entry);
    }
    Ok(out)
}

/// `messages` with the bytes of the images they name (an image attached to a message is
/// named there; its bytes stay in its row until a call is made): the latest
/// [`MAX_IMAGES_PER_CALL`], older ones said in words. An image that cannot be read is left
/// out, with a warning: the call goes on without it. For a provider that reads no images
/// (the session's agent changed since they were attached) none is sent, each said in words.
pub async fn with_images(
    st: &AppState,
    user_id: i64,
    dk: &SecretKey,
    provider: ProviderKind,
    mut messages: Vec<Arc<ChatMessage>>,
) -> Vec<Arc<ChatMessage>> {
    let mut sent = 0;
    for m in messages.iter_mut().rev() {
        if m.images.is_empty() {
            continue;
        }
        let m = Arc::make_mut(m);
        if !reads_images(provider) {
            for image in m.images.drain(..) {
                let name = image.name.replace(['[', ']'], "_");
                m.content.push_str(&format!(
                    "\n\n[the image {name} is not sent: this agent's provider reads no images]"
                ));
            }
            continue;
        }
        let room = MAX_IMAGES_PER_CALL.saturating_sub(sent);
        if m.images.len() > room {
            let older = m.images.len() - room;
            m.images.drain(..older);
            m.content.push_str(&format!(
                "\n\n[{older} earlier image(s) of this message are not sent again: a call carries the latest {MAX_IMAGES_PER_CALL}]"
            ));
        }
        sent += m.images.len();
        for image in m.images.iter_mut().filter(|i| i.data.is_none()) {
            match image_bytes(st, user_id, dk, &image.attachment_id).await {
                Ok(bytes) => image.data = Some(Arc::from(base64_of(&bytes))),
                Err(e) => {
                    tracing::warn!(error = %e, "an attached image could not be read for a call")
                }
            }
        }
        m.images.retain(|i| i.data.is_some());
    }
    messages
}

async fn image_bytes(st: &AppState, user_id: i64, dk: &SecretKey, id: &str) -> Result<Vec<u8>> {
    let row = st
        .db
        .read_with(async |c| crate::store::attachments::get(c, user_id, id).await)
        .await?
        .ok_or(Error::NotFound("attachment"))?;
    let at = aad(&row, "content");
    Ok(crypto::open(dk, &at, &row.content)?)
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// 415 unless the session's agent reads images.
async fn images_read_by(st: &AppState, user: &AuthUser, session_id: i64) -> Result<()> {
    let session = super::sessions::get(&st.db, user, session_id).await?;
    let agent = match session.agent_id {
        Some(id) => Some(crate::agents::get(&st.db, &st.keys, user, id).await?),
        None => None,
    };
    match agent {
        Some(a) if reads_images(a.provider) => Ok(()),
        Some(a) => Err(Error::Unsupported(format!(
            "{} ({}) does not read images: attach text or a PDF, or choose an Anthropic or OpenAI agent for this session",
            a.name,
            a.provider.as_str()
        ))),
        None => Err(Error::Unsupported(
            "this session has no agent to read an image: choose one first".into(),
        )),
    }
}

/// The text of a PDF, read on a blocking thread (a malformed file may make the reader
/// panic, which is caught) within [`PDF_TIMEOUT`]: 422 naming the problem when it cannot
/// be read or holds no text.
async fn pdf_text(name: &str, bytes: Vec<u8>) -> Result<String> {
    // One PDF read at a time: the permit goes with the reading thread, which a timeout
    // does not stop, so a file that reads for ever holds one thread, never more.
    let permit = tokio::time::timeout(PDF_TIMEOUT, PDF_READS.acquire())
        .await
        .map_err(|_| {
            Error::Unavailable("another PDF is being read; attach this one again in a moment")
        })?
        .map_err(|_| Error::Internal("the PDF readers' semaphore closed".into()))?;
    let read = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        std::panic::catch_unwind(|| pdf_extract::extract_text_from_mem(&bytes))
    });
    let unreadable =
        |why: String| Error::Unreadable(format!("{name} could not be read as a PDF: {why}"));
    let text = match tokio::time::timeout(PDF_TIMEOUT, read).await {
        Err(_) => return Err(unreadable("reading it took too long".into())),
        Ok(Err(_)) | Ok(Ok(Err(_))) => return Err(unreadable("the file is damaged".into())),
        Ok(Ok(Ok(Err(e)))) => return Err(unreadable(e.to_string())),
        Ok(Ok(Ok(Ok(text)))) => text,
    };
    if text.trim().is_empty() {
        return Err(Error::Unreadable(format!(
            "{name} holds no text to read (scanned pages are images: attach them as images)"
        )));
    }
    Ok(text)
}

/// `text` cut at [`MAX_ATTACHMENT_TEXT_CHARS`], saying so.
fn cut(text: String) -> String {
    match text.char_indices().nth(MAX_ATTACHMENT_TEXT_CHARS) {
        Some((at, _)) => format!(
            "{}\n[cut here: the agent reads the first {MAX_ATTACHMENT_TEXT_CHARS} characters]",
            &text[..at]
        ),
        None => text,
    }
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

/// What binds a sealed field to its attachment: its id, owner, session, kind, media type,
/// size and time, so that no stored column can be changed under a sealed one.
fn aad(row: &AttachmentRow, field: &str) -> Vec<u8> {
    format!(
        "hero attachment v1|{}|{}|{}|{}|{}|{}|{}|{field}",
        row.id, row.user_id, row.session_id, row.kind, row.media_type, row.size, row.created_at
    )
    .into_bytes()
}

/// A row's name and text, opened.
struct Opened {
    name: String,
    text: Option<String>,
}

impl Opened {
    fn of(dk: &SecretKey, row: &AttachmentRow) -> Result<Opened> {
        let at = |field: &str| aad(row, field);
        let utf8 = |b: Vec<u8>| String::from_utf8(b).map_err(|e| Error::Internal(e.to_string()));
        let name = utf8(crypto::open(dk, &at("name"), &row.name)?)?;
        let text = match &row.text {
            Some(t) => Some(utf8(crypto::open(dk, &at("text"), t)?)?),
            None => None,
        };
        Ok(Opened { name, text })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_known_by_their_first_bytes_or_as_text() {
        let kind = classify;
        assert_eq!(
            kind("a.png", b"\x89PNG\r\n\x1a\nrest").unwrap(),
            (Kind::Image, "image/png")
        );
        assert_eq!(
            kind("photo", &[0xFF, 0xD8, 0xFF, 0xE0]).unwrap(),
            (Kind::Image, "image/jpeg")
        );
        assert_eq!(
            kind("x.webp", b"RIFF\0\0\0\0WEBPVP8 ").unwrap(),
            (Kind::Image, "image/webp")
        );
        assert_eq!(
            kind("doc.pdf", b"%PDF-1.4\n").unwrap(),
            (Kind::Pdf, "application/pdf")
        );
        assert_eq!(
            kind("notes.md", "# Été".as_bytes()).unwrap(),
            (Kind::Text, "text/markdown")
        );
        assert_eq!(
            kind("data.CSV", b"a,b\n1,2").unwrap(),
            (Kind::Text, "text/csv")
        );
        assert_eq!(
            kind("main.rs", b"fn main() {}").unwrap(),
            (Kind::Text, "text/plain")
        );
        // A PNG named .txt is an image; bytes that are no text and no known file are refused.
        assert_eq!(kind("a.txt", b"\x89PNG\r\n\x1a\n").unwrap().0, Kind::Image);
        let e = kind("tool.exe", b"MZ\x90\0\x03").unwrap_err();
        assert_eq!(e.status(), http::StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert!(
            e.to_string()
                .starts_with("tool.exe is not a file Hero reads"),
            "{e}"
        );
    }

    #[test]
    fn long_text_is_cut_and_says_so() {
        let long = "é".repeat(MAX_ATTACHMENT_TEXT_CHARS + 5);
        let c = cut(long);
        assert!(c.ends_with("characters]"), "{}", &c[c.len() - 80..]);
        assert_eq!(
            c.chars().filter(|&ch| ch == 'é').count(),
            MAX_ATTACHMENT_TEXT_CHARS
        );
        assert_eq!(cut("short".into()), "short");
    }

    #[tokio::test]
    async fn a_pdf_is_read_and_a_broken_one_is_refused() {
        let text = pdf_text("a.pdf", crate::test_support::pdf("Quarterly figures: 42"))
            .await
            .unwrap();
        assert!(text.contains("Quarterly figures: 42"), "{text:?}");
        let e = pdf_text("b.pdf", b"%PDF-1.4\nnot really".to_vec())
            .await
            .unwrap_err();
        assert_eq!(e.status(), http::StatusCode::UNPROCESSABLE_ENTITY);
        assert!(
            e.to_string()
                .starts_with("b.pdf could not be read as a PDF"),
            "{e}"
        );
    }
}
