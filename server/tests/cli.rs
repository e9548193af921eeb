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
    for word in ["add", "list", "passwd", "disable"] {
        assert!(
            user_help.contains(word),
            "user --help lacks {word}:\n{user_help}"
        );
    }
}
