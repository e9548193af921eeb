//! What each command does. `main` parses the command line; these functions do the work and
//! return errors with context for `main` to print.

use std::future::IntoFuture;
use std::io::{BufRead, IsTerminal};

use anyhow::{Context, bail};
use hero_backend::{AppState, accounts, accounts::users, crypto, store};
use rand::Rng;

use crate::config::Config;

/// Opens the data directory: database (created and migrated), master key, key check.
pub async fn open_store(cfg: &Config) -> anyhow::Result<AppState> {
    let db = match &cfg.database_url {
        Some(url) => {
            let db = store::Db::connect_postgres(url.expose()).await?;
            store::data_directory(&cfg.data_dir)?;
            db
        }
        None => store::Db::open(&cfg.data_dir)
            .await
            .with_context(|| format!("cannot open the database in {}", cfg.data_dir.display()))?,
    };
    store::migrate(&db)
        .await
        .context("cannot apply database migrations")?;
    let (master, source) = crypto::load_master_key(
        cfg.master_key.as_ref().map(crate::config::Secret::expose),
        &cfg.data_dir,
    )?;
    match &source {
        crypto::KeySource::CreatedFile(p) => {
            tracing::info!(
                "created a new master key in {} (keep it safe: it opens every secret)",
                p.display()
            )
        }
        crypto::KeySource::ExistingFile(p) => tracing::debug!("master key from {}", p.display()),
        crypto::KeySource::Environment => tracing::debug!("master key from HERO_MASTER_KEY"),
    }
    let keys = crypto::Keyring::new(master);
    store::check_master_key(&db, &keys).await?;
    Ok(AppState::new(db, keys, cfg.backend_settings()).await?)
}

pub async fn migrate(cfg: &Config) -> anyhow::Result<()> {
    open_store(cfg).await?;
    println!("database in {} is up to date", cfg.data_dir.display());
    Ok(())
}

