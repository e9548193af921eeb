//! `hero`: the command line. Parsing only; the work is in `server::cli`.

use clap::{Parser, Subcommand};
use server::{cli, config::ConfigArgs};

#[derive(Parser)]
#[command(
    name = "hero",
    version,
    about = "Hero: a self-hosted, multi-user workspace for AI agents",
    long_about = "Hero: a self-hosted, multi-user workspace for AI agents.\n\n\
        Start it with `hero serve` and open the address it prints. On the first run it \
        creates an administrator account and prints its password.\n\n\
        Every setting can be given as a flag, as a HERO_* environment variable, or in a TOML \
        file (--config); flags win over variables, variables over the file.",
    propagate_version = true
)]
struct Cli {
    #[command(flatten)]
    config: ConfigArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the web app and the JSON API (applies migrations first)
    Serve,
    /// Apply database migrations and exit
    Migrate,
    /// Print the settings in force (from flags, variables, the file and the defaults); secrets
    /// are hidden
    Settings,
    /// Put the built site (cargo leptos build --release, then scripts/compress-site.sh)
    /// inside this binary, which then serves it with no directory beside it
    EmbedSite {
        /// The built site
        #[arg(long, value_name = "DIR", default_value = "target/site")]
        site: std::path::PathBuf,
        /// The build's hashes [default: hash.txt beside this binary]
        #[arg(long, value_name = "FILE")]
        hashes: Option<std::path::PathBuf>,
        /// Where to write the binary with its site [default: this binary, replaced]
        #[arg(long, value_name = "FILE")]
        out: Option<std::path::PathBuf>,
    },
    /// The database itself
    Db {
        #[command(subcommand)]
        command: DbCommand,
    },
    /// Manage user accounts
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
}

#[derive(Subcommand)]
enum DbCommand {
    /// Copy every row into another, empty database (SQLite to PostgreSQL or back), then
    /// check the copy: each table's rows counted, every frame opened under its key
    Copy {
        /// Where to copy: a postgres:// URL, or a data directory (its hero.db)
        #[arg(long, value_name = "URL|DIR")]
        to: String,
        /// What to copy [default: the configured database (database_url, else DATA_DIR)]
        #[arg(long, value_name = "URL|DIR")]
        from: Option<String>,
    },
}

#[derive(Subcommand)]
enum UserCommand {
    /// Create a user; the password is asked for, or read from standard input when piped
    /// (echo 'secret' | hero user add alice)
    Add {
        /// Username: letters, digits, '_', '-' and '.'
        name: String,
        /// Make the user an administrator
        #[arg(long)]
        admin: bool,
    },
    /// List users
    List,
    /// Set a user's password (read like `add`); ends all their sign-ins
    Passwd { name: String },
    /// Disable a user; ends all their sign-ins
    Disable { name: String },
    /// Enable a disabled user
    Enable { name: String },
    /// Make a user an administrator (--off unmakes one; the last enabled one stays)
    Admin {
        name: String,
        #[arg(long)]
        off: bool,
    },
}

fn main() -> std::process::ExitCode {
    // Started inside a bash sandbox as its Landlock helper: restrict, become the command.
    hero_backend::execution::sandbox::landlock::main_if_asked();
    // The settings file's values come in as the flags they stand for (`config::layered`).
    use clap::CommandFactory;
    let argv = match server::config::layered(&Cli::command(), std::env::args_os().collect()) {
        Ok(argv) => argv,
        Err(e) => {
            eprintln!("error: {e:#}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let cli = Cli::parse_from(argv);
    let result = cli.config.resolve().and_then(|cfg| {
        match &cli.command {
            Command::Settings => {
                println!("{cfg:#?}");
                return Ok(());
            }
            Command::EmbedSite { site, hashes, out } => {
                return cli::embed_site(site, hashes.as_deref(), out.as_deref());
            }
            _ => {}
        }
        init_logging(&cfg.log, cfg.log_format);
        let rt = tokio::runtime::Runtime::new()?;
        rt.block_on(async {
            match cli.command {
                Command::Serve => cli::serve(cfg).await,
                Command::Migrate => cli::migrate(&cfg).await,
                Command::Settings | Command::EmbedSite { .. } => Ok(()),
                Command::Db {
                    command: DbCommand::Copy { to, from },
                } => cli::db_copy(&cfg, from.as_deref(), &to).await,
                Command::User { command } => match command {
                    UserCommand::Add { name, admin } => cli::user_add(&cfg, &name, admin).await,
                    UserCommand::List => cli::user_list(&cfg).await,
                    UserCommand::Admin { name, off } => {
                        cli::user_set_admin(&cfg, &name, !off).await
                    }
                    UserCommand::Passwd { name } => cli::user_passwd(&cfg, &name).await,
                    UserCommand::Disable { name } => {
                        cli::user_set_disabled(&cfg, &name, true).await
                    }
                    UserCommand::Enable { name } => {
                        cli::user_set_disabled(&cfg, &name, false).await
                    }
                },
            }
        })
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn init_logging(filter: &str, format: server::config::LogFormat) {
    let asked = filter;
    let mut filter = tracing_subscriber::EnvFilter::try_new(asked)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // The MCP client logs what plugins send at `info`, unbounded: its warnings alone, unless
    // the filter names it.
    if !asked.contains("rmcp")
        && let Ok(quiet) = "rmcp=warn".parse()
    {
        filter = filter.add_directive(quiet);
    }
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        server::config::LogFormat::Text => logs.init(),
        server::config::LogFormat::Json => logs.json().init(),
    }
}
