//! The `hero` binary as a script would use it.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn hero(data: &std::path::Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hero"))
        .args(args)
        .env("HERO_DATA_DIR", data)
        .env_remove("HERO_MASTER_KEY")
        .env_remove("HERO_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(s) = stdin {
        input.write_all(s.as_bytes()).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn users_are_managed_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let m = hero(&data, &["migrate"], None);
    assert!(m.status.success(), "{}", text(&m));
    assert!(data.join("hero.db").exists() && data.join("master.key").exists());

    let add = hero(
        &data,
        &["user", "add", "alice", "--admin"],
        Some("alice-password\n"),
    );
    assert!(add.status.success(), "{}", text(&add));
    assert!(text(&add).contains("created user alice"), "{}", text(&add));
    let dup = hero(&data, &["user", "add", "alice"], Some("another-password\n"));
    assert!(
        !dup.status.success() && text(&dup).contains("is taken"),
        "{}",
        text(&dup)
    );
    let short = hero(&data, &["user", "add", "bob"], Some("short\n"));
    assert!(
        !short.status.success() && text(&short).contains("too short"),
        "{}",
        text(&short)
    );
    let empty = hero(&data, &["user", "add", "bob"], Some(""));
    assert!(
        !empty.status.success() && text(&empty).contains("no password on standard input"),
        "{}",
        text(&empty)
    );

    let list = hero(&data, &["user", "list"], None);
    let out = text(&list);
    assert!(
        out.contains("alice") && out.contains("yes") && !out.contains("bob"),
        "{out}"
    );

    assert!(
        hero(&data, &["user", "passwd", "alice"], Some("new-password\n"))
            .status
            .success()
    );
    // The one administrator cannot be disabled: the site would have none.
    let refused = hero(&data, &["user", "disable", "alice"], None);
    assert!(
        !refused.status.success() && text(&refused).contains("last enabled administrator"),
        "{}",
        text(&refused)
    );
    assert!(!text(&hero(&data, &["user", "list"], None)).contains("disabled"));
    assert!(
        hero(
            &data,
            &["user", "add", "carol", "--admin"],
            Some("carol-password\n")
        )
        .status
        .success()
    );
    let dis = hero(&data, &["user", "disable", "alice"], None);
    assert!(
        dis.status.success() && text(&dis).contains("disabled"),
        "{}",
        text(&dis)
    );
    assert!(text(&hero(&data, &["user", "list"], None)).contains("disabled"));
    let missing = hero(&data, &["user", "disable", "nobody"], None);
    assert!(
        !missing.status.success() && text(&missing).contains("user not found"),
        "{}",
        text(&missing)
    );

    // Administrators are made and unmade, never down to none enabled; the list shows use.
    assert!(
        hero(&data, &["user", "add", "bob"], Some("bob-password\n"))
            .status
            .success()
    );
    let made = hero(&data, &["user", "admin", "bob"], None);
    assert!(
        made.status.success() && text(&made).contains("bob is an administrator"),
        "{}",
        text(&made)
    );
    let unmade = hero(&data, &["user", "admin", "alice", "--off"], None);
    assert!(unmade.status.success(), "{}", text(&unmade));
    let unmade = hero(&data, &["user", "admin", "carol", "--off"], None);
    assert!(unmade.status.success(), "{}", text(&unmade));
    let last = hero(&data, &["user", "admin", "bob", "--off"], None);
    assert!(
        !last.status.success() && text(&last).contains("last enabled administrator"),
        "{}",
        text(&last)
    );
    let out = text(&hero(&data, &["user", "list"], None));
    let row = |name: &str| out.lines().find(|l| l.contains(name)).unwrap().to_owned();
    assert!(out.contains("sessions") && out.contains("spend"), "{out}");
    assert!(
        row("bob").contains("yes") && row("alice").contains("no"),
        "{out}"
    );
    // Each new account starts with its demo agent.
    assert!(
        row("bob").contains(" 1 ") && row("bob").contains("$0.00"),
        "{out}"
    );
}

#[test]
fn a_wrong_master_key_stops_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    assert!(hero(&data, &["migrate"], None).status.success());
    let out = Command::new(env!("CARGO_BIN_EXE_hero"))
        .args(["migrate"])
        .env("HERO_DATA_DIR", &data)
        .env("HERO_MASTER_KEY", "ab".repeat(32))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out).contains("master key does not match"),
        "{}",
        text(&out)
    );
    let bad = Command::new(env!("CARGO_BIN_EXE_hero"))
        .args(["migrate"])
        .env("HERO_DATA_DIR", &data)
        .env("HERO_MASTER_KEY", "tooshort")
        .output()
        .unwrap();
    assert!(
        !bad.status.success() && text(&bad).contains("master key is invalid"),
        "{}",
        text(&bad)
    );
}

