//! Skills (reference 002 §8–13): folders of instructions in the Agent Skills format
//! ([`format`]), read by an agent when a task needs one. Tiers, highest first, the higher
//! winning a name both have ([`Tier`]): a user's workspace (`workspaces/<user>/skills`) and
//! project (`workspaces/<user>/.agents/skills`) folders, read when a user's skills are asked
//! for; the administrator's (`DATA_DIR/skills`) and Hero's own (the repository's `skills/`,
//! in the binary), read at start-up. A folder whose skill cannot be read is listed with
//! why, and is not used.
//!
//! Every read of a folder stays beneath it ([`files`]). Found with [`crate::search`]'s
//! BM25 over names and descriptions. Offered to agents by the functions `skill_search` and
//! `skill_get`, and in the prompt's `## Skills` section ([`prompt_section`]).

pub mod api;
pub mod files;
pub mod format;
pub mod grants;
pub mod personal;
pub mod vectors;
mod watch;

pub use watch::WATCHED_WORKSPACES;

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::Digest;

use crate::search::Bm25;

/// Where a skill comes from, highest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    Workspace,
    Project,
    Personal,
    Global,
    Builtin,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Workspace => "workspace",
            Tier::Project => "project",
            Tier::Personal => "personal",
            Tier::Global => "global",
            Tier::Builtin => "builtin",
        }
    }

    /// Where a skill of this tier's folder is, as `bash` sees it, if it sees it.
    fn in_sandbox(self) -> Option<&'static str> {
        match self {
            Tier::Workspace => Some("/workspace/skills"),
            Tier::Project => Some("/workspace/.agents/skills"),
            _ => None,
        }
    }
}

/// The most skills one root may hold unless the installation says otherwise
/// (`--max-skills-per-root`); past them, the first by name are read.
pub const MAX_SKILLS_PER_ROOT: usize = 1_000;
/// The most results a search gives.
pub const MAX_RESULTS: usize = 20;
/// The results a search gives unless asked for more or fewer.
pub const DEFAULT_RESULTS: usize = 5;
/// The longest query.
pub const MAX_QUERY_CHARS: usize = 1_000;
/// At most this many skills are listed in the prompt (inline mode)...
pub const INLINE_MAX_SKILLS: usize = 20;
/// ...and at most this many estimated tokens of names and descriptions (characters / 4).
pub const INLINE_MAX_TOKENS: usize = 3_500;

/// One skill, read and checked.
#[derive(Debug, Clone)]
pub struct Skill {
    pub tier: Tier,
    pub md: format::SkillMd,
    /// Where its folder is on the host: a root the user cannot change, and the folder's
    /// path beneath it (reached through no link); none for one of Hero's own or a personal
    /// one.
    pub dir: Option<(PathBuf, String)>,
    /// Its files other than SKILL.md, held in memory (a personal skill's), by path.
    pub texts: Option<Arc<std::collections::BTreeMap<String, String>>>,
    /// Its files, `SKILL.md` among them: (path in the folder, size).
    pub files: Vec<(String, u64)>,
    /// The first 16 hex digits of its `SKILL.md`'s SHA-256: it changes when the text does.
    pub version: String,
}

impl Skill {
    pub fn name(&self) -> &str {
        &self.md.name
    }

    /// Where its files are for the agent: the path `bash` sees for the workspace tiers,
    /// else `skill://<name>`, which `skill_get` reads.
    pub fn base_dir(&self) -> String {
        match self.tier.in_sandbox() {
            Some(root) => format!("{root}/{}", self.md.name),
            None => format!("skill://{}", self.md.name),
        }
    }

    /// Its body, `{baseDir}` made [`Skill::base_dir`].
    pub fn body(&self) -> String {
        self.md.body.replace("{baseDir}", &self.base_dir())
    }