pub async fn serve(cfg: Config) -> anyhow::Result<()> {
    let st = open_store(&cfg).await?;
    // Run as root, bash's sandbox runs as another uid, which must reach the workspaces.
    hero_backend::execution::sandbox::let_the_sandbox_in(&cfg.data_dir).with_context(|| {
        format!(
            "cannot let the sandbox's uid search {}",
            cfg.data_dir.display()
        )
    })?;
    // On PostgreSQL, this instance joins the others on the database (live events reach
    // its readers from now on).
    let member = hero_backend::conversation::cluster::join(&st)
        .await
        .context("cannot join the other instances on the database")?;
    if let Some(me) = &member {
        // A stopped instance's work is taken over (by one of those alive).
        tokio::spawn(hero_backend::conversation::takeover::watch(
            st.clone(),
            me.clone(),
        ));
    }
    if hero_backend::conversation::cluster::recovers(&st, member.as_ref()).await {
        recover(&st).await;
        hero_backend::conversation::cluster::recovered(&st, member.as_ref()).await;
    }
    tracing::info!(sandbox = %st.sandbox.layers().describe(), "bash runs in");
    let first_run_password = if users::count(&st.db).await? == 0 {
        let pw = random_password();
        // The file first: an account whose password was never told would lock its owner out.
        let file = write_private(
            &cfg.data_dir.join(FIRST_PASSWORD_FILE),
            format!("{pw}\n").as_bytes(),
        )?;
        accounts::create(&st.db, &st.keys, "admin", &pw, true).await?;
        Some(file)
    } else {
        None
    };
    let listener = tokio::net::TcpListener::bind(cfg.addr)
        .await
        .with_context(|| format!("cannot listen on {}", cfg.addr))?;
    let addr = listener.local_addr()?;
    let site =
        crate::site::Site::choose(cfg.site_root.as_deref(), crate::config::default_site_root)?;
    match &site {
        crate::site::Site::Dir(dir) if !dir.join("pkg").is_dir() => tracing::warn!(
            "no built site in {} (pages will not hydrate): build with `cargo leptos build --release`",
            dir.display()
        ),
        _ => tracing::info!(site = %site.describe(), "the site is served from"),
    }
    // The operator's address: the metrics and the health checks, nothing else.
    if let Some(at) = cfg.metrics_addr {
        let metrics = tokio::net::TcpListener::bind(at)
            .await
            .with_context(|| format!("cannot listen on {at} (metrics_addr)"))?;
        let at = metrics.local_addr()?;
        let router = crate::ops::metrics_router(st.clone());
        tokio::spawn(async move {
            if let Err(e) = axum::serve(metrics, router).await {
                tracing::error!(error = %e, "the metrics address stopped serving");
            }
        });
        println!("Metrics are served on http://{at}/metrics");
    }
    let state = st.clone();
    let app = crate::web::pin_host(
        crate::web::router_with_site(
            st.clone(),
            crate::web::leptos_options(addr, site_dir(&site)),
            site,
        ),
        crate::web::HostPolicy::new(cfg.public_url.as_ref(), addr),
    );
    let app = crate::web::under_base(crate::ops::counted(app, st), &cfg.base_path);
    println!("Hero is serving on http://{addr}{}", cfg.base_path);
    if let Some(file) = first_run_password {
        // The password itself goes to a private file, never to the output, which often ends
        // up in a log that others read.
        println!();
        println!("First run: an administrator account was created.");
        println!("  Sign in at http://{addr}{}/login", cfg.base_path);
        println!("  username: admin");
        println!("  password: in {} (readable by you alone)", file.display());
        println!("Change it with `hero user passwd admin`, then delete that file.");
        println!();
    }
    let signalled = std::sync::Arc::new(tokio::sync::Notify::new());
    let on_signal = {
        let (state, signalled) = (state.clone(), signalled.clone());
        async move {
            shutdown_signal().await;
            tracing::info!("shutting down: ending live streams and replies in flight");
            // Event streams and sockets end, turns stop and store what they have; the
            // server stops accepting and waits for its connections (the posters' streams
            // end with their turns' `message_complete`).
            state.shutdown();
            signalled.notify_one();
        }
    };
    // A cheap clone of the router per connection (see `web::router`).
    // Each connection's peer address reaches the handlers (the sign-in brake keys on it).
    let server = axum::serve(
        crate::web::listener(listener),
        app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(on_signal)
    .into_future();
    tokio::pin!(server);
    tokio::select! {
        r = &mut server => return r.context("server stopped with an error"),
        () = signalled.notified() => {}
    }
    // The drain is bounded: connections still open and turns not yet stored when it ends are
    // cut. Turns whose posters left finish in tasks of their own, so they are waited for too,
    // and so are WebSockets: an upgraded connection is no longer the server's to wait for, and
    // each must still send its close frame (1012) before the process ends.
    let drained = async {
        server.await.context("server stopped with an error")?;
        while state.turns.count_all() > 0 || state.hub.streams_open() > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        anyhow::Ok(())
    };
    match tokio::time::timeout(cfg.drain, drained).await {
        Ok(r) => r?,
        Err(_) => tracing::warn!("still draining after {:?}; exiting anyway", cfg.drain),
    }
    if let Some(me) = &member {
        hero_backend::conversation::cluster::leave(&state, me).await;
    }
    println!("Hero stopped.");
    Ok(())
}

/// What a previous run left unfinished: summonings cut short, calls approved but never
/// finished, timed questions to arm again.
async fn recover(st: &AppState) {
    // A summoning a previous run cut short leaves its agent active.
    if let Err(e) = hero_backend::agents::summon::recover(st).await {
        tracing::warn!(error = %e, "agents left summoning could not be made active");
    }
    // Calls a previous run approved but never finished are told so, before anyone asks.
    match hero_backend::conversation::turn::recover(st).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(
            calls = n,
            "calls interrupted by the last shutdown are recorded as such"
        ),
        Err(e) => {
            tracing::warn!(error = %e, "calls interrupted by the last shutdown could not be recorded")
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}

/// Where the first run leaves the administrator's password, in the data directory.
pub const FIRST_PASSWORD_FILE: &str = "initial-admin-password";

/// Writes `bytes` to a new file at `path` that only its owner can read (mode 0600). One left
/// by a first run that failed is removed first (never written through: someone else could
/// have made it, readable).
fn write_private(path: &std::path::Path, bytes: &[u8]) -> anyhow::Result<std::path::PathBuf> {
    use std::io::Write;
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot replace {}", path.display())),
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut f = opts
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path.to_path_buf())
}

fn random_password() -> String {
    const CHARS: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
    let mut rng = rand::thread_rng();
    (0..20)
        .map(|_| CHARS[rng.gen_range(0..CHARS.len())] as char)
        .collect()
}

/// A password from the terminal (asked twice, not echoed) or, when standard input is not a
/// terminal, its first line, so scripts can pipe one in.
pub fn read_new_password() -> anyhow::Result<String> {
    if std::io::stdin().is_terminal() {
        let a = rpassword::prompt_password("New password: ")?;
        let b = rpassword::prompt_password("Repeat it: ")?;
        if a != b {
            bail!("the two passwords differ");
        }
        Ok(a)
    } else {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .context("cannot read the password from standard input")?;
        let pw = line.trim_end_matches(['\n', '\r']).to_owned();
        if pw.is_empty() {
            bail!(
                "no password on standard input (pipe one in: echo 'secret' | hero user add NAME)"
            );
        }
        Ok(pw)
    }
}

pub async fn user_add(cfg: &Config, name: &str, admin: bool) -> anyhow::Result<()> {
    let st = open_store(cfg).await?;
    users::validate_username(name)?;
    let pw = read_new_password()?;
    let u = accounts::create(&st.db, &st.keys, name, &pw, admin).await?;
    println!(
        "created user {} (id {}){}",
        u.username,
        u.id,
        if admin { ", administrator" } else { "" }
    );
    Ok(())
}

pub async fn user_list(cfg: &Config) -> anyhow::Result<()> {
    let st = open_store(cfg).await?;
    let list = hero_backend::store::users::list_with_usage(&st.db).await?;
    println!(
        "{:>5}  {:<24} {:<6} {:<9} {:>8} {:>6} {:>10}  created",
        "id", "username", "admin", "state", "sessions", "agents", "spend"
    );
    for (u, n) in list {
        println!(
            "{:>5}  {:<24} {:<6} {:<9} {:>8} {:>6} {:>10}  {}",
            u.id,
            u.username,
            if u.is_admin { "yes" } else { "no" },
            if u.disabled { "disabled" } else { "active" },
            n.sessions,
            n.agents,
            format!("${:.2}", n.cost_micros as f64 / 1e6),
            u.created_at
        );
    }
    Ok(())
}

pub async fn user_set_admin(cfg: &Config, name: &str, is_admin: bool) -> anyhow::Result<()> {
    let st = open_store(cfg).await?;
    let u = hero_backend::accounts::admin::set_admin(&st.db, name, is_admin).await?;
    if is_admin {
        println!("{} is an administrator", u.username);
    } else {
        println!("{} is no longer an administrator", u.username);
    }
    Ok(())
}

pub async fn user_passwd(cfg: &Config, name: &str) -> anyhow::Result<()> {
    let st = open_store(cfg).await?;
    let u = users::find_by_name(&st.db, name).await?;
    let pw = read_new_password()?;
    users::set_password(&st.db, u.id, &pw).await?;
    println!(
        "password of {} changed; their sign-ins have ended",
        u.username
    );
    Ok(())
}

pub async fn user_set_disabled(cfg: &Config, name: &str, disabled: bool) -> anyhow::Result<()> {
    let st = open_store(cfg).await?;
    let u = hero_backend::accounts::admin::set_disabled_by_name(&st.db, name, disabled).await?;
    if disabled {
        println!("user {} disabled; their sign-ins have ended", u.username);
    } else {
        println!("user {} enabled", u.username);
    }
    Ok(())
}

/// The directory Leptos's options name as the site's: the site's own, or none for a site
/// inside the binary (nothing is read from it then).
fn site_dir(site: &crate::site::Site) -> &std::path::Path {
    match site {
        crate::site::Site::Dir(dir) => dir,
        crate::site::Site::Embedded(_) => std::path::Path::new(""),
    }
}

/// `hero embed-site`: this program with the built site in `site` inside it, written to
/// `out` (this program's own file when unset). The build's hashes are `hashes`, else the
/// `hash.txt` cargo-leptos left beside this program.
pub fn embed_site(
    site: &std::path::Path,
    hashes: Option<&std::path::Path>,
    out: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("cannot find this program's file")?;
    let hashes = match hashes {
        Some(h) => h.to_owned(),
        None => exe.with_file_name("hash.txt"),
    };
    let out = out.map_or_else(|| exe.clone(), std::path::Path::to_owned);
    let size = crate::site::embed(&exe, site, &hashes, &out)?;
    println!(
        "{} now carries the site in {} ({:.1} MB in all)",
        out.display(),
        site.display(),
        size as f64 / 1e6
    );
    Ok(())
}

/// A database named on the command line: a PostgreSQL URL, or a data directory (its
/// `hero.db`, made if missing).
async fn open_named(target: &str) -> anyhow::Result<store::Db> {
    if target.starts_with("postgres://") || target.starts_with("postgresql://") {
        Ok(store::Db::connect_postgres(target).await?)
    } else {
        let dir = std::path::Path::new(target);
        store::Db::open(dir)
            .await
            .with_context(|| format!("cannot open the database in {}", dir.display()))
    }
}

/// `hero db copy`: every row of the configured database (or `from`) into the empty one `to`,
/// then checked: each table's rows counted on both sides, and every frame opened under its
/// user's key in the copy.
pub async fn db_copy(cfg: &Config, from: Option<&str>, to: &str) -> anyhow::Result<()> {
    let source = match (from, &cfg.database_url) {
        (Some(f), _) => open_named(f).await?,
        (None, Some(url)) => store::Db::connect_postgres(url.expose()).await?,
        (None, None) => open_named(&cfg.data_dir.to_string_lossy()).await?,
    };
    store::migrate(&source)
        .await
        .context("cannot apply database migrations to the source")?;
    let (master, _) = crypto::load_master_key(
        cfg.master_key.as_ref().map(crate::config::Secret::expose),
        &cfg.data_dir,
    )?;
    let keys = crypto::Keyring::new(master);
    store::check_master_key(&source, &keys).await?;
    let target = open_named(to).await?;
    let copied = store::copy::copy(&source, &target).await?;
    for c in &copied {
        println!("{:<14} {:>8} rows copied", c.table, c.to);
        if c.from != c.to {
            bail!(
                "{} has {} rows in the source but {} in the copy",
                c.table,
                c.from,
                c.to
            );
        }
    }
    let mut frames = 0;
    for user in users::list(&target).await? {
        let dk = users::data_key(&target, &keys, user.id).await?;
        for s in store::sessions::list(&target, user.id).await? {
            frames += hero_backend::conversation::frames::all(&target, &dk, s.id)
                .await
                .with_context(|| format!("a frame of session {} does not open in the copy", s.id))?
                .len();
        }
    }
    println!("{frames} frames open under their keys in the copy");
    Ok(())
}
