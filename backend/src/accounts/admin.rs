//! What an administrator does to accounts: list them with their use, make one, and change
//! one (disable or enable, reset the password, make or unmake an administrator). The admin
//! page and API call these; `hero user …` calls the same [`super::users`] functions.
//!
//! Two rules keep a site governable: an administrator changes neither their own
//! administration nor their own enabling here (another administrator, or `hero user`, must),
//! and no change leaves the site without an enabled administrator.

use super::auth::AuthUser;
use super::{password, tokens, users};
use crate::store::users::{Usage, UserRow};
use crate::{AppState, Error, Result, now_text, store};

/// What a change asks; absent fields stay as they are.
#[derive(Debug, Default, Clone)]
pub struct Change {
    pub disabled: Option<bool>,
    pub is_admin: Option<bool>,
    pub password: Option<String>,
}

fn require_admin(user: &AuthUser) -> Result<()> {
    if user.is_admin() {
        Ok(())
    } else {
        Err(Error::Forbidden("only an administrator manages users"))
    }
}

/// Every account with its use, for an administrator.
pub async fn list(st: &AppState, user: &AuthUser) -> Result<Vec<(UserRow, Usage)>> {
    require_admin(user)?;
    store::users::list_with_usage(&st.db).await
}

/// Makes an account (with its demo agent), for an administrator.
pub async fn create(
    st: &AppState,
    user: &AuthUser,
    username: &str,
    pw: &str,
    is_admin: bool,
) -> Result<UserRow> {
    require_admin(user)?;
    super::create(&st.db, &st.keys, username, pw, is_admin).await
}

/// Applies `change` to account `id` in one transaction: all of it or nothing. A new
/// password or a disabling ends every sign-in the account has.
pub async fn update(st: &AppState, user: &AuthUser, id: i64, change: Change) -> Result<UserRow> {
    require_admin(user)?;
    if change.disabled.is_none() && change.is_admin.is_none() && change.password.is_none() {
        return Err(Error::Invalid(
            "nothing to change: give disabled, is_admin or password".into(),
        ));
    }
    let hash = match &change.password {
        Some(pw) => {
            password::validate(pw)?;
            Some(password::hash(pw).await?)
        }
        None => None,
    };
    let mut tx = st.db.begin().await?;
    let Some(before) = store::users::by_id(&mut tx, id).await? else {
        return Err(Error::NotFound("user"));
    };
    let after_admin = change.is_admin.unwrap_or(before.is_admin);
    let after_disabled = change.disabled.unwrap_or(before.disabled);
    if id == user.id() && change.password.is_some() {
        return Err(Error::Conflict(
            "change your own password on your account page, with your current one".into(),
        ));
    }
    if id == user.id() && (after_admin != before.is_admin || after_disabled != before.disabled) {
        return Err(Error::Conflict(
            "you cannot disable or unmake your own administrator account; another \
             administrator (or `hero user`) can"
                .into(),
        ));
    }
    keeps_an_administrator(&mut tx, &before, after_admin, after_disabled).await?;
    let now = now_text();
    if let Some(a) = change.is_admin {
        store::users::set_admin(&mut tx, id, a, &now).await?;
    }
    if let Some(d) = change.disabled {
        store::users::set_disabled(&mut tx, id, d, &now).await?;
    }
    if let Some(h) = &hash {
        store::users::set_password_hash(&mut tx, id, h, &now).await?;
    }
    if hash.is_some() || after_disabled && !before.disabled {
        tokens::revoke_all(&mut tx, id).await?;
    }
    tx.commit().await?;
    Ok(UserRow {
        is_admin: after_admin,
        disabled: after_disabled,
        ..before
    })
}

/// Refuses a change that takes `before` from the enabled administrators when it is the
/// last of them (counted in `tx`, which on PostgreSQL locks their rows).
async fn keeps_an_administrator(
    tx: &mut crate::store::Write<'_>,
    before: &UserRow,
    is_admin: bool,
    disabled: bool,
) -> Result<()> {
    let was_counted = before.is_admin && !before.disabled;
    let counted = is_admin && !disabled;
    if was_counted && !counted && store::users::enabled_admins(tx).await? <= 1 {
        return Err(Error::Conflict(format!(
            "{} is the last enabled administrator; make another one first",
            before.username
        )));
    }
    Ok(())
}

/// Makes or unmakes an administrator by name (`hero user admin`), with the last-administrator
/// rule; the operator's command has no "own account".
pub async fn set_admin(db: &crate::store::Db, name: &str, is_admin: bool) -> Result<UserRow> {
    let u = users::find_by_name(db, name).await?;
    let mut tx = db.begin().await?;
    keeps_an_administrator(&mut tx, &u, is_admin, u.disabled).await?;
    store::users::set_admin(&mut tx, u.id, is_admin, &now_text()).await?;
    tx.commit().await?;
    Ok(UserRow { is_admin, ..u })
}

/// Disables or enables an account by name (`hero user disable`/`enable`), with the
/// last-administrator rule; disabling ends its sign-ins.
pub async fn set_disabled_by_name(
    db: &crate::store::Db,
    name: &str,
    disabled: bool,
) -> Result<UserRow> {
    let u = users::find_by_name(db, name).await?;
    let mut tx = db.begin().await?;
    keeps_an_administrator(&mut tx, &u, u.is_admin, disabled).await?;
    store::users::set_disabled(&mut tx, u.id, disabled, &now_text()).await?;
    if disabled {
        tokens::revoke_all(&mut tx, u.id).await?;
    }
    tx.commit().await?;
    Ok(UserRow { disabled, ..u })
}

/// An account and its use as the API and the admin page show them.
pub fn dto(u: UserRow, usage: Usage) -> hero_shared::api::AdminUserDto {
    hero_shared::api::AdminUserDto {
        id: u.id,
        username: u.username,
        is_admin: u.is_admin,
        disabled: u.disabled,
        created_at: u.created_at,
        usage: hero_shared::api::UserUsageDto {
            sessions: usage.sessions,
            agents: usage.agents,
            last_active: usage.last_active,
            cost_usd: usage.cost_micros as f64 / 1e6,
            calls: usage.calls,
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
        },
    }
}