    /// One of its files other than `SKILL.md`, as text.
    pub fn file(&self, path: &str) -> Result<String, String> {
        let path = path.trim_start_matches("./");
        if let Some(texts) = &self.texts {
            return texts
                .get(path)
                .cloned()
                .ok_or_else(|| format!("the skill {} has no file {path}", self.md.name));
        }
        let Some((root, folder)) = &self.dir else {
            return Err(format!("the skill {} has no file {path}", self.md.name));
        };
        let fd = files::open_root(root)
            .and_then(|r| files::open_subdir(&r, folder))
            .map_err(|e| format!("the skill's folder cannot be read: {e}"))?;
        let bytes = files::read(&fd, path, files::MAX_FILE_BYTES)?;
        if bytes.contains(&0) {
            return Err(format!("{path} is not text"));
        }
        String::from_utf8(bytes).map_err(|_| format!("{path} is not UTF-8 text"))
    }
}

/// A folder that is no skill, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    pub tier: Tier,
    /// The folder's name.
    pub name: String,
    pub error: String,
}

/// What one root of a tier holds.
#[derive(Debug, Clone, Default)]
pub struct Root {
    pub skills: Vec<Arc<Skill>>,
    pub failed: Vec<Failed>,
}

fn version_of(bytes: &[u8]) -> String {
    let digest = sha2::Sha256::digest(bytes);
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads every skill folder of `root` (none: nothing) as skills of `tier`, the first `max`
/// by name.
pub fn read_root(root: &Path, tier: Tier, max: usize) -> Root {
    read_root_at(root, None, tier, max)
}

/// Reads every skill folder of `trusted/beneath` (`trusted` itself when `beneath` is none;
/// none there: nothing) as skills of `tier`. `trusted` is a root the user cannot change;
/// `beneath` is reached through no link.
pub fn read_root_at(trusted: &Path, beneath: Option<&str>, tier: Tier, max: usize) -> Root {
    let mut out = Root::default();
    let Ok(trusted_fd) = files::open_root(trusted) else {
        return out;
    };
    let root_fd = match beneath {
        None => trusted_fd,
        Some(rel) => match files::open_subdir(&trusted_fd, rel) {
            Ok(fd) => fd,
            Err(_) => return out,
        },
    };
    let Ok(mut names) = files::folders(&root_fd) else {
        return out;
    };
    if names.len() > max {
        tracing::warn!(root = %trusted.display(), found = names.len(), "more skills than {max}; the first by name are read");
        names.truncate(max);
    }
    for name in names {
        let folder = match beneath {
            Some(rel) => format!("{rel}/{name}"),
            None => name.clone(),
        };
        match read_one(&root_fd, (trusted, folder), &name, tier) {
            Ok(skill) => out.skills.push(Arc::new(skill)),
            Err(error) => out.failed.push(Failed { tier, name, error }),
        }
    }
    out
}

/// The skill in the folder `name` of `root_fd`, which is `folder` beneath `trusted`.
fn read_one(
    root_fd: impl AsFd,
    (trusted, folder): (&Path, String),
    name: &str,
    tier: Tier,
) -> Result<Skill, String> {
    format::check_name(name)?;
    let dir = files::open_subdir(&root_fd, name)
        .map_err(|e| format!("the folder cannot be opened: {e}"))?;
    let bytes = files::read(&dir, "SKILL.md", format::MAX_SKILL_MD_BYTES as u64)?;
    let md = format::parse(&bytes, name)?;
    let listed = files::list(&dir)?;
    Ok(Skill {
        tier,
        version: version_of(&bytes),
        md,
        dir: Some((trusted.to_path_buf(), folder)),
        texts: None,
        files: listed,
    })
}

/// A folder gone bad keeps its last good version in use: each failed folder of `fresh`
/// that `old` (the same root, read before) held as a skill keeps that skill, and says so.
fn keep_last_good(fresh: &mut Root, old: &Root) {
    for f in &mut fresh.failed {
        if let Some(good) = old.skills.iter().find(|s| s.md.name == f.name) {
            fresh.skills.push(good.clone());
            f.error.push_str("; its last good version is in use");
        }
    }
    fresh.skills.sort_by(|a, b| a.md.name.cmp(&b.md.name));
}

/// A skill made from its `SKILL.md` and files held in memory (Hero's own, a personal one).
fn in_memory(
    tier: Tier,
    name: &str,
    skill_md: &str,
    texts: std::collections::BTreeMap<String, String>,
) -> Result<Skill, String> {
    let md = format::parse(skill_md.as_bytes(), name)?;
    let mut files = vec![("SKILL.md".to_owned(), skill_md.len() as u64)];
    files.extend(texts.iter().map(|(p, t)| (p.clone(), t.len() as u64)));
    files.sort();
    Ok(Skill {
        tier,
        version: version_of(skill_md.as_bytes()),
        md,
        dir: None,
        texts: Some(Arc::new(texts)),
        files,
    })
}

/// Whose skills are asked for.
#[derive(Debug, Clone, Copy)]
pub enum Seer {
    /// A user's, in the API: an administrator sees every global skill, to manage it.
    User { id: i64, admin: bool },
    /// An agent's, working for the user `user_id`: what the user and the agent are granted,
    /// at the agent's pinned versions.
    Agent { user_id: i64, agent_id: i64 },
}

/// The skills a user or agent has, the user's personal ones opened with their data key (a
/// connection of its own).
pub async fn of_user(st: &crate::AppState, seer: Seer) -> crate::Result<View> {
    let (user_id, agent_id) = match seer {
        Seer::User { id, .. } => (id, None),
        Seer::Agent { user_id, agent_id } => (user_id, Some(agent_id)),
    };
    grants::ready(st).await?;
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user_id).await?;
    let personal = personal::read(&mut st.db.conn().await?, &dk, user_id).await?;
    let mut roots = st.skills.roots_async(user_id).await;
    if !matches!(seer, Seer::User { admin: true, .. }) {
        grants::apply(st, &mut roots, user_id, agent_id);
    }
    roots.push(personal);
    Ok(View::of(roots))
}

