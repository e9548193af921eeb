//! Each user's permission levels (reference 000, "Permission Levels"): every registered
//! function with its default and the user's own choice, which overrides it.

use hero_shared::api::PermissionDto;
use hero_shared::calls::Permission;

use crate::auth::AuthUser;
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
