//! Abilities (reference 000, "Abilities"): everything an agent may be given, in one list.
//! Functions are the registry's (source `builtin`); processes are instruction macros in
//! markdown ([`hero_shared::process`]): Hero's own, shipped in the binary (source
//! `system`), and each user's own (source `user`), stored sealed with the user's data key,
//! bound to the row's user, id and name. An ability's id carries its source
//! (`builtin:bash`, `system:act`, `user:17`).
//!
//! A user creates, changes and deletes their own processes only; Hero's abilities are
//! read-only ("belongs to Hero; copy it").

use hero_shared::api::{
    AbilityDto, AbilitySource, AbilityType, CreateProcessRequest, RenderProcessRequest,
    UpdateProcessRequest,
};
use hero_shared::calls::{DangerLevel, FunctionPermissions, Permission};
use hero_shared::process::{self, Vars};
use serde::{Deserialize, Serialize};

use crate::accounts::auth::AuthUser;
use crate::crypto::{self, SecretKey};
use crate::execution::functions::Spec;
use crate::execution::plugins::{Plugin, PluginProcess, Plugins};
use crate::store::{self, processes::ProcessRow};
use crate::{AppState, Error, Result, now_text};

/// The most processes one user may have.
pub const MAX_PROCESSES_PER_USER: i64 = 500;
/// The longest `args` a process is rendered with (characters).
pub const MAX_ARGS_CHARS: usize = 4_000;
/// The longest description a process may have (characters).
pub const MAX_DESCRIPTION_CHARS: usize = process::MAX_DESCRIPTION_CHARS;

/// Hero's own processes: (name, description, content).
pub const SYSTEM: &[(&str, &str, &str)] = &[
    (
        "__onstart_",
        "What every session begins with: who the user is, the date, how to answer.",
        include_str!("../../templates/processes/__onstart_.md"),
    ),
    (
        "act",
        "How to act with the functions: say, call, read the result as data, answer.",
        include_str!("../../templates/processes/act.md"),
    ),
];

/// What a user's process holds under its seal.
#[derive(Serialize, Deserialize)]
struct Sealed {
    description: String,
    content: String,
}

fn aad(user_id: i64, id: i64, name: &str) -> Vec<u8> {
    format!("processes:{user_id}:{id}:{name}").into_bytes()
}

/// A user's process, opened.
struct Process {
    id: i64,
    name: String,
    description: String,
    content: String,
}

fn open(dk: &SecretKey, row: ProcessRow) -> Result<Process> {
    let bytes = crypto::open(dk, &aad(row.user_id, row.id, &row.name), &row.sealed)?;
    let sealed: Sealed = serde_json::from_slice(&bytes)
        .map_err(|e| Error::Internal(format!("a process could not be read: {e}")))?;
    Ok(Process {
        id: row.id,
        name: row.name,
        description: sealed.description,
        content: sealed.content,
    })
}

fn seal(
    dk: &SecretKey,
    user_id: i64,
    id: i64,
    name: &str,
    description: &str,
    content: &str,
) -> Vec<u8> {
    let sealed = Sealed {
        description: description.to_owned(),
        content: content.to_owned(),
    };
    // A struct of two strings always serialises.
    let bytes = serde_json::to_vec(&sealed).unwrap_or_default();
    crypto::seal(dk, &aad(user_id, id, name), &bytes)
}

/// A process as an ability: loading one is safe and runs at once.
fn process_dto(source: AbilitySource, id: String, name: &str, description: &str) -> AbilityDto {
    AbilityDto {
        id,
        name: name.to_owned(),
        kind: AbilityType::Process,
        source,
        description: description.to_owned(),
        category: "processes".to_owned(),
        permissions: FunctionPermissions::allowed(DangerLevel::Safe),
        auto_approve_policy: Permission::Always,
        startup: process::startup_rank(name).is_some(),
        editable: source == AbilitySource::User,
        content: None,
        schema: None,
        examples: None,
    }
}

