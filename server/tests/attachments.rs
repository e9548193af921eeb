//! Attachments on loopback with the mock LLM: a CSV, a PDF and an image uploaded and sent
//! with a message reach the provider's request as the real APIs take them (Anthropic's
//! text and image blocks, OpenAI's image parts), sealed at rest, downloadable by their
//! owner alone; and every bad upload or message a 4xx naming its limit or problem, with
//! nothing stored.

mod support;

use base64::Engine;
use hero_backend::conversation::attachments::{
    MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS_PER_MESSAGE, MAX_ATTACHMENTS_PER_SESSION,
};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::*;

/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0xF8, 0xCF, 0xC0, 0xF0,
    0x1F, 0x00, 0x05, 0x00, 0x01, 0xFF, 0x89, 0x99, 0x3D, 0x1D, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82,
];

async fn upload(
    c: &reqwest::Client,
    h: &Hero,
    session: i64,
    name: &str,
    bytes: Vec<u8>,
) -> (StatusCode, Value) {
    // A form as a browser sends it: one `file` part.
    let boundary = "hero-test-boundary-7f3a";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(&bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let r = c
        .post(h.url(&format!("/api/sessions/{session}/attachments")))
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// The last request the mock was sent.
fn last_request(mock: &mock_llm::MockServer) -> Value {
    mock.requests().last().expect("a request")["body"].clone()
}

#[tokio::test]
async fn text_pdf_and_image_reach_the_provider_and_only_their_owner_reads_them() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    let csv = b"city,visits\nLyon,3\n".to_vec();
    let (s, a) = upload(&h.c, &h, session, "visits.csv", csv.clone()).await;
    assert_eq!(s, StatusCode::CREATED, "{a}");
    assert_eq!(
        (a["name"].as_str(), a["kind"].as_str(), a["size"].as_u64()),
        (Some("visits.csv"), Some("text"), Some(csv.len() as u64))
    );
    let pdf = hero_backend::test_support::pdf("Quarterly figures: 42");
    let (s, p) = upload(&h.c, &h, session, "report.pdf", pdf).await;
    assert_eq!(
        (s, p["kind"].as_str()),
        (StatusCode::CREATED, Some("pdf")),
        "{p}"
    );
    let (s, i) = upload(&h.c, &h, session, "dot.png", PNG.to_vec()).await;
    assert_eq!(
        (s, i["kind"].as_str()),
        (StatusCode::CREATED, Some("image")),
        "{i}"
    );
    let ids: Vec<Value> = [&a, &p, &i]
        .iter()
        .map(|x| x["attachment_id"].clone())
        .collect();

    // Sent with a message: the texts in the user's turn, the image as an image block.
    let events = h
        .stream_body(
            session,
            json!({"content": "What do these say? [[mock text=ok]]", "attachments": ids}),
        )
        .await;
    assert!(names(&events).contains(&"message_complete"), "{events:?}");
    let body = last_request(&mock);
    let user = body["messages"].as_array().unwrap().last().unwrap().clone();
    let blocks = user["content"].as_array().expect("blocks");
    assert_eq!(blocks[0]["type"], "image", "{user}");
    assert_eq!(blocks[0]["source"]["media_type"], "image/png");
    let b64 = base64::engine::general_purpose::STANDARD.encode(PNG);
    assert_eq!(blocks[0]["source"]["data"], b64.as_str());
    let text = blocks[1]["text"].as_str().unwrap();
    assert!(text.contains("What do these say?"), "{text}");
    assert!(
        text.contains("<attachment name=\"visits.csv\" type=\"text/csv\">\ncity,visits\nLyon,3\n"),
        "{text}"
    );
    assert!(
        text.contains("<attachment name=\"report.pdf\" type=\"application/pdf\">")
            && text.contains("Quarterly figures: 42"),
        "{text}"
    );

    // The message shows what it carried (names, kinds, sizes), its words alone as content.
    let frames = h.frames(session).await;
    let sent = frames
        .iter()
        .rev()
        .find(|f| f["type"] == "message" && f["author_type"] == "user")
        .unwrap();
    assert_eq!(
        sent["payload"]["content"],
        "What do these say? [[mock text=ok]]"
    );
    let carried: Vec<&str> = sent["payload"]["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(carried, ["visits.csv", "report.pdf", "dot.png"]);

    // The page is sent the names alone: the text read from a file stays on the server
    // (the frames' own route and the export carry it).
    let (_, v) = h
        .json(Method::GET, &format!("/api/sessions/{session}/view"), None)
        .await;
    let shown = v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["payload"]["attachments"].is_array())
        .unwrap()
        .clone();
    assert!(shown["payload"]["attachments"][0]["name"].is_string());
    assert!(
        shown["payload"]["attachments"][0].get("text").is_none(),
        "{shown}"
    );
    assert!(sent["payload"]["attachments"][0]["text"].is_string());

    // A later turn sends the image again: the conversation holds it.
    h.stream(session, "And now? [[mock text=still]]").await;
    let again = last_request(&mock);
    assert!(
        again.to_string().contains(&b64),
        "the image is not in the later turn's request"
    );

    // The session's agent changed to one whose provider reads no images: the image stays
    // out of its requests, and the agent is told it is not sent.
    let (_, compatible) = h.session_with("openai-compatible", &mock, KEY).await;
    let (s, v) = h
        .json(
            Method::PATCH,
            &format!("/api/sessions/{session}"),
            Some(json!({ "agent_id": compatible })),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    h.stream(session, "And here? [[mock text=unseen]]").await;
    let plain = last_request(&mock);
    assert!(
        !plain.to_string().contains(&b64) && !plain.to_string().contains("image_url"),
        "an image reached a provider that reads none: {plain}"
    );
    assert!(plain.to_string().contains("dot.png is not sent"), "{plain}");

    // Sealed at rest: neither the name nor the text is in the database's bytes.
    let raw = hero_backend::store::testing::bytes(&h.st.db, "SELECT name FROM attachments", &[])
        .await
        .unwrap();
    assert!(
        !raw.windows(6).any(|w| w == b"visits"),
        "a name is stored in the clear"
    );

    // Downloaded by its owner, as it was; a missing one for anyone else.
    let id = a["attachment_id"].as_str().unwrap();
    let r =
        h.c.get(h.url(&format!("/api/attachments/{id}")))
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], "text/csv");
    assert!(
        r.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .contains("visits.csv")
    );
    assert_eq!(r.bytes().await.unwrap().as_ref(), csv.as_slice());
    let bob = bob_client(&h).await;
    let r = bob
        .get(h.url(&format!("/api/attachments/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    // OpenAI's wire format: the image as a data URL part.
    let (openai, _) = h.session_with("openai", &mock, KEY).await;
    let (_, img) = upload(&h.c, &h, openai, "dot.png", PNG.to_vec()).await;
    h.stream_body(
        openai,
        json!({"content": "Look [[mock text=seen]]", "attachments": [img["attachment_id"]]}),
    )
    .await;
    let body = last_request(&mock);
    let parts = body["messages"].as_array().unwrap().last().unwrap()["content"].clone();
    assert_eq!(parts[0]["type"], "text", "{parts}");
    assert_eq!(parts[1]["type"], "image_url");
    assert_eq!(
        parts[1]["image_url"]["url"],
        format!("data:image/png;base64,{b64}").as_str()
    );
}

#[tokio::test]
async fn bad_uploads_and_messages_are_refused_and_store_nothing() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    let (compatible, _) = h.session_with("openai-compatible", &mock, KEY).await;
    let stored = || async { hero_backend::test_support::rows_in(&h.st, "attachments").await };
    let error = |v: &Value| v["error"].as_str().unwrap_or_default().to_owned();

    let big = vec![b'a'; MAX_ATTACHMENT_BYTES + 1];
    let (s, e) = upload(&h.c, &h, session, "big.txt", big).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{e}");
    assert!(error(&e).contains("at most 10"), "{e}");
    let (s, e) = upload(&h.c, &h, session, "tool.exe", b"MZ\x90\0\x03\0".to_vec()).await;
    assert_eq!(s, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{e}");
    assert!(
        error(&e).starts_with("tool.exe is not a file Hero reads"),
        "{e}"
    );
    let (s, e) = upload(
        &h.c,
        &h,
        session,
        "broken.pdf",
        b"%PDF-1.4\nnothing here".to_vec(),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    assert!(
        error(&e).starts_with("broken.pdf could not be read as a PDF"),
        "{e}"
    );
    let (s, e) = upload(&h.c, &h, compatible, "dot.png", PNG.to_vec()).await;
    assert_eq!(s, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{e}");
    assert!(error(&e).contains("does not read images"), "{e}");
    let (s, e) = upload(&h.c, &h, session, "empty.txt", Vec::new()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
    // Another user's session is a missing one.
    let bob = bob_client(&h).await;
    let (s, _) = upload(&bob, &h, session, "a.txt", b"hi".to_vec()).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(stored().await, 0);

    // A message naming too many, another session's, or another user's: refused, unsent.
    let (_, mine) = upload(&h.c, &h, session, "a.txt", b"hello".to_vec()).await;
    let id = mine["attachment_id"].clone();
    let frames_before = h.frames(session).await.len();
    let h = &h;
    let post = |session: i64, ids: Value| async move {
        let path = format!("/api/sessions/{session}/messages");
        let body = json!({"content": "see", "attachments": ids});
        h.json(Method::POST, &path, Some(body)).await
    };
    let many: Vec<Value> = (0..=MAX_ATTACHMENTS_PER_MESSAGE)
        .map(|i| json!(format!("id-{i}")))
        .collect();
    let (s, e) = post(session, json!(many)).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{e}");
    assert!(error(&e).contains("at most 8 attachments"), "{e}");
    let (other, _) = h.session_with("anthropic", &mock, KEY).await;
    let (s, _) = post(other, json!([id])).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = post(session, json!(["not-an-attachment"])).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // Bob naming Alice's attachment in his own session: a missing one, and nothing sent.
    let r = bob
        .post(h.url("/api/sessions"))
        .json(&json!({"name": "Bob's"}))
        .send()
        .await
        .unwrap();
    let bobs = r.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    let r = bob
        .post(h.url(&format!("/api/sessions/{bobs}/messages")))
        .json(&json!({"content": "see", "attachments": [id]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let r = bob
        .get(h.url(&format!("/api/sessions/{bobs}/frames")))
        .send()
        .await
        .unwrap();
    let page: Value = r.json().await.unwrap();
    assert_eq!(page["frames"], json!([]), "nothing sent");
    let r = bob
        .get(h.url(&format!("/api/attachments/{}", id.as_str().unwrap())))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let (s, e) = h
        .json(
            Method::POST,
            &format!("/api/sessions/{session}/messages"),
            Some(json!({"content": "/compact", "attachments": [id]})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
    assert_eq!(h.frames(session).await.len(), frames_before);

    // A session holds a bounded number.
    for i in 1..MAX_ATTACHMENTS_PER_SESSION {
        let (s, e) = upload(&h.c, h, session, &format!("n{i}.txt"), b"x".to_vec()).await;
        assert_eq!(s, StatusCode::CREATED, "{i}: {e}");
    }
    let (s, e) = upload(&h.c, h, session, "one-more.txt", b"x".to_vec()).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{e}");
    assert!(error(&e).contains("200 attachments"), "{e}");
    assert_eq!(stored().await, MAX_ATTACHMENTS_PER_SESSION);
}
