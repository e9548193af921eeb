//! The Skills page (`/skills`, reference 002 §8–13): the user's skills grouped by tier, a
//! folder that is no skill with why, a scored search (a plain GET form, `?q=`), one skill
//! opened (`?skill=NAME&tier=TIER`: its SKILL.md rendered, its fields and files, a file's
//! text with `&file=PATH`), and the user's personal skills made, edited (`?edit=NAME`),
//! deleted and imported from a folder the browser reads. An administrator also sees a global
//! skill's visibility and grants.
//!
//! The import is the one part that needs the wasm (`browser`): the other forms are
//! [`FnForm`]s. The pure parts (the tiers' headings, a score, a folder's files read into a
//! skill, a SKILL.md written back from its fields) are above `browser` and tested natively.

use std::collections::BTreeMap;

use hero_shared::api::{
    SkillDto, SkillFileText, SkillGrantDto, SkillGrantsDto, SkillHitDto, SkillSearchDto, SkillsDto,
};
use leptos::prelude::*;
use leptos::server_fn::ServerFn;
use leptos_router::components::Redirect;
use leptos_router::hooks::use_query_map;

use crate::auth::{current_user, error_text};
use crate::enhance::FnForm;
use crate::json::resource;

#[server(prefix = "/_fn")]
pub async fn list_skills() -> Result<SkillsDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::skills::api::list(&st, &user)
        .await
        .map_err(fail)
}

/// The skill `name` in use, or the one of `tier` (which may be hidden by a higher tier).
#[server(prefix = "/_fn")]
pub async fn get_skill(name: String, tier: Option<String>) -> Result<SkillDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let tier = tier.filter(|t| !t.is_empty());
    hero_backend::skills::api::get(&st, &user, &name, tier.as_deref())
        .await
        .map_err(fail)
}

/// A text file of the skill `name` in use, or of the one of `tier` (`SKILL.md`: its body).
#[server(prefix = "/_fn")]
pub async fn read_skill_file(
    name: String,
    path: String,
    tier: Option<String>,
) -> Result<SkillFileText, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let tier = tier.filter(|t| !t.is_empty());
    hero_backend::skills::api::file(&st, &user, &name, &path, tier.as_deref())
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn search_skills(query: String) -> Result<SkillSearchDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let req = hero_shared::api::SkillSearchRequest {
        query,
        agent_id: None,
        limit: None,
    };
    hero_backend::skills::api::search(&st, &user, &req)
        .await
        .map_err(fail)
}

/// The user's personal skill `name`, whether in use or hidden by a higher tier.
#[cfg(feature = "ssr")]
async fn personal_skill(
    st: &hero_backend::AppState,
    user: &hero_backend::accounts::auth::AuthUser,
    name: &str,
) -> Result<Option<std::sync::Arc<hero_backend::skills::Skill>>, hero_backend::Error> {
    use hero_backend::skills::Tier;
    let view = hero_backend::skills::of_user(
        st,
        hero_backend::skills::Seer::User {
            id: user.id(),
            admin: user.is_admin(),
        },
    )
    .await?;
    let hidden = view.overridden.iter().map(|(s, _)| s);
    Ok(view
        .skills
        .iter()
        .chain(hidden)
        .find(|s| s.tier == Tier::Personal && s.md.name == name)
        .cloned())
}

/// The personal skill `name`'s SKILL.md as the editor shows it: written back from what was
/// read (the route gives the body with `{baseDir}` filled in, and the fields apart).
#[server(prefix = "/_fn")]
pub async fn skill_source(name: String) -> Result<String, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    match personal_skill(&st, &user, &name).await.map_err(fail)? {
        Some(s) => Ok(skill_md_text(&s.md)),
        None => Err(fail(hero_backend::Error::NotFound("skill"))),
    }
}

/// Writes the personal skill `name` from its SKILL.md. The route takes a skill's whole
/// folder, so the files beside the SKILL.md it replaces (an imported folder's) are sent
/// again: editing the text keeps them.
#[server(prefix = "/_fn")]
pub async fn save_skill(name: String, content: String) -> Result<SkillDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let name = name.trim().to_owned();
    let files = personal_skill(&st, &user, &name)
        .await
        .map_err(fail)?
        .and_then(|s| s.texts.as_deref().cloned())
        .unwrap_or_default();
    let req = hero_shared::api::PutSkillRequest {
        content,
        files: Some(files),
        tier: None,
    };
    hero_backend::skills::api::put(&st, &user, &name, req)
        .await
        .map(|(_, skill)| skill)
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn delete_skill(name: String) -> Result<(), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::skills::api::delete(&st, &user, &name)
        .await
        .map_err(fail)
}

/// A global skill's visibility and grants (administrators only: the backend checks).
#[server(prefix = "/_fn")]
pub async fn skill_grants(name: String) -> Result<SkillGrantsDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::skills::grants::list(&st, &user, &name)
        .await
        .map_err(fail)
}