fn function_dto(spec: &Spec) -> AbilityDto {
    AbilityDto {
        id: match &spec.plugin {
            Some(_) => format!("plugin:{}", spec.name),
            None => format!("builtin:{}", spec.name),
        },
        name: spec.name.to_string(),
        kind: AbilityType::Function,
        source: match &spec.plugin {
            Some(_) => AbilitySource::Plugin,
            None => AbilitySource::Builtin,
        },
        description: spec.description.to_string(),
        category: match hero_shared::command::by_function(&spec.name) {
            Some(_) => "commands",
            None => "functions",
        }
        .to_owned(),
        permissions: spec.permissions,
        // One that asks every time is never approved without asking (000 "Ask Always").
        auto_approve_policy: match spec.permissions.may_be_always() {
            true => spec.default,
            false => Permission::Never,
        },
        startup: false,
        editable: false,
        content: None,
        schema: None,
        examples: None,
    }
}

/// A builtin conditional process by its name.
fn conditional(name: &str) -> Option<&'static super::conditional::Conditional> {
    super::conditional::builtin()
        .iter()
        .find(|c| c.name == name)
}

/// A conditional process (000 "Conditional Abilities"): Hero's, told to the agent when it
/// applies, its description saying when.
fn conditional_dto(c: &super::conditional::Conditional) -> AbilityDto {
    AbilityDto {
        category: "conditional".to_owned(),
        ..process_dto(
            AbilitySource::Builtin,
            format!("builtin:{}", c.name),
            c.name,
            c.applies,
        )
    }
}

/// A plugin's process as an ability is named: `<plugin>__<name>`.
fn plugin_process_name(p: &Plugin, process: &PluginProcess) -> String {
    format!("{}__{}", p.name, process.name)
}

fn plugin_process_description(p: &Plugin) -> String {
    let about = p.manifest.as_ref().map_or("", |m| m.description.as_str());
    match about {
        "" => format!("A process of the plugin {}.", p.name),
        about => format!("A process of the plugin {}: {about}", p.name),
    }
}

/// What `GET /api/abilities` may be narrowed to.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    pub kind: Option<AbilityType>,
    pub source: Option<AbilitySource>,
    pub category: Option<String>,
}

impl Filter {
    fn keeps(&self, a: &AbilityDto) -> bool {
        self.kind.is_none_or(|k| k == a.kind)
            && self.source.is_none_or(|s| s == a.source)
            && self.category.as_ref().is_none_or(|c| *c == a.category)
    }
}

/// Every ability the user has: the functions, Hero's processes, then their own (by name).
pub async fn list(st: &AppState, user: &AuthUser, filter: &Filter) -> Result<Vec<AbilityDto>> {
    let mut all: Vec<AbilityDto> = st.functions.specs().map(function_dto).collect();
    all.extend(super::conditional::builtin().iter().map(conditional_dto));
    all.extend(SYSTEM.iter().map(|(name, description, _)| {
        process_dto(
            AbilitySource::System,
            format!("system:{name}"),
            name,
            description,
        )
    }));
    all.extend(st.plugins.processes().map(|(p, process)| {
        process_dto(
            AbilitySource::Plugin,
            p.process_id(&process.name),
            &plugin_process_name(p, process),
            &plugin_process_description(p),
        )
    }));
    let wanted = filter.source.is_none_or(|s| s == AbilitySource::User)
        && filter.kind.is_none_or(|k| k == AbilityType::Process);
    if wanted {
        let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await?;
        let mut rows = store::processes::list(&st.db, user.id()).await?;
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        for row in rows {
            let p = open(&dk, row)?;
            all.push(process_dto(
                AbilitySource::User,
                format!("user:{}", p.id),
                &p.name,
                &p.description,
            ));
        }
    }
    all.retain(|a| filter.keeps(a));
    Ok(all)
}

