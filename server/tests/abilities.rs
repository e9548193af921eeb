//! Abilities (reference 000) over the API, on loopback: the list of functions and Hero's
//! processes, the user's own processes created, read, changed, rendered and deleted (sealed
//! in their rows, another user's a 404), and every refusal a person can act on.

mod support;

use hero_backend::store::testing::{Arg, bytes};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::*;

fn ids(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn the_list_holds_functions_and_heros_processes_filtered() {
    let h = hero(&[]).await;
    let (s, all) = h.json(Method::GET, "/api/abilities", None).await;
    assert_eq!(s, StatusCode::OK, "{all}");
    let all_ids = ids(&all);
    for id in [
        "builtin:help",
        "builtin:bash",
        "builtin:agent_queue",
        "system:__onstart_",
        "system:act",
    ] {
        assert!(all_ids.contains(&id), "{id} in {all_ids:?}");
    }
    let bash = all
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "builtin:bash")
        .unwrap();
    assert_eq!(bash["type"], "function");
    assert_eq!(bash["source"], "builtin");
    assert_eq!(
        bash["permissions"],
        json!({"autoApprove": "always", "dangerLevel": "dangerous"})
    );
    assert_eq!(bash["autoApprovePolicy"], "ask");
    assert_eq!(bash["editable"], false);
    assert!(bash.get("content").is_none());
    let (_, processes) = h
        .json(
            Method::GET,
            "/api/abilities?type=process&source=system",
            None,
        )
        .await;
    assert_eq!(ids(&processes), ["system:__onstart_", "system:act"]);
    assert_eq!(processes[0]["startup"], true);
    assert_eq!(processes[1]["startup"], false);
    // The commands: their own category; those that change what the user owns ask always.
    let (_, commands) = h
        .json(Method::GET, "/api/abilities?category=commands", None)
        .await;
    assert_eq!(
        ids(&commands),
        [
            "builtin:command_ability",
            "builtin:command_session",
            "builtin:command_agent",
            "builtin:command_skill",
            "builtin:command_start",
            "builtin:command_compact",
            "builtin:command_stream",
            "builtin:command_update_usage",
        ]
    );
    assert_eq!(commands[1]["autoApprovePolicy"], "never");
    assert_eq!(
        commands[1]["permissions"],
        json!({"autoApprove": "never", "dangerLevel": "moderate"})
    );
    assert_eq!(commands[4]["autoApprovePolicy"], "always");
    let (s, body) = h.json(Method::GET, "/api/abilities?type=skill", None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    let (s, one) = h
        .json(Method::GET, "/api/abilities/builtin:websearch", None)
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(one["schema"]["properties"]["query"]["type"], "string");
    assert!(!one["examples"].as_array().unwrap().is_empty());
    let (s, _) = h
        .json(Method::GET, "/api/abilities/builtin:nope", None)
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // The conditional process Hero ships: a builtin process saying when it applies.
    let (_, conditional) = h
        .json(
            Method::GET,
            "/api/abilities?source=builtin&type=process",
            None,
        )
        .await;
    assert_eq!(ids(&conditional), ["builtin:prompt_response_handler"]);
    assert_eq!(conditional[0]["category"], "conditional");
    assert!(
        conditional[0]["description"]
            .as_str()
            .unwrap()
            .contains("responds to an hml-prompt"),
        "{conditional}"
    );
    let (_, one) = h
        .json(
            Method::GET,
            "/api/abilities/builtin:prompt_response_handler",
            None,
        )
        .await;
    assert!(
        one["content"].as_str().unwrap().contains("update_prompt"),
        "{one}"
    );
}

#[tokio::test]
async fn a_users_process_is_created_rendered_changed_and_deleted() {
    let h = hero(&[]).await;
    let content = "Weekly review for {{user.name}} with {{agent.name}} in {{session.name}} on {{date}} at {{time}}: {{args}}. \\{{date}} is literal.";
    let (s, made) = h
        .json(
            Method::POST,
            "/api/abilities",
            Some(json!({"name": "weekly-review", "description": "the Friday review", "content": content})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{made}");
    let id = made["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("user:"), "{id}");
    assert_eq!(made["source"], "user");
    assert_eq!(made["editable"], true);
    assert_eq!(made["type"], "process");
    // Sealed in its row: neither the content nor the description is there in plain.
    let n: i64 = id["user:".len()..].parse().unwrap();
    let row = bytes(
        &h.st.db,
        "SELECT sealed FROM processes WHERE id = $1",
        &[Arg::Int(n)],
    )
    .await
    .unwrap();
    let raw = String::from_utf8_lossy(&row);
    assert!(
        !raw.contains("Weekly review") && !raw.contains("Friday"),
        "{raw}"
    );
    let (s, got) = h
        .json(Method::GET, &format!("/api/abilities/{id}"), None)
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(got["content"], content);
    assert_eq!(got["description"], "the Friday review");

    // Rendered for a session: every variable filled.
    let (_, session) = h
        .json(
            Method::POST,
            "/api/sessions",
            Some(json!({"name": "Planning"})),
        )
        .await;
    let (s, out) = h
        .json(
            Method::POST,
            &format!("/api/abilities/{id}/render"),
            Some(json!({"session_id": session["id"], "args": "the launch"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{out}");
    let text = out["content"].as_str().unwrap();
    let today = &hero_shared_now()[..10];
    let start = |day: &str| {
        format!("Weekly review for alice with Hero demo (offline) in Planning on {day} at ")
    };
    // (Across midnight UTC, the day before.)
    let yesterday = (time::OffsetDateTime::now_utc() - time::Duration::days(1)).date();
    assert!(
        text.starts_with(&start(today)) || text.starts_with(&start(&yesterday.to_string())),
        "{text}"
    );
    assert!(
        text.ends_with(": the launch. {{date}} is literal."),
        "{text}"
    );
    let (s, _) = h
        .json(
            Method::POST,
            "/api/abilities/system:act/render",
            Some(json!({"args": "Go."})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);

    // Changed, then deleted.
    let (s, changed) = h
        .json(
            Method::PATCH,
            &format!("/api/abilities/{id}"),
            Some(json!({"name": "friday-review", "content": "Now {{date}}."})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{changed}");
    assert_eq!(changed["name"], "friday-review");
    assert_eq!(changed["description"], "the Friday review");
    let (_, got) = h
        .json(Method::GET, &format!("/api/abilities/{id}"), None)
        .await;
    assert_eq!(got["content"], "Now {{date}}.");
    let (_, mine) = h
        .json(Method::GET, "/api/abilities?source=user", None)
        .await;
    assert_eq!(ids(&mine), [id.as_str()]);

    // Another user sees none of it.
    let bob = bob_client(&h).await;
    for (method, path) in [
        (Method::GET, format!("/api/abilities/{id}")),
        (Method::DELETE, format!("/api/abilities/{id}")),
    ] {
        let r = bob.request(method, h.url(&path)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
    }
    let r = bob
        .get(h.url("/api/abilities?source=user"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.json::<Value>().await.unwrap(), json!([]));
    let r = bob
        .patch(h.url(&format!("/api/abilities/{id}")))
        .json(&json!({"content": "mine now"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let r = bob
        .post(h.url(&format!("/api/abilities/{id}/render")))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // Nor renders Hero's for alice's session.
    let r = bob
        .post(h.url("/api/abilities/system:act/render"))
        .json(&json!({"session_id": session["id"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    let (s, _) = h
        .json(Method::DELETE, &format!("/api/abilities/{id}"), None)
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = h
        .json(Method::GET, &format!("/api/abilities/{id}"), None)
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

/// Today's date as the server writes it (UTC).
fn hero_shared_now() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

#[tokio::test]
async fn bad_processes_are_refused_with_their_reason_and_nothing_is_stored() {
    let h = hero(&[]).await;
    let post = |body: Value| h.json(Method::POST, "/api/abilities", Some(body));
    let refused = |r: &(StatusCode, Value), status: StatusCode, want: &str| {
        assert_eq!(r.0, status, "{}", r.1);
        let msg = r.1["error"].as_str().unwrap();
        assert!(msg.contains(want), "{msg:?} lacks {want:?}");
    };
    refused(
        &post(json!({"name": "bad name", "content": "x"})).await,
        StatusCode::BAD_REQUEST,
        "letters, digits",
    );
    refused(
        &post(json!({"name": "p", "content": "Hi {{user.email}}"})).await,
        StatusCode::BAD_REQUEST,
        "{{user.email}} is not a variable",
    );
    refused(
        &post(json!({"name": "p", "content": "x".repeat(64 * 1024 + 1)})).await,
        StatusCode::BAD_REQUEST,
        "at most 64 KiB",
    );
    // A name any ability has.
    refused(
        &post(json!({"name": "bash", "content": "x"})).await,
        StatusCode::CONFLICT,
        "already named",
    );
    refused(
        &post(json!({"name": "act", "content": "x"})).await,
        StatusCode::CONFLICT,
        "already named",
    );
    assert_eq!(
        post(json!({"name": "mine", "content": "x"})).await.0,
        StatusCode::CREATED
    );
    refused(
        &post(json!({"name": "mine", "content": "y"})).await,
        StatusCode::CONFLICT,
        "already named",
    );
    // Hero's own are read-only.
    for id in ["builtin:bash", "system:act"] {
        let r = h
            .json(
                Method::PATCH,
                &format!("/api/abilities/{id}"),
                Some(json!({"content": "x"})),
            )
            .await;
        refused(&r, StatusCode::CONFLICT, "belongs to Hero; copy it");
        let r = h
            .json(Method::DELETE, &format!("/api/abilities/{id}"), None)
            .await;
        refused(&r, StatusCode::CONFLICT, "belongs to Hero");
    }
    let r = h
        .json(
            Method::POST,
            "/api/abilities/builtin:help/render",
            Some(json!({})),
        )
        .await;
    refused(&r, StatusCode::BAD_REQUEST, "only a process renders");
    let r = h
        .json(
            Method::POST,
            "/api/abilities/system:act/render",
            Some(json!({"args": "x".repeat(4_001)})),
        )
        .await;
    refused(
        &r,
        StatusCode::BAD_REQUEST,
        "args is at most 4000 characters",
    );
    // A misspelt field is refused, not ignored.
    let (_, mine) = h
        .json(Method::GET, "/api/abilities?source=user", None)
        .await;
    let id = mine[0]["id"].as_str().unwrap().to_owned();
    let r = h
        .json(
            Method::PATCH,
            &format!("/api/abilities/{id}"),
            Some(json!({"contents": "y"})),
        )
        .await;
    assert!(r.0.is_client_error(), "{r:?}");
    let (_, got) = h
        .json(Method::GET, &format!("/api/abilities/{id}"), None)
        .await;
    assert_eq!(got["content"], "x");
    let (_, mine) = h
        .json(Method::GET, "/api/abilities?source=user", None)
        .await;
    assert_eq!(mine.as_array().unwrap().len(), 1, "{mine}");
}

/// The 501st process is refused (429), counted in the transaction that would insert it.
#[tokio::test]
async fn a_user_has_at_most_so_many_processes() {
    let h = hero(&[]).await;
    let most = hero_backend::agents::abilities::MAX_PROCESSES_PER_USER;
    for i in 0..most {
        let (s, body) = h
            .json(
                Method::POST,
                "/api/abilities",
                Some(json!({"name": format!("p{i}"), "content": "x"})),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
    }
    let (s, body) = h
        .json(
            Method::POST,
            "/api/abilities",
            Some(json!({"name": "one-more", "content": "x"})),
        )
        .await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("500 processes"),
        "{body}"
    );
}

/// The agent loads a process by its name (`process`, always and safe): Hero's, or the user's
/// own, its variables filled for the session; a name with no process is a failed call.
#[tokio::test]
async fn the_agent_loads_a_process_by_its_name() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    let (s, _) = h
        .json(
            Method::POST,
            "/api/abilities",
            Some(json!({"name": "greet", "content": "Greet {{user.name}} in {{session.name}} about {{args}}."})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    // `\u0040` is `@`: the user's own message makes no call.
    h.stream(
        session,
        r#"[[mock text="\u0040system(process, {name: \"greet\", args: \"the launch\"}) \u0040system(process, {name: \"act\"}) \u0040system(process, {name: \"nope\"})" then="Loaded."]]"#,
    )
    .await;
    let frames = frames_when(&h, session, |f| agent_messages(f).len() == 2).await;
    let results: Vec<(String, String)> = of_type(&frames, "result")
        .iter()
        .map(|r| {
            (
                r["payload"]["outcome"].as_str().unwrap().to_owned(),
                r["payload"]["output"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(results.len(), 3, "{frames:#?}");
    assert_eq!(
        results[0],
        (
            "ok".to_owned(),
            "Greet alice in chat about the launch.".to_owned()
        )
    );
    assert_eq!(results[1].0, "ok");
    assert!(
        results[1].1.starts_with("How to act with the functions"),
        "{}",
        results[1].1
    );
    assert_eq!(
        results[2],
        (
            "error".to_owned(),
            r#"there is no process named "nope""#.to_owned()
        )
    );
}

/// The system prompt of the mock's last chat request, as text.
fn last_system(mock: &mock_llm::MockServer) -> String {
    let r = mock
        .requests()
        .into_iter()
        .rev()
        .find(|r| r["path"].as_str().is_some_and(|p| p.ends_with("/messages")))
        .expect("a chat request");
    match &r["body"]["system"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        other => panic!("no system prompt: {other}"),
    }
}

/// An agent's default processes (reference 003) are in its every system prompt, in full, in
/// their order, after the tooling; the other processes are listed by name. Only processes
/// of Hero's or the user's own may be chosen; a change to one reaches the next prompt, and
/// a deleted one leaves the list.
#[tokio::test]
async fn default_processes_are_in_the_agents_prompt_in_order() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, agent) = h.session_with("anthropic", &mock, KEY).await;
    let make = |name: &'static str, description: &'static str, content: &'static str| {
        h.json(
            Method::POST,
            "/api/abilities",
            Some(json!({"name": name, "description": description, "content": content})),
        )
    };
    let (_, first) = make(
        "first-steps",
        "how to begin",
        "Greet {{user.name}} as {{agent.name}}.",
    )
    .await;
    let (_, style) = make("style", "the house style", "Answer in short lines.").await;
    let style_id = style["id"].as_str().unwrap().to_owned();
    let agent_path = format!("/api/agents/{agent}");
    let (s, set) = h
        .json(
            Method::PATCH,
            &agent_path,
            Some(json!({"default_processes": [style_id, "system:act", first["id"], style_id]})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{set}");
    assert_eq!(
        set["default_processes"],
        json!([style_id, "system:act", first["id"]]),
        "in order, each once"
    );
    // Only processes of Hero's or the user's own.
    let bob = bob_client(&h).await;
    let r = bob
        .post(h.url("/api/abilities"))
        .json(&json!({"name": "bobs", "content": "x"}))
        .send()
        .await
        .unwrap();
    let bobs: Value = r.json().await.unwrap();
    for bad in [
        json!("builtin:bash"),
        json!("user:999999"),
        bobs["id"].clone(),
        json!("act"),
    ] {
        let (s, body) = h
            .json(
                Method::PATCH,
                &agent_path,
                Some(json!({"default_processes": [bad]})),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("not a process of yours"),
            "{body}"
        );
    }

    h.stream(session, "[[mock text=\"ok\"]]").await;
    let system = last_system(&mock);
    let style_at = system
        .find("<process name=\"style\">\nAnswer in short lines.\n</process>")
        .expect("the style process in full");
    let act_at = system
        .find("<process name=\"act\">\nHow to act")
        .expect("act in full");
    let first_at = system
        .find("<process name=\"first-steps\">\nGreet alice as anthropic agent.\n</process>")
        .expect("first-steps, rendered");
    assert!(style_at < act_at && act_at < first_at, "{system}");
    assert!(system.find("## Tooling").unwrap() < style_at);
    assert!(
        system.contains("- `__onstart_`: What every session begins with"),
        "{system}"
    );
    assert!(
        !system.contains("- `style`"),
        "a default one is not listed again"
    );

    // A change to a process reaches the next prompt.
    let (s, _) = h
        .json(
            Method::PATCH,
            &format!("/api/abilities/{style_id}"),
            Some(json!({"content": "Answer in long lines."})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    h.stream(session, "[[mock text=\"again\"]]").await;
    assert!(last_system(&mock).contains("Answer in long lines."));

    // A deleted one leaves the list.
    let (s, _) = h
        .json(Method::DELETE, &format!("/api/abilities/{style_id}"), None)
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (_, got) = h.json(Method::GET, &agent_path, None).await;
    assert_eq!(got["default_processes"], json!(["system:act", first["id"]]));
}

/// The chat requests' messages the mock was sent, last first, as JSON text.
fn last_messages(mock: &mock_llm::MockServer) -> String {
    mock.requests()
        .into_iter()
        .rev()
        .find(|r| r["path"].as_str().is_some_and(|p| p.ends_with("/messages")))
        .expect("a chat request")["body"]["messages"]
        .to_string()
}

/// The startup processes' names in the frames, in order.
fn startup_names(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .filter_map(|f| f["payload"]["startup"].as_str().map(str::to_owned))
        .collect()
}

/// A session's first message is preceded by the startup processes (Hero's and the user's,
/// in the startup rule's order), hidden in the view and on the page yet in the provider's
/// input; later messages add none; `/start` sends them again; a summary is followed by
/// them, so the next call after `/compact` has them.
#[tokio::test]
async fn startup_processes_precede_the_first_message_hidden_yet_sent() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    for (name, content) in [
        ("_onstart_b", "Second of mine, for {{user.name}}."),
        ("_onstart_a", "First of mine, in {{session.name}}."),
        ("___onstart_x", "Earliest of all."),
        ("not_onstart", "Never at the start."),
    ] {
        let (s, body) = h
            .json(
                Method::POST,
                "/api/abilities",
                Some(json!({"name": name, "content": content})),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
    }
    let (session, agent) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(session, "[[mock text=\"Hello.\"]]").await;
    let frames = h.frames(session).await;
    let order = ["___onstart_x", "__onstart_", "_onstart_a", "_onstart_b"];
    assert_eq!(startup_names(&frames), order);
    // Before the user's message, Hero's, hidden from birth.
    for f in &frames[..4] {
        assert_eq!(f["author_type"], "system");
        assert_eq!(f["payload"]["hidden"], true, "{f}");
    }
    assert_eq!(frames[4]["author_type"], "user");
    assert_eq!(frames[2]["payload"]["content"], "First of mine, in chat.");
    // Yet sent to the agent, in order, before the user's words.
    let sent = last_messages(&mock);
    let at = |text: &str| {
        sent.find(text)
            .unwrap_or_else(|| panic!("{text} in {sent}"))
    };
    assert!(at("Earliest of all.") < at("You are starting a new session"));
    assert!(at("You are starting a new session") < at("First of mine"));
    assert!(at("First of mine") < at("Second of mine, for alice."));
    assert!(at("Second of mine") < at("Hello."));
    assert!(!sent.contains("Never at the start"));
    // Hidden in the view and on the page.
    let (_, view) = h
        .json(Method::GET, &format!("/api/sessions/{session}/view"), None)
        .await;
    let startup_shown: Vec<&Value> = view["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m.to_string().contains("Earliest of all"))
        .collect();
    assert_eq!(startup_shown.len(), 1, "{view}");
    assert_eq!(startup_shown[0]["hidden"], true, "{view}");
    // The page draws the shown messages; the hidden ones are only in its data, for "Show
    // hidden messages".
    let page = h.page(&format!("/s/{session}")).await;
    let drawn: String = page
        .split("<script")
        .map(|part| {
            part.split_once("</script>")
                .map_or(part, |(_, after)| after)
        })
        .collect();
    assert!(drawn.contains("Hello."), "{drawn}");
    assert!(!drawn.contains("Earliest of all"), "hidden on the page");

    // A later message adds none.
    h.stream(session, "[[mock text=\"Again.\"]]").await;
    assert_eq!(startup_names(&h.frames(session).await).len(), 4);

    // `/start`: sent again, as a call of command_start, and no reply.
    let asked = mock.requests().len();
    h.stream(session, "/start").await;
    let frames = h.frames(session).await;
    assert_eq!(startup_names(&frames), [order, order].concat());
    let result = of_type(&frames, "result").last().copied().unwrap().clone();
    assert_eq!(result["payload"]["function"], "command_start");
    assert_eq!(result["payload"]["outcome"], "ok");
    assert!(
        result["payload"]["output"]
            .as_str()
            .unwrap()
            .contains("___onstart_x, __onstart_, _onstart_a, _onstart_b"),
        "{result}"
    );
    assert_eq!(mock.requests().len(), asked, "a command asks no reply");

    // After `/compact`, the next call has them after the summary.
    h.stream(session, "/compact").await;
    let frames = h.frames(session).await;
    let compact_at = frames
        .iter()
        .position(|f| f["type"] == "compact")
        .expect("a summary");
    assert_eq!(startup_names(&frames[compact_at..]), order);
    h.stream(session, "[[mock text=\"After.\"]]").await;
    let sent = last_messages(&mock);
    assert!(
        sent.contains("Earliest of all.") && sent.contains("After."),
        "{sent}"
    );

    // `/start` before the first message begins the session: the message adds none again.
    let (s, fresh) = h
        .json(
            Method::POST,
            "/api/sessions",
            Some(json!({"name": "fresh", "agent_id": agent})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{fresh}");
    let fresh = fresh["id"].as_i64().unwrap();
    h.stream(fresh, "/start").await;
    h.stream(fresh, "[[mock text=\"Once.\"]]").await;
    assert_eq!(startup_names(&h.frames(fresh).await), order);
}

/// Commands: typed, one runs at once as a call of its function with the user's authority
/// (a request and a result frame, no reply); bad arguments leave a private note with the
/// usage and run nothing; `/agent` with a key is refused before anything is stored. Called
/// by the agent, `command_session` waits for approval with no "Always allow", which cannot
/// be set; approved, it runs and the session exists.
#[tokio::test]
async fn commands_typed_run_at_once_and_the_agents_ask_always() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    let asked = mock.requests().len();
    h.stream(session, "/session new Research notes").await;
    let frames = h.frames(session).await;
    let typed = frames.last().unwrap();
    assert_eq!(typed["type"], "result", "{frames:#?}");
    assert_eq!(typed["payload"]["function"], "command_session");
    assert_eq!(typed["payload"]["outcome"], "ok", "{typed}");
    let request = of_type(&frames, "request")[0];
    assert_eq!(request["payload"]["decided_by"], "sender");
    let note = frames
        .iter()
        .find(|f| f["payload"]["content"] == "/session new Research notes")
        .unwrap();
    assert_eq!(note["payload"]["private"], true);
    assert_eq!(mock.requests().len(), asked, "a command asks no reply");
    let (_, sessions) = h.json(Method::GET, "/api/sessions", None).await;
    assert!(
        sessions.to_string().contains("Research notes"),
        "{sessions}"
    );

    // Bad arguments: a note with the usage, nothing run.
    let before = of_type(&h.frames(session).await, "request").len();
    h.stream(session, "/session fly away").await;
    let frames = h.frames(session).await;
    let last = frames.last().unwrap();
    let text = last["payload"]["content"].as_str().unwrap();
    assert!(
        text.contains("\"fly\" is not one of") && text.contains("Usage: /session new"),
        "{text}"
    );
    assert_eq!(last["payload"]["private"], true);
    assert_eq!(of_type(&frames, "request").len(), before);

    // A key: refused, nothing stored.
    let count = frames.len();
    let (status, body) = h
        .json(
            Method::POST,
            &format!("/api/sessions/{session}/messages/stream"),
            Some(json!({"content": "/agent configure anthropic --model m api_key=sk-ant-secret0123"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("Agents page"),
        "{body}"
    );
    let frames = h.frames(session).await;
    assert_eq!(frames.len(), count);
    assert!(
        !frames
            .iter()
            .any(|f| f.to_string().contains("sk-ant-secret"))
    );

    // Ask Always: no "always" level.
    let (s, body) = h
        .json(
            Method::PUT,
            "/api/permissions/command_agent",
            Some(json!({"level": "always"})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");

    // The agent's call waits for approval, its card without "Always allow".
    h.stream(
        session,
        r#"[[mock tool=command_session input={"action": "new", "name": "Agent made"} then="Made it."]]"#,
    )
    .await;
    let frames = h.frames(session).await;
    let request = of_type(&frames, "request").last().copied().unwrap().clone();
    assert_eq!(request["payload"]["function"], "command_session");
    assert_eq!(request["payload"]["status"], "pending", "{request}");
    assert_eq!(
        request["payload"]["permissions"],
        json!({"autoApprove": "never", "dangerLevel": "moderate"})
    );
    let page = h.page(&format!("/s/{session}")).await;
    assert!(page.contains("command_session") && !page.contains("Always allow command_session"));
    let (_, sessions) = h.json(Method::GET, "/api/sessions", None).await;
    assert!(
        !sessions.to_string().contains("Agent made"),
        "not before approval"
    );
    let rid = request["id"].as_str().unwrap();
    let (s, body) = decide(&h, session, rid, true).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    frames_when(&h, session, |f| {
        of_type(f, "result").iter().any(|r| r["parent_id"] == rid)
    })
    .await;
    let (_, sessions) = h.json(Method::GET, "/api/sessions", None).await;
    assert!(sessions.to_string().contains("Agent made"), "{sessions}");
}

/// The result of the last call in the session, `(outcome, output)`.
async fn last_result(h: &Hero, session: i64) -> (String, String) {
    let frames = h.frames(session).await;
    let r = of_type(&frames, "result").last().copied().unwrap().clone();
    (
        r["payload"]["outcome"].as_str().unwrap().to_owned(),
        r["payload"]["output"].as_str().unwrap().to_owned(),
    )
}

/// Every command, typed: `/skill` and `/ability` make, show, change and delete the user's
/// processes; `/agent` creates and configures an agent (never a key); `/session` renames,
/// archives and restores; the safe ones the agent calls run at once (`command_stream`).
#[tokio::test]
async fn every_command_does_what_it_says() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    let ok = |(outcome, output): (String, String), wanted: &str| {
        assert_eq!(outcome, "ok", "{output}");
        assert!(output.contains(wanted), "{wanted:?} in {output}");
    };
    h.stream(session, "/skill greet Hello {{user.name}}.").await;
    ok(
        last_result(&h, session).await,
        "Created the process \"greet\"",
    );
    h.stream(session, "/ability show greet").await;
    ok(last_result(&h, session).await, "Hello {{user.name}}.");
    h.stream(
        session,
        "/ability edit greet --description \"A greeting\"\nHi {{user.name}}!",
    )
    .await;
    ok(
        last_result(&h, session).await,
        "Changed the process \"greet\"",
    );
    let (_, listed) = h
        .json(Method::GET, "/api/abilities?source=user", None)
        .await;
    assert_eq!(listed[0]["description"], "A greeting", "{listed}");
    h.stream(session, "/ability list").await;
    ok(last_result(&h, session).await, "- greet (user:");
    // A name of Hero's cannot be taken.
    h.stream(session, "/ability create act\nMine now.").await;
    let (outcome, output) = last_result(&h, session).await;
    assert_eq!(outcome, "error");
    assert!(output.contains("already named"), "{output}");
    h.stream(session, "/ability delete greet").await;
    ok(last_result(&h, session).await, "Deleted");
    let (_, listed) = h
        .json(Method::GET, "/api/abilities?source=user", None)
        .await;
    assert_eq!(listed, json!([]));

    h.stream(
        session,
        "/agent create Bea --provider anthropic --model claude-x",
    )
    .await;
    ok(
        last_result(&h, session).await,
        "\"Bea\": anthropic claude-x",
    );
    h.stream(
        session,
        "/agent configure Bea --model claude-y --rename Bee",
    )
    .await;
    ok(
        last_result(&h, session).await,
        "\"Bee\": anthropic claude-y",
    );
    let (_, agents) = h.json(Method::GET, "/api/agents", None).await;
    let bee = agents
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "Bee")
        .expect("the agent made");
    assert_eq!(bee["has_api_key"], false);

    h.stream(session, "/session rename Renamed here").await;
    ok(last_result(&h, session).await, "\"Renamed here\" is active");
    h.stream(session, "/session archive").await;
    ok(last_result(&h, session).await, "is archived");
    h.stream(session, &format!("/session restore {session}"))
        .await;
    ok(last_result(&h, session).await, "is active");
    let (_, s) = h
        .json(Method::GET, &format!("/api/sessions/{session}"), None)
        .await;
    assert_eq!(s["name"], "Renamed here");

    // Only the user's own: another user's session is not found, and nothing changes.
    let bob = bob_client(&h).await;
    let bobs: Value = bob
        .post(h.url("/api/sessions"))
        .json(&json!({"name": "Bob's"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bobs = bobs["id"].as_i64().unwrap();
    h.stream(session, &format!("/session archive {bobs}")).await;
    let (outcome, output) = last_result(&h, session).await;
    assert_eq!(outcome, "error");
    assert!(output.contains("not found"), "{output}");
    let theirs: Value = bob
        .get(h.url(&format!("/api/sessions/{bobs}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(theirs["status"], "active");

    // A skill's text is kept as typed.
    h.stream(
        session,
        "/skill fmt Run cargo fmt --all \"first\"\n  then test",
    )
    .await;
    ok(
        last_result(&h, session).await,
        "Created the process \"fmt\"",
    );
    h.stream(session, "/ability show fmt").await;
    ok(
        last_result(&h, session).await,
        "Run cargo fmt --all \"first\"\n  then test",
    );

    // Arguments against the function's schema: an invalid call, nothing run.
    let long = "x".repeat(300);
    h.stream(session, &format!("/session rename {long}")).await;
    let (outcome, output) = last_result(&h, session).await;
    assert_eq!(outcome, "invalid", "{output}");

    // The agent's command_agent with a key: refused, no agent made.
    h.stream(
        session,
        r#"[[mock tool=command_agent input={"action": "create", "name": "Keyed", "provider": "anthropic", "model": "m", "base_url": "https://x.test/?api_key=sk-ant-0123456789abcdefghij"} then="Tried."]]"#,
    )
    .await;
    let frames = h.frames(session).await;
    let rid = of_type(&frames, "request").last().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, body) = decide(&h, session, rid.as_ref(), true).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let frames = frames_when(&h, session, |f| {
        of_type(f, "result")
            .iter()
            .any(|r| r["parent_id"] == rid.as_str())
    })
    .await;
    let result = of_type(&frames, "result")
        .into_iter()
        .find(|r| r["parent_id"] == rid.as_str())
        .unwrap();
    assert_eq!(result["payload"]["outcome"], "error");
    assert!(
        result["payload"]["output"]
            .as_str()
            .unwrap()
            .contains("Agents page")
    );
    let (_, agents) = h.json(Method::GET, "/api/agents", None).await;
    assert!(!agents.to_string().contains("Keyed"), "{agents}");

    // A safe command the agent calls runs at once; its note carries the mode.
    h.stream(
        session,
        r#"[[mock tool=command_stream input={"on": false} then="Switched."]]"#,
    )
    .await;
    let frames = frames_when(&h, session, |f| {
        f.iter().any(|m| m["payload"]["content"] == "Switched.")
    })
    .await;
    assert!(
        frames
            .iter()
            .any(|f| f["payload"]["streaming"] == false && f["payload"]["private"] == true),
        "the note saying so"
    );
    let (_, s) = h
        .json(Method::GET, &format!("/api/sessions/{session}"), None)
        .await;
    assert_eq!(s["streaming"], false);
}
