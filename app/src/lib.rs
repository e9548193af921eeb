//! Hero's user interface: the HTML shell, the routes, and the pages, rendered on the server
//! and taken over by hand in the browser (nothing hydrates). Server functions here are thin: each checks the signed-in
//! user and calls the same `hero_backend` function the JSON API calls.
//!
//! Layout:
//! - [`auth`]: sign-in page, sign-out, the current user.
//! - [`sessions`]: the sidebar tree of sessions and the session page.
//! - [`chat`]: the conversation: stored messages, the live reply, the composer.
//! - [`agents`]: the Agents page.
//! - [`abilities`]: the Abilities page (functions and processes; the user's own processes
//!   made, edited with a preview, and deleted).
//! - [`search`]: the Search page (the user's messages and sessions found, each opening its
//!   session at its message).
//! - [`admin`]: the admin page (administrators only): accounts, their use, and changes.
//! - [`memory`]: an agent's Memory page (its memory files and yours, each edited with a
//!   preview; a file made; a search showing the chunks found with their lines and scores).
//! - [`theme`]: the colour theme, the system's until the toggle picks one (a cookie).
//! - [`shortcuts`]: the keyboard shortcuts and the `?` list of them.
//! - [`skills`]: the Skills page (the user's skills by tier, a scored search, one skill's
//!   text and files; personal skills made, edited, deleted and imported from a folder).
//! - [`enhance`]: the forms of the server-rendered pages, in the browser.
//! - `guard` (ssr only): `require_user()` and the error mapping every server function uses.
//! - `http` (hydrate only): the browser's one `fetch`, its answer read as text.
//! - [`json`]: the codec of the pages' resources.
//! - `markdown` (hydrate only): the markdown parser, loaded in the browser when first needed.
//! - `csp` (ssr only): the pages' Content-Security-Policy, with each response's nonce.

#![recursion_limit = "256"]

pub mod abilities;
pub mod admin;
pub mod agents;
pub mod auth;
pub mod base;
pub mod chat;
pub mod config;
#[cfg(feature = "ssr")]
pub mod csp;
pub mod enhance;
pub mod files;
#[cfg(feature = "ssr")]
pub mod guard;
#[cfg(feature = "hydrate")]
pub mod http;
pub mod json;
#[cfg(feature = "hydrate")]
pub mod markdown;
pub mod mcp;
pub mod memory;
pub mod navigate;
pub mod permissions;
#[cfg(feature = "hydrate")]
pub mod rpc;
pub mod search;
pub mod sessions;
pub mod shortcuts;
pub mod skills;
pub mod tasks;
pub mod theme;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Title, provide_meta_context};
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
    skills::install();
    navigate::install();
    shortcuts::install();
    if let Some(body) = document().body() {
        let _ = body.set_attribute("data-ready", "true");
    }
}

/// The site's built files a page links, by the names the build gave them (`hero.<hash>.js`:
/// a name changes with its content). The server reads them once, from the hashes the build
/// left (`hash.txt`), and hands them to every page as context.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assets {
    pub js: String,
    pub wasm: String,
    pub css: String,
}

impl Default for Assets {
    /// A site built without hashed names.
    fn default() -> Self {
        Assets {
            js: "hero.js".into(),
            wasm: "hero.wasm".into(),
            css: "hero.css".into(),
        }
    }
}

impl Assets {
    /// From a `hash.txt` as cargo-leptos writes it (`js: <hash>` a line, and `wasm`,
    /// `css`); a file it does not name keeps its plain name.
    pub fn from_hashes(text: &str) -> Self {
        let mut a = Assets::default();
        for (kind, hash) in text.lines().filter_map(|l| l.split_once(':')) {
            let (kind, hash) = (kind.trim(), hash.trim());
            // A hash is base64url: nothing in it can leave the attribute or the script.
            if hash.is_empty()
                || !hash
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                continue;
            }
            match kind {
                "js" => a.js = format!("hero.{hash}.js"),
                "wasm" => a.wasm = format!("hero.{hash}.wasm"),
                "css" => a.css = format!("hero.{hash}.css"),
                _ => {}
            }
        }
        a
    }
}