/// Which ability an id names.
enum Named<'a> {
    Function(&'a Spec),
    /// A builtin conditional process (`prompt_response_handler`).
    Conditional(&'static super::conditional::Conditional),
    System(&'static str, &'static str, &'static str),
    Plugin(&'a Plugin, &'a PluginProcess),
    User(i64),
}

fn named<'a>(st: &'a AppState, id: &str) -> Result<Named<'a>> {
    let missing = Error::NotFound("ability");
    let (source, rest) = id.split_once(':').ok_or(Error::NotFound("ability"))?;
    match source {
        "builtin" => st
            .functions
            .get(rest)
            .filter(|(spec, _)| spec.plugin.is_none())
            .map(|(spec, _)| Named::Function(spec))
            .or_else(|| conditional(rest).map(Named::Conditional))
            .ok_or(missing),
        "system" => SYSTEM
            .iter()
            .find(|(name, _, _)| *name == rest)
            .map(|(n, d, c)| Named::System(n, d, c))
            .ok_or(missing),
        "plugin" => match st.functions.get(rest) {
            Some((spec, _)) if spec.plugin.is_some() => Ok(Named::Function(spec)),
            _ => st
                .plugins
                .process(rest)
                .map(|(p, process)| Named::Plugin(p, process))
                .ok_or(missing),
        },
        "user" => rest.parse().map(Named::User).map_err(|_| missing),
        _ => Err(missing),
    }
}

/// The user's process `id`, opened; 404 for another user's.
async fn own(st: &AppState, user: &AuthUser, id: i64) -> Result<(SecretKey, Process)> {
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await?;
    let row = store::processes::get(&mut st.db.conn().await?, user.id(), id)
        .await?
        .ok_or(Error::NotFound("ability"))?;
    Ok((dk.clone(), open(&dk, row)?))
}

/// One ability, with its content (a process's), schema and examples (a function's).
pub async fn get(st: &AppState, user: &AuthUser, id: &str) -> Result<AbilityDto> {
    Ok(match named(st, id)? {
        Named::Function(spec) => AbilityDto {
            schema: Some(spec.schema.clone()),
            examples: Some(spec.examples.clone()),
            ..function_dto(spec)
        },
        Named::Conditional(c) => AbilityDto {
            content: Some(c.message.to_owned()),
            ..conditional_dto(c)
        },
        Named::System(name, description, content) => AbilityDto {
            content: Some(content.to_owned()),
            ..process_dto(AbilitySource::System, id.to_owned(), name, description)
        },
        Named::Plugin(p, process) => AbilityDto {
            content: Some(process.content.clone()),
            ..process_dto(
                AbilitySource::Plugin,
                id.to_owned(),
                &plugin_process_name(p, process),
                &plugin_process_description(p),
            )
        },
        Named::User(n) => {
            let (_, p) = own(st, user, n).await?;
            AbilityDto {
                content: Some(p.content.clone()),
                ..process_dto(AbilitySource::User, id.to_owned(), &p.name, &p.description)
            }
        }
    })
}

/// Checks a process's fields before anything is stored.
fn check(name: &str, description: &str, content: &str) -> Result<()> {
    process::check_name(name).map_err(Error::Invalid)?;
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(Error::Invalid(format!(
            "a process's description is at most {MAX_DESCRIPTION_CHARS} characters"
        )));
    }
    process::check(content).map_err(Error::Invalid)
}

/// A name no other ability of the user's has: Hero's are refused outright; another of
/// their processes is a 409.
async fn check_free(
    st: &AppState,
    c: &mut store::Conn<'_>,
    user_id: i64,
    name: &str,
    except: i64,
) -> Result<()> {
    let hero = st.functions.get(name).is_some()
        || conditional(name).is_some()
        || SYSTEM.iter().any(|(n, _, _)| *n == name)
        || st.plugins.process(name).is_some();
    if hero || store::processes::name_taken(c, user_id, name, except).await? {
        return Err(Error::Conflict(format!(
            "an ability is already named {name:?}"
        )));
    }
    Ok(())
}

fn belongs_to_hero() -> Error {
    Error::Conflict(
        "this ability belongs to Hero; copy it into a process of your own to change it".into(),
    )
}