/// Hero's own skills, in the binary: (folder, SKILL.md).
const BUILTIN: &[(&str, &str)] = &[(
    "writing-skills",
    include_str!("../../../skills/writing-skills/SKILL.md"),
)];

/// Hero's own skills.
pub fn builtin() -> Root {
    let mut out = Root::default();
    for (name, text) in BUILTIN {
        match format::parse(text.as_bytes(), name) {
            Ok(md) => out.skills.push(Arc::new(Skill {
                tier: Tier::Builtin,
                version: version_of(text.as_bytes()),
                files: vec![("SKILL.md".into(), text.len() as u64)],
                md,
                dir: None,
                texts: None,
            })),
            Err(error) => out.failed.push(Failed {
                tier: Tier::Builtin,
                name: (*name).to_owned(),
                error,
            }),
        }
    }
    out
}

/// How long the administrator's skills must be left alone after a change before they are
/// read again (002 §13: 500 ms).
pub const RELOAD_DEBOUNCE: std::time::Duration = std::time::Duration::from_millis(500);
/// The longest changes that never stop may hold a reload off.
pub const RELOAD_AT_MOST_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// The skills of every tier but the users' own: Hero's and the administrator's (read at
/// start-up, and again when the administrator's folder changes); and where the users' are.
pub struct Library {
    fixed: std::sync::RwLock<Vec<Root>>,
    global: Option<PathBuf>,
    workspaces: PathBuf,
    /// What watches `global`, kept as long as the library.
    watcher: std::sync::Mutex<Option<notify::RecommendedWatcher>>,
    /// Raised each time `global` is read again.
    generation: std::sync::atomic::AtomicU64,
    /// The most skills read from one root.
    max_per_root: usize,
    /// The users' workspace and project skills, kept while unchanged.
    users: watch::Workspaces,
}

/// Hero's skills and the administrator's under `global`, read now.
fn read_fixed(global: Option<&Path>, max: usize) -> Vec<Root> {
    let mut fixed = Vec::new();
    if let Some(g) = global {
        fixed.push(read_root(g, Tier::Global, max));
    }
    fixed.push(builtin());
    for root in &fixed {
        for f in &root.failed {
            tracing::warn!(skill = %f.name, tier = f.tier.as_str(), "skill not loaded: {}", f.error);
        }
    }
    fixed
}

impl Library {
    /// Reads Hero's skills and the administrator's under `global` (if given); the users'
    /// folders are under `workspaces`; `max_per_root` skills at most from each.
    pub fn load(global: Option<&Path>, workspaces: &Path, max_per_root: usize) -> Library {
        Library {
            max_per_root,
            users: watch::Workspaces::new(workspaces, WATCHED_WORKSPACES),
            fixed: std::sync::RwLock::new(read_fixed(global, max_per_root)),
            global: global.map(Path::to_path_buf),
            workspaces: workspaces.to_path_buf(),
            watcher: Default::default(),
            generation: Default::default(),
        }
    }

