//! Reference 004's tasks over loopback: the `tasks` capability's six tools called by the
//! mock LLM, the routes, identifiers under concurrent creates, the history of every change,
//! `task_changed` on the user's sockets, and every refusal in words; another user's task
//! is a missing one.

mod support;

use std::time::Duration;

use futures::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::*;
use tokio_tungstenite::tungstenite::Message;

/// The agent calls `tool` with `input`; the call's result frame, once stored.
async fn call(h: &Hero, session: i64, tool: &str, input: Value) -> Value {
    h.stream(
        session,
        &format!("[[mock tool={tool} input={input} then=\"Done.\"]]"),
    )
    .await;
    let frames = frames_when(h, session, |f| {
        of_type(f, "request").last().is_some_and(|r| {
            of_type(f, "result")
                .iter()
                .any(|x| x["parent_id"] == r["id"])
        })
    })
    .await;
    let request = of_type(&frames, "request").last().copied().unwrap().clone();
    assert_eq!(request["payload"]["function"], tool);
    of_type(&frames, "result")
        .into_iter()
        .find(|x| x["parent_id"] == request["id"])
        .unwrap()
        .clone()
}

fn output(result: &Value) -> &str {
    assert_eq!(result["payload"]["outcome"], "ok", "{result}");
    result["payload"]["output"].as_str().unwrap()
}