/// Makes a global skill `public` or `internal`.
#[server(prefix = "/_fn")]
pub async fn set_skill_visibility(
    name: String,
    visibility: String,
) -> Result<SkillGrantsDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::skills::grants::set_visibility(&st, &user, &name, &visibility)
        .await
        .map_err(fail)
}

/// Grants a global skill to a user (by name) or to an agent (by id), which may be pinned
/// to a kept version; the form's empty fields are absent.
#[server(prefix = "/_fn")]
pub async fn grant_skill(
    name: String,
    user: String,
    agent_id: String,
    pinned_version: String,
) -> Result<SkillGrantDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, me) = require_user().await?;
    let given = |s: String| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
    let number = |what: &str, s: String| {
        given(s)
            .map(|t| {
                t.parse::<i64>().map_err(|_| {
                    fail(hero_backend::Error::Invalid(format!(
                        "{what} {t:?} is not a number"
                    )))
                })
            })
            .transpose()
    };
    let req = hero_shared::api::SkillGrantRequest {
        user: given(user),
        agent_id: number("the agent id", agent_id)?,
        pinned_version: number("the version", pinned_version)?,
    };
    hero_backend::skills::grants::grant(&st, &me, &name, &req)
        .await
        .map(|(_, grant)| grant)
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn revoke_skill_grant(name: String, grant_id: String) -> Result<(), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::skills::grants::revoke(&st, &user, &name, &grant_id)
        .await
        .map_err(fail)
}

/// The tiers, highest first, and their headings.
pub const TIERS: [(&str, &str); 5] = [
    ("workspace", "Workspace"),
    ("project", "Project"),
    ("personal", "Personal"),
    ("global", "Global"),
    ("builtin", "Built-in"),
];

/// What the New form's SKILL.md starts as.
pub const TEMPLATE: &str = "---\nname: \ndescription: \n---\n";

/// A score as the page shows it.
pub fn score(x: f64) -> String {
    format!("{x:.2}")
}

/// A search result's parts: its BM25 score and, in hybrid mode, its vector similarity.
pub fn score_parts(hit: &SkillHitDto) -> String {
    match hit.vector {
        Some(v) => format!("BM25 {}, vector {}", score(hit.bm25), score(v)),
        None => format!("BM25 {}", score(hit.bm25)),
    }
}

/// The page that opens the skill `name` of `tier`.
fn skill_href(name: &str, tier: &str) -> String {
    // A skill's name and a tier are lowercase letters, digits and hyphens: nothing to escape.
    crate::base::href(&format!("/skills?skill={name}&tier={tier}"))
}

// -- Writing a SKILL.md back from its fields --------------------------------------------

/// A string as a YAML value: plain when YAML reads it back as that same string (a letter
/// first, then letters, digits, spaces and punctuation that means nothing to YAML, and no
/// word YAML reads as a boolean or null), else a JSON string, which YAML reads alike.
pub fn yaml_str(s: &str) -> String {
    const RESERVED: [&str; 9] = ["y", "n", "yes", "no", "true", "false", "on", "off", "null"];
    let plain = s.chars().next().is_some_and(char::is_alphabetic)
        && !s.ends_with(' ')
        && s.chars()
            .all(|c| c.is_alphanumeric() || " .,;()/_-+'!?".contains(c))
        && !RESERVED.contains(&s.to_ascii_lowercase().as_str());
    if plain {
        s.to_owned()
    } else {
        serde_json::Value::from(s).to_string()
    }
}

/// A value of a key the format does not name, as YAML: a string as [`yaml_str`], anything
/// else in flow style with every string quoted.
#[cfg(feature = "ssr")]
fn yaml_value(v: &serde_json::Value) -> String {
    use serde_json::Value;
    fn flow(v: &Value) -> String {
        match v {
            Value::Array(items) => {
                let items: Vec<String> = items.iter().map(flow).collect();
                format!("[{}]", items.join(", "))
            }
            Value::Object(map) => {
                let pairs: Vec<String> = map
                    .iter()
                    .map(|(k, v)| format!("{}: {}", Value::from(k.as_str()), flow(v)))
                    .collect();
                format!("{{{}}}", pairs.join(", "))
            }
            other => other.to_string(),
        }
    }
    match v {
        Value::String(s) => yaml_str(s),
        other => flow(other),
    }
}

/// A SKILL.md from its parts: YAML frontmatter (the format's keys in its order, then the
/// others), then the body as written, `{baseDir}` and all.
#[cfg(feature = "ssr")]
pub fn skill_md_text(md: &hero_backend::skills::format::SkillMd) -> String {
    fn field(out: &mut String, key: &str, value: &str) {
        out.push_str(&format!("{key}: {}\n", yaml_str(value)));
    }
    let mut out = String::from("---\n");
    field(&mut out, "name", &md.name);
    field(&mut out, "description", &md.description);
    if let Some(v) = &md.license {
        field(&mut out, "license", v);
    }
    if let Some(v) = &md.compatibility {
        field(&mut out, "compatibility", v);
    }
    if !md.metadata.is_empty() {
        out.push_str("metadata:\n");
        for (k, v) in &md.metadata {
            out.push_str(&format!("  {}: {}\n", yaml_str(k), yaml_str(v)));
        }
    }
    if let Some(v) = &md.allowed_tools {
        field(&mut out, "allowed-tools", v);
    }
    for (k, v) in &md.other {
        out.push_str(&format!("{}: {}\n", yaml_str(k), yaml_value(v)));
    }
    out.push_str("---\n");
    out.push_str(&md.body);
    out
}