    /// How many times a user's workspace and project folders were read (not kept).
    pub fn user_reads(&self) -> u64 {
        self.users.reads.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many times the administrator's skills were read again since start-up.
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Hero's skills and the administrator's, as last read.
    pub fn fixed_skills(&self) -> Vec<Arc<Skill>> {
        self.fixed
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .flat_map(|r| r.skills.iter().cloned())
            .collect()
    }

    /// The administrator's skills, as last read.
    pub fn global(&self) -> Vec<Arc<Skill>> {
        self.fixed
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .flat_map(|r| r.skills.iter())
            .filter(|s| s.tier == Tier::Global)
            .cloned()
            .collect()
    }

    /// Reads the administrator's skills again.
    pub fn reload(&self) {
        let mut fresh = read_fixed(self.global.as_deref(), self.max_per_root);
        // The same roots in the same order: a folder gone bad keeps what it was.
        for (new, old) in fresh.iter_mut().zip(self.fixed_roots().iter()) {
            keep_last_good(new, old);
        }
        let count: usize = fresh.iter().map(|r| r.skills.len()).sum();
        *self.fixed.write().unwrap_or_else(|p| p.into_inner()) = fresh;
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        tracing::info!(skills = count, "the administrator's skills were read again");
    }

    /// Watches the administrator's folder (made if missing) and reads it again once a burst
    /// of changes has been quiet for [`RELOAD_DEBOUNCE`]. The watching thread ends with the
    /// library.
    pub fn watch(self: &Arc<Self>) -> Result<(), String> {
        use notify::Watcher;
        let Some(dir) = &self.global else {
            return Ok(());
        };
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("{} cannot be made: {e}", dir.display()))?;
        // Bounded: a change while one waits says nothing more than the one waiting.
        let (tx, rx) = std::sync::mpsc::sync_channel::<()>(64);
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                match event {
                    // Reading the folder is an event too (the reload's own): only changes
                    // count, else each read would call for the next.
                    Ok(e) if matches!(e.kind, notify::EventKind::Access(_)) => {}
                    // Events may have been lost: read it again.
                    _ => {
                        let _ = tx.try_send(());
                    }
                }
            })
            .map_err(|e| format!("{} cannot be watched: {e}", dir.display()))?;
        watcher
            .watch(dir, notify::RecursiveMode::Recursive)
            .map_err(|e| format!("{} cannot be watched: {e}", dir.display()))?;
        *self.watcher.lock().unwrap_or_else(|p| p.into_inner()) = Some(watcher);
        let library = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("hero-skills-watch".into())
            .spawn(move || {
                // Ends when the watcher, and with it the sender, goes with the library.
                while rx.recv().is_ok() {
                    let began = std::time::Instant::now();
                    while began.elapsed() < RELOAD_AT_MOST_EVERY
                        && rx.recv_timeout(RELOAD_DEBOUNCE).is_ok()
                    {}
                    let Some(library) = library.upgrade() else {
                        return;
                    };
                    library.reload();
                }
            })
            .map_err(|e| format!("the skills' watcher cannot start: {e}"))?;
        Ok(())
    }

    /// [`Library::roots`] on a thread for blocking work: the folders are read from disk.
    /// What needs no folder read (kept skills, or no workspace) is taken at once: a thread
    /// hand-off costs a turn more than the lookup.
    pub async fn roots_async(self: &Arc<Self>, user_id: i64) -> Vec<Root> {
        let ws = self.workspaces.join(user_id.to_string());
        if let Some(mut roots) = self.users.without_reading(user_id, &ws) {
            roots.extend(self.fixed_roots());
            return roots;
        }
        let library = self.clone();
        tokio::task::spawn_blocking(move || library.roots(user_id))
            .await
            .unwrap_or_default()
    }

    fn fixed_roots(&self) -> Vec<Root> {
        self.fixed
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .to_vec()
    }

    /// Every root of `user_id`'s skills but their personal ones: their workspace's and
    /// project's (as kept if their folders are unchanged, else read now), and the fixed
    /// tiers.
    pub fn roots(&self, user_id: i64) -> Vec<Root> {
        let ws = self.workspaces.join(user_id.to_string());
        let max = self.max_per_root;
        let mut roots = self.users.roots(user_id, || {
            vec![
                read_root_at(&ws, Some("skills"), Tier::Workspace, max),
                read_root_at(&ws, Some(".agents/skills"), Tier::Project, max),
            ]
        });
        roots.extend(self.fixed_roots());
        roots
    }

    /// The skills `user_id` has: their workspace's and project's, read now, their personal
    /// ones (`personal`, opened by the caller), over the fixed tiers, the grants not applied
    /// (tests and benchmarks; the server asks [`of_user`]).
    pub fn for_user(&self, user_id: i64, personal: Root) -> View {
        let mut roots = self.roots(user_id);
        roots.push(personal);
        View::of(roots)
    }
}

