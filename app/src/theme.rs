//! The colour theme: the system's (light or dark, as the device is set) until the user picks
//! one with the toggle, which a cookie remembers (`hero_theme`, a year). The server reads it
//! and draws the page with `<html data-theme=…>`, so a page never flashes the other theme;
//! the stylesheet's colours are `light-dark()` pairs chosen by `color-scheme`. The toggle is
//! a plain form (it works without the wasm): the page is loaded again after it.

use leptos::prelude::*;

use crate::enhance::FnForm;

/// The cookie that remembers the theme picked.
pub const COOKIE: &str = "hero_theme";

/// A theme a user can pick; anything else is the system's.
pub fn parse(v: &str) -> Option<&'static str> {
    match v {
        "light" => Some("light"),
        "dark" => Some("dark"),
        _ => None,
    }
}

/// The theme a `Cookie` header remembers, if any.
pub fn from_cookies(header: &str) -> Option<&'static str> {
    header
        .split(';')
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .and_then(|(_, v)| parse(v))
}

/// Picks the theme (`light`, `dark`, or `system` to follow the device again).
#[server(prefix = "/_fn")]
pub async fn set_theme(theme: String) -> Result<(), ServerFnError> {
    let st = crate::guard::state()?;
    let (value, max_age) = match (theme.as_str(), parse(&theme)) {
        (_, Some(t)) => (t, 31_536_000),
        ("system", None) => ("", 0),
        _ => {
            return Err(crate::guard::fail(hero_backend::Error::Invalid(format!(
                "{theme:?} is no theme: light, dark or system"
            ))));
        }
    };
    let cookie = hero_backend::accounts::auth::cookie(COOKIE, value, max_age, false, &st.settings);
    let resp = expect_context::<leptos_axum::ResponseOptions>();
    resp.append_header(
        http::header::SET_COOKIE,
        http::HeaderValue::from_str(&cookie).map_err(|e| ServerFnError::new(e.to_string()))?,
    );
    Ok(())
}

/// The theme the request's cookie remembers (on the server; none in the browser).
pub fn current() -> Option<&'static str> {
    #[cfg(feature = "ssr")]
    {
        use_context::<http::request::Parts>()
            .and_then(|p| {
                p.headers
                    .get(http::header::COOKIE)
                    .and_then(|v| v.to_str().ok())
                    .map(from_cookies)
            })
            .flatten()
    }
    #[cfg(not(feature = "ssr"))]
    {
        None
    }
}

/// The toggle: the theme not in force now. Both are drawn; the stylesheet shows the one
/// that applies (it knows the system's setting, the server does not).
#[component]
pub fn ThemeToggle() -> impl IntoView {
    use leptos::server_fn::ServerFn;
    view! {
        <FnForm action=SetTheme::PATH then="reload" class="theme-form to-light">
            <input type="hidden" name="theme" value="light"/>
            <button type="submit" class="link-button" aria-label="Light theme" title="Light theme">"☀"</button>
        </FnForm>
        <FnForm action=SetTheme::PATH then="reload" class="theme-form to-dark">
            <input type="hidden" name="theme" value="dark"/>
            <button type="submit" class="link-button" aria-label="Dark theme" title="Dark theme">"☾"</button>
        </FnForm>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_names_a_theme_or_none() {
        assert_eq!(from_cookies("a=1; hero_theme=dark; b=2"), Some("dark"));
        assert_eq!(from_cookies("hero_theme=light"), Some("light"));
        assert_eq!(from_cookies("hero_theme=purple"), None);
        assert_eq!(from_cookies("xhero_theme=dark"), None);
        assert_eq!(from_cookies(""), None);
    }
}