// -- A folder imported from the browser ---------------------------------------------------

/// The largest file a skill may hold (the backend's `skills::files::MAX_FILE_BYTES`): a
/// larger one is left out unread.
pub const IMPORT_MAX_FILE_BYTES: u64 = 1 << 20;
/// The most files a skill may hold (the backend's `skills::files::MAX_FILES`): a larger
/// folder is refused before any file is read.
pub const IMPORT_MAX_FILES: usize = 256;

/// One file of a folder chosen in the browser: its path from the folder's parent
/// (`pdf/scripts/fill.py`, as `webkitRelativePath` gives it), and its bytes (none when it
/// was too large to read).
pub struct FolderFile {
    pub path: String,
    pub bytes: Option<Vec<u8>>,
}

/// A folder read into a personal skill: named after the folder, its SKILL.md, the text
/// files beside it by path in the folder, and the files left out with why.
#[derive(Debug, PartialEq, Eq)]
pub struct Import {
    pub name: String,
    pub content: String,
    pub files: BTreeMap<String, String>,
    pub skipped: Vec<String>,
}

impl Import {
    /// What the page says once it is imported.
    pub fn summary(&self) -> String {
        let files = match self.files.len() {
            1 => "1 file".to_owned(),
            n => format!("{n} files"),
        };
        let mut said = format!("Imported {} with SKILL.md and {files}", self.name);
        if !self.skipped.is_empty() {
            said.push_str(&format!("; left out: {}", self.skipped.join(", ")));
        }
        said
    }
}

/// Reads a chosen folder's files into a skill: the folder must hold a SKILL.md at its top;
/// a file that is not UTF-8 text (or holds a NUL) is left out, and said so.
pub fn read_folder(files: Vec<FolderFile>) -> Result<Import, String> {
    let folder = files
        .first()
        .and_then(|f| f.path.split_once('/'))
        .map(|(top, _)| top.to_owned())
        .ok_or("Choose a folder (its files were not given with their folder).")?;
    let mut content = None;
    let mut out = BTreeMap::new();
    let mut skipped = Vec::new();
    for f in files {
        let Some(rel) = f
            .path
            .strip_prefix(&folder)
            .and_then(|p| p.strip_prefix('/'))
        else {
            return Err(format!("{} is not in the folder {folder}", f.path));
        };
        let text = match f.bytes {
            None => {
                skipped.push(format!("{rel} (over {} MiB)", IMPORT_MAX_FILE_BYTES >> 20));
                continue;
            }
            Some(bytes) => String::from_utf8(bytes).ok().filter(|t| !t.contains('\0')),
        };
        match (rel == "SKILL.md", text) {
            (true, Some(t)) => content = Some(t),
            (true, None) => return Err("SKILL.md is not UTF-8 text.".into()),
            (false, Some(t)) => {
                out.insert(rel.to_owned(), t);
            }
            (false, None) => skipped.push(format!("{rel} (not text)")),
        }
    }
    let content =
        content.ok_or_else(|| format!("The folder {folder} has no SKILL.md at its top."))?;
    Ok(Import {
        name: folder,
        content,
        files: out,
        skipped,
    })
}

// -- The page -----------------------------------------------------------------------------

#[component]
pub fn SkillsPage() -> impl IntoView {
    let user = resource(|| (), |_| current_user());
    let query = use_query_map();
    let q = |key: &str| query.read_untracked().get(key).unwrap_or_default();
    let opened = Opened {
        skill: q("skill"),
        tier: q("tier"),
        file: q("file"),
    };
    let (search, edit) = (q("q"), q("edit"));
    view! {
        <Suspense>
            {move || user.get().map(|u| match u {
                Ok(u) => view! {
                    <Skills search=search.clone() opened=opened.clone() edit=edit.clone() is_admin=u.is_admin/>
                }.into_any(),
                Err(_) => view! { <Redirect path=crate::base::href("/login")/> }.into_any(),
            })}
        </Suspense>
    }
}

/// The skill the page opens (`?skill=&tier=`) and, in it, the file shown (`&file=`).
#[derive(Clone, Debug, PartialEq)]
struct Opened {
    skill: String,
    tier: String,
    file: String,
}

