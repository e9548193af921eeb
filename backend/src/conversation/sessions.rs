//! A user's sessions. Every query names the user: another user's session is "not found",
//! exactly like a missing one.

use crate::store::Db;
use hero_shared::api::{
    CreateSessionRequest, MAX_SESSION_NAME_CHARS, SessionDto, SessionStatus, UpdateSessionRequest,
};

use crate::accounts::auth::AuthUser;
use crate::store::{self, sessions::SessionRow};
use crate::{Error, Result, now_text};

/// A stored session as the API shows it.
impl SessionRow {
    pub(crate) fn dto(self) -> SessionDto {
        SessionDto {
            id: self.id,
            name: self.name,
            // The column's CHECK constraint admits only the three statuses.
            status: SessionStatus::parse(&self.status).unwrap_or(SessionStatus::Active),
            parent_session_id: self.parent_session_id,
            agent_id: self.agent_id,
            streaming: self.streaming,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// Trims and checks a session name.
pub fn validate_name(name: &str) -> Result<String> {
    let name = name.trim();
    if name.is_empty() {
        return Err(Error::Invalid("session name must not be empty".into()));
    }
    if name.chars().count() > MAX_SESSION_NAME_CHARS {
        return Err(Error::Invalid(format!(
            "session name is too long (at most {MAX_SESSION_NAME_CHARS} characters)"
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(Error::Invalid(
            "session name must not contain control characters".into(),
        ));
    }
    Ok(name.to_owned())
}

/// All the user's sessions, oldest first (the UI groups children under parents).
pub async fn list(db: &Db, user: &AuthUser) -> Result<Vec<SessionDto>> {
    let rows = store::sessions::list(db, user.id()).await?;
    Ok(rows.into_iter().map(SessionRow::dto).collect())
}

pub async fn get(db: &Db, user: &AuthUser, id: i64) -> Result<SessionDto> {
    fetch(&mut db.conn().await?, user.id(), id).await
}

pub(crate) async fn fetch(
    ex: &mut crate::store::Conn<'_>,
    user_id: i64,
    id: i64,
) -> Result<SessionDto> {
    let row = store::sessions::get(ex, user_id, id).await?;
    row.map(SessionRow::dto).ok_or(Error::NotFound("session"))
}

pub async fn create(
    st: &crate::AppState,
    user: &AuthUser,
    req: CreateSessionRequest,
) -> Result<SessionDto> {
    let mut tx = st.db.begin().await?;
    let row = create_in(st, &mut tx, user, req).await?;
    tx.commit().await?;
    Ok(row.dto())
}

/// [`create`] inside `tx`, for what stores more with the session (an import's frames).
pub(crate) async fn create_in(
    st: &crate::AppState,
    tx: &mut crate::store::Write<'_>,
    user: &AuthUser,
    req: CreateSessionRequest,
) -> Result<SessionRow> {
    let name = validate_name(&req.name)?;
    let status = req.status.unwrap_or(SessionStatus::Active);
    // Counted in the transaction that inserts: two creations at once cannot both slip in.
    store::users::lock(tx, user.id()).await?;
    let most = st.settings.limits.sessions_per_user;
    if store::sessions::count(tx, user.id()).await? >= most as i64 {
        return Err(Error::Limit(format!(
            "you have {most} sessions, the most one may (an administrator sets it: HERO_MAX_SESSIONS)"
        )));
    }
    if let Some(parent) = req.parent_session_id {
        fetch(tx, user.id(), parent)
            .await
            .map_err(|_| parent_not_found())?;
    }
    let agent_id = match req.agent_id {
        Some(a) => Some(crate::agents::check_usable(tx, user.id(), a).await?),
        None => crate::agents::first_usable(tx, user.id()).await?,
    };
    let fields = store::sessions::SessionFields {
        name: &name,
        status: status.as_str(),
        parent_session_id: req.parent_session_id,
        agent_id,
    };
    store::sessions::insert(tx, user.id(), &fields, &now_text()).await
}

/// Applies a partial update in one transaction: all fields change, or none.
pub async fn update(
    db: &Db,
    user: &AuthUser,
    id: i64,
    req: UpdateSessionRequest,
) -> Result<SessionDto> {
    let name = req.name.as_deref().map(validate_name).transpose()?;
    let mut tx = db.begin().await?;
    let current = fetch(&mut tx, user.id(), id).await?;
    let parent = match req.parent_session_id {
        Some(Some(p)) => {
            check_parent(&mut tx, user.id(), id, p).await?;
            Some(p)
        }
        Some(None) => None,
        None => current.parent_session_id,
    };
    let agent_id = match req.agent_id {
        Some(Some(a)) => Some(crate::agents::check_usable(&mut tx, user.id(), a).await?),
        Some(None) => None,
        None => current.agent_id,
    };
    let name = name.unwrap_or(current.name);
    let fields = store::sessions::SessionFields {
        name: &name,
        status: req.status.unwrap_or(current.status).as_str(),
        parent_session_id: parent,
        agent_id,
    };
    let row = store::sessions::update(&mut tx, user.id(), id, &fields, &now_text())
        .await?
        .ok_or(Error::NotFound("session"))?;
    tx.commit().await?;
    Ok(row.dto())
}

fn parent_not_found() -> Error {
    Error::Invalid("parent_session_id names no session of yours".into())
}

/// Switches batch/stream mode (`/stream on|off`), on the hot connection (the switch commits
/// with its note in the log).
pub(crate) async fn set_streaming(
    c: &mut crate::store::Conn<'_>,
    user: &AuthUser,
    id: i64,
    on: bool,
) -> Result<()> {
    if !store::sessions::set_streaming(c, user.id(), id, on, &now_text()).await? {
        return Err(Error::NotFound("session"));
    }
    Ok(())
}

/// A parent must be the user's, and making it the parent must not close a loop.
async fn check_parent(
    tx: &mut crate::store::Write<'_>,
    user_id: i64,
    id: i64,
    parent: i64,
) -> Result<()> {
    let mut cursor = Some(parent);
    // Depth is bounded by the number of the user's sessions; the walk stops at the root.
    while let Some(p) = cursor {
        if p == id {
            return Err(Error::Invalid(
                "a session cannot be its own parent or the parent of its ancestor".into(),
            ));
        }
        cursor = fetch(tx, user_id, p)
            .await
            .map_err(|_| parent_not_found())?
            .parent_session_id;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{signed_in, state};

    #[tokio::test]
    async fn create_rename_archive_restore() {
        let (_dir, st) = state().await;
        let alice = signed_in(&st, "alice").await;
        let s = create(
            &st,
            &alice,
            CreateSessionRequest {
                name: "  Plans ".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
        assert_eq!(
            (s.name.as_str(), s.status),
            ("Plans", SessionStatus::Active)
        );
        let upd = |name: Option<&str>, status| UpdateSessionRequest {
            name: name.map(str::to_owned),
            status,
            ..Default::default()
        };
        let r = update(&st.db, &alice, s.id, upd(Some("Trip"), None))
            .await
            .unwrap();
        assert_eq!(r.name, "Trip");
        let a = update(
            &st.db,
            &alice,
            s.id,
            upd(None, Some(SessionStatus::Archived)),
        )
        .await
        .unwrap();
        assert_eq!(
            (a.name.as_str(), a.status),
            ("Trip", SessionStatus::Archived)
        );
        let b = update(&st.db, &alice, s.id, upd(None, Some(SessionStatus::Active)))
            .await
            .unwrap();
        assert_eq!(b.status, SessionStatus::Active);
        assert_eq!(list(&st.db, &alice).await.unwrap(), vec![b]);
    }

    #[tokio::test]
    async fn sessions_are_private_to_their_user() {
        let (_dir, st) = state().await;
        let alice = signed_in(&st, "alice").await;
        let bob = signed_in(&st, "bob").await;
        let s = create(
            &st,
            &alice,
            CreateSessionRequest {
                name: "mine".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
        assert!(list(&st.db, &bob).await.unwrap().is_empty());
        assert!(matches!(
            get(&st.db, &bob, s.id).await,
            Err(Error::NotFound(_))
        ));
        let rename = UpdateSessionRequest {
            name: Some("stolen".into()),
            ..Default::default()
        };
        assert!(matches!(
            update(&st.db, &bob, s.id, rename).await,
            Err(Error::NotFound(_))
        ));
        // Bob cannot hang his session under Alice's either.
        let child = CreateSessionRequest {
            name: "c".into(),
            parent_session_id: Some(s.id),
            status: None,
            agent_id: None,
        };
        assert!(matches!(
            create(&st, &bob, child).await,
            Err(Error::Invalid(_))
        ));
        assert_eq!(get(&st.db, &alice, s.id).await.unwrap().name, "mine");
    }

    #[tokio::test]
    async fn parents_are_checked_and_loops_refused() {
        let (_dir, st) = state().await;
        let alice = signed_in(&st, "alice").await;
        let mk = |name: &str, parent| CreateSessionRequest {
            name: name.into(),
            parent_session_id: parent,
            status: None,
            agent_id: None,
        };
        let a = create(&st, &alice, mk("a", None)).await.unwrap();
        let b = create(&st, &alice, mk("b", Some(a.id))).await.unwrap();
        assert_eq!(b.parent_session_id, Some(a.id));
        let to = |p| UpdateSessionRequest {
            parent_session_id: Some(p),
            ..Default::default()
        };
        for bad in [Some(a.id), Some(b.id)] {
            let e = update(&st.db, &alice, a.id, to(bad)).await.unwrap_err();
            assert!(e.to_string().contains("parent"), "{e}");
        }
        let e = update(&st.db, &alice, a.id, to(Some(9999)))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("names no session"), "{e}");
        let detached = update(&st.db, &alice, b.id, to(None)).await.unwrap();
        assert_eq!(detached.parent_session_id, None);
    }

    #[tokio::test]
    async fn bad_names_change_nothing() {
        let (_dir, st) = state().await;
        let alice = signed_in(&st, "alice").await;
        let s = create(
            &st,
            &alice,
            CreateSessionRequest {
                name: "ok".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
        for (bad, want) in [
            ("   ", "empty"),
            (&"x".repeat(201)[..], "too long"),
            ("a\u{7}b", "control"),
        ] {
            let e = update(
                &st.db,
                &alice,
                s.id,
                UpdateSessionRequest {
                    name: Some(bad.into()),
                    status: Some(SessionStatus::Archived),
                    ..Default::default()
                },
            )
            .await
            .unwrap_err();
            assert!(e.to_string().contains(want), "{e}");
        }
        assert_eq!(get(&st.db, &alice, s.id).await.unwrap(), s);
        let e = create(
            &st,
            &alice,
            CreateSessionRequest {
                name: "".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
        assert!(matches!(e, Error::Invalid(_)));
        assert_eq!(list(&st.db, &alice).await.unwrap().len(), 1);
    }
}