/// A user's skills: the one of each name from the highest tier, those it hides, and the
/// folders that are no skill.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// By name.
    pub skills: Vec<Arc<Skill>>,
    /// Each hidden skill and the tier of the one that hides it.
    pub overridden: Vec<(Arc<Skill>, Tier)>,
    pub failed: Vec<Failed>,
}

impl View {
    /// `roots` highest tier first.
    pub fn of(mut roots: Vec<Root>) -> View {
        roots.sort_by_key(|r| {
            r.skills
                .first()
                .map(|s| s.tier)
                .or(r.failed.first().map(|f| f.tier))
        });
        let mut view = View::default();
        // Each name's winner's tier: a thousand skills are a thousand lookups, not a
        // million comparisons.
        let mut winners: std::collections::HashMap<String, Tier> = Default::default();
        for root in roots {
            for s in root.skills {
                match winners.get(&s.md.name) {
                    Some(by) => view.overridden.push((s, *by)),
                    None => {
                        winners.insert(s.md.name.clone(), s.tier);
                        view.skills.push(s);
                    }
                }
            }
            view.failed.extend(root.failed);
        }
        view.skills.sort_by(|a, b| a.md.name.cmp(&b.md.name));
        view
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Skill>> {
        self.skills.iter().find(|s| s.md.name == name)
    }

    /// The skills an allow list lets an agent use: all (`None`), none (`[]`), or those
    /// named.
    pub fn allowed(&self, allow: Option<&[String]>) -> Vec<Arc<Skill>> {
        self.skills
            .iter()
            .filter(|s| allow.is_none_or(|names| names.iter().any(|n| *n == s.md.name)))
            .cloned()
            .collect()
    }
}

/// One search result: the skill, its score, and its BM25 part (over the query's best).
#[derive(Debug, Clone)]
pub struct Hit {
    pub skill: Arc<Skill>,
    pub score: f64,
    pub bm25: f64,
    /// The vector part, when the search was hybrid.
    pub vector: Option<f64>,
}

/// The skills of `among` that best fit `query` (BM25 over name and description; the score
/// is the BM25 part, over the best), `limit` at most, best first, ties by name.
pub fn search(among: &[Arc<Skill>], query: &str, limit: usize) -> Result<Vec<Hit>, String> {
    if query.chars().count() > MAX_QUERY_CHARS {
        return Err(format!("a query is at most {MAX_QUERY_CHARS} characters"));
    }
    Ok(bm25(among, query, limit.clamp(1, MAX_RESULTS))
        .into_iter()
        .map(|(i, bm25)| Hit {
            skill: among[i].clone(),
            score: crate::search::fuse(Some(bm25), None),
            bm25,
            vector: None,
        })
        .collect())
}

/// The skills of `among` sharing a word with `query` by BM25 over their names and
/// descriptions, `limit` at most, best first (ties in `among`'s order): `(index, score over
/// the best)`.
pub(crate) fn bm25(among: &[Arc<Skill>], query: &str, limit: usize) -> Vec<(usize, f64)> {
    let texts: Vec<String> = among
        .iter()
        .map(|s| format!("{} {}", s.md.name, s.md.description))
        .collect();
    let index = Bm25::new(texts.iter().map(String::as_str));
    let found = index.search(query, limit);
    let best = found.first().map_or(1.0, |(_, s)| *s);
    found.into_iter().map(|(i, s)| (i, s / best)).collect()
}

/// What tells one list of skills from another in a kept prompt: each one's name, tier and
/// version.
pub fn fingerprint(skills: &[Arc<Skill>]) -> String {
    let mut h = sha2::Sha256::new();
    for s in skills {
        h.update(s.md.name.as_bytes());
        h.update([0, s.tier as u8]);
        h.update(s.version.as_bytes());
    }
    h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether the prompt lists `skills` (inline) rather than telling the agent to search:
/// at most [`INLINE_MAX_SKILLS`] and [`INLINE_MAX_TOKENS`] estimated tokens.
pub fn inline(skills: &[Arc<Skill>]) -> bool {
    skills.len() <= INLINE_MAX_SKILLS && estimated_tokens(skills) <= INLINE_MAX_TOKENS
}

/// The names' and descriptions' characters, over 4.
pub fn estimated_tokens(skills: &[Arc<Skill>]) -> usize {
    skills
        .iter()
        .map(|s| s.md.name.chars().count() + s.md.description.chars().count())
        .sum::<usize>()
        / 4
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The prompt's `## Skills` section for the skills an agent may use; none when it has none.
pub fn prompt_section(skills: &[Arc<Skill>]) -> Option<String> {
    if skills.is_empty() {
        return None;
    }
    let mut p = String::from(
        "\n## Skills\nSkills are instructions for kinds of task, with files beside them. Before a task a skill is for, read it with @system(skill_get, {\"name\": \"…\"}) (and `file` for one of its files), then follow it.\n",
    );
    if inline(skills) {
        p.push_str("<available_skills>\n");
        for s in skills {
            p.push_str(&format!(
                "<skill><name>{}</name><description>{}</description><location>{}/SKILL.md</location></skill>\n",
                escape(&s.md.name),
                escape(&s.md.description),
                escape(&s.base_dir()),
            ));
        }
        p.push_str("</available_skills>\n");
    } else {
        p.push_str(&format!(
            "You have {} skills, too many to list: find the ones a task needs with @system(skill_search, {{\"query\": \"…\"}}), which gives the best 5.\n",
            skills.len()
        ));
    }
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(tier: Tier, name: &str, description: &str) -> Arc<Skill> {
        Arc::new(Skill {
            tier,
            md: format::SkillMd {
                name: name.into(),
                description: description.into(),
                license: None,
                compatibility: None,
                metadata: Default::default(),
                allowed_tools: None,
                other: Default::default(),
                body: "Use {baseDir}/run.sh.".into(),
            },
            dir: None,
            texts: None,
            files: Vec::new(),
            version: "0".into(),
        })
    }

    fn root(skills: Vec<Arc<Skill>>) -> Root {
        Root {
            skills,
            failed: Vec::new(),
        }
    }

    #[test]
    fn the_higher_tier_wins_a_name() {
        let view = View::of(vec![
            root(vec![skill(Tier::Builtin, "pdf", "Hero's")]),
            root(vec![skill(Tier::Workspace, "pdf", "mine")]),
            root(vec![
                skill(Tier::Global, "pdf", "the admin's"),
                skill(Tier::Global, "git", "g"),
            ]),
        ]);
        let names: Vec<(&str, Tier)> = view.skills.iter().map(|s| (s.name(), s.tier)).collect();
        assert_eq!(names, [("git", Tier::Global), ("pdf", Tier::Workspace)]);
        let hidden: Vec<(Tier, Tier)> = view
            .overridden
            .iter()
            .map(|(s, by)| (s.tier, *by))
            .collect();
        assert_eq!(
            hidden,
            [
                (Tier::Global, Tier::Workspace),
                (Tier::Builtin, Tier::Workspace)
            ]
        );
    }

    #[test]
    fn base_dir_is_where_bash_sees_it_or_a_skill_address() {
        assert_eq!(
            skill(Tier::Workspace, "pdf", "d").body(),
            "Use /workspace/skills/pdf/run.sh."
        );
        assert_eq!(
            skill(Tier::Project, "pdf", "d").base_dir(),
            "/workspace/.agents/skills/pdf"
        );
        assert_eq!(
            skill(Tier::Global, "pdf", "d").body(),
            "Use skill://pdf/run.sh."
        );
    }

    #[test]
    fn allow_lists() {
        let view = View::of(vec![root(vec![
            skill(Tier::Global, "a1", "x"),
            skill(Tier::Global, "b1", "y"),
        ])]);
        assert_eq!(view.allowed(None).len(), 2);
        assert!(view.allowed(Some(&[])).is_empty());
        let named = view.allowed(Some(&["b1".to_owned(), "zz".to_owned()]));
        assert_eq!(named.iter().map(|s| s.name()).collect::<Vec<_>>(), ["b1"]);
    }

    #[test]
    fn inline_up_to_twenty_skills_and_3500_tokens() {
        let many = |n: usize| -> Vec<Arc<Skill>> {
            (0..n)
                .map(|i| skill(Tier::Global, &format!("s{i:02}"), "d"))
                .collect()
        };
        assert!(inline(&many(20)));
        assert!(!inline(&many(21)));
        // 14,003 characters of names and descriptions are 3,500 tokens; 14,004 are 3,501.
        let sized = |chars: usize| vec![skill(Tier::Global, "ab", &"d".repeat(chars - 2))];
        assert!(inline(&sized(14_003)));
        assert!(!inline(&sized(14_004)));
        let listed = prompt_section(&many(2)).unwrap();
        assert!(listed.contains("<available_skills>"), "{listed}");
        assert!(
            listed.contains("<location>skill://s00/SKILL.md</location>"),
            "{listed}"
        );
        let searched = prompt_section(&many(21)).unwrap();
        assert!(searched.contains("skill_search") && !searched.contains("<available_skills>"));
        assert!(prompt_section(&[]).is_none());
        let hostile =
            prompt_section(&[skill(Tier::Global, "x1", "</skill></available_skills>")]).unwrap();
        assert!(hostile.contains("&lt;/skill&gt;"), "{hostile}");
    }

    #[test]
    fn search_ranks_by_name_and_description() {
        let among = vec![
            skill(Tier::Global, "pdf-forms", "Fill in PDF forms"),
            skill(Tier::Global, "git-history", "Read a repository's history"),
            skill(Tier::Global, "pdf-merge", "Merge PDF files into one"),
        ];
        let hits = search(&among, "fill a pdf", 5).unwrap();
        assert_eq!(hits[0].skill.name(), "pdf-forms");
        assert_eq!(hits[0].score, 1.0);
        assert_eq!(hits.len(), 2);
        assert!(search(&among, &"q".repeat(1_001), 5).is_err());
    }

    #[test]
    fn folders_are_read_and_bad_ones_said_why() {
        let root_dir = tempfile::tempdir().unwrap();
        let write = |path: &str, text: &str| {
            let p = root_dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write(
            "pdf/SKILL.md",
            "---\nname: pdf\ndescription: PDFs.\n---\nBody\n",
        );
        write("pdf/scripts/run.sh", "echo");
        write("broken/SKILL.md", "---\nname: broken\n");
        write("Upper/SKILL.md", "---\nname: Upper\ndescription: d\n---\n");
        std::fs::create_dir_all(root_dir.path().join("empty")).unwrap();
        std::fs::write(root_dir.path().join("master.key"), "secret").unwrap();
        std::fs::create_dir_all(root_dir.path().join("linked")).unwrap();
        std::os::unix::fs::symlink("../master.key", root_dir.path().join("linked/SKILL.md"))
            .unwrap();
        let read = read_root(root_dir.path(), Tier::Global, MAX_SKILLS_PER_ROOT);
        let first = read_root(root_dir.path(), Tier::Global, 2);
        assert_eq!(
            first
                .failed
                .iter()
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>(),
            ["Upper", "broken"],
            "the first two folders by name alone"
        );
        assert_eq!(read.skills.len(), 1);
        let pdf = &read.skills[0];
        assert_eq!(
            pdf.files,
            [
                ("SKILL.md".to_owned(), 42),
                ("scripts/run.sh".to_owned(), 4)
            ]
        );
        assert_eq!(pdf.file("scripts/run.sh").unwrap(), "echo");
        assert!(pdf.file("../master.key").is_err());
        let failed: Vec<&str> = read.failed.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(failed, ["Upper", "broken", "empty", "linked"]);
        assert!(
            read.failed[1].error.contains("no closing"),
            "{:?}",
            read.failed[1]
        );
        assert!(
            read.failed[3].error.contains("link"),
            "{:?}",
            read.failed[3]
        );
        assert!(
            read_root(&root_dir.path().join("none"), Tier::Global, 9)
                .skills
                .is_empty()
        );
    }

    /// A workspace's tier folders are reached through no link: a command cannot make
    /// another user's skills (or anything else) one of its own user's tiers.
    #[test]
    fn a_tier_reached_through_a_link_is_empty() {
        let workspaces = tempfile::tempdir().unwrap();
        let theirs = workspaces.path().join("1/skills/secret");
        std::fs::create_dir_all(&theirs).unwrap();
        std::fs::write(
            theirs.join("SKILL.md"),
            "---\nname: secret\ndescription: Not yours.\n---\nBody\n",
        )
        .unwrap();
        let mine = workspaces.path().join("2");
        std::fs::create_dir_all(&mine).unwrap();
        std::os::unix::fs::symlink("../1", mine.join(".agents")).unwrap();
        std::os::unix::fs::symlink("../1/skills", mine.join("skills")).unwrap();
        let library = Library::load(None, workspaces.path(), MAX_SKILLS_PER_ROOT);
        let view = library.for_user(2, Root::default());
        assert!(view.get("secret").is_none(), "{:?}", view.skills);
        assert!(library.for_user(1, Root::default()).get("secret").is_some());
    }

    /// A SKILL.md gone bad keeps its last good version in use, and the list says so.
    #[test]
    fn a_folder_gone_bad_keeps_its_last_good_version() {
        let global = tempfile::tempdir().unwrap();
        let workspaces = tempfile::tempdir().unwrap();
        let skill = global.path().join("pdf/SKILL.md");
        std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
        std::fs::write(&skill, "---\nname: pdf\ndescription: PDFs.\n---\nGood\n").unwrap();
        let library = Library::load(Some(global.path()), workspaces.path(), MAX_SKILLS_PER_ROOT);
        std::fs::write(&skill, "---\nname: pdf\n").unwrap();
        library.reload();
        let view = library.for_user(1, Root::default());
        assert_eq!(view.get("pdf").map(|s| s.md.body.as_str()), Some("Good\n"));
        assert!(
            view.failed[0].error.contains("last good version is in use"),
            "{:?}",
            view.failed
        );
        // Mended: the new text is used, and nothing failed.
        std::fs::write(&skill, "---\nname: pdf\ndescription: PDFs.\n---\nBetter\n").unwrap();
        library.reload();
        let view = library.for_user(1, Root::default());
        assert_eq!(
            view.get("pdf").map(|s| s.md.body.as_str()),
            Some("Better\n")
        );
        assert!(view.failed.is_empty());
    }

    /// A change is read once: the read's own opening of the files is no change (it was, and
    /// the administrator's folder was read twice a second for good).
    #[test]
    fn the_watcher_reads_a_change_once_and_then_rests() {
        let global = tempfile::tempdir().unwrap();
        let workspaces = tempfile::tempdir().unwrap();
        let library = Arc::new(Library::load(
            Some(global.path()),
            workspaces.path(),
            MAX_SKILLS_PER_ROOT,
        ));
        library.watch().unwrap();
        let skill = global.path().join("pdf/SKILL.md");
        std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
        std::fs::write(&skill, "---\nname: pdf\ndescription: PDFs.\n---\nGood\n").unwrap();
        let began = std::time::Instant::now();
        while library.generation() == 0 {
            assert!(
                began.elapsed() < std::time::Duration::from_secs(20),
                "never read"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(library.global().len(), 1);
        let after = library.generation();
        std::thread::sleep(RELOAD_DEBOUNCE * 4);
        assert_eq!(
            library.generation(),
            after,
            "read again with nothing changed"
        );
    }

    #[test]
    fn heros_own_skills_read() {
        let b = builtin();
        assert!(b.failed.is_empty(), "{:?}", b.failed);
        assert!(!b.skills.is_empty());
    }
}