/// The page's parts: the opened skill or the editor above, the search, the tiers, then the
/// New and Import forms. Each form's success reads the page's `<main>` again.
#[component]
fn Skills(search: String, opened: Opened, edit: String, is_admin: bool) -> impl IntoView {
    let list = resource(|| (), |_| list_skills());
    let query = search.clone();
    let hits = resource(
        move || query.clone(),
        |q| async move {
            if q.trim().is_empty() {
                return Ok(None);
            }
            search_skills(q).await.map(Some)
        },
    );
    let detail = (!opened.skill.is_empty()).then(|| view! { <Detail opened is_admin/> });
    let editor = (!edit.is_empty()).then(|| view! { <Editor name=edit/> });
    let mode = move || {
        list.get()
            .and_then(Result::ok)
            .map(|l| view! { <span class="muted" data-testid="search-mode">{format!("Search mode: {}", l.search_mode)}</span> })
    };
    let results = move || {
        hits.get().map(|r| match r {
            Ok(None) => ().into_any(),
            Ok(Some(found)) if found.results.is_empty() => {
                view! { <p class="muted skill-hits">"No skill matches."</p> }.into_any()
            }
            Ok(Some(found)) => view! {
                <ol class="skill-hits" aria-label="Search results">
                    {found.results.into_iter().map(|h| view! { <Hit h/> }).collect_view()}
                </ol>
            }
            .into_any(),
            Err(e) => view! { <p class="form-error" role="alert">{error_text(&e)}</p> }.into_any(),
        })
    };
    let tiers = move || {
        list.get().map(|r| match r {
            Ok(l) => groups(l.skills).into_any(),
            Err(e) => view! { <p class="form-error" role="alert">{error_text(&e)}</p> }.into_any(),
        })
    };
    view! {
        <main class="skills-page">
            <p><a href=crate::base::href("/")>"← Back to sessions"</a></p>
            <h1>"Skills"</h1>
            <p class="muted">"Instructions your agents read when a task needs them. A skill of a higher tier hides one of the same name below it; a folder that is no skill says why."</p>
            <span class="saved" role="status"></span>
            {detail}
            {editor}
            <form method="get" class="skill-search" role="search">
                <label>"Search skills " <input type="search" name="q" value=search maxlength="1000"/></label>
                <button type="submit">"Search"</button>
                <Suspense>{mode}</Suspense>
            </form>
            <Suspense>{results}</Suspense>
            <Suspense>{tiers}</Suspense>
            <h2>"New skill"</h2>
            <FnForm action=SaveSkill::PATH then="refresh" class="skill-form new-skill" done="Skill saved">
                <label>"Name" <input type="text" name="name" required maxlength="64" placeholder="pdf-forms"/></label>
                <label>"SKILL.md" <textarea name="content" rows="10" required>{TEMPLATE}</textarea></label>
                <button type="submit">"Create skill"</button>
            </FnForm>
            <h2>"Import a folder"</h2>
            <p class="muted">"A skill's folder from your computer: its SKILL.md and the text files beside it become a personal skill named after the folder."</p>
            <form class="skill-form skill-import" data-skill-import="">
                <label>"Folder" <input type="file" name="folder" webkitdirectory="" multiple required/></label>
                <button type="submit">"Import"</button>
                <p class="form-error" role="alert" hidden></p>
            </form>
        </main>
    }
}

/// The skills by tier, highest first, under their headings; an empty tier is left out.
fn groups(skills: Vec<SkillDto>) -> impl IntoView {
    TIERS
        .iter()
        .filter_map(|(tier, heading)| {
            let of: Vec<SkillDto> = skills.iter().filter(|s| s.tier == *tier).cloned().collect();
            (!of.is_empty()).then(|| {
                view! {
                    <section class="skill-tier" aria-label=*heading data-tier=*tier>
                        <h2>{*heading}</h2>
                        <ul class="skill-list">
                            {of.into_iter().map(|s| view! { <SkillItem s/> }).collect_view()}
                        </ul>
                    </section>
                }
            })
        })
        .collect_view()
}

/// One skill of the list: a link that opens it, or, for a folder that is no skill, its name
/// and why.
#[component]
fn SkillItem(s: SkillDto) -> impl IntoView {
    let SkillDto {
        name,
        description,
        tier,
        visibility,
        version,
        overridden_by,
        error,
        ..
    } = s;
    let title = if error.is_some() {
        view! { <strong>{name.clone()}</strong> }.into_any()
    } else {
        view! { <a href=skill_href(&name, &tier)>{name.clone()}</a> }.into_any()
    };
    let version = (!version.is_empty())
        .then(|| view! { <span class="muted skill-version">{format!("version {version}")}</span> });
    let hidden = overridden_by.map(
        |by| view! { <span class="badge skill-overridden">{format!("overridden by {by}")}</span> },
    );
    let failed = error.map(|e| view! { <p class="form-error skill-error">{e}</p> });
    view! {
        <li class="skill" data-skill=name>
            <div class="skill-head">
                {title}
                <span class="badge">{visibility}</span>
                {version}
                {hidden}
            </div>
            <div class="muted">{description}</div>
            {failed}
        </li>
    }
}

