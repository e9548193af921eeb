//! What a gated call costs the server beyond its handler's own time: finding it in the
//! reply, the permission read and the request frame (one transaction), the result frame,
//! the open-call checks and the events, on a real SQLite file. The handler does nothing,
//! so what is measured is the pipeline. Two paths: an `always` function (run at once), and
//! an `ask` one from the user's decision to its stored result. The `always` path is run
//! twice: through the server's bus (its subscribers) with four pass-through handlers
//! added, and through a bus with none, so what the bus adds is the difference (reference
//! 000's "Middleware Pipeline"; the goal: at most 1 ms at p99). Then the capability chain
//! (reference 004): an `always` no-op that is the last of 12 capabilities' tools, whose call
//! walks the chain past 11 that answer `None`, against Hero's own no-op (the goal: at most
//! 1 ms more at p99). Prints p50 and p99; asserts nothing.
//!
//! `cargo bench -p hero-backend --features test-support --bench gate_cost`

use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use hero_backend::conversation::act::{self, Authority, Scene};
use hero_backend::conversation::hub::HubEvent;
use hero_backend::execution::functions::bus::{self, Bus, Handled, Handler, Routed};
use hero_backend::execution::functions::{
    Capability, Ctx, Function, Registry, Spec, ToolResult, builtin,
};
use hero_backend::{Settings, conversation::frames, test_support};
use hero_shared::calls::{DangerLevel, FunctionPermissions, Permission};
use hero_shared::frame::FrameType;
use serde_json::{Value, json};

/// A function that does nothing: its own time is nil.
struct Noop(&'static str, Permission);

impl Function for Noop {
    fn spec(&self) -> Spec {
        Spec {
            name: self.0.into(),
            description: "does nothing".into(),
            plugin: None,
            default: self.1,
            permissions: FunctionPermissions::allowed(DangerLevel::Safe),
            answered_by_user: false,
            schema: json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
            examples: vec![],
        }
    }

    fn run<'a>(
        &'a self,
        _cx: &'a Ctx<'a>,
        _args: &'a Value,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async { Ok("ok".to_owned()) })
    }
}

/// A handler that lets every call pass, having looked at it.
struct Pass(&'static str);

impl Handler for Pass {
    fn name(&self) -> &'static str {
        self.0
    }

    fn handle(&self, _cx: &Ctx<'_>, call: &Routed<'_>) -> Handled {
        std::hint::black_box(call.args.get("n"));
        Handled::Pass
    }
}

/// A capability with one tool, `<name>_tool`, that answers only its own.
struct Cap(String);

impl Capability for Cap {
    fn name(&self) -> &str {
        &self.0
    }

    fn tools(&self) -> Vec<Spec> {
        let mut spec = Noop("", Permission::Always).spec();
        spec.name = format!("{}_tool", self.0).into();
        vec![spec]
    }

    fn prompt(&self) -> &str {
        "Instructions."
    }

    fn handle<'a>(
        &'a self,
        _cx: &'a Ctx<'a>,
        tool: &'a str,
        _input: &'a Value,
    ) -> BoxFuture<'a, Option<Result<ToolResult, String>>> {
        Box::pin(async move {
            (tool.strip_suffix("_tool") == Some(self.0.as_str())).then(|| {
                Ok(ToolResult {
                    result: "ok".to_owned(),
                    pending_change_id: None,
                })
            })
        })
    }
}

/// The functions measured, with `bus` as the bus they are routed through.
fn registry(bus: Bus) -> Registry {
    let mut reg = builtin::registry();
    reg.register(Noop("noop_always", Permission::Always));
    reg.register(Noop("noop_ask", Permission::Ask));
    *reg.bus_mut() = bus;
    reg
}

/// The `always` path, `n` calls of `function`: found, gated, run (a no-op) and recorded.
async fn always(
    st: &hero_backend::AppState,
    name: &str,
    n: usize,
    function: &str,
) -> Vec<Duration> {
    let user = test_support::signed_in(st, name).await;
    let session = test_support::session(st, &user, "gate").await;
    let dk = frames::session_key(st, &user, session.id).await.unwrap();
    let mut took = Vec::with_capacity(n);
    for i in 0..n {
        let text = format!("Running it: @system({function}, {{n: {i}}})");
        let t0 = Instant::now();
        let sc = Scene {
            user_id: user.id(),
            session_id: session.id,
            dk: dk.clone(),
            message_id: format!("reply-{i}"),
            agent_id: None,
            tools: st.functions.clone(),
        };
        let asked = act::find(&st.functions, &text, &[]);
        let opened = act::open(st, &sc, Authority::Agent(1), asked, None)
            .await
            .unwrap();
        let settled = act::settle(st, &sc, &opened, &|_| {}, None).await.unwrap();
        took.push(t0.elapsed());
        assert!(settled.done);
    }
    took
}

/// Waits for the next result frame the session publishes.
async fn result_published(live: &mut hero_backend::conversation::hub::Subscription) {
    loop {
        match live.recv().await {
            Ok(ev) if matches!(&*ev, HubEvent::Frame(f) if f.frame_type == FrameType::Result) => {
                return;
            }
            Ok(_) => {}
            Err(e) => panic!("{e}"),
        }
    }
}

