//! The path Hero is served under (`base_path`: `/hero` behind a proxy, empty at a host's
//! root). Every URL a page writes and every request the browser's side makes is the app's
//! own path (`/s/12`, `/_fn/…`, `/api/…`) with this in front, through [`href`]; what the
//! browser reads back (its address bar, a link's `href`) loses it again through
//! [`app_path`]. On the server the prefix comes from the request's [`hero_backend::AppState`];
//! in the browser, from the `<meta name="hero-base">` the server wrote into the page.

/// The name of the `<meta>` that carries the base path into the browser.
pub const META: &str = "hero-base";

/// The base path in force: `""` or `/hero`, never ending in `/`.
#[cfg(feature = "ssr")]
pub fn path() -> String {
    leptos::prelude::use_context::<hero_backend::AppState>()
        .map(|st| st.settings.base_path.clone())
        .unwrap_or_default()
}

/// The base path in force: `""` or `/hero`, never ending in `/`. Read from the page once.
#[cfg(all(feature = "hydrate", not(feature = "ssr")))]
pub fn path() -> String {
    thread_local! {
        static BASE: String = web_sys::window()
            .and_then(|w| w.document())
            .and_then(|d| d.query_selector(&format!("meta[name=\"{META}\"]")).ok().flatten())
            .and_then(|m| m.get_attribute("content"))
            .filter(|p| p.starts_with('/'))
            .map(|p| p.trim_end_matches('/').to_owned())
            .unwrap_or_default();
    }
    BASE.with(Clone::clone)
}

/// Built with neither side (the native unit tests of the pure parts): the host's root.
#[cfg(not(any(feature = "ssr", feature = "hydrate")))]
pub fn path() -> String {
    String::new()
}

/// The URL of the app's own `path` (which starts with `/`).
pub fn href(path: &str) -> String {
    prefixed(&self::path(), path)
}

/// `path` under `base`.
pub fn prefixed(base: &str, path: &str) -> String {
    format!("{base}{path}")
}

/// The app's own path of `url` (a path as the browser shows it): without the base path,
/// when it starts with it; as it is otherwise.
pub fn app_path(url: &str) -> &str {
    strip(&path(), url)
}

/// `url` without `base` in front, when it starts with it (as a whole segment).
pub fn strip<'a>(base: &str, url: &'a str) -> &'a str {
    if base.is_empty() {
        return url;
    }
    match url.strip_prefix(base) {
        Some("") => "/",
        Some(rest) if rest.starts_with('/') => rest,
        _ => url,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_goes_under_the_base_and_comes_back_out() {
        assert_eq!(prefixed("", "/s/1"), "/s/1");
        assert_eq!(prefixed("/hero", "/s/1"), "/hero/s/1");
        assert_eq!(strip("/hero", "/hero/s/1"), "/s/1");
        assert_eq!(strip("/hero", "/hero"), "/");
        assert_eq!(strip("", "/s/1"), "/s/1");
        // Only a whole segment is the base: /heroes is another path.
        assert_eq!(strip("/hero", "/heroes/s/1"), "/heroes/s/1");
        assert_eq!(strip("/hero", "/s/1"), "/s/1");
    }
}