/// One search result: the skill, its tier, its score and the score's parts.
#[component]
fn Hit(h: SkillHitDto) -> impl IntoView {
    let parts = score_parts(&h);
    view! {
        <li class="skill-hit" data-skill=h.name.clone()>
            <a href=skill_href(&h.name, &h.tier)>{h.name.clone()}</a>
            " " <span class="badge">{h.tier.clone()}</span>
            " " <span class="skill-score">{format!("score {}", score(h.score))}</span>
            " " <span class="muted">{format!("({parts})")}</span>
            <div class="muted">{h.description.clone()}</div>
        </li>
    }
}

/// An opened skill: its SKILL.md rendered, its fields, its files (one opened below them),
/// Edit and Delete for a personal one, and for an administrator a global one's visibility
/// and grants.
#[component]
fn Detail(opened: Opened, is_admin: bool) -> impl IntoView {
    let Opened { skill, tier, file } = opened;
    let key = (skill.clone(), tier.clone());
    let dto = resource(move || key.clone(), |(n, t)| get_skill(n, Some(t)));
    let key = (skill.clone(), file.clone(), tier.clone());
    let text = resource(
        move || key.clone(),
        |(name, path, tier)| async move {
            if path.is_empty() {
                return Ok(None);
            }
            read_skill_file(name, path, Some(tier)).await.map(Some)
        },
    );
    // Shown whether or not the skill could be read (the section reads its own grants).
    let admin = (is_admin && tier == "global").then(|| view! { <Grants name=skill.clone()/> });
    let shown = move || {
        text.get().map(|r| match r {
            Ok(None) => ().into_any(),
            Ok(Some(f)) => view! {
                <section class="skill-file" aria-label=f.path.clone()>
                    <h3>{f.path.clone()}</h3>
                    <pre>{f.content}</pre>
                </section>
            }
            .into_any(),
            Err(e) => view! { <p class="form-error" role="alert">{error_text(&e)}</p> }.into_any(),
        })
    };
    let body = move || {
        dto.get().map(|r| match r {
            Ok(s) => view! { <DetailBody s/> }.into_any(),
            Err(e) => view! { <p class="form-error" role="alert">{error_text(&e)}</p> }.into_any(),
        })
    };
    view! {
        <section class="skill-detail" aria-label=format!("Skill {skill}")>
            <Suspense>{body}</Suspense>
            <Suspense>{shown}</Suspense>
            {admin}
        </section>
    }
}

#[component]
fn DetailBody(s: SkillDto) -> impl IntoView {
    let detail = s
        .detail
        .clone()
        .unwrap_or_else(|| hero_shared::api::SkillDetail {
            license: None,
            compatibility: None,
            metadata: BTreeMap::new(),
            allowed_tools: None,
            content: String::new(),
            files: Vec::new(),
        });
    let mut fields: Vec<(&str, String)> = Vec::new();
    fields.extend(detail.license.map(|v| ("License", v)));
    fields.extend(detail.compatibility.map(|v| ("Compatibility", v)));
    fields.extend(detail.allowed_tools.map(|v| ("Allowed tools", v)));
    fields.extend(
        detail
            .metadata
            .iter()
            .map(|(k, v)| ("Metadata", format!("{k}: {v}"))),
    );
    let fields = fields
        .into_iter()
        .map(|(k, v)| view! { <dt>{k}</dt><dd>{v}</dd> })
        .collect_view();
    let (name, tier) = (s.name.clone(), s.tier.clone());
    let files = detail
        .files
        .into_iter()
        .map(|f| {
            let size = format!("{} B", f.size);
            let path = f.path.clone();
            let open = view! {
                <form method="get">
                    <input type="hidden" name="skill" value=name.clone()/>
                    <input type="hidden" name="tier" value=tier.clone()/>
                    <button type="submit" name="file" value=path.clone()>{path.clone()}</button>
                </form>
            };
            view! { <li data-file=path>{open} " " <span class="muted">{size}</span></li> }
        })
        .collect_view();
    let personal = (s.tier == "personal").then(|| {
        let name = s.name.clone();
        view! {
            <div class="skill-actions">
                <a href=crate::base::href(&format!("/skills?edit={name}")) class="edit-skill">"Edit"</a>
                <details class="skill-delete">
                    <summary>"Delete"</summary>
                    <FnForm action=DeleteSkill::PATH then="/skills" class="skill-delete-form">
                        <input type="hidden" name="name" value=name.clone()/>
                        <p>{format!("Delete the skill {name} and its files? This cannot be undone.")}</p>
                        <button type="submit" class="danger">"Delete for good"</button>
                    </FnForm>
                </details>
            </div>
        }
    });
    let hidden = s.overridden_by.clone().map(
        |by| view! { <span class="badge skill-overridden">{format!("overridden by {by}")}</span> },
    );
    view! {
        <h2>{s.name.clone()}</h2>
        <p class="skill-head">
            <span class="badge">{s.tier.clone()}</span>
            <span class="badge">{s.visibility.clone()}</span>
            <span class="muted skill-version">{format!("version {}", s.version)}</span>
            {hidden}
        </p>
        <p>{s.description.clone()}</p>
        <dl class="skill-fields">{fields}</dl>
        {personal}
        <h3>"SKILL.md"</h3>
        <crate::files::Rendered text=detail.content class="file-preview skill-body"/>
        <h3>"Files"</h3>
        <ul class="skill-files" aria-label="Files">{files}</ul>
    }
}