#[tokio::test]
async fn the_agent_works_the_board_with_six_tools_and_every_change_is_history() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, agent) = h.session_with("anthropic", &mock, KEY).await;
    let (_, mut ws) = h.ws().await;

    // The prompt gives the capability's instructions.
    let (_, prompt) = h
        .json(
            Method::GET,
            &format!("/api/sessions/{session}/system-prompt"),
            None,
        )
        .await;
    assert!(
        prompt["prompt"]
            .as_str()
            .unwrap()
            .contains("<capability name=\"tasks\">"),
        "{prompt}"
    );

    // create_task: in Personal (made on first use), as the agent of this session.
    let made = call(
        &h,
        session,
        "create_task",
        json!({"title": "Renew the passport", "priority": 2, "due": "2026-12-15", "labels": ["admin"], "project": "Travel"}),
    )
    .await;
    assert!(output(&made).starts_with("Made PER-1:"), "{made}");
    let heard = loop {
        let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("task_changed on the socket");
        if let Some(Ok(Message::Text(t))) = m {
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["type"] == "task_changed" {
                break v;
            }
        }
    };
    assert_eq!(
        (&heard["identifier"], &heard["status"]),
        (&json!("PER-1"), &json!("todo"))
    );
    let (s, task) = h.json(Method::GET, "/api/tasks/per-1", None).await;
    assert_eq!(s, StatusCode::OK, "{task}");
    assert_eq!(
        (
            &task["title"],
            &task["team"],
            &task["priority"],
            &task["due"],
            &task["project"],
            &task["labels"]
        ),
        (
            &json!("Renew the passport"),
            &json!("PER"),
            &json!(2),
            &json!("2026-12-15"),
            &json!("Travel"),
            &json!(["admin"])
        )
    );

    // A suggestion goes to Triage; update_task accepts it.
    let suggested = call(
        &h,
        session,
        "create_task",
        json!({"title": "Book the dentist", "status": "triage"}),
    )
    .await;
    assert!(output(&suggested).starts_with("Made PER-2:"));
    let listed = call(&h, session, "get_suggested_tasks", json!({})).await;
    assert!(
        output(&listed).contains("PER-2 [triage] Book the dentist")
            && !output(&listed).contains("PER-1"),
        "{listed}"
    );
    let moved = call(
        &h,
        session,
        "update_task",
        json!({"id": "PER-2", "status": "in_progress", "priority": 1}),
    )
    .await;
    assert!(output(&moved).contains("PER-2 [in_progress] Book the dentist (priority: urgent)"));

    // list_tasks: what is open; done ones only when asked.
    let (s, _) = h
        .json(
            Method::PATCH,
            "/api/tasks/1",
            Some(json!({"status": "done"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let open = call(&h, session, "list_tasks", json!({})).await;
    assert!(
        output(&open).contains("PER-2") && !output(&open).contains("PER-1"),
        "{open}"
    );
    let done = call(&h, session, "list_tasks", json!({"status": "done"})).await;
    assert!(
        output(&done).contains("PER-1 [done] Renew the passport"),
        "{done}"
    );

    // get_task: the task and its history; get_team_context: teams, projects, labels.
    let read = call(&h, session, "get_task", json!({"id": "PER-2"})).await;
    assert!(
        output(&read).contains("History:") && output(&read).contains("by agent"),
        "{read}"
    );
    let context = call(&h, session, "get_team_context", json!({})).await;
    assert!(
        output(&context).contains("Personal (PER, 2 tasks)")
            && output(&context).contains("Projects: Travel")
            && output(&context).contains("Labels: admin"),
        "{context}"
    );
    // An unknown task is told, in a line.
    let missing = call(
        &h,
        session,
        "update_task",
        json!({"id": "PER-99", "status": "done"}),
    )
    .await;
    assert_eq!(missing["payload"]["outcome"], "error");
    assert!(
        missing["payload"]["output"]
            .as_str()
            .unwrap()
            .contains("no task \"PER-99\""),
        "{missing}"
    );

    // The history: made by the agent (its agent and session), changed by it, then by the user.
    let (_, history) = h.json(Method::GET, "/api/tasks/PER-2/history", None).await;
    let events = history.as_array().unwrap();
    assert_eq!(events.len(), 2, "{history}");
    assert_eq!(
        (
            &events[0]["actor"],
            &events[0]["agent_id"],
            &events[0]["session_id"]
        ),
        (&json!("agent"), &json!(agent), &json!(session))
    );
    assert_eq!(
        events[0]["changes"][0],
        json!({"field": "created", "from": null, "to": "PER-2"})
    );
    let changed: Vec<(&str, &str, &str)> = events[1]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["field"].as_str().unwrap(),
                c["from"].as_str().unwrap(),
                c["to"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        changed,
        [
            ("status", "triage", "in_progress"),
            ("priority", "none", "urgent")
        ]
    );
    let (_, first) = h.json(Method::GET, "/api/tasks/PER-1/history", None).await;
    assert_eq!(first[1]["actor"], "user");
}

#[tokio::test]
async fn identifiers_rise_under_concurrent_creates_and_bad_input_is_told() {
    let h = hero(&[]).await;
    let creates = (0..50).map(|i| {
        h.json(
            Method::POST,
            "/api/tasks",
            Some(json!({"title": format!("Task {i}")})),
        )
    });
    let made = futures::future::join_all(creates).await;
    let mut numbers: Vec<i64> = made
        .iter()
        .map(|(s, t)| {
            assert_eq!(*s, StatusCode::CREATED, "{t}");
            t["identifier"].as_str().unwrap()["PER-".len()..]
                .parse()
                .unwrap()
        })
        .collect();
    numbers.sort();
    assert_eq!(numbers, (1..=50).collect::<Vec<i64>>());

    // A team of one's own: its own numbers; a taken key is a 409.
    let (s, team) = h
        .json(
            Method::POST,
            "/api/tasks/teams",
            Some(json!({"name": "Work", "key": "WRK"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{team}");
    let (s, _) = h
        .json(
            Method::POST,
            "/api/tasks/teams",
            Some(json!({"name": "Other", "key": "WRK"})),
        )
        .await;
    assert_eq!(s, StatusCode::CONFLICT);
    let (_, t) = h
        .json(
            Method::POST,
            "/api/tasks",
            Some(json!({"title": "Ship", "team": "work"})),
        )
        .await;
    assert_eq!(t["identifier"], "WRK-1");
    // Moved to another team, a task takes its next number there.
    let (s, moved) = h
        .json(
            Method::PATCH,
            "/api/tasks/PER-3",
            Some(json!({"team": "WRK"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{moved}");
    assert_eq!(moved["identifier"], "WRK-2");
    let (_, history) = h.json(Method::GET, "/api/tasks/WRK-2/history", None).await;
    assert_eq!(
        history[1]["changes"][0],
        json!({"field": "team", "from": "PER", "to": "WRK"})
    );
    let (s, _) = h.json(Method::GET, "/api/tasks/PER-3", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, back) = h
        .json(
            Method::PATCH,
            "/api/tasks/WRK-2",
            Some(json!({"team": "PER"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{back}");
    assert_eq!(back["identifier"], "PER-51");
    let (_, teams) = h.json(Method::GET, "/api/tasks/teams", None).await;
    assert_eq!(
        teams
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["key"].as_str().unwrap(), t["tasks"].as_i64().unwrap()))
            .collect::<Vec<_>>(),
        [("PER", 50), ("WRK", 1)]
    );

    for (method, path, body, status, says) in [
        (
            Method::POST,
            "/api/tasks",
            json!({"title": "x", "status": "doing"}),
            StatusCode::BAD_REQUEST,
            "the statuses are triage, backlog, todo, in_progress, done, canceled",
        ),
        (
            Method::POST,
            "/api/tasks",
            json!({"title": "x", "team": "Home"}),
            StatusCode::BAD_REQUEST,
            "the teams are Personal (PER), Work (WRK)",
        ),
        (
            Method::POST,
            "/api/tasks",
            json!({"title": "x", "priority": 9}),
            StatusCode::BAD_REQUEST,
            "0 (none), 1 (urgent), 2 (high), 3 (medium), 4 (low)",
        ),
        (
            Method::POST,
            "/api/tasks",
            json!({"title": "  "}),
            StatusCode::BAD_REQUEST,
            "needs a title",
        ),
        (
            Method::POST,
            "/api/tasks",
            json!({"title": "x".repeat(501)}),
            StatusCode::BAD_REQUEST,
            "at most 500 characters",
        ),
        (
            Method::POST,
            "/api/tasks",
            json!({"title": "x", "description": "d".repeat(65 * 1024)}),
            StatusCode::BAD_REQUEST,
            "at most 64 KiB",
        ),
        (
            Method::POST,
            "/api/tasks",
            json!({"title": "x", "due": "soon"}),
            StatusCode::BAD_REQUEST,
            "YYYY-MM-DD",
        ),
        (
            Method::PATCH,
            "/api/tasks/PER-1",
            json!({"status": "gone"}),
            StatusCode::BAD_REQUEST,
            "the statuses are",
        ),
        (
            Method::POST,
            "/api/tasks/teams",
            json!({"name": "Bad", "key": "bad"}),
            StatusCode::BAD_REQUEST,
            "capital letters",
        ),
    ] {
        let (s, b) = h.json(method, path, Some(body)).await;
        assert_eq!(s, status, "{path}: {b}");
        assert!(b["error"].as_str().unwrap().contains(says), "{path}: {b}");
    }
    let (s, b) = h.json(Method::GET, "/api/tasks?status=someday", None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    let (s, _) = h.json(Method::GET, "/api/tasks/PER-999", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // Bob's tasks are his: alice's identifiers are missing ones to him, and his own PER-1
    // is another task.
    let bob = bob_client(&h).await;
    for path in [
        "/api/tasks/PER-1",
        "/api/tasks/1",
        "/api/tasks/PER-1/history",
    ] {
        let r = bob.get(h.url(path)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
    }
    let r = bob
        .patch(h.url("/api/tasks/PER-1"))
        .json(&json!({"status": "done"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let mine: Value = bob
        .post(h.url("/api/tasks"))
        .json(&json!({"title": "Bob's"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(mine["identifier"], "PER-1");
    let (_, alices) = h.json(Method::GET, "/api/tasks/PER-1", None).await;
    assert_ne!(alices["title"], "Bob's");
    let listed: Value = bob
        .get(h.url("/api/tasks"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);
}
