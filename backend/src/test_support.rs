//! One harness for the unit tests, the integration tests and the benchmarks (feature
//! `test-support`): a fresh data directory with a migrated database and a random master
//! key, signed-in users, and the provider pipeline's pieces the cost benchmark drives.
//! Nothing here is compiled into `hero`.

use std::ops::Deref;

use crate::{AppState, Settings, accounts, accounts::auth, crypto, store};

/// An [`AppState`] over a database in a temporary directory, removed when this is dropped.
pub struct TestState {
    pub st: AppState,
    pub dir: tempfile::TempDir,
}

impl Deref for TestState {
    type Target = AppState;

    fn deref(&self) -> &AppState {
        &self.st
    }
}

/// A fresh data directory with a migrated database and a random master key.
pub async fn state() -> (tempfile::TempDir, AppState) {
    let t = state_with(Settings::default()).await;
    (t.dir, t.st)
}

/// [`state`] with the given settings.
pub async fn state_with(settings: Settings) -> TestState {
    state_with_functions(settings, crate::execution::functions::builtin::registry()).await
}

/// [`state_with`] and a registry of one's own.
pub async fn state_with_functions(
    settings: Settings,
    functions: crate::execution::functions::Registry,
) -> TestState {
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = Settings {
        workspaces: dir.path().join("workspaces"),
        plugins: crate::execution::plugins::PluginSettings {
            state: dir.path().join("plugin-state"),
            ..settings.plugins
        },
        ..settings
    };
    let db = match std::env::var("HERO_TEST_BACKEND").as_deref() {
        Ok("postgres") => postgres_db().await,
        Ok("sqlite") | Err(_) => store::Db::open(dir.path()).await.expect("open db"),
        Ok(other) => panic!("HERO_TEST_BACKEND is sqlite or postgres, not {other:?}"),
    };
    store::migrate(&db).await.expect("migrate");
    crate::execution::sandbox::let_the_sandbox_in(dir.path()).expect("the sandbox's way in");
    let keys = crypto::Keyring::new(crypto::SecretKey::random());
    TestState {
        st: AppState::with_functions(db, keys, settings, functions)
            .await
            .expect("state"),
        dir,
    }
}

/// A database of its own on the PostgreSQL that `HERO_TEST_POSTGRES` names (a URL: what
/// `scripts/postgres.sh start` prints, which `scripts/test.sh` starts): a fresh schema,
/// which the pool's connections search first, not migrated. The tests of the store run on it
/// with `HERO_TEST_BACKEND=postgres` (scripts/test.sh runs them so too).
pub async fn postgres_db() -> store::Db {
    store::testing::postgres_db().await
}

/// The password [`signed_in`] gives `name`.
pub fn password_of(name: &str) -> String {
    format!("password-of-{name}")
}

/// Creates `name` (password [`password_of`]) and signs them in.
pub async fn signed_in(st: &AppState, name: &str) -> auth::AuthUser {
    let pw = password_of(name);
    accounts::create(&st.db, &st.keys, name, &pw, false)
        .await
        .expect("create user");
    auth::login(st, name, &pw).await.expect("login").user
}

/// How many rows `table` holds (tests of what is stored, on either backend).
pub async fn rows_in(st: &AppState, table: &str) -> i64 {
    crate::store::rows_in(&st.db, table).await.expect("count")
}

/// A new session of `user` named `name`, with their first agent (the offline demo).
pub async fn session(
    st: &AppState,
    user: &auth::AuthUser,
    name: &str,
) -> hero_shared::api::SessionDto {
    crate::conversation::sessions::create(
        st,
        user,
        hero_shared::api::CreateSessionRequest {
            name: name.into(),
            parent_session_id: None,
            status: None,
            agent_id: None,
        },
    )
    .await
    .expect("create session")
}

/// The Anthropic decoder over raw SSE bytes, as a turn reads a provider's body: what the
/// pipeline cost benchmark feeds one event at a time.
pub fn anthropic_deltas<S>(body: S) -> crate::providers::DeltaStream
where
    S: futures::Stream<Item = Result<&'static [u8], std::io::Error>> + Send + 'static,
{
    crate::providers::drive(
        sseer::EventStream::new(body),
        crate::providers::anthropic::AnthropicDecoder::default(),
    )
}

/// A one-page PDF whose page shows `text` (ASCII, in Helvetica): the smallest file a PDF
/// reader takes, its cross-reference table computed, for tests that attach one.
pub fn pdf(text: &str) -> Vec<u8> {
    let escaped = text
        .replace('\\', "\\\\")
        .replace('(', "\\(")
        .replace(')', "\\)");
    let stream = format!("BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET");
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_owned(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>".to_owned(),
        format!("<< /Length {} >>\nstream\n{stream}\nendstream", stream.len()),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
            .to_owned(),
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{o}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for off in offsets {
        out.extend_from_slice(format!("{off:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

/// A frame of session 1 at `seq` (id `f{seq}`), as the unit tests of the conversation
/// build them.
pub fn frame(
    seq: i64,
    frame_type: hero_shared::frame::FrameType,
    author: hero_shared::frame::AuthorType,
    payload: serde_json::Value,
) -> hero_shared::frame::Frame {
    hero_shared::frame::Frame {
        id: format!("f{seq}"),
        session_id: 1,
        seq,
        parent_id: None,
        target_ids: Vec::new(),
        timestamp: String::new(),
        frame_type,
        author_type: author,
        author_id: None,
        payload,
    }
}