/// Creates a process of the user's own.
pub async fn create(
    st: &AppState,
    user: &AuthUser,
    req: CreateProcessRequest,
) -> Result<AbilityDto> {
    let name = req.name.trim().to_owned();
    check(&name, &req.description, &req.content)?;
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await?;
    let now = now_text();
    let id = st
        .db
        .write_with(async |tx| {
            // Counted in the transaction that inserts: two creations at once cannot both
            // slip past the bound.
            store::users::lock(tx, user.id()).await?;
            if store::processes::count(tx, user.id()).await? >= MAX_PROCESSES_PER_USER {
                return Err(Error::Limit(format!(
                    "you have {MAX_PROCESSES_PER_USER} processes, the most one may; delete one first"
                )));
            }
            check_free(st, tx, user.id(), &name, 0).await?;
            let id = store::processes::insert(tx, user.id(), &name, &now).await?;
            let sealed = seal(&dk, user.id(), id, &name, &req.description, &req.content);
            store::processes::set(tx, user.id(), id, &name, &sealed, &now).await?;
            Ok(id)
        })
        .await?;
    Ok(process_dto(
        AbilitySource::User,
        format!("user:{id}"),
        &name,
        &req.description,
    ))
}

/// Changes a process of the user's own: all the fields given, or none.
pub async fn update(
    st: &AppState,
    user: &AuthUser,
    id: &str,
    req: UpdateProcessRequest,
) -> Result<AbilityDto> {
    let Named::User(n) = named(st, id)? else {
        return Err(belongs_to_hero());
    };
    let (dk, p) = own(st, user, n).await?;
    let name = req
        .name
        .as_deref()
        .map_or(p.name.clone(), |s| s.trim().to_owned());
    let description = req.description.unwrap_or(p.description);
    let content = req.content.unwrap_or(p.content);
    check(&name, &description, &content)?;
    let now = now_text();
    st.db
        .write_with(async |tx| {
            // Under the user's lock, as a creation is: two changes to one name cannot both
            // pass the check (on PostgreSQL too), and the row is still theirs.
            store::users::lock(tx, user.id()).await?;
            check_free(st, tx, user.id(), &name, n).await?;
            let sealed = seal(&dk, user.id(), n, &name, &description, &content);
            if store::processes::set(tx, user.id(), n, &name, &sealed, &now).await? {
                Ok(())
            } else {
                Err(Error::NotFound("ability"))
            }
        })
        .await?;
    Ok(process_dto(
        AbilitySource::User,
        id.to_owned(),
        &name,
        &description,
    ))
}

/// Deletes a process of the user's own; it leaves every agent's default processes in the
/// same transaction (an id may be given again to a later process).
pub async fn delete(st: &AppState, user: &AuthUser, id: &str) -> Result<()> {
    let Named::User(n) = named(st, id)? else {
        return Err(belongs_to_hero());
    };
    let ability = format!("user:{n}");
    let gone = st
        .db
        .write_with(async |tx| {
            if !store::processes::delete(tx, user.id(), n).await? {
                return Ok(false);
            }
            for (agent, list) in store::agents::naming_process(tx, user.id(), &ability).await? {
                let mut ids: Vec<String> = serde_json::from_str(&list).unwrap_or_default();
                ids.retain(|i| *i != ability);
                let json = serde_json::to_string(&ids).unwrap_or_else(|_| "[]".into());
                store::agents::set_default_processes(tx, agent, &json).await?;
            }
            Ok(true)
        })
        .await?;
    if gone {
        Ok(())
    } else {
        Err(Error::NotFound("ability"))
    }
}

/// What an agent's prompt says of processes: its default ones (name, text rendered for
/// the user and the agent; `{{session.name}}` is "this session", as the prompt serves every
/// session of the agent's), then every other process (name, description). Hero's first,
/// then the user's by name.
pub(crate) async fn for_prompt(
    c: &mut store::Conn<'_>,
    plugins: &Plugins,
    dk: &SecretKey,
    user_id: i64,
    username: &str,
    agent_name: &str,
    defaults: &[String],
) -> Result<(Vec<(String, String)>, Vec<(String, String)>)> {
    let mut all: Vec<(String, String, String, String)> = SYSTEM
        .iter()
        .map(|(n, d, c)| {
            (
                format!("system:{n}"),
                (*n).to_owned(),
                (*d).to_owned(),
                (*c).to_owned(),
            )
        })
        .collect();
    all.extend(plugins.processes().map(|(p, process)| {
        (
            p.process_id(&process.name),
            plugin_process_name(p, process),
            plugin_process_description(p),
            process.content.clone(),
        )
    }));
    let mut own: Vec<Process> = Vec::new();
    for row in store::processes::list_on(c, user_id).await? {
        own.push(open(dk, row)?);
    }
    own.sort_by(|a, b| a.name.cmp(&b.name));
    all.extend(
        own.into_iter()
            .map(|p| (format!("user:{}", p.id), p.name, p.description, p.content)),
    );
    let now = now_text();
    let vars = Vars {
        user_name: username.to_owned(),
        agent_name: agent_name.to_owned(),
        session_name: "this session".to_owned(),
        date: now.get(..10).unwrap_or_default().to_owned(),
        time: now.get(11..16).unwrap_or_default().to_owned(),
        args: String::new(),
    };
    let given: Vec<(String, String)> = defaults
        .iter()
        .filter_map(|id| all.iter().find(|(i, ..)| i == id))
        .map(|(_, name, _, content)| (name.clone(), process::render(content, &vars)))
        .collect();
    let listed = all
        .into_iter()
        .filter(|(id, ..)| !defaults.contains(id))
        .map(|(_, name, description, _)| (name, description))
        .collect();
    Ok((given, listed))
}

