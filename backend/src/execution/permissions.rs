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
    let tools = registry(st, user.id()).await?;
    Ok(tools
        .specs()
        .map(|s| PermissionDto {
            capability: tools.capability_of(&s.name).map(str::to_owned),
            function: s.name.to_string(),
            description: s.description.to_string(),
            default: s.default,
            auto_approve: s.permissions.auto_approve,
            danger_level: s.permissions.danger_level,
            level: own
                .iter()
                .find(|(f, _)| *f == s.name)
                .and_then(|(_, l)| Permission::parse(l))
                .map(|l| match l {
                    Permission::Always if !s.permissions.may_be_always() => Permission::Ask,
                    l => l,
                })
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
    let tools = registry(st, user.id()).await?;
    let Some((spec, _)) = tools.get(function) else {
        return Err(Error::NotFound("function"));
    };
    if level == Permission::Always && !spec.permissions.may_be_always() {
        return Err(Error::Invalid(format!(
            "{function} asks every time: it cannot be allowed always"
        )));
    }
    store::permissions::set(&st.db, user.id(), &spec.name, level.as_str(), &now_text()).await?;
    Ok(PermissionDto {
        capability: tools.capability_of(&spec.name).map(str::to_owned),
        function: spec.name.to_string(),
        description: spec.description.to_string(),
        default: spec.default,
        auto_approve: spec.permissions.auto_approve,
        danger_level: spec.permissions.danger_level,
        level,
    })
}

/// The user's chain ([`crate::execution::mcp::registry`]).
async fn registry(st: &AppState, user_id: i64) -> Result<Arc<functions::Registry>> {
    st.db
        .read_with(async |c| crate::execution::mcp::registry(st, c, user_id).await)
        .await
}

/// The level a function has for a user: their own, else the function's default; never
/// `always` for one that asks every time.
pub(crate) async fn level(
    c: &mut crate::store::Conn<'_>,
    registry: &functions::Registry,
    user_id: i64,
    function: &str,
) -> Result<Permission> {
    let own = store::permissions::get_hot(c, user_id, function).await?;
    let spec = registry.get(function).map(|(s, _)| s);
    let level = own
        .as_deref()
        .and_then(Permission::parse)
        .or(spec.map(|s| s.default))
        .unwrap_or(Permission::Ask);
    Ok(match spec {
        Some(s) if level == Permission::Always && !s.permissions.may_be_always() => Permission::Ask,
        _ => level,
    })
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
                .find(|(f, _)| *f == s.name)
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
pub async fn offered(
    st: &AppState,
    tools: &functions::Registry,
    user_id: i64,
) -> Result<Vec<Arc<crate::providers::Tool>>> {
    st.db
        .read_with(async |c| {
            Ok(allowed(c, tools, user_id)
                .await?
                .into_iter()
                .map(|(_, t)| t.clone())
                .collect())
        })
        .await
}

#[cfg(test)]
mod tests {
    use futures::future::BoxFuture;
    use hero_shared::calls::{AutoApprove, DangerLevel, FunctionPermissions, Permission};
    use serde_json::{Value, json};

    use crate::execution::functions::{Ctx, Function, Spec};
    use crate::test_support;

    /// A function that asks every time (reference 003's "Ask Always").
    struct AskAlways;

    impl Function for AskAlways {
        fn spec(&self) -> Spec {
            Spec {
                name: "ask_always".into(),
                description: "asks every time".into(),
                plugin: None,
                default: Permission::Ask,
                permissions: FunctionPermissions {
                    auto_approve: AutoApprove::Never,
                    danger_level: DangerLevel::Moderate,
                },
                answered_by_user: false,
                schema: json!({"type": "object", "properties": {}}),
                examples: Vec::new(),
            }
        }

        fn run<'a>(
            &'a self,
            _: &'a Ctx<'a>,
            _: &'a Value,
        ) -> BoxFuture<'a, Result<String, String>> {
            Box::pin(async { Ok("ran".into()) })
        }
    }

    /// A function that asks every time cannot be set to always, and a level stored as
    /// always (before it asked every time) still asks.
    #[tokio::test]
    async fn what_asks_every_time_is_never_always() {
        let mut registry = crate::execution::functions::builtin::registry();
        registry.register(AskAlways);
        let t = test_support::state_with_functions(Default::default(), registry).await;
        let user = test_support::signed_in(&t.st, "alice").await;
        let e = super::set(&t.st, &user, "ask_always", Permission::Always)
            .await
            .unwrap_err();
        assert_eq!(
            e.public_message(),
            "ask_always asks every time: it cannot be allowed always"
        );
        let listed = super::list(&t.st, &user).await.unwrap();
        let row = listed.iter().find(|p| p.function == "ask_always").unwrap();
        assert_eq!(
            (row.auto_approve, row.level),
            (AutoApprove::Never, Permission::Ask)
        );
        crate::store::permissions::set(&t.st.db, user.id(), "ask_always", "always", "now")
            .await
            .unwrap();
        let listed = super::list(&t.st, &user).await.unwrap();
        let row = listed.iter().find(|p| p.function == "ask_always").unwrap();
        assert_eq!(row.level, Permission::Ask);
        let level = t
            .st
            .db
            .read_with(async |c| super::level(c, &t.st.functions, user.id(), "ask_always").await)
            .await
            .unwrap();
        assert_eq!(level, Permission::Ask);
        // Never is still the user's to choose.
        super::set(&t.st, &user, "ask_always", Permission::Never)
            .await
            .unwrap();
    }
}
