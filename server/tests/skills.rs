//! Skills (reference 002 §8–10) over the API, on loopback: the tiers and what overrides
//! what, a broken folder's reason, a skill's details and files (never a read beneath its
//! folder), the search, the prompt's `## Skills` section (a skill written by a command is in
//! the next prompt), and `skill_search` and `skill_get` called by the agent.

mod support;

use std::path::Path;

use reqwest::{Method, StatusCode};
use serde_json::json;
use support::*;

fn write(root: &Path, path: &str, text: &str) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn skill_md(name: &str, description: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n{body}")
}

async fn me(h: &Hero) -> i64 {
    h.json(Method::GET, "/api/me", None).await.1["id"]
        .as_i64()
        .unwrap()
}

#[tokio::test]
async fn skills_by_tier_searched_given_to_the_agent_and_read_beneath_their_folder() {
    let global = tempfile::tempdir().unwrap();
    write(
        global.path(),
        "pdf-forms/SKILL.md",
        &skill_md(
            "pdf-forms",
            "Fill in PDF forms from a table of values.",
            "Run {baseDir}/fill.py.",
        ),
    );
    write(global.path(), "pdf-forms/fill.py", "print('filled')\n");
    write(
        global.path(),
        "git-history/SKILL.md",
        &skill_md(
            "git-history",
            "Read a repository's history.",
            "Use git log.",
        ),
    );
    write(
        global.path(),
        "broken/SKILL.md",
        "---\nname: broken\ndescription: [unclosed\n---\n",
    );
    std::fs::write(global.path().join("master.key"), "the secret").unwrap();
    std::os::unix::fs::symlink(
        global.path().join("master.key"),
        global.path().join("pdf-forms/key"),
    )
    .unwrap();
    let dir = global.path().to_owned();
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero_with(&[mock.addr()], move |s| s.skills_dir = Some(dir)).await;

    // Listed by tier: Hero's own, the administrator's, and the broken one with its reason.
    let (s, list) = h.json(Method::GET, "/api/skills", None).await;
    assert_eq!(s, StatusCode::OK, "{list}");
    assert_eq!(list["search_mode"], "bm25");
    let seen: Vec<(&str, &str)> = list["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["tier"].as_str().unwrap(), s["name"].as_str().unwrap()))
        .collect();
    assert_eq!(
        seen,
        [
            ("global", "broken"),
            ("global", "git-history"),
            ("global", "pdf-forms"),
            ("builtin", "writing-skills"),
        ]
    );
    let broken = &list["skills"][0];
    assert!(
        broken["error"]
            .as_str()
            .unwrap()
            .starts_with("SKILL.md line "),
        "{broken}"
    );
    assert_eq!(list["skills"][2]["visibility"], "public");

    // One, with its details and files; the link to the key is no file of it.
    let (s, pdf) = h.json(Method::GET, "/api/skills/pdf-forms", None).await;
    assert_eq!(s, StatusCode::OK, "{pdf}");
    assert_eq!(pdf["content"], "Run skill://pdf-forms/fill.py.");
    let files: Vec<&str> = pdf["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["SKILL.md", "fill.py"]);
    let (s, file) = h
        .json(Method::GET, "/api/skills/pdf-forms/files/fill.py", None)
        .await;
    assert_eq!(s, StatusCode::OK, "{file}");
    assert_eq!(file["content"], "print('filled')\n");
    for outside in ["key", "..%2Fmaster.key", "nothing"] {
        let (s, body) = h
            .json(
                Method::GET,
                &format!("/api/skills/pdf-forms/files/{outside}"),
                None,
            )
            .await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{outside}: {body}");
        assert!(!body.to_string().contains("the secret"));
    }
    let (s, _) = h.json(Method::GET, "/api/skills/nothing", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // One the administrator adds is read again without a restart (002's hot reload).
    write(
        global.path(),
        "mail-sort/SKILL.md",
        &skill_md("mail-sort", "Sort a mailbox into folders.", "Sort."),
    );
    let mut seen = false;
    for _ in 0..200 {
        let (_, list) = h.json(Method::GET, "/api/skills", None).await;
        if list.to_string().contains("\"mail-sort\"") {
            seen = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(seen, "the new global skill was never listed");

    // A skill of the user's workspace (as a command writes it) hides the administrator's.
    let uid = me(&h).await;
    let ws = h._dir.path().join("workspaces").join(uid.to_string());
    write(
        &ws,
        "skills/pdf-forms/SKILL.md",
        &skill_md(
            "pdf-forms",
            "My own way to fill in PDF forms.",
            "Use {baseDir}/mine.sh.",
        ),
    );
    let (_, list) = h.json(Method::GET, "/api/skills", None).await;
    assert_eq!(list["skills"][0]["tier"], "workspace");
    assert_eq!(list["skills"][0]["visibility"], "private");
    let hidden = list["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["tier"] == "global" && s["name"] == "pdf-forms")
        .unwrap();
    assert_eq!(hidden["overridden_by"], "workspace");
    let (_, theirs) = h
        .json(Method::GET, "/api/skills/pdf-forms?tier=global", None)
        .await;
    assert_eq!(theirs["content"], "Run skill://pdf-forms/fill.py.");
    // The hidden one's files are read with its tier; without it, the one in use's.
    let (s, file) = h
        .json(
            Method::GET,
            "/api/skills/pdf-forms/files/fill.py?tier=global",
            None,
        )
        .await;
    assert_eq!(
        (s, file["content"].as_str()),
        (StatusCode::OK, Some("print('filled')\n"))
    );
    let (s, _) = h
        .json(Method::GET, "/api/skills/pdf-forms/files/fill.py", None)
        .await;
    assert_eq!(
        s,
        StatusCode::NOT_FOUND,
        "the workspace's pdf-forms has no fill.py"
    );

    // Searched: scored, best first; bad queries said why.
    let (s, found) = h
        .json(
            Method::POST,
            "/api/skills/search",
            Some(json!({"query": "fill a PDF form"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{found}");
    assert_eq!(found["results"][0]["name"], "pdf-forms");
    assert_eq!(found["results"][0]["score"], 1.0);
    assert_eq!(found["results"][0]["tier"], "workspace");
    for bad in [json!({"query": ""}), json!({"query": "q".repeat(1_001)})] {
        let (s, body) = h.json(Method::POST, "/api/skills/search", Some(bad)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    }

    // In the prompt, listed; a new skill is in the next one.
    let (session, agent) = h.session_with("anthropic", &mock, KEY).await;
    let path = format!("/api/sessions/{session}/system-prompt");
    let prompt = || async {
        h.json(Method::GET, &path, None).await.1["prompt"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let p = prompt().await;
    assert!(
        p.contains("## Skills") && p.contains("<available_skills>"),
        "{p}"
    );
    assert!(
        p.contains("<skill><name>pdf-forms</name><description>My own way to fill in PDF forms.</description><location>/workspace/skills/pdf-forms/SKILL.md</location></skill>"),
        "{p}"
    );
    assert!(!p.contains("broken"), "{p}");
    write(
        &ws,
        ".agents/skills/mail-merge/SKILL.md",
        &skill_md("mail-merge", "Send one letter to many people.", "Merge."),
    );
    // Seen once the watcher has word of it (polled: no time asserted).
    let mut p = String::new();
    for _ in 0..200 {
        p = prompt().await;
        if p.contains("<name>mail-merge</name>") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(p.contains("<name>mail-merge</name>"), "{p}");

    // The agent searches, then reads one.
    h.stream(
        session,
        r#"[[mock tool=skill_search input={"query": "history of a repository"} then="Searched."]]"#,
    )
    .await;
    let frames = frames_when(&h, session, |f| agent_messages(f).len() == 2).await;
    let result = of_type(&frames, "result").last().copied().unwrap();
    let output = result["payload"]["output"].as_str().unwrap();
    assert!(
        output.starts_with("- git-history (score 1.00, global)"),
        "{output}"
    );
    h.stream(
        session,
        r#"[[mock tool=skill_get input={"name": "pdf-forms"} then="Read."]]"#,
    )
    .await;
    let frames = frames_when(&h, session, |f| agent_messages(f).len() == 4).await;
    let result = of_type(&frames, "result").last().copied().unwrap();
    assert_eq!(
        result["payload"]["output"],
        "Use /workspace/skills/pdf-forms/mine.sh."
    );
    h.stream(
        session,
        r#"[[mock tool=skill_get input={"name": "nothing"} then="Missing."]]"#,
    )
    .await;
    let frames = frames_when(&h, session, |f| agent_messages(f).len() == 6).await;
    let result = of_type(&frames, "result").last().copied().unwrap();
    assert!(
        result["payload"]["output"]
            .as_str()
            .unwrap()
            .contains("no skill"),
        "{result}"
    );

    // An allow list: the agent is given those alone, in its prompt and its calls; `[]`
    // none; `null` all again. A name no skill may have is refused.
    let agent_path = format!("/api/agents/{agent}");
    let (s, body) = h
        .json(
            Method::PATCH,
            &agent_path,
            Some(json!({"skill_allow_list": ["git-history", "git-history"]})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["skill_allow_list"], json!(["git-history"]));
    let (_, given) = h
        .json(Method::GET, &format!("/api/agents/{agent}/skills"), None)
        .await;
    assert_eq!(given["prompt_mode"], "inline");
    assert_eq!(given["skills"].as_array().unwrap().len(), 1, "{given}");
    assert_eq!(given["skills"][0]["name"], "git-history");
    let p = prompt().await;
    assert!(
        p.contains("<name>git-history</name>") && !p.contains("<name>pdf-forms</name>"),
        "{p}"
    );
    let (_, found) = h
        .json(
            Method::POST,
            "/api/skills/search",
            Some(json!({"query": "pdf", "agent_id": agent})),
        )
        .await;
    assert_eq!(found["results"], json!([]), "{found}");
    h.stream(
        session,
        r#"[[mock tool=skill_get input={"name": "pdf-forms"} then="Refused."]]"#,
    )
    .await;
    let frames = frames_when(&h, session, |f| agent_messages(f).len() == 8).await;
    let result = of_type(&frames, "result").last().copied().unwrap();
    assert!(
        result["payload"]["output"]
            .as_str()
            .unwrap()
            .contains("no skill"),
        "{result}"
    );
    h.json(
        Method::PATCH,
        &agent_path,
        Some(json!({"skill_allow_list": []})),
    )
    .await;
    assert!(!prompt().await.contains("## Skills"));
    h.json(
        Method::PATCH,
        &agent_path,
        Some(json!({"skill_allow_list": null})),
    )
    .await;
    assert!(prompt().await.contains("<name>pdf-forms</name>"));

    // A message's `skill_filter` is the allow list for its turn and its follow-ups; the
    // next message without one goes back to the agent's.
    h.stream_body(
        session,
        json!({
            "content": r#"[[mock tool=skill_search input={"query": "pdf forms"} then="Filtered."]]"#,
            "skill_filter": ["git-history"],
        }),
    )
    .await;
    let frames = frames_when(&h, session, |f| agent_messages(f).len() == 10).await;
    let result = of_type(&frames, "result").last().copied().unwrap();
    assert!(
        result["payload"]["output"]
            .as_str()
            .unwrap()
            .starts_with("No skill fits"),
        "{result}"
    );
    h.stream(
        session,
        r#"[[mock tool=skill_search input={"query": "pdf forms"} then="All."]]"#,
    )
    .await;
    let frames = frames_when(&h, session, |f| agent_messages(f).len() == 12).await;
    let result = of_type(&frames, "result").last().copied().unwrap();
    assert!(
        result["payload"]["output"]
            .as_str()
            .unwrap()
            .starts_with("- pdf-forms"),
        "{result}"
    );
    let (s, body) = h
        .json(
            Method::POST,
            &format!("/api/sessions/{session}/messages"),
            Some(json!({"content": "hi", "skill_filter": ["../etc"]})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    let (s, body) = h
        .json(
            Method::PATCH,
            &agent_path,
            Some(json!({"skill_allow_list": ["Not A Name"]})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    let (s, _) = h.json(Method::GET, "/api/agents/999999/skills", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

/// Personal skills: written and replaced through the API (a folder's text files with it),
/// over the administrator's of the same name, sealed (their text is in neither the database
/// file nor its WAL), another user's a 404, each refusal saying why, and deleted.
#[tokio::test]
async fn personal_skills_are_sealed_rows_of_their_own_user() {
    let global = tempfile::tempdir().unwrap();
    write(
        global.path(),
        "git-history/SKILL.md",
        &skill_md(
            "git-history",
            "Read a repository's history.",
            "Use git log.",
        ),
    );
    let dir = global.path().to_owned();
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero_with(&[mock.addr()], move |s| s.skills_dir = Some(dir)).await;
    let marker = "ZEBRA-MARKER-7781";
    let body = json!({
        "content": skill_md("git-history", &format!("My history notes {marker}."), "Read {baseDir}/ref/notes.md."),
        "files": {"ref/notes.md": format!("Notes {marker}")}
    });
    let (s, made) = h
        .json(Method::PUT, "/api/skills/git-history", Some(body.clone()))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{made}");
    assert_eq!(made["tier"], "personal");
    assert_eq!(made["visibility"], "private");
    assert_eq!(made["content"], "Read skill://git-history/ref/notes.md.");
    let (s, _) = h
        .json(Method::PUT, "/api/skills/git-history", Some(body))
        .await;
    assert_eq!(s, StatusCode::OK, "replaced");
    let (_, list) = h.json(Method::GET, "/api/skills", None).await;
    let tiers: Vec<(&str, &str, Option<&str>)> = list["skills"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == "git-history")
        .map(|s| {
            (
                s["tier"].as_str().unwrap(),
                s["name"].as_str().unwrap(),
                s["overridden_by"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        tiers,
        [
            ("personal", "git-history", None),
            ("global", "git-history", Some("personal"))
        ]
    );
    let (_, file) = h
        .json(
            Method::GET,
            "/api/skills/git-history/files/ref/notes.md",
            None,
        )
        .await;
    assert_eq!(file["content"], format!("Notes {marker}"));

    // The agent is given it, and reads its file.
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    let (_, p) = h
        .json(
            Method::GET,
            &format!("/api/sessions/{session}/system-prompt"),
            None,
        )
        .await;
    assert!(
        p["prompt"]
            .as_str()
            .unwrap()
            .contains("<location>skill://git-history/SKILL.md</location>"),
        "{p}"
    );
    h.stream(
        session,
        r#"[[mock tool=skill_get input={"name": "git-history", "file": "ref/notes.md"} then="Read."]]"#,
    )
    .await;
    let frames = frames_when(&h, session, |f| agent_messages(f).len() == 2).await;
    let result = of_type(&frames, "result").last().copied().unwrap();
    assert_eq!(result["payload"]["output"], format!("Notes {marker}"));

    // Sealed: the marker is nowhere in the database's files.
    if std::env::var("HERO_TEST_BACKEND").as_deref() != Ok("postgres") {
        for file in ["hero.db", "hero.db-wal"] {
            let bytes = std::fs::read(h._dir.path().join(file)).unwrap_or_default();
            assert!(
                !bytes.windows(marker.len()).any(|w| w == marker.as_bytes()),
                "{file} holds the skill's text"
            );
        }
    }

    // Another user's: not found.
    let bob = bob_client(&h).await;
    let r = bob
        .get(h.url("/api/skills/git-history?tier=personal"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let r = bob
        .delete(h.url("/api/skills/git-history"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    // Refused, saying why, and nothing stored.
    for (name, bad, why) in [
        (
            "other",
            json!({"content": skill_md("mine", "d", "b")}),
            "not its folder's name",
        ),
        (
            "mine",
            json!({"content": "---\nname: mine\ndescription: [x\n---\n"}),
            "SKILL.md line",
        ),
        (
            "mine",
            json!({"content": skill_md("mine", "d", "b"), "files": {"../x": "y"}}),
            "not a path",
        ),
        (
            "Mine",
            json!({"content": skill_md("Mine", "d", "b")}),
            "lowercase",
        ),
        (
            "mine",
            json!({"content": skill_md("mine", "d", "b"), "tier": "project"}),
            "personal",
        ),
    ] {
        let (s, body) = h
            .json(Method::PUT, &format!("/api/skills/{name}"), Some(bad))
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
        assert!(body.to_string().contains(why), "{why}: {body}");
    }
    let (_, list) = h.json(Method::GET, "/api/skills", None).await;
    assert!(!list.to_string().contains("\"mine\""), "{list}");

    // Deleted: the administrator's is in use again.
    let (s, _) = h
        .json(Method::DELETE, "/api/skills/git-history", None)
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = h
        .json(Method::DELETE, "/api/skills/git-history", None)
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (_, one) = h.json(Method::GET, "/api/skills/git-history", None).await;
    assert_eq!(one["tier"], "global");
}

async fn call(
    c: &reqwest::Client,
    h: &Hero,
    method: Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> (StatusCode, serde_json::Value) {
    let mut req = c.request(method, h.url(path));
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
    )
}

/// Visibility and grants (reference 002 §12): a global skill is public until an
/// administrator makes it internal; then only the users and agents it is granted to see
/// it, in lists, details, prompts and calls. An agent may be pinned to a kept version,
/// which rises as the administrator changes the skill. Only administrators set these.
#[tokio::test]
async fn internal_skills_are_seen_through_grants_and_pinned_agents_read_their_version() {
    let global = tempfile::tempdir().unwrap();
    write(
        global.path(),
        "deploy/SKILL.md",
        &skill_md(
            "deploy",
            "Deploy the service to production.",
            "Version one.",
        ),
    );
    let dir = global.path().to_owned();
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero_with(&[mock.addr()], move |s| s.skills_dir = Some(dir)).await;
    let root = client_of(&h, "root", true).await;
    let bob = bob_client(&h).await;
    let (session, agent) = h.session_with("anthropic", &mock, KEY).await;
    let names = |list: &serde_json::Value| -> Vec<String> {
        list["skills"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_owned())
            .collect()
    };

    // Public: everyone sees it, at version 1.
    let (_, list) = call(&bob, &h, Method::GET, "/api/skills", None).await;
    assert!(names(&list).contains(&"deploy".to_owned()), "{list}");
    let (s, one) = call(&bob, &h, Method::GET, "/api/skills/deploy", None).await;
    assert_eq!(s, StatusCode::OK, "{one}");
    assert_eq!(
        (one["visibility"].as_str(), one["version"].as_str()),
        (Some("public"), Some("1"))
    );

    // Only an administrator sets visibility and grants.
    for (method, path, body) in [
        (
            Method::PUT,
            "/api/skills/deploy/visibility",
            Some(json!({"visibility": "internal"})),
        ),
        (Method::GET, "/api/skills/deploy/grants", None),
        (
            Method::POST,
            "/api/skills/deploy/grants",
            Some(json!({"user": "bob"})),
        ),
        (Method::DELETE, "/api/skills/deploy/grants/user-1", None),
        (
            Method::PUT,
            "/api/skills/deploy",
            Some(json!({"content": skill_md("deploy", "d", "b"), "tier": "global"})),
        ),
    ] {
        let (s, body) = call(&bob, &h, method, path, body).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{path}: {body}");
    }
    let (s, body) = call(
        &root,
        &h,
        Method::PUT,
        "/api/skills/deploy/visibility",
        Some(json!({"visibility": "secret"})),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    let (s, _) = call(
        &root,
        &h,
        Method::GET,
        "/api/skills/writing-skills/grants",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "Hero's own skills have no grants");

    // Internal: seen by nobody without a grant.
    let (s, body) = call(
        &root,
        &h,
        Method::PUT,
        "/api/skills/deploy/visibility",
        Some(json!({"visibility": "internal"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["visibility"], "internal");
    let (_, list) = call(&bob, &h, Method::GET, "/api/skills", None).await;
    assert!(!names(&list).contains(&"deploy".to_owned()), "{list}");
    let (s, _) = call(&bob, &h, Method::GET, "/api/skills/deploy", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let prompt_path = format!("/api/sessions/{session}/system-prompt");
    let prompt = || async {
        h.json(Method::GET, &prompt_path, None).await.1["prompt"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(!prompt().await.contains("<name>deploy</name>"));

    // Granted to bob: bob sees it (twice granted is one grant); revoked, he does not.
    let (s, grant) = call(
        &root,
        &h,
        Method::POST,
        "/api/skills/deploy/grants",
        Some(json!({"user": "bob"})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{grant}");
    assert_eq!(
        (grant["user"].as_str(), grant["granted_by"].as_str()),
        (Some("bob"), Some("root"))
    );
    let (s, again) = call(
        &root,
        &h,
        Method::POST,
        "/api/skills/deploy/grants",
        Some(json!({"user": "BOB"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{again}");
    assert_eq!(again["id"], grant["id"]);
    let (_, one) = call(&bob, &h, Method::GET, "/api/skills/deploy", None).await;
    assert_eq!(one["visibility"], "internal", "{one}");
    let (_, list) = h.json(Method::GET, "/api/skills", None).await;
    assert!(
        !names(&list).contains(&"deploy".to_owned()),
        "alice has no grant: {list}"
    );
    let (s, _) = call(
        &root,
        &h,
        Method::DELETE,
        &format!(
            "/api/skills/deploy/grants/{}",
            grant["id"].as_str().unwrap()
        ),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = call(&bob, &h, Method::GET, "/api/skills/deploy", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = call(
        &root,
        &h,
        Method::DELETE,
        "/api/skills/deploy/grants/user-999",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // The administrator changes the skill through the API: version 2, version 1 kept.
    let (s, written) = call(
        &root,
        &h,
        Method::PUT,
        "/api/skills/deploy",
        Some(json!({
            "content": skill_md("deploy", "Deploy the service to production.", "Version two."),
            "files": {"notes.md": "Notes."},
            "tier": "global",
        })),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{written}");
    assert_eq!(written["content"], "Version two.");
    assert_eq!(
        std::fs::read_to_string(global.path().join("deploy/notes.md")).unwrap(),
        "Notes."
    );
    let (_, grants) = call(&root, &h, Method::GET, "/api/skills/deploy/grants", None).await;
    assert_eq!(
        (grants["version"].as_i64(), grants["versions"].clone()),
        (Some(2), json!([2, 1])),
        "{grants}"
    );

    // Alice's agent, pinned to version 1, reads version 1; the agent alone, not alice.
    for bad in [
        json!({"agent_id": agent, "pinned_version": 7}),
        json!({"agent_id": agent, "user": "bob"}),
        json!({"user": "nobody"}),
        json!({"agent_id": 999_999}),
        json!({}),
    ] {
        let (s, body) = call(
            &root,
            &h,
            Method::POST,
            "/api/skills/deploy/grants",
            Some(bad.clone()),
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    let (s, pinned) = call(
        &root,
        &h,
        Method::POST,
        "/api/skills/deploy/grants",
        Some(json!({"agent_id": agent, "pinned_version": 1})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{pinned}");
    assert_eq!(pinned["pinned_version"], 1);
    let (_, given) = h
        .json(Method::GET, &format!("/api/agents/{agent}/skills"), None)
        .await;
    let deploy = given["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "deploy")
        .cloned()
        .unwrap_or_else(|| panic!("the agent has deploy: {given}"));
    assert_eq!(deploy["version"], "1", "{given}");
    assert!(prompt().await.contains("<name>deploy</name>"));
    h.stream(
        session,
        r#"[[mock tool=skill_get input={"name": "deploy"} then="Read."]]"#,
    )
    .await;
    let frames = frames_when(&h, session, |f| agent_messages(f).len() == 2).await;
    let result = of_type(&frames, "result").last().copied().unwrap();
    assert_eq!(result["payload"]["output"], "Version one.");
    let (s, _) = h.json(Method::GET, "/api/skills/deploy", None).await;
    assert_eq!(
        s,
        StatusCode::NOT_FOUND,
        "the grant is the agent's, not alice's"
    );

    // Unpinned, it follows the newest.
    let (s, _) = call(
        &root,
        &h,
        Method::POST,
        "/api/skills/deploy/grants",
        Some(json!({"agent_id": agent})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    h.stream(
        session,
        r#"[[mock tool=skill_get input={"name": "deploy"} then="Read."]]"#,
    )
    .await;
    let frames = frames_when(&h, session, |f| agent_messages(f).len() == 4).await;
    let result = of_type(&frames, "result").last().copied().unwrap();
    assert_eq!(result["payload"]["output"], "Version two.");
}

/// Hybrid search (reference 002 §10–11) with the mock's embeddings: a skill found by
/// meaning alone (its vector, no shared word), the parts in each result, the vectors
/// cached (a second search embeds the query alone), and a failing endpoint leaving the
/// search to BM25 with a note.
#[tokio::test]
async fn hybrid_search_finds_by_meaning_and_falls_back_to_bm25() {
    let global = tempfile::tempdir().unwrap();
    write(
        global.path(),
        "rollout-helper/SKILL.md",
        &skill_md("rollout-helper", "Deploy the web application.", "Steps."),
    );
    write(
        global.path(),
        "car-rental/SKILL.md",
        &skill_md("car-rental", "Rent an automobile for a trip.", "Steps."),
    );
    for i in 0..70 {
        let name = format!("garden-{i:02}");
        write(
            global.path(),
            &format!("{name}/SKILL.md"),
            &skill_md(&name, "Water the tomatoes.", "Steps."),
        );
    }
    let dir = global.path().to_owned();
    let mock = mock_llm::spawn(mock_llm::Config::default().embedding_dimensions(256))
        .await
        .unwrap();
    let url = format!("{}/v1", mock.url());
    let h = hero_with(&[mock.addr()], move |s| {
        s.skills_dir = Some(dir);
        s.embeddings = hero_backend::search::embed::Settings {
            model: Some("embed-mock".into()),
            url: Some(url),
            api_key: Some("sk-embed".into()),
        };
    })
    .await;
    let (s, list) = h.json(Method::GET, "/api/skills", None).await;
    assert_eq!(
        (s, list["search_mode"].as_str()),
        (StatusCode::OK, Some("hybrid"))
    );

    // The public skills are embedded in the background after start-up (their 72 and
    // Hero's one), before any search, at most 64 texts a call (polled: no time asserted).
    let mut backfilled = false;
    for _ in 0..200 {
        if mock.stats()["embedded_inputs"].as_u64().unwrap() >= 73 {
            backfilled = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(backfilled, "{}", mock.stats());
    let calls: Vec<usize> = mock
        .requests()
        .iter()
        .filter(|r| r["path"] == "/v1/embeddings")
        .map(|r| r["body"]["input"].as_array().map_or(1, Vec::len))
        .collect();
    assert!(
        calls.len() >= 2 && calls.iter().all(|n| *n <= 64),
        "{calls:?}"
    );

    let search = |query: &'static str| {
        let h = &h;
        async move {
            h.json(
                Method::POST,
                "/api/skills/search",
                Some(json!({"query": query})),
            )
            .await
        }
    };
    let (s, found) = search("release").await;
    assert_eq!(s, StatusCode::OK, "{found}");
    assert_eq!(found["mode"], "hybrid");
    let top = &found["results"][0];
    assert_eq!(top["name"], "rollout-helper", "{found}");
    assert_eq!(top["bm25"], 0.0, "no word in common: {found}");
    let vector = top["vector"].as_f64().unwrap();
    assert!(vector > 0.5, "{found}");
    // No skill shares a word with the query: the vectors rank alone, weighing 1.0.
    assert!((top["score"].as_f64().unwrap() - vector).abs() < 1e-9);
    let (_, both) = search("deploy").await;
    let top = &both["results"][0];
    assert_eq!(
        (top["name"].as_str(), top["bm25"].as_f64()),
        (Some("rollout-helper"), Some(1.0))
    );
    assert!(
        (top["score"].as_f64().unwrap() - (0.3 + 0.7 * top["vector"].as_f64().unwrap())).abs()
            < 1e-9,
        "{both}"
    );
    assert!(
        found["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["name"] != "car-rental"),
        "{found}"
    );

    // The vectors are kept: the same search again embeds nothing, another its query alone.
    let embedded = || mock.stats()["embedded_inputs"].as_u64().unwrap();
    let before = embedded();
    search("release").await;
    assert_eq!(embedded(), before);
    search("launch").await;
    assert_eq!(embedded(), before + 1);

    // The endpoint failing: BM25 alone, with a note.
    let (s, found) = search("deploy [[mock fault=500]]").await;
    assert_eq!(s, StatusCode::OK, "{found}");
    assert_eq!(found["mode"], "bm25");
    assert!(
        found["note"].as_str().unwrap().contains("BM25 alone"),
        "{found}"
    );
    assert_eq!(found["results"][0]["name"], "rollout-helper");
    assert_eq!(found["results"][0]["vector"], serde_json::Value::Null);

    // The agent's skill_search is hybrid too.
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(
        session,
        r#"[[mock tool=skill_search input={"query": "release"} then="Searched."]]"#,
    )
    .await;
    let frames = frames_when(&h, session, |f| agent_messages(f).len() == 2).await;
    let result = of_type(&frames, "result").last().copied().unwrap();
    let output = result["payload"]["output"].as_str().unwrap();
    assert!(output.starts_with("- rollout-helper"), "{output}");
}

/// Without an installation-wide endpoint, an agent whose provider speaks OpenAI's API
/// embeds through its own base URL and key (a user's text goes only where their chat goes),
/// an Anthropic agent searches with BM25 alone, and nothing of the agent's endpoint is
/// stored.
#[tokio::test]
async fn an_openai_agent_embeds_through_its_own_endpoint() {
    let global = tempfile::tempdir().unwrap();
    write(
        global.path(),
        "rollout-helper/SKILL.md",
        &skill_md("rollout-helper", "Deploy the web application.", "Steps."),
    );
    let dir = global.path().to_owned();
    let mock = mock_llm::spawn(mock_llm::Config::default().embedding_dimensions(256))
        .await
        .unwrap();
    let h = hero_with(&[mock.addr()], move |s| {
        s.skills_dir = Some(dir);
        s.embeddings = hero_backend::search::embed::Settings {
            model: Some("embed-mock".into()),
            url: None,
            api_key: None,
        };
    })
    .await;
    let (_, list) = h.json(Method::GET, "/api/skills", None).await;
    assert_eq!(list["search_mode"], "bm25", "no endpoint for everyone");
    let (_, openai) = h.session_with("openai", &mock, KEY).await;
    let (_, anthropic) = h.session_with("anthropic", &mock, KEY).await;
    let search = |agent: i64| {
        let h = &h;
        async move {
            h.json(
                Method::POST,
                "/api/skills/search",
                Some(json!({"query": "release", "agent_id": agent})),
            )
            .await
            .1
        }
    };
    let found = search(openai).await;
    assert_eq!(found["mode"], "hybrid", "{found}");
    assert_eq!(found["results"][0]["name"], "rollout-helper");
    let asked = mock.requests();
    let embedding = asked
        .iter()
        .find(|r| r["path"] == "/v1/embeddings")
        .expect("the agent's endpoint was asked");
    assert_eq!(embedding["auth"]["matched"], true, "with the agent's key");
    let found = search(anthropic).await;
    assert_eq!(found["mode"], "bm25", "{found}");
    assert_eq!(found["results"], json!([]), "no word in common: {found}");
    assert_eq!(
        hero_backend::test_support::rows_in(&h.st, "embeddings").await,
        0,
        "an agent's own endpoint's vectors are held in memory only"
    );
}
