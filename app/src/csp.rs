//! The Content-Security-Policy: what a page may load and run. Scripts come from this origin
//! or carry the response's nonce (Leptos puts it on its hydration and streaming scripts);
//! the wasm may be compiled (`wasm-unsafe-eval`); styles come from the stylesheet alone, so
//! no inline style (from model output or anywhere else) applies; nothing is framed, no
//! `<base>` moves links, forms post only here. Behind the markdown renderer, which never
//! emits live markup, this is the second wall.

use leptos::prelude::*;

/// The policy, with `nonce` for a page (`None` for any other answer: nothing inline runs).
pub fn policy(nonce: Option<&str>) -> String {
    policy_allowing(nonce.map(|n| format!("'nonce-{n}'")).as_deref())
}

/// The policy that answers lacking their own carry: the one inline script it allows is the
/// pages' loader, by its hash (`'sha256-…'`). A page's own policy (its nonce) is set by the
/// page as it renders; should a render ever leave it unset, the page still starts.
pub fn policy_with_hash(sha256: &str) -> String {
    policy_allowing(Some(&format!("'sha256-{sha256}'")))
}

fn policy_allowing(source: Option<&str>) -> String {
    let scripts = match source {
        Some(s) => format!("'self' {s} 'wasm-unsafe-eval'"),
        None => "'self' 'wasm-unsafe-eval'".to_owned(),
    };
    format!(
        "default-src 'self'; script-src {scripts}; style-src 'self'; img-src 'self'; \
         connect-src 'self'; font-src 'self'; object-src 'none'; frame-ancestors 'none'; \
         base-uri 'none'; form-action 'self'"
    )
}

/// Sets this page's policy header, with the nonce Leptos made for this response.
pub fn send_with_nonce() {
    let (Some(nonce), Some(resp)) = (
        leptos::nonce::use_nonce(),
        use_context::<leptos_axum::ResponseOptions>(),
    ) else {
        return;
    };
    if let Ok(v) = http::HeaderValue::from_str(&policy(Some(&nonce))) {
        resp.insert_header(http::header::CONTENT_SECURITY_POLICY, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_allows_nothing_inline_but_the_nonce() {
        let p = policy(Some("abc"));
        assert!(
            p.contains("script-src 'self' 'nonce-abc' 'wasm-unsafe-eval';"),
            "{p}"
        );
        for d in [
            "style-src 'self';",
            "frame-ancestors 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "object-src 'none'",
        ] {
            assert!(p.contains(d), "{d} in {p}");
        }
        assert!(
            !p.contains("unsafe-inline") && !p.contains("'unsafe-eval'"),
            "{p}"
        );
        assert!(!policy(None).contains("nonce"));
    }
}
