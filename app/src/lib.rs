//! Hero's user interface: the HTML shell, the routes, and the pages, rendered on the server
//! and taken over by hand in the browser (nothing hydrates). Server functions here are thin: each checks the signed-in
//! user and calls the same `hero_backend` function the JSON API calls.
//!
//! Layout:
//! - [`auth`]: sign-in page, sign-out, the current user.
//! - [`sessions`]: the sidebar tree of sessions and the session page.
//! - [`chat`]: the conversation: stored messages, the live reply, the composer.
//! - [`agents`]: the Agents page.
//! - [`enhance`]: the forms of the server-rendered pages, in the browser.
//! - `guard` (ssr only): `require_user()` and the error mapping every server function uses.
//! - [`json`]: the codec of the pages' resources.
//! - `csp` (ssr only): the pages' Content-Security-Policy, with each response's nonce.

#![recursion_limit = "256"]

pub mod agents;
pub mod auth;
pub mod base;
pub mod chat;
#[cfg(feature = "ssr")]
pub mod csp;
pub mod enhance;
pub mod files;
#[cfg(feature = "ssr")]
pub mod guard;
pub mod json;
pub mod navigate;
pub mod permissions;
pub mod sessions;

use leptos::prelude::*;
use leptos_meta::{HashedStylesheet, MetaTags, Title, provide_meta_context};
use leptos_router::components::{Route, Router, Routes};
use leptos_router::{SsrMode, path};

/// The browser's entry (named `hydrate` because Leptos's loader calls it so; nothing
/// hydrates): every page is the server's HTML, taken over without components: the chat by
/// [`chat::client`], the forms by [`enhance`], moves between sessions by [`navigate`]. Then
/// it marks the body, which tells tests (and people debugging) that clicks now reach their
/// handlers (`data-ready`).
#[cfg(feature = "hydrate")]
pub fn hydrate() {
    // With no island, this hydrates nothing: it starts the executor that runs the page's
    // tasks and effects, and sets the root owner of what the page holds.
    leptos::mount::hydrate_islands();
    // Server functions are called under the base path, as every other request.
    let base = base::path();
    if !base.is_empty() {
        let _ = leptos::server_fn::client::try_set_server_url(base.leak());
    }
    chat::client::start();
    enhance::install();
    navigate::install();
    if let Some(body) = document().body() {
        let _ = body.set_attribute("data-ready", "true");
    }
}

/// The script that loads the wasm and calls [`hydrate`]: Leptos's plain loader (the islands
/// one is three times its size, and there are no islands), with the page's resources left
/// out of the page, as the islands loader would: nothing hydrates from them.
#[component]
fn Loader(options: LeptosOptions, root: String) -> impl IntoView {
    if let Some(sc) = Owner::current_shared_context() {
        sc.set_is_hydrating(false);
    }
    view! { <HydrationScripts options root/> }
}

/// The HTML document around the app, rendered on the server only.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    #[cfg(feature = "ssr")]
    csp::send_with_nonce();
    let root = base::path();
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <meta name=base::META content=root.clone()/>
                <link rel="icon" href=format!("{root}/favicon.svg") type="image/svg+xml"/>
                <HashedStylesheet options=options.clone() id="leptos" root=root.clone()/>
                <AutoReload options=options.clone()/>
                <Loader options root/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    view! {
        <Title text="Hero"/>
        <Router>
            <Routes fallback=|| view! { <p class="not-found">"Page not found."</p> }>
                <Route path=path!("/login") view=auth::LoginPage ssr=SsrMode::Async/>
                <Route path=path!("/") view=sessions::Workspace ssr=SsrMode::Async/>
                <Route path=path!("/s/:id") view=sessions::Workspace ssr=SsrMode::Async/>
                <Route path=path!("/agents") view=agents::AgentsPage ssr=SsrMode::Async/>
                <Route path=path!("/agents/:id/files") view=files::FilesPage ssr=SsrMode::Async/>
                <Route path=path!("/permissions") view=permissions::PermissionsPage ssr=SsrMode::Async/>
            </Routes>
        </Router>
    }
}