#[test]
fn help_explains_every_command_and_setting() {
    let out = Command::new(env!("CARGO_BIN_EXE_hero"))
        .arg("--help")
        .output()
        .unwrap();
    let help = text(&out);
    for word in [
        "serve",
        "migrate",
        "user",
        "HERO_ADDR",
        "HERO_DATA_DIR",
        "HERO_MASTER_KEY",
        "HERO_CONFIG",
    ] {
        assert!(help.contains(word), "--help lacks {word}:\n{help}");
    }
    let user_help = text(
        &Command::new(env!("CARGO_BIN_EXE_hero"))
            .args(["user", "--help"])
            .output()
            .unwrap(),
    );
    for word in ["add", "list", "passwd", "disable", "admin"] {
        assert!(
            user_help.contains(word),
            "user --help lacks {word}:\n{user_help}"
        );
    }
}

/// The precedence of a setting's four sources, as one table: a flag beats its variable,
/// the variable beats the settings file, the file beats the default; for settings of each
/// kind (an address, a path, a number, a list, a boolean), through the real `hero`.
#[test]
fn a_flag_beats_its_variable_the_variable_the_file_the_file_the_default() {
    let dir = tempfile::tempdir().unwrap();
    // (flag, variable, TOML key = value, flag's value, variable's value, what each shows)
    type Row<'a> = (&'a str, &'a str, &'a str, &'a str, &'a str, [&'a str; 4]);
    let table: [Row<'_>; 5] = [
        (
            "--addr",
            "HERO_ADDR",
            "addr = \"0.0.0.0:9003\"",
            "127.0.0.1:9001",
            "127.0.0.1:9002",
            [
                "127.0.0.1:3000",
                "0.0.0.0:9003",
                "127.0.0.1:9002",
                "127.0.0.1:9001",
            ],
        ),
        (
            "--log",
            "HERO_LOG",
            "log = \"debug\"",
            "error",
            "warn",
            [
                "log: \"info\"",
                "log: \"debug\"",
                "log: \"warn\"",
                "log: \"error\"",
            ],
        ),
        (
            "--max-turns",
            "HERO_MAX_TURNS",
            "max_turns = 3",
            "5",
            "4",
            [
                "turns_per_user: 8",
                "turns_per_user: 3",
                "turns_per_user: 4",
                "turns_per_user: 5",
            ],
        ),
        (
            "--trusted-proxies",
            "HERO_TRUSTED_PROXIES",
            "trusted_proxies = [\"10.0.0.3\"]",
            "10.0.0.1",
            "10.0.0.2",
            ["trusted_proxies: []", "10.0.0.3", "10.0.0.2", "10.0.0.1"],
        ),
        (
            "--search-pages-allowed",
            "HERO_SEARCH_PAGES_ALLOWED",
            "search_pages_allowed = true",
            "false",
            "true",
            [
                "pages_allowed: false",
                "pages_allowed: true",
                "pages_allowed: true",
                "pages_allowed: false",
            ],
        ),
    ];
    for (flag, var, line, flag_value, var_value, shows) in table {
        let file = dir.path().join("hero.toml");
        std::fs::write(&file, format!("{line}\n")).unwrap();
        for (i, want) in shows.iter().enumerate() {
            let mut c = Command::new(env!("CARGO_BIN_EXE_hero"));
            c.env_clear().env("PATH", "/usr/bin:/bin");
            let mut args: Vec<String> = Vec::new();
            if i >= 1 {
                args.extend(["--config".into(), file.display().to_string()]);
            }
            if i >= 2 {
                c.env(var, var_value);
            }
            if i >= 3 {
                args.extend([flag.into(), flag_value.into()]);
            }
            args.push("settings".into());
            let out = c.args(&args).output().unwrap();
            let shown = text(&out);
            assert!(out.status.success(), "{flag} {args:?}: {shown}");
            assert!(
                shown.contains(want),
                "{flag}, source {i}: wanted {want:?} in {shown}"
            );
        }
    }
}

/// `hero settings` hides the secrets it was given.
#[test]
fn the_settings_print_without_their_secrets() {
    let out = Command::new(env!("CARGO_BIN_EXE_hero"))
        .env_clear()
        .env("HERO_MASTER_KEY", "MASTER-SECRET-KEY")
        .args([
            "--config",
            "/dev/null",
            "--search-api-key",
            "BRAVE-SECRET-TOKEN",
            "settings",
        ])
        .output()
        .unwrap();
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(
        shown.contains("master_key: Some(\n        <hidden>"),
        "{shown}"
    );
    assert!(
        !shown.contains("MASTER-SECRET-KEY") && !shown.contains("BRAVE-SECRET-TOKEN"),
        "{shown}"
    );
}

/// `hero db copy` moves an installation from SQLite to PostgreSQL and back: every row, every
/// frame (of every type) opening under its key on the other side, and a copy into a database
/// that is not empty refused.
#[tokio::test]
async fn an_installation_is_copied_to_postgresql_and_back() {
    use hero_backend::conversation::frames::{self, NewFrame};
    use hero_backend::{AppState, Settings, crypto, store, test_support};
    use hero_shared::frame::{AuthorType, FrameType};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // An installation on SQLite: its key file, alice, a session with a frame of each type.
    let db = store::Db::open(&data).await.unwrap();
    store::migrate(&db).await.unwrap();
    let (master, _) = crypto::load_master_key(None, &data).unwrap();
    let keys = crypto::Keyring::new(master);
    store::check_master_key(&db, &keys).await.unwrap();
    let st = AppState::new(db, keys, Settings::default()).await.unwrap();
    let alice = test_support::signed_in(&st, "alice").await;
    let session = test_support::session(&st, &alice, "Copied").await.id;
    let dk = frames::session_key(&st, &alice, session).await.unwrap();
    for (i, t) in [
        FrameType::Message,
        FrameType::Request,
        FrameType::Result,
        FrameType::Update,
        FrameType::Compact,
        FrameType::Message,
    ]
    .into_iter()
    .enumerate()
    {
        let mut f = NewFrame::message(
            session,
            AuthorType::User,
            Some(alice.id()),
            serde_json::json!({"role": "user", "content": format!("frame {i}")}),
        );
        f.frame_type = t;
        frames::append(&st, &dk, f).await.unwrap();
    }
    let before = frames::all(&st.db, &dk, session).await.unwrap();
    assert_eq!(before.len(), 6);
    // And a process of alice's, sealed under her key and its row's id.
    use hero_backend::agents::abilities;
    let made = abilities::create(
        &st,
        &alice,
        hero_shared::api::CreateProcessRequest {
            name: "copied".into(),
            description: "kept".into(),
            content: "For {{user.name}}.".into(),
        },
    )
    .await
    .unwrap();
    st.db.close().await;

    // To PostgreSQL.
    let url = store::testing::postgres_url().await;
    let out = hero(&data, &["db", "copy", "--to", &url], None);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("6 frames open under their keys"),
        "{}",
        text(&out)
    );
    let pg = store::Db::connect_postgres(&url).await.unwrap();
    let copied = frames::all(&pg, &dk, session).await.unwrap();
    assert_eq!(
        copied, before,
        "the same frames, opening under the same key"
    );

    // Into it again: it is not empty.
    let again = hero(&data, &["db", "copy", "--to", &url], None);
    assert!(!again.status.success());
    assert!(
        text(&again).contains("the target database is not empty"),
        "{}",
        text(&again)
    );

    // And back, into an empty data directory.
    let back = dir.path().join("back");
    let out = hero(
        &data,
        &[
            "db",
            "copy",
            "--from",
            &url,
            "--to",
            &back.to_string_lossy(),
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out));
    let lite = store::Db::open(&back).await.unwrap();
    assert_eq!(frames::all(&lite, &dk, session).await.unwrap(), before);
    // The copy's users go on from the copied ids: a new one is the next.
    let on_pg = AppState::new(
        pg,
        crypto::Keyring::new(crypto::load_master_key(None, &data).unwrap().0),
        Settings::default(),
    )
    .await
    .unwrap();
    let process = abilities::get(&on_pg, &alice, &made.id).await.unwrap();
    assert_eq!(process.content.as_deref(), Some("For {{user.name}}."));
    let bob = test_support::signed_in(&on_pg, "bob").await;
    assert!(bob.id() > alice.id());
}