/// The most default processes an agent may have.
pub const MAX_DEFAULT_PROCESSES: usize = 100;

/// An agent's default processes as given: each a process of Hero's or of the user's own
/// (a function, another user's or a missing one is a 400 naming it), in order, each once.
pub(crate) async fn check_defaults(
    c: &mut store::Conn<'_>,
    user_id: i64,
    ids: &[String],
) -> Result<Vec<String>> {
    if ids.len() > MAX_DEFAULT_PROCESSES {
        return Err(Error::Invalid(format!(
            "an agent has at most {MAX_DEFAULT_PROCESSES} default processes"
        )));
    }
    let refused = |id: &str| {
        let shown: String = id.chars().take(80).collect();
        Error::Invalid(format!(
            "default_processes names {shown:?}, which is not a process of yours (a process's id is system:NAME or user:N)"
        ))
    };
    let mut kept: Vec<String> = Vec::with_capacity(ids.len());
    for id in ids {
        let known = match id.split_once(':') {
            Some(("system", name)) => SYSTEM.iter().any(|(n, _, _)| *n == name),
            Some(("user", n)) => match n.parse::<i64>() {
                Ok(n) => store::processes::get(c, user_id, n).await?.is_some(),
                Err(_) => false,
            },
            _ => false,
        };
        if !known {
            return Err(refused(id));
        }
        if !kept.contains(id) {
            kept.push(id.clone());
        }
    }
    Ok(kept)
}

/// A process as it would be loaded: its variables filled for the user, the session (its
/// name, its agent's) if one is given, now, and `args`.
pub async fn render(
    st: &AppState,
    user: &AuthUser,
    id: &str,
    req: RenderProcessRequest,
) -> Result<String> {
    let content = match named(st, id)? {
        Named::Function(_) => {
            return Err(Error::Invalid(
                "only a process renders; this ability is a function".into(),
            ));
        }
        Named::System(_, _, content) => content.to_owned(),
        Named::Conditional(c) => c.message.to_owned(),
        Named::Plugin(_, process) => process.content.clone(),
        Named::User(n) => own(st, user, n).await?.1.content,
    };
    let args = req.args.unwrap_or_default();
    if args.chars().count() > MAX_ARGS_CHARS {
        return Err(Error::Invalid(format!(
            "args is at most {MAX_ARGS_CHARS} characters"
        )));
    }
    let vars = vars(st, user.id(), req.session_id, args).await?;
    Ok(process::render(&content, &vars))
}

/// A process by its name, Hero's or else the user's own, rendered for the session: what the
/// `process` function gives the agent. `None`: the user has no process of that name.
pub async fn load(
    st: &AppState,
    user_id: i64,
    session_id: i64,
    name: &str,
    args: String,
) -> Result<Option<String>> {
    let system = SYSTEM
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, _, c)| *c);
    let plugin = st.plugins.process(name).map(|(_, p)| p.content.as_str());
    let content = match system.or(plugin) {
        Some(content) => content.to_owned(),
        None => {
            let row = store::processes::by_name(&mut st.db.conn().await?, user_id, name).await?;
            let Some(row) = row else {
                return Ok(None);
            };
            let dk = crate::accounts::users::data_key(&st.db, &st.keys, user_id).await?;
            open(&dk, row)?.content
        }
    };
    let vars = vars(st, user_id, Some(session_id), args).await?;
    Ok(Some(process::render(&content, &vars)))
}

