//! The work of an instance that stopped beating, taken over by another: what the
//! instances on one PostgreSQL database ([`crate::conversation::cluster`]) do when one of
//! them dies. Once among the others (under the recovery's lease), every heartbeat: each
//! reply the dead one had in flight is stored as interrupted, keeping the text this
//! instance's mirror of it holds; then its calls, questions and summonings are recovered as
//! after a restart (which leaves alone what live instances work on), and it is forgotten.

use crate::conversation::cluster::{self, EXPIRY, HEARTBEAT, Member, now_ms};
use crate::{AppState, Result, store};

/// Takes over dead instances' work every heartbeat until the server shuts down (`hero
/// serve` runs it beside [`cluster::join`]).
pub async fn watch(st: AppState, me: Member) {
    let mut every = tokio::time::interval(HEARTBEAT);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            () = st.hub.closed() => return,
        }
        match take_over(&st, &me).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                instances = n,
                "the work of stopped instances was taken over"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "the work of stopped instances could not be taken over")
            }
        }
    }
}

/// Takes over the work of instances that stopped beating, once among the others (under
/// the recovery's lease): each reply they had in flight is stored as interrupted, keeping
/// the text this instance's mirror of it holds; then their calls and questions are
/// recovered as after a restart, and they are forgotten. Answers how many instances.
pub async fn take_over(st: &AppState, me: &Member) -> Result<usize> {
    // An instance whose own beats have not been landing (the database was away) may be
    // the one that looks dead: it judges no other until they land again.
    if !me.may_take_over() {
        return Ok(0);
    }
    let now = now_ms();
    let dead: Vec<String> = store::cluster::dead(&st.db, now - EXPIRY.as_millis() as i64)
        .await?
        .into_iter()
        .filter(|d| *d != me.id)
        .collect();
    if dead.is_empty() || !cluster::recovers(st, Some(me)).await {
        return Ok(0);
    }
    // The lease goes back however the work ends.
    let done = take_over_held(st, &dead).await;
    cluster::recovered(st, Some(me)).await;
    done.map(|()| dead.len())
}

/// [`take_over`]'s work, under the recovery's lease.
async fn take_over_held(st: &AppState, dead: &[String]) -> Result<()> {
    for d in dead {
        for name in store::cluster::leases_of(&st.db, d).await? {
            let Some((user_id, session_id, message_id)) = cluster::parse_reply_mark(&name) else {
                continue;
            };
            let kept = st
                .turns
                .remote(session_id, message_id)
                .map(|live| live.text());
            tracing::warn!(instance = %d, session = session_id, "a reply in flight on a stopped instance is stored as interrupted");
            if let Err(e) = crate::conversation::act::write_interrupted(
                st, session_id, message_id, user_id, kept,
            )
            .await
            {
                tracing::warn!(error = %e, "a reply of a stopped instance could not be stored");
            }
            st.turns.forget_remote(session_id, message_id);
        }
    }
    crate::conversation::turn::recover(st).await?;
    cluster::end_summonings(st).await?;
    for d in dead {
        store::cluster::leave(&st.db, d).await?;
    }
    Ok(())
}