/// A global skill's visibility and its grants, for an administrator: public (every user has
/// it) or internal (the users and agents it is granted to; an agent may be pinned to one of
/// its kept versions).
#[component]
fn Grants(name: String) -> impl IntoView {
    let key = name.clone();
    let grants = resource(move || key.clone(), skill_grants);
    let body = move || {
        let name = name.clone();
        grants.get().map(|r| match r {
            Ok(g) => view! { <GrantsBody name g/> }.into_any(),
            Err(e) => view! { <p class="form-error" role="alert">{error_text(&e)}</p> }.into_any(),
        })
    };
    view! {
        <section class="skill-grants" aria-label="Visibility and grants">
            <h3>"Visibility and grants"</h3>
            <Suspense>{body}</Suspense>
        </section>
    }
}

#[component]
fn GrantsBody(name: String, g: SkillGrantsDto) -> impl IntoView {
    let visibility = g.visibility.clone();
    let choice = move |value: &'static str| {
        view! { <option value=value selected=value == visibility>{value}</option> }
    };
    let rows = g
        .grants
        .into_iter()
        .map(|grant| view! { <GrantRow name=name.clone() grant/> })
        .collect_view();
    let versions = g
        .versions
        .iter()
        .map(|v| view! { <option value=*v>{format!("version {v}")}</option> })
        .collect_view();
    let (name_visibility, name_grant) = (name.clone(), name);
    view! {
        <p class="muted">"Public: every user has it. Internal: only the users and agents it is granted to."</p>
        <FnForm action=SetSkillVisibility::PATH then="refresh" class="visibility-form" done="Visibility saved">
            <input type="hidden" name="name" value=name_visibility/>
            <label>"Visibility"
                <select name="visibility">{choice("public")}{choice("internal")}</select>
            </label>
            <button type="submit">"Save visibility"</button>
        </FnForm>
        <p class="muted">{format!("Version {} now.", g.version)}</p>
        <table aria-label="Grants">
            <thead><tr><th>"To"</th><th>"Pinned"</th><th>"Granted by"</th><th>"When"</th><th></th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
        <FnForm action=GrantSkill::PATH then="refresh" class="grant-form" done="Granted">
            <input type="hidden" name="name" value=name_grant/>
            <label>"User" <input type="text" name="user" maxlength="64"/></label>
            <label>"or agent id" <input type="text" name="agent_id" inputmode="numeric"/></label>
            <label>"Pinned version (an agent's)"
                <select name="pinned_version">
                    <option value="">"latest"</option>
                    {versions}
                </select>
            </label>
            <button type="submit">"Grant"</button>
        </FnForm>
    }
}

#[component]
fn GrantRow(name: String, grant: SkillGrantDto) -> impl IntoView {
    let SkillGrantDto {
        id,
        user,
        agent_id,
        pinned_version,
        granted_by,
        created_at,
    } = grant;
    let to = match (user, agent_id) {
        (Some(u), _) => format!("user {u}"),
        (None, Some(a)) => format!("agent {a}"),
        (None, None) => String::new(),
    };
    let pinned = match (agent_id, pinned_version) {
        (Some(_), Some(v)) => format!("version {v}"),
        (Some(_), None) => "latest".to_owned(),
        (None, _) => String::new(),
    };
    let row = id.clone();
    view! {
        <tr data-grant=row>
            <td>{to}</td>
            <td>{pinned}</td>
            <td>{granted_by}</td>
            <td class="muted">{created_at}</td>
            <td>
                <FnForm action=RevokeSkillGrant::PATH then="refresh" class="revoke-form" done="Grant removed">
                    <input type="hidden" name="name" value=name/>
                    <input type="hidden" name="grant_id" value=id/>
                    <button type="submit" class="danger">"Remove"</button>
                </FnForm>
            </td>
        </tr>
    }
}

/// The editor of a personal skill: its SKILL.md, written back from what was read.
#[component]
fn Editor(name: String) -> impl IntoView {
    let key = name.clone();
    let source = resource(move || key.clone(), skill_source);
    let heading = format!("Edit {name}");
    let body = move || {
        let name = name.clone();
        source.get().map(|r| match r {
            Ok(text) => view! {
                <FnForm action=SaveSkill::PATH then="refresh" class="skill-form edit-skill-form" done=format!("Saved {name}")>
                    <input type="hidden" name="name" value=name.clone()/>
                    <label>"SKILL.md" <textarea name="content" rows="16" required>{text}</textarea></label>
                    <button type="submit">"Save"</button>
                </FnForm>
            }
            .into_any(),
            Err(e) => view! { <p class="form-error" role="alert">{error_text(&e)}</p> }.into_any(),
        })
    };
    view! {
        <section class="skill-editor" aria-label="Edit skill">
            <h2>{heading}</h2>
            <Suspense>{body}</Suspense>
        </section>
    }
}

