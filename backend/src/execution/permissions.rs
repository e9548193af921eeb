//! Each user's permission levels (reference 000, "Permission Levels"): every registered
//! function with its default and the user's own choice, which overrides it, and what a
//! user's agents are offered (every function the user has not set to never).

use std::sync::Arc;

use hero_shared::api::PermissionDto;
use hero_shared::calls::Permission;

use crate::accounts::auth::AuthUser;
use crate::execution::functions;
use crate::{AppState, Error, Result, now_text, store};

/// Every registered function, its default and the user's level.
pub async fn list(st: &AppState, user: &AuthUser) -> Result<Vec<PermissionDto>> {
    let own = store::permissions::list(&st.db, user.id()).await?;
    Ok(st
        .functions
        .specs()
        .map(|s| PermissionDto {
            function: s.name.to_owned(),
            description: s.description.to_owned(),
            default: s.default,
            level: own
                .iter()
                .find(|(f, _)| f == s.name)
                .and_then(|(_, l)| Permission::parse(l))
                .unwrap_or(s.default),
        })
        .collect())
}

/// Sets the user's own level for a registered function.
pub async fn set(
    st: &AppState,
    user: &AuthUser,
    function: &str,
    level: Permission,
) -> Result<PermissionDto> {
    let Some((spec, _)) = st.functions.get(function) else {
        return Err(Error::NotFound("function"));
    };
    store::permissions::set(&st.db, user.id(), spec.name, level.as_str(), &now_text()).await?;
    Ok(PermissionDto {
        function: spec.name.to_owned(),
        description: spec.description.to_owned(),
        default: spec.default,
        level,
    })
}

/// The level a function has for a user: their own, else the function's default.
pub(crate) async fn level(
    c: &mut crate::store::Conn<'_>,
    registry: &functions::Registry,
    user_id: i64,
    function: &str,
) -> Result<Permission> {
    let own = store::permissions::get_hot(c, user_id, function).await?;
    Ok(own
        .as_deref()
        .and_then(Permission::parse)
        .or_else(|| registry.get(function).map(|(s, _)| s.default))
        .unwrap_or(Permission::Ask))
}

/// The registry's functions the user has not set to never (one read of the user's levels),
/// each with itself as a native tool: what the agent is offered.
pub(crate) async fn allowed<'r>(
    c: &mut crate::store::Conn<'_>,
    registry: &'r functions::Registry,
    user_id: i64,
) -> Result<Vec<(&'r functions::Spec, &'r Arc<crate::providers::Tool>)>> {
    let own = store::permissions::list_hot(c, user_id).await?;
    Ok(registry
        .tools()
        .filter(|(s, _)| {
            let level = own
                .iter()
                .find(|(f, _)| f == s.name)
                .and_then(|(_, l)| Permission::parse(l))
                .unwrap_or(s.default);
            level != Permission::Never
        })
        .collect())
}

/// The registry's functions the user has not set to never.
pub(crate) async fn allowed_specs<'r>(
    c: &mut crate::store::Conn<'_>,
    registry: &'r functions::Registry,
    user_id: i64,
) -> Result<Vec<&'r functions::Spec>> {
    Ok(allowed(c, registry, user_id)
        .await?
        .into_iter()
        .map(|(s, _)| s)
        .collect())
}

/// The registry's functions as native tools, but those the user has set to never.
pub async fn offered(st: &AppState, user_id: i64) -> Result<Vec<Arc<crate::providers::Tool>>> {
    st.db
        .read_with(async |c| {
            Ok(allowed(c, &st.functions, user_id)
                .await?
                .into_iter()
                .map(|(_, t)| t.clone())
                .collect())
        })
        .await
}