/// The loader's text for the site's files `js` and `wasm` (their URLs). The pages' policy
/// allows it by its nonce and, where a page's own policy is missing, by its hash
/// (`server::web`): the same text, so the same hash.
pub fn loader_script(js: &str, wasm: &str) -> String {
    // The paths hold only the base path's and the hashes' characters (both checked), so
    // as JSON strings they are JavaScript strings that cannot end the script.
    format!(
        "import({js}).then(m => m.default({{module_or_path: {wasm}}}).then(() => m.hydrate()));",
        js = serde_json::Value::from(js),
        wasm = serde_json::Value::from(wasm),
    )
}

/// The URLs of the site's script and wasm under `root` (the base path), as pages link them.
pub fn loader_urls(root: &str, pkg_dir: &str, assets: &Assets) -> (String, String) {
    let pkg = format!("{root}/{pkg_dir}");
    (
        format!("{pkg}/{}", assets.js),
        format!("{pkg}/{}", assets.wasm),
    )
}

/// The script that loads the wasm and calls [`hydrate`]: what Leptos's plain loader does
/// (the islands one is three times its size, and there are no islands), with the page's
/// resources left out of the page, as the islands loader would: nothing hydrates from them.
/// Its files are named from [`Assets`], not from a file read at each page.
#[component]
fn Loader(js: String, wasm: String) -> impl IntoView {
    if let Some(sc) = Owner::current_shared_context() {
        sc.set_is_hydrating(false);
    }
    let nonce = leptos::nonce::use_nonce();
    let script = loader_script(&js, &wasm);
    view! {
        <link rel="modulepreload" href=js crossorigin=""/>
        <link rel="preload" href=wasm r#as="fetch" r#type="application/wasm" crossorigin=""/>
        <script type="module" nonce=nonce>{script}</script>
    }
}

/// The HTML document around the app, rendered on the server only.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    #[cfg(feature = "ssr")]
    csp::send_with_nonce();
    let root = base::path();
    let assets = use_context::<Assets>().unwrap_or_default();
    let pkg = format!("{root}/{}", options.site_pkg_dir);
    let (js, wasm) = loader_urls(&root, &options.site_pkg_dir, &assets);
    view! {
        <!DOCTYPE html>
        <html lang="en" data-theme=theme::current()>
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <meta name=base::META content=root.clone()/>
                <link rel="icon" href=format!("{root}/favicon.svg") type="image/svg+xml"/>
                <link rel="stylesheet" id="leptos" href=format!("{pkg}/{}", assets.css)/>
                <AutoReload options=options.clone()/>
                <Loader js=js wasm=wasm/>
                <MetaTags/>
            </head>
            <body>
                <App/>
                <shortcuts::ShortcutsHelp/>
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
                <Route path=path!("/agents/:id/memory") view=memory::MemoryPage ssr=SsrMode::Async/>
                <Route path=path!("/permissions") view=permissions::PermissionsPage ssr=SsrMode::Async/>
                <Route path=path!("/config") view=config::ConfigPage ssr=SsrMode::Async/>
                <Route path=path!("/tasks") view=tasks::TasksPage ssr=SsrMode::Async/>
                <Route path=path!("/mcp") view=mcp::McpPage ssr=SsrMode::Async/>
                <Route path=path!("/tasks/:id") view=tasks::TaskPage ssr=SsrMode::Async/>
                <Route path=path!("/abilities") view=abilities::AbilitiesPage ssr=SsrMode::Async/>
                <Route path=path!("/skills") view=skills::SkillsPage ssr=SsrMode::Async/>
                <Route path=path!("/admin") view=admin::AdminPage ssr=SsrMode::Async/>
                <Route path=path!("/search") view=search::SearchPage ssr=SsrMode::Async/>
            </Routes>
        </Router>
    }
}

#[cfg(test)]
mod tests {
    use super::Assets;

    #[test]
    fn the_site_files_are_named_by_the_builds_hashes() {
        let a = Assets::from_hashes("js: abc-_1\nwasm: W2\ncss: C3\nsplit: ignored\n");
        assert_eq!(a.js, "hero.abc-_1.js");
        assert_eq!(a.wasm, "hero.W2.wasm");
        assert_eq!(a.css, "hero.C3.css");
        // A hash that could leave an attribute or a script is no hash: the plain name.
        let odd = Assets::from_hashes("js: a\"<script>\nwasm:\n");
        assert_eq!(odd, Assets::default());
    }
}