/// The sentence of a JSON route's refusal (`{"error": "..."}`); another kind of failure
/// says what it is.
pub fn api_error(status: u16, body: &str) -> String {
    serde_json::from_str::<hero_shared::api::ErrorBody>(body)
        .map(|b| b.error)
        .unwrap_or_else(|_| crate::enhance::error_sentence(status, ""))
}

#[cfg(feature = "hydrate")]
pub use browser::install;

/// The import in the browser: the chosen folder's files read, checked as [`read_folder`]
/// says, and sent to `PUT /api/skills/{name}` (the route takes a skill's folder up to its
/// bounds, past a server function's body limit); then the page's `<main>` is read again.
#[cfg(feature = "hydrate")]
mod browser {
    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;
    use wasm_bindgen::prelude::*;
    use wasm_bindgen_futures::JsFuture;
    use web_sys::{HtmlFormElement, HtmlInputElement};

    use super::{
        FolderFile, IMPORT_MAX_FILE_BYTES, IMPORT_MAX_FILES, Import, api_error, read_folder,
    };
    use crate::enhance::{announce, busy, error_sentence, refresh, show_alert};

    /// Listens for the import form's submit; called once, when the page has loaded.
    pub fn install() {
        let Some(doc) = web_sys::window().and_then(|w| w.document()) else {
            return;
        };
        let on_submit = Closure::<dyn FnMut(web_sys::Event)>::new(on_submit);
        let _ = doc.add_event_listener_with_callback("submit", on_submit.as_ref().unchecked_ref());
        // It lives as long as the page.
        on_submit.forget();
    }

    fn on_submit(ev: web_sys::Event) {
        let Some(form) = ev
            .target()
            .and_then(|t| t.dyn_into::<HtmlFormElement>().ok())
        else {
            return;
        };
        if !form.has_attribute("data-skill-import") {
            return;
        }
        ev.prevent_default();
        if form.get_attribute("aria-busy").as_deref() == Some("true") {
            return;
        }
        leptos::task::spawn_local(async move {
            busy(&form, true);
            let outcome = import(&form).await;
            busy(&form, false);
            match outcome {
                Ok(said) => {
                    show_alert(&form, None);
                    refresh().await;
                    announce(&said);
                }
                Err(sentence) => show_alert(&form, Some(&sentence)),
            }
        });
    }

