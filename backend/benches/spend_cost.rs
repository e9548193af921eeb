//! What the spend lines cost to read (`GET /api/spend`, reference 003) once a user has
//! 100,000 priced calls: the totals are kept per scope as each call is recorded, so the read
//! should not grow with the rows. Prints p50 and p99; asserts nothing.
//!
//! `cargo bench -p hero-backend --features test-support --bench spend_cost`

use std::time::{Duration, Instant};

use hero_backend::store::usage::{UsageRow, insert};
use hero_backend::{agents, test_support};
use hero_shared::api::{CreateAgentRequest, ProviderKind};

#[tokio::main]
async fn main() {
    const ROWS: usize = 100_000;
    const READS: usize = 2_000;
    let t = test_support::state_with(Default::default()).await;
    let st = t.st.clone();
    let user = test_support::signed_in(&st, "bench").await;
    let agent = agents::create(
        &st.db,
        &st.keys,
        &st.settings.egress,
        &user,
        CreateAgentRequest {
            name: "priced".into(),
            provider: ProviderKind::Anthropic,
            model: "claude-sonnet-4".into(),
            base_url: None,
            api_key: Some("sk-bench-0123456789".into()),
            config: None,
            kind: Default::default(),
            compact_after_messages: None,
            compact_after_tokens: None,
            context_window: None,
        },
    )
    .await
    .unwrap();
    let session = test_support::session(&st, &user, "spend").await;
    hero_backend::conversation::sessions::update(
        &st.db,
        &user,
        session.id,
        hero_shared::api::UpdateSessionRequest {
            agent_id: Some(Some(agent.id)),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let key_fp = st.keys.key_fingerprint("sk-bench-0123456789");
    let started = Instant::now();
    for chunk in 0..ROWS / 1000 {
        st.db
            .write_with(async |tx| {
                for i in 0..1000 {
                    let row = UsageRow {
                        user_id: user.id(),
                        agent_id: agent.id,
                        session_id: session.id,
                        frame_id: "f",
                        provider: "anthropic",
                        model: "claude-sonnet-4",
                        input_tokens: 1000 + (chunk * 1000 + i) as i64 % 97,
                        output_tokens: 500,
                        cache_read_tokens: 2000,
                        cache_write_tokens: 0,
                        cost_micros: 11_100,
                        price_source: "table",
                        scalar_ppm: 1_000_000,
                        key_fp: Some(&key_fp),
                        created_at: "2026-11-28T00:00:00Z",
                    };
                    insert(tx, &row).await?;
                }
                Ok(())
            })
            .await
            .unwrap();
    }
    println!(
        "{ROWS} usage rows written in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let mut took: Vec<Duration> = Vec::with_capacity(READS);
    for _ in 0..READS {
        let t0 = Instant::now();
        let lines = agents::spend::lines(&st, &user, Some(session.id))
            .await
            .unwrap();
        took.push(t0.elapsed());
        assert_eq!(lines.global.calls, ROWS as i64);
    }
    took.sort();
    let at = |q: f64| took[((took.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    println!(
        "the three spend lines over {ROWS} calls: p50 {:.3} ms, p99 {:.3} ms ({READS} reads)",
        at(0.5),
        at(0.99)
    );
}
