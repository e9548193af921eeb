//! Calls in the chat: a card under the message that asked for each (what it calls, where
//! it stands, its result collapsed), with Approve, Deny and "Always allow" while it waits.
//! Every tab of the user shows the same: the cards are compiled from the log's request,
//! decision and result frames, which reach each tab through the session's feed.

use hero_shared::calls::CallView;
use leptos::prelude::*;

/// The user's decision on a call waiting for it.
#[server(prefix = "/_fn")]
pub async fn decide_call(
    session_id: i64,
    request_id: String,
    approved: bool,
) -> Result<(), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::act::decide(&st, &user, session_id, &request_id, approved)
        .await
        .map(|_| ())
        .map_err(fail)
}

/// Sets the call's function to `always` for this user, then approves the call.
#[server(prefix = "/_fn")]
pub async fn always_allow(
    session_id: i64,
    request_id: String,
    function: String,
) -> Result<(), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::permissions::set(
        &st,
        &user,
        &function,
        hero_shared::calls::Permission::Always,
    )
    .await
    .map_err(fail)?;
    hero_backend::act::decide(&st, &user, session_id, &request_id, true)
        .await
        .map(|_| ())
        .map_err(fail)
}

/// The calls of one message, as the executable elements in it look them up.
#[derive(Clone, Debug, Default)]
pub struct MessageCalls(pub Vec<CallView>);

impl MessageCalls {
    /// The call an element of the message stands for.
    pub fn of_element(&self, element_id: &str) -> Option<&CallView> {
        self.0.iter().find(|c| {
            matches!(&c.request.origin, hero_shared::calls::CallOrigin::Element { element_id: e, .. } if e == element_id)
        })
    }
}

#[component]
pub fn CallCard(session_id: i64, c: CallView) -> impl IntoView {
    let decide = ServerAction::<DecideCall>::new();
    let always = ServerAction::<AlwaysAllow>::new();
    let state = c.state();
    let pending = c.is_pending();
    // A question asked through a native tool call has no element in the text: its card asks.
    let asks = (c.is_question()
        && !matches!(
            c.request.origin,
            hero_shared::calls::CallOrigin::Element { .. }
        ))
    .then(use_context::<super::elements::prompt::MessageCtx>)
    .flatten()
    .map(|ctx| {
        let element_id = c.request.origin.element_id();
        let question = c.request.arg("question").unwrap_or_default().to_owned();
        view! { <super::elements::ask::Waiting c=c.clone() ctx element_id question/> }
    });
    let request_id = c.request_id.clone();
    let function = c.request.function.clone();
    let args = match &c.request.args {
        serde_json::Value::Null => String::new(),
        a if a.as_object().is_some_and(|o| o.is_empty()) => String::new(),
        a => a.to_string(),
    };
    let state_class = state
        .split([' ', ':'])
        .next()
        .unwrap_or_default()
        .to_owned();
    let error = move || {
        [decide.value().get(), always.value().get()]
            .into_iter()
            .flatten()
            .find_map(Result::err)
            .map(|e| view! { <div class="msg-error" role="alert">{crate::auth::error_text(&e)}</div> })
    };
    let (id1, id2, id3, f3) = (
        request_id.clone(),
        request_id.clone(),
        request_id.clone(),
        function.clone(),
    );
    view! {
        <div class=format!("call call-{state_class}") data-call=request_id.clone() data-function=function.clone()>
            <div class="call-head">
                <span class="call-fn">{function.clone()}</span>
                <code class="call-args">{args}</code>
                <span class="call-state" data-testid="call-state">{state}</span>
            </div>
            {pending.then(|| view! {
                <div class="call-actions">
                    <button type="button" class="approve" on:click=move |_| { decide.dispatch(DecideCall { session_id, request_id: id1.clone(), approved: true }); }>"Approve"</button>
                    <button type="button" class="deny" on:click=move |_| { decide.dispatch(DecideCall { session_id, request_id: id2.clone(), approved: false }); }>"Deny"</button>
                    <button type="button" class="always" on:click=move |_| { always.dispatch(AlwaysAllow { session_id, request_id: id3.clone(), function: f3.clone() }); }>{format!("Always allow {function}")}</button>
                </div>
            })}
            {asks}
            {c.result.map(|r| view! {
                <details class="call-result">
                    <summary>{if r.outcome == hero_shared::calls::Outcome::Ok { "Result" } else { "Why" }}</summary>
                    <pre>{r.output}</pre>
                </details>
            })}
            {error}
        </div>
    }
}