    /// Reads the chosen folder and sends it; what to tell the user once it is imported.
    async fn import(form: &HtmlFormElement) -> Result<String, String> {
        let files = form
            .query_selector("input[type=file]")
            .ok()
            .flatten()
            .and_then(|e| e.dyn_into::<HtmlInputElement>().ok())
            .and_then(|input| input.files())
            .filter(|list| list.length() > 0)
            .ok_or("Choose a folder first.")?;
        if files.length() as usize > IMPORT_MAX_FILES {
            return Err(format!(
                "The folder holds {} files; a skill holds at most {IMPORT_MAX_FILES}.",
                files.length()
            ));
        }
        let mut read = Vec::new();
        for i in 0..files.length() {
            let Some(file) = files.item(i) else { continue };
            // A folder's files carry their path from the folder's parent.
            let path = js_sys::Reflect::get(&file, &JsValue::from_str("webkitRelativePath"))
                .ok()
                .and_then(|v| v.as_string())
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| file.name());
            let bytes = if file.size() > IMPORT_MAX_FILE_BYTES as f64 {
                None
            } else {
                let buffer = JsFuture::from(file.array_buffer())
                    .await
                    .map_err(|_| format!("{path} could not be read."))?;
                Some(js_sys::Uint8Array::new(&buffer).to_vec())
            };
            read.push(FolderFile { path, bytes });
        }
        let import = read_folder(read)?;
        put(&import).await?;
        Ok(import.summary())
    }

    /// `PUT /api/skills/{name}` with the folder's SKILL.md and files; the refusal's sentence.
    async fn put(import: &Import) -> Result<(), String> {
        let unreachable = || error_sentence(0, "");
        let body = serde_json::json!({ "content": &import.content, "files": &import.files });
        let init = web_sys::RequestInit::new();
        init.set_method("PUT");
        init.set_body(&JsValue::from_str(&body.to_string()));
        let headers = web_sys::Headers::new().map_err(|_| unreachable())?;
        let _ = headers.set("Content-Type", "application/json");
        let _ = headers.set("Accept", "application/json");
        init.set_headers(&headers);
        let name = String::from(js_sys::encode_uri_component(&import.name));
        let url = crate::base::href(&format!("/api/skills/{name}"));
        match crate::http::fetch(&url, &init).await {
            Some((true, _, _)) => Ok(()),
            Some((false, status, text)) => Err(api_error(status, &text)),
            None => Err(unreachable()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, bytes: &[u8]) -> FolderFile {
        FolderFile {
            path: path.into(),
            bytes: Some(bytes.to_vec()),
        }
    }

    #[test]
    fn a_score_has_two_decimals_and_its_parts() {
        let mut hit = SkillHitDto {
            name: "pdf".into(),
            description: String::new(),
            tier: "personal".into(),
            score: 1.23456,
            bm25: 0.5,
            vector: None,
        };
        assert_eq!(score(hit.score), "1.23");
        assert_eq!(score_parts(&hit), "BM25 0.50");
        hit.vector = Some(0.876);
        assert_eq!(score_parts(&hit), "BM25 0.50, vector 0.88");
    }

    #[test]
    fn a_folder_becomes_a_skill_named_after_it() {
        let import = read_folder(vec![
            file("pdf/SKILL.md", b"---\nname: pdf\n---\n"),
            file("pdf/scripts/fill.py", b"print(1)\n"),
            file("pdf/logo.png", &[0x89, b'P', b'N', b'G', 0xff]),
            file("pdf/nul.txt", b"a\0b"),
            FolderFile {
                path: "pdf/big.txt".into(),
                bytes: None,
            },
        ])
        .unwrap();
        assert_eq!(import.name, "pdf");
        assert_eq!(import.content, "---\nname: pdf\n---\n");
        assert_eq!(
            import.files,
            BTreeMap::from([("scripts/fill.py".to_owned(), "print(1)\n".to_owned())])
        );
        assert_eq!(
            import.skipped,
            [
                "logo.png (not text)",
                "nul.txt (not text)",
                "big.txt (over 1 MiB)"
            ]
        );
        assert_eq!(
            import.summary(),
            "Imported pdf with SKILL.md and 1 file; left out: logo.png (not text), nul.txt (not text), big.txt (over 1 MiB)"
        );
    }

    #[test]
    fn a_folder_without_its_skill_md_or_files_without_a_folder_are_refused() {
        let none = read_folder(vec![
            file("pdf/docs/SKILL.md", b"x"),
            file("pdf/a.txt", b"a"),
        ]);
        assert_eq!(
            none,
            Err("The folder pdf has no SKILL.md at its top.".into())
        );
        let flat = read_folder(vec![file("SKILL.md", b"x")]);
        assert!(flat.unwrap_err().starts_with("Choose a folder"));
        assert!(read_folder(Vec::new()).is_err());
        let binary = read_folder(vec![file("pdf/SKILL.md", &[0xff, 0xfe])]);
        assert_eq!(binary, Err("SKILL.md is not UTF-8 text.".into()));
    }

    #[test]
    fn a_yaml_value_is_plain_only_where_yaml_reads_the_same_string() {
        assert_eq!(
            yaml_str("Fill PDF forms, quickly."),
            "Fill PDF forms, quickly."
        );
        for quoted in [
            "a: b", "yes", "No", "1.5", "- item", "#x", "", "x ", "a\nb", "\"q\"",
        ] {
            assert!(yaml_str(quoted).starts_with('"'), "{quoted:?}");
        }
    }

    #[test]
    fn a_refusal_of_the_json_api_is_its_sentence() {
        assert_eq!(
            api_error(400, r#"{"error":"SKILL.md line 3: bad"}"#),
            "SKILL.md line 3: bad"
        );
        assert_eq!(
            api_error(502, "<html>"),
            "The server answered 502; try again."
        );
    }

    /// The editor's SKILL.md reads back as the skill it was written from.
    #[cfg(feature = "ssr")]
    #[test]
    fn a_skill_md_written_back_reads_as_the_same_skill() {
        use hero_backend::skills::format::parse;
        for text in [
            "---\nname: pdf\ndescription: Fill forms\n---\nUse {baseDir}/run.sh.\n",
            "---\nname: pdf\ndescription: \"Fill: forms # quickly\"\nlicense: MIT\ncompatibility: 'yes'\nmetadata:\n  author: ada\n  \"odd key\": \"1.0\"\nallowed-tools: bash read\nextra: [1, {a: \"b\"}, null]\nflag: true\nnote: \"line\\none\"\n---\n# Title\n\nbody\n",
            "---\n{\"name\": \"pdf\", \"description\": \"- starts with a dash\", \"x-y\": {\"k\": [\"v\", 2.5]}}\n---\n",
        ] {
            let md = parse(text.as_bytes(), "pdf").unwrap();
            let again = skill_md_text(&md);
            assert_eq!(parse(again.as_bytes(), "pdf").unwrap(), md, "{again}");
        }
    }

    #[cfg(feature = "ssr")]
    #[test]
    fn the_imports_bounds_are_the_backends() {
        use hero_backend::skills::files::{MAX_FILE_BYTES, MAX_FILES};
        assert_eq!(IMPORT_MAX_FILE_BYTES, MAX_FILE_BYTES);
        assert_eq!(IMPORT_MAX_FILES, MAX_FILES);
    }
}