/// The test plugin's binary, from `--plugin PATH`.
fn plugin_program() -> Option<std::path::PathBuf> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--plugin")
        .and_then(|i| args.get(i + 1))
        .map(Into::into)
}

/// A plugin's tools: a cold start (the sandbox, the spawn, `initialize`, and one call) for a
/// user with no process yet; a warm no-op call, alone and as a gated `always` call, against
/// a builtin no-op's `always_p50`.
async fn plugin(program: &std::path::Path, always_p50: f64) {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("kit");
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::copy(program, dir.join("bin/run")).unwrap();
    std::fs::write(
        dir.join("plugin.toml"),
        "name = \"kit\"\nversion = \"1\"\ncommand = \"bin/run\"\n[functions.noop]\nauto_approve = true\n",
    )
    .unwrap();
    for d in [root.path().to_path_buf(), dir.clone(), dir.join("bin")] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let settings = Settings {
        sandbox: hero_backend::execution::sandbox::SandboxLimits {
            landlock_helper: Some(env!("CARGO_BIN_EXE_hero-landlock").into()),
            ..Default::default()
        },
        plugins: hero_backend::execution::plugins::PluginSettings {
            dir: Some(root.path().to_path_buf()),
            ..Default::default()
        },
        ..Settings::default()
    };
    let t = test_support::state_with_functions(settings, registry(bus::builtin())).await;
    let st = &t.st;
    const COLD: usize = 30;
    let mut cold = Vec::with_capacity(COLD);
    for user in 0..COLD as i64 {
        let t0 = Instant::now();
        st.plugins
            .call(&st.sandbox, "kit", 10_000 + user, "noop", &json!({}))
            .await
            .unwrap();
        cold.push(t0.elapsed());
    }
    let (p50, p99) = quantiles(cold);
    println!(
        "plugin: cold start (sandbox, spawn, initialize) and one call: p50 {p50:.3} ms, p99 {p99:.3} ms ({COLD} users)"
    );
    const WARM: usize = 1_000;
    let mut warm = Vec::with_capacity(WARM);
    for i in 0..WARM {
        let t0 = Instant::now();
        st.plugins
            .call(&st.sandbox, "kit", 10_000, "noop", &json!({"n": i}))
            .await
            .unwrap();
        warm.push(t0.elapsed());
    }
    let (p50, p99) = quantiles(warm);
    println!("plugin: a warm no-op call, alone: p50 {p50:.3} ms, p99 {p99:.3} ms ({WARM} calls)");
    always(st, "plugin-warm", 50, "kit__noop").await;
    let (p50, p99) = quantiles(always(st, "plugin", WARM, "kit__noop").await);
    println!(
        "plugin: a warm no-op tool found, gated, run and recorded: p50 {p50:.3} ms, p99 {p99:.3} ms; over a builtin no-op's p50 ({always_p50:.3} ms): {:.3} ms ({WARM} calls)",
        p50 - always_p50
    );
}

