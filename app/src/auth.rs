//! Signing in and out, and who is signed in.

use hero_shared::api::UserDto;
use leptos::prelude::*;
use leptos_router::components::Redirect;

/// The signed-in user; answers 401 when nobody is.
#[server(prefix = "/_fn")]
pub async fn current_user() -> Result<UserDto, ServerFnError> {
    let (_, user) = crate::guard::require_user().await?;
    Ok(user.dto())
}

/// Checks the password and stores the sign-in token in an HttpOnly cookie.
#[server(prefix = "/_fn")]
pub async fn login(username: String, password: String) -> Result<(), ServerFnError> {
    use crate::guard::{fail, state};
    let st = state()?;
    // The brake keys on the client's address too (the peer, or what a trusted proxy says).
    let client = use_context::<http::request::Parts>().and_then(|parts| {
        let peer = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|c| c.0.ip());
        hero_backend::accounts::auth::client_address(
            &parts.headers,
            peer,
            &st.settings.trusted_proxies,
        )
    });
    let l = hero_backend::accounts::auth::login_from(&st, client, &username, &password)
        .await
        .map_err(fail)?;
    let cookie = hero_backend::accounts::auth::session_cookie(
        &l.token,
        st.settings.token_ttl.whole_seconds(),
        &st.settings,
    );
    let resp = expect_context::<leptos_axum::ResponseOptions>();
    resp.append_header(
        http::header::SET_COOKIE,
        http::HeaderValue::from_str(&cookie).map_err(|e| ServerFnError::new(e.to_string()))?,
    );
    Ok(())
}

/// Ends this sign-in: the token is revoked on the server and the cookie cleared.
#[server(prefix = "/_fn")]
pub async fn logout() -> Result<(), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::accounts::auth::logout(&st, &user)
        .await
        .map_err(fail)?;
    let resp = expect_context::<leptos_axum::ResponseOptions>();
    resp.append_header(
        http::header::SET_COOKIE,
        http::HeaderValue::from_str(&hero_backend::accounts::auth::clear_cookie(&st.settings))
            .map_err(|e| ServerFnError::new(e.to_string()))?,
    );
    Ok(())
}

#[component]
pub fn LoginPage() -> impl IntoView {
    let user = crate::json::resource(|| (), |_| current_user());
    view! {
        <Suspense>
            {move || user.get().map(|u| match u {
                Ok(_) => view! { <Redirect path=crate::base::href("/")/> }.into_any(),
                Err(_) => view! {
                    <main class="login">
                        <h1>"Hero"</h1>
                        <p class="tagline">"Sign in to your workspace."</p>
                        <LoginForm/>
                    </main>
                }.into_any(),
            })}
        </Suspense>
    }
}

/// The sign-in form: sent by [`crate::enhance`], which opens the workspace once signed in
/// (a full load, so that everything is read with the new cookie).
#[component]
fn LoginForm() -> impl IntoView {
    use leptos::server_fn::ServerFn;
    view! {
        <crate::enhance::FnForm action=Login::PATH then="/" class="login-form">
            <label>"Username" <input type="text" name="username" autocomplete="username" required/></label>
            <label>"Password" <input type="password" name="password" autocomplete="current-password" required/></label>
            <button type="submit">"Sign in"</button>
        </crate::enhance::FnForm>
    }
}

/// A server function error as a sentence for a person.
pub(crate) fn error_text(e: &ServerFnError) -> String {
    match e {
        ServerFnError::ServerError(msg) => msg.clone(),
        other => other.to_string(),
    }
}