/// The id of the user's own process `name` (`user:N`), if they have one.
pub async fn own_id(st: &AppState, user_id: i64, name: &str) -> Result<Option<String>> {
    let row = store::processes::by_name(&mut st.db.conn().await?, user_id, name).await?;
    Ok(row.map(|r| format!("user:{}", r.id)))
}

/// The id of the ability named `name`: a function's, a process of Hero's, or the user's own.
pub async fn id_of(st: &AppState, user_id: i64, name: &str) -> Result<Option<String>> {
    if st.functions.get(name).is_some() {
        return Ok(Some(format!("builtin:{name}")));
    }
    if SYSTEM.iter().any(|(n, _, _)| *n == name) {
        return Ok(Some(format!("system:{name}")));
    }
    if let Some((p, process)) = st.plugins.process(name) {
        return Ok(Some(p.process_id(&process.name)));
    }
    own_id(st, user_id, name).await
}

/// The startup processes (reference 000 "Startup Abilities"): Hero's and the user's whose
/// names are underscores then `onstart_`, in the startup order
/// ([`process::startup_order`]: most leading underscores first, then by name), each
/// `(name, text)` rendered for the session. Only those rows are opened.
pub(crate) async fn startup(
    c: &mut store::Conn<'_>,
    dk: &SecretKey,
    user_id: i64,
    session_id: i64,
) -> Result<Vec<(String, String)>> {
    let mut found: Vec<(String, String)> = SYSTEM
        .iter()
        .filter(|(n, _, _)| process::startup_rank(n).is_some())
        .map(|(n, _, c)| ((*n).to_owned(), (*c).to_owned()))
        .collect();
    for row in store::processes::list_on(c, user_id).await? {
        if process::startup_rank(&row.name).is_some() {
            let p = open(dk, row)?;
            found.push((p.name, p.content));
        }
    }
    let order: Vec<String> = process::startup_order(found.iter().map(|(n, _)| n.as_str()))
        .into_iter()
        .map(str::to_owned)
        .collect();
    let vars = vars_on(c, user_id, Some(session_id), String::new()).await?;
    Ok(order
        .into_iter()
        .filter_map(|name| {
            let i = found.iter().position(|(n, _)| *n == name)?;
            let (name, content) = found.swap_remove(i);
            Some((name, process::render(&content, &vars)))
        })
        .collect())
}

/// What a process's variables stand for: the user's name, the session's and its agent's
/// (when a session is given; 404 for another user's), the date and time now (UTC), `args`.
async fn vars(st: &AppState, user_id: i64, session_id: Option<i64>, args: String) -> Result<Vars> {
    vars_on(&mut st.db.conn().await?, user_id, session_id, args).await
}

/// [`vars`] on a held connection.
async fn vars_on(
    c: &mut store::Conn<'_>,
    user_id: i64,
    session_id: Option<i64>,
    args: String,
) -> Result<Vars> {
    let now = now_text();
    let mut vars = Vars {
        user_name: store::users::name_of(c, user_id).await?.unwrap_or_default(),
        date: now.get(..10).unwrap_or_default().to_owned(),
        time: now.get(11..16).unwrap_or_default().to_owned(),
        args,
        ..Vars::default()
    };
    if let Some(sid) = session_id {
        let session = store::sessions::get(c, user_id, sid)
            .await?
            .ok_or(Error::NotFound("session"))?;
        vars.session_name = session.name;
        if let Some(agent) = session.agent_id {
            vars.agent_name = store::agents::get(c, user_id, agent)
                .await?
                .map(|a| a.name)
                .unwrap_or_default();
        }
    }
    Ok(vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heros_processes_use_only_the_variables_and_names_allowed() {
        for (name, _, content) in SYSTEM {
            assert_eq!(process::check_name(name), Ok(()));
            assert_eq!(process::check(content), Ok(()), "{name}");
        }
        assert_eq!(
            process::startup_order(SYSTEM.iter().map(|(n, _, _)| *n)),
            ["__onstart_"]
        );
    }
}