fn quantiles(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let at = |q: f64| v[((v.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    (at(0.5), at(0.99))
}

#[tokio::main]
async fn main() {
    const N: usize = 2_000;
    // The bus alone: an `always` no-op through no subscriber or handler, then through the
    // server's bus and four handlers that pass; each on a state of its own.
    let bare =
        test_support::state_with_functions(Settings::default(), registry(Bus::default())).await;
    let mut server_bus = bus::builtin();
    for name in ["audit", "limit", "log", "shape"] {
        server_bus.handle(Pass(name));
    }
    let full = test_support::state_with_functions(Settings::default(), registry(server_bus)).await;
    // Warm both, then measure in turns so that the machine's drift falls on both alike.
    always(&bare.st, "warm-bare", 200, "noop_always").await;
    always(&full.st, "warm-full", 200, "noop_always").await;
    let (mut without, mut with) = (Vec::new(), Vec::new());
    for round in 0..4 {
        without.extend(always(&bare.st, &format!("bare-{round}"), N / 4, "noop_always").await);
        with.extend(always(&full.st, &format!("full-{round}"), N / 4, "noop_always").await);
    }
    let (p50_without, p99_without) = quantiles(without);
    let (p50_with, p99_with) = quantiles(with);
    println!(
        "bus: an always no-op with no bus p50 {p50_without:.3} ms, p99 {p99_without:.3} ms; through the server's bus and 4 handlers p50 {p50_with:.3} ms, p99 {p99_with:.3} ms; the bus adds {:.3} ms at p99 ({N} calls each)",
        p99_with - p99_without
    );
    drop((bare, full));

    // The capability chain: 12 capabilities after Hero's own (`config` among them), the
    // last one's tool against Hero's own no-op, on one state, in turns.
    let mut chained = registry(bus::builtin());
    for i in 1..=11 {
        chained.add_capability(std::sync::Arc::new(Cap(format!("cap{i}"))));
    }
    chained.add_capability(std::sync::Arc::new(Cap("last".into())));
    let links = chained.chain().len() - 1;
    let c = test_support::state_with_functions(Settings::default(), chained).await;
    always(&c.st, "warm-chain", 200, "last_tool").await;
    let (mut own, mut last) = (Vec::new(), Vec::new());
    for round in 0..4 {
        own.extend(always(&c.st, &format!("own-{round}"), N / 4, "noop_always").await);
        last.extend(always(&c.st, &format!("last-{round}"), N / 4, "last_tool").await);
    }
    let (p50_own, p99_own) = quantiles(own);
    let (p50_last, p99_last) = quantiles(last);
    println!(
        "capabilities: Hero's own always no-op p50 {p50_own:.3} ms, p99 {p99_own:.3} ms; the last of {links} capabilities' no-op p50 {p50_last:.3} ms, p99 {p99_last:.3} ms; the chain adds {:.3} ms at p99 ({N} calls each)",
        p99_last - p99_own
    );
    drop(c);

    let reg = registry(bus::builtin());
    // Every layer, as the server runs bash: this crate's Landlock helper included.
    let settings = Settings {
        sandbox: hero_backend::execution::sandbox::SandboxLimits {
            landlock_helper: Some(env!("CARGO_BIN_EXE_hero-landlock").into()),
            ..Default::default()
        },
        ..Settings::default()
    };
    let t = test_support::state_with_functions(settings, reg).await;
    let st = t.st.clone();
    let user = test_support::signed_in(&st, "bench").await;
    let session = test_support::session(&st, &user, "gate").await;
    // No agent: a decided call's follow-up reply finds none and does not run, so that only
    // the call itself is measured.
    hero_backend::conversation::sessions::update(
        &st.db,
        &user,
        session.id,
        hero_shared::api::UpdateSessionRequest {
            agent_id: Some(None),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let dk = frames::session_key(&st, &user, session.id).await.unwrap();
    let scene = |i: usize| Scene {
        user_id: user.id(),
        session_id: session.id,
        dk: dk.clone(),
        message_id: format!("reply-{i}"),
        agent_id: None,
        tools: st.functions.clone(),
    };

    let (p50, p99) = quantiles(always(&st, "always", N, "noop_always").await);
    let always_p50 = p50;
    println!(
        "always: a call found, gated, run (a no-op) and recorded: p50 {p50:.3} ms, p99 {p99:.3} ms ({N} calls)"
    );
    if let Some(program) = plugin_program() {
        plugin(&program, always_p50).await;
    } else {
        println!("plugin: not measured (give `-- --plugin PATH`, the hero-test-plugin binary)");
    }

    let mut live = st.hub.subscribe_session(session.id);
    let mut decided = Vec::with_capacity(N);
    for i in 0..N {
        let sc = scene(N + i);
        let asked = act::find(
            &st.functions,
            &format!("@system(noop_ask, {{n: {i}}})"),
            &[],
        );
        let opened = act::open(&st, &sc, Authority::Agent(1), asked, None)
            .await
            .unwrap();
        let t0 = Instant::now();
        hero_backend::conversation::turn::decide(
            &st,
            &user,
            session.id,
            &opened[0].request_id,
            true,
        )
        .await
        .unwrap();
        // The call runs in a task of its own: done when its result is published.
        result_published(&mut live).await;
        decided.push(t0.elapsed());
    }
    let (p50, p99) = quantiles(decided);
    println!(
        "ask: from the user's decision to the stored result: p50 {p50:.3} ms, p99 {p99:.3} ms ({N} calls)"
    );

    // bash: from the approval to its first line of output (and to its stored result).
    const RUNS: usize = 200;
    println!("sandbox: {}", st.sandbox.layers().describe());
    let mut first_line = Vec::with_capacity(RUNS);
    let mut to_result = Vec::with_capacity(RUNS);
    for i in 0..RUNS {
        let sc = scene(3 * N + i);
        let asked = act::find(&st.functions, "<bash>echo first line</bash>", &[]);
        let opened = act::open(&st, &sc, Authority::Agent(1), asked, None)
            .await
            .unwrap();
        let t0 = Instant::now();
        hero_backend::conversation::turn::decide(
            &st,
            &user,
            session.id,
            &opened[0].request_id,
            true,
        )
        .await
        .unwrap();
        result_published(&mut live).await;
        to_result.push(t0.elapsed());
        // The run's own first output, from its spawn; the decision's part is the rest.
        let ran = st
            .sandbox
            .run(1, "echo first line", None, None, None)
            .await
            .unwrap();
        first_line.push(ran.first_output.unwrap_or_default());
    }
    let (p50, p99) = quantiles(to_result);
    println!(
        "bash: from the approval to its stored result (`echo`): p50 {p50:.3} ms, p99 {p99:.3} ms ({RUNS} runs)"
    );
    let (p50, p99) = quantiles(first_line);
    println!(
        "bash: from the sandbox's spawn to the first output line: p50 {p50:.3} ms, p99 {p99:.3} ms ({RUNS} runs)"
    );
}
