//! Who sees the administrator's skills (reference 002 §12): a global skill is `public` (the
//! default: every user) or `internal` (the users and the agents it is granted to); an agent
//! may be pinned to one of its versions, which rises each time its SKILL.md changes. The
//! folders are on disk; their visibility, versions, last texts and grants are rows
//! ([`crate::store::skills`]), recorded as the folders are read.
//!
//! Each instance holds a [`Snapshot`] of the rows: made again when the administrator's
//! folder was read again, when a grant or visibility changes here, and every
//! [`FRESH_FOR`] (another instance's change). A turn applies the snapshot in memory
//! ([`Snapshot::apply`]): no query on its way.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use hero_shared::api::{SkillGrantDto, SkillGrantRequest, SkillGrantsDto};

use super::{Root, Skill, Tier, format};
use crate::accounts::auth::AuthUser;
use crate::store::skills::{self as rows, GlobalRow};
use crate::{AppState, Error, Result, now_text};

/// How long a snapshot is used before it is read again (another instance's grants).
pub const FRESH_FOR: Duration = Duration::from_secs(5);

/// The rows of the administrator's skills, as one instance last read them.
#[derive(Debug)]
pub struct Snapshot {
    /// The library's generation whose skills were recorded before it was read.
    generation: u64,
    /// [`Access`]'s epoch when its read began.
    epoch: u64,
    loaded: Instant,
    by_name: HashMap<String, GlobalRow>,
    users: HashSet<(i64, i64)>,
    agents: HashMap<(i64, i64), Option<i64>>,
    /// The texts agents are pinned to, by (skill, version).
    pinned: HashMap<(i64, i64), String>,
}

impl Snapshot {
    /// The row of the global skill `name`, if it was recorded.
    pub fn row(&self, name: &str) -> Option<&GlobalRow> {
        self.by_name.get(name)
    }

    /// The visibility of a skill of `tier` named `name`.
    pub fn visibility(&self, tier: Tier, name: &str) -> &str {
        match tier {
            Tier::Builtin => "public",
            Tier::Global => self.row(name).map_or("public", |r| r.visibility.as_str()),
            _ => "private",
        }
    }

    /// Whether nothing is hidden or pinned: a turn has nothing to apply.
    fn open_to_all(&self) -> bool {
        self.agents.is_empty() && self.by_name.values().all(|r| r.visibility == "public")
    }

    /// Leaves in `roots` the administrator's skills `user_id` (and the agent `agent_id`, if
    /// a turn of one) may see, each at the version the agent is pinned to.
    pub fn apply(&self, roots: &mut [Root], user_id: i64, agent_id: Option<i64>) {
        if self.open_to_all() {
            return;
        }
        for root in roots.iter_mut() {
            let tier = root
                .skills
                .first()
                .map(|s| s.tier)
                .or(root.failed.first().map(|f| f.tier));
            if tier != Some(Tier::Global) {
                continue;
            }
            root.skills = std::mem::take(&mut root.skills)
                .into_iter()
                .filter_map(|s| self.seen(s, user_id, agent_id))
                .collect();
            // A broken internal skill's folder, and its error, are not for everyone either.
            root.failed.retain(|f| {
                self.by_name.get(&f.name).is_none_or(|row| {
                    row.visibility == "public"
                        || self.users.contains(&(row.id, user_id))
                        || agent_id.is_some_and(|a| self.agents.contains_key(&(row.id, a)))
                })
            });
        }
    }

    /// `s` as the user and agent see it, if they do.
    fn seen(&self, s: Arc<Skill>, user_id: i64, agent_id: Option<i64>) -> Option<Arc<Skill>> {
        // A folder not yet recorded is public, as every new one is.
        let Some(row) = self.by_name.get(&s.md.name) else {
            return Some(s);
        };
        let grant = agent_id.and_then(|a| self.agents.get(&(row.id, a)));
        let seen = row.visibility == "public"
            || self.users.contains(&(row.id, user_id))
            || grant.is_some();
        if !seen {
            return None;
        }
        match grant {
            Some(Some(pin)) if *pin != row.version => Some(self.pinned(&s, row.id, *pin)),
            _ => Some(s),
        }
    }

    /// The skill `s` at the kept version `version` (its SKILL.md then; its files as they
    /// are). A version no longer kept, or no longer read, leaves `s` as it is.
    fn pinned(&self, s: &Arc<Skill>, skill_id: i64, version: i64) -> Arc<Skill> {
        let Some(text) = self.pinned.get(&(skill_id, version)) else {
            return s.clone();
        };
        match format::parse(text.as_bytes(), &s.md.name) {
            Ok(md) => Arc::new(Skill {
                md,
                version: super::version_of(text.as_bytes()),
                ..(**s).clone()
            }),
            Err(_) => s.clone(),
        }
    }

    /// The version a skill is shown with: a global skill's number, else its hash.
    pub fn version_of(&self, s: &Skill) -> String {
        match (s.tier, self.row(&s.md.name)) {
            (Tier::Global, Some(row)) => self
                .pinned
                .iter()
                .find(|((id, _), text)| {
                    *id == row.id && super::version_of(text.as_bytes()) == s.version
                })
                .map_or(row.version, |((_, v), _)| *v)
                .to_string(),
            _ => s.version.clone(),
        }
    }
}

/// The snapshot an instance holds.
#[derive(Default)]
pub struct Access {
    current: RwLock<Option<Arc<Snapshot>>>,
    /// Raised by each change made here: a snapshot read before it is stale, and one whose
    /// read began before it is never installed.
    epoch: AtomicU64,
    /// One refresh at a time; the others wait for it and use what it read.
    refreshing: tokio::sync::Mutex<()>,
}

impl Access {
    /// The snapshot last read, if one was.
    pub fn current(&self) -> Option<Arc<Snapshot>> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Installs `snapshot` unless a change was made since its read began (`epoch`).
    fn install(&self, snapshot: Arc<Snapshot>) -> bool {
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        if self.epoch.load(Ordering::Acquire) != snapshot.epoch {
            return false;
        }
        *current = Some(snapshot);
        true
    }

    /// A change was made here: the snapshot held is stale (still used until the next is
    /// read: an administrator's change is followed by [`ready`]).
    fn changed(&self) {
        let _current = self.current.write().unwrap_or_else(|p| p.into_inner());
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether `s` is still what the rows hold, as far as this instance knows.
    fn fresh(&self, s: &Snapshot, generation: u64) -> bool {
        s.generation == generation
            && s.epoch == self.epoch.load(Ordering::Acquire)
            && s.loaded.elapsed() < FRESH_FOR
    }
}

/// Applies the instance's snapshot to `roots`; without one (never read), hides every global
/// skill rather than show one that is internal.
pub fn apply(st: &AppState, roots: &mut [Root], user_id: i64, agent_id: Option<i64>) {
    match st.skill_access.current() {
        Some(snapshot) => snapshot.apply(roots, user_id, agent_id),
        None => {
            for root in roots.iter_mut() {
                root.skills.retain(|s| s.tier != Tier::Global);
                root.failed.retain(|f| f.tier != Tier::Global);
            }
        }
    }
}

/// The snapshot, read again if it is stale: the administrator's skills recorded first if
/// their folder was read again since. Called before anything that shows skills: never
/// inside a transaction (it may write).
pub async fn ready(st: &AppState) -> Result<Arc<Snapshot>> {
    let access = &st.skill_access;
    let generation = st.skills.generation();
    if let Some(s) = access.current()
        && access.fresh(&s, generation)
    {
        return Ok(s);
    }
    let _one = access.refreshing.lock().await;
    // Another may have read it while this one waited.
    let held = access.current();
    if let Some(s) = &held
        && access.fresh(s, generation)
    {
        return Ok(s.clone());
    }
    if held.is_none_or(|s| s.generation != generation) {
        record(st).await?;
        super::vectors::backfill(st);
    }
    loop {
        let epoch = access.epoch.load(Ordering::Acquire);
        let snapshot = Arc::new(read(st, generation, epoch).await?);
        // A change made while it was read: read again.
        if access.install(snapshot.clone()) {
            return Ok(snapshot);
        }
    }
}

/// Records each of the administrator's skills as its folder now is: its row, and its text
/// with a new version when its SKILL.md changed.
async fn record(st: &AppState) -> Result<()> {
    let known: HashMap<String, String> = st
        .db
        .read_with(async |c| rows::global_hashes(c).await)
        .await?
        .into_iter()
        .collect();
    let changed: Vec<Arc<Skill>> = st
        .skills
        .global()
        .into_iter()
        .filter(|s| known.get(&s.md.name) != Some(&s.version))
        .collect();
    if changed.is_empty() {
        return Ok(());
    }
    // The texts are read again from their folders, off the runtime's threads.
    let texts = tokio::task::spawn_blocking(move || {
        changed
            .iter()
            .filter_map(|s| {
                // Hashed as read now: the folder may have changed since it was listed.
                let text = s.file("SKILL.md").ok()?;
                Some((s.md.name.clone(), super::version_of(text.as_bytes()), text))
            })
            .collect::<Vec<_>>()
    })
    .await
    .map_err(|e| Error::Internal(format!("the skills could not be read: {e}")))?;
    let now = now_text();
    st.db
        .write_with(async |tx| {
            for (name, hash, text) in &texts {
                rows::record_global(tx, name, hash, text, &now).await?;
            }
            Ok(())
        })
        .await
}

async fn read(st: &AppState, generation: u64, epoch: u64) -> Result<Snapshot> {
    st.db
        .read_with(async |c| {
            let by_name = rows::globals(c)
                .await?
                .into_iter()
                .map(|r| (r.name.clone(), r))
                .collect();
            let users = rows::user_grants(c).await?.into_iter().collect();
            let agents = rows::agent_grants(c)
                .await?
                .into_iter()
                .map(|(s, a, pin)| ((s, a), pin))
                .collect();
            let pinned = rows::pinned_texts(c)
                .await?
                .into_iter()
                .map(|(s, v, text)| ((s, v), text))
                .collect();
            Ok(Snapshot {
                generation,
                epoch,
                loaded: Instant::now(),
                by_name,
                users,
                agents,
                pinned,
            })
        })
        .await
}

/// The global skill `name`'s row, for an administrator (else 403); 404 when there is no
/// such skill in the administrator's folder.
async fn admin_row(st: &AppState, user: &AuthUser, name: &str) -> Result<GlobalRow> {
    if !user.is_admin() {
        return Err(Error::Forbidden(
            "only an administrator sets a skill's visibility and grants",
        ));
    }
    if !st.skills.global().iter().any(|s| s.md.name == name) {
        return Err(Error::NotFound("skill"));
    }
    ready(st).await?;
    st.db
        .read_with(async |c| rows::global(c, name).await)
        .await?
        .ok_or(Error::NotFound("skill"))
}

/// `GET /api/skills/{name}/grants`.
pub async fn list(st: &AppState, user: &AuthUser, name: &str) -> Result<SkillGrantsDto> {
    let row = admin_row(st, user, name).await?;
    let (versions, grants) = st
        .db
        .read_with(async |c| {
            Ok((
                rows::versions(c, row.id).await?,
                rows::grants_of(c, row.id).await?,
            ))
        })
        .await?;
    Ok(SkillGrantsDto {
        visibility: row.visibility,
        version: row.version,
        versions,
        grants: grants.into_iter().map(grant_dto).collect(),
    })
}

fn grant_dto(g: rows::GrantRow) -> SkillGrantDto {
    SkillGrantDto {
        id: format!("{}-{}", g.kind, g.id),
        user: g.username,
        agent_id: g.agent_id,
        pinned_version: g.pinned_version,
        granted_by: g.granted_by,
        created_at: g.created_at,
    }
}

/// `PUT /api/skills/{name}/visibility`.
pub async fn set_visibility(
    st: &AppState,
    user: &AuthUser,
    name: &str,
    visibility: &str,
) -> Result<SkillGrantsDto> {
    if !matches!(visibility, "public" | "internal") {
        return Err(Error::Invalid(format!(
            "a skill's visibility is public or internal, not {visibility:?}"
        )));
    }
    let row = admin_row(st, user, name).await?;
    st.db
        .write_with(async |tx| rows::set_visibility(tx, row.id, visibility).await)
        .await?;
    st.skill_access.changed();
    ready(st).await?;
    list(st, user, name).await
}

/// `POST /api/skills/{name}/grants`: answers the grant and whether it is new.
pub async fn grant(
    st: &AppState,
    user: &AuthUser,
    name: &str,
    req: &SkillGrantRequest,
) -> Result<(bool, SkillGrantDto)> {
    let row = admin_row(st, user, name).await?;
    let now = now_text();
    // The user as stored (a name is found whatever its case).
    let mut granted_to = None;
    let (kind, new) = match (&req.user, req.agent_id) {
        (Some(username), None) => {
            if req.pinned_version.is_some() {
                return Err(Error::Invalid(
                    "a version is pinned for an agent, not a user".into(),
                ));
            }
            let found = crate::store::users::find_by_name(&st.db, username)
                .await?
                .ok_or_else(|| Error::Invalid(format!("there is no user {username:?}")))?;
            let to = found.id;
            granted_to = Some(found.username);
            let new = st
                .db
                .write_with(async |tx| rows::grant_user(tx, row.id, to, user.id(), &now).await)
                .await?;
            ("user", new)
        }
        (None, Some(agent_id)) => {
            let kept = st
                .db
                .read_with(async |c| rows::versions(c, row.id).await)
                .await?;
            if let Some(pin) = req.pinned_version
                && !kept.contains(&pin)
            {
                return Err(Error::Invalid(format!(
                    "version {pin} of {name} is not kept; the kept versions are {kept:?}"
                )));
            }
            if !crate::store::agents::exists(&st.db, agent_id).await? {
                return Err(Error::Invalid(format!("there is no agent {agent_id}")));
            }
            let new = st
                .db
                .write_with(async |tx| {
                    rows::grant_agent(tx, row.id, agent_id, req.pinned_version, user.id(), &now)
                        .await
                })
                .await?;
            ("agent", new)
        }
        _ => {
            return Err(Error::Invalid(
                "a grant is to a user (`user`) or to an agent (`agent_id`), one of them".into(),
            ));
        }
    };
    st.skill_access.changed();
    ready(st).await?;
    let listed = list(st, user, name).await?;
    let made = listed
        .grants
        .into_iter()
        .filter(|g| g.id.starts_with(kind))
        .find(|g| match kind {
            "user" => g.user == granted_to,
            _ => g.agent_id == req.agent_id,
        })
        .ok_or_else(|| Error::Internal("a grant was made and then not found".into()))?;
    Ok((new, made))
}

/// `DELETE /api/skills/{name}/grants/{grant_id}`.
pub async fn revoke(st: &AppState, user: &AuthUser, name: &str, grant_id: &str) -> Result<()> {
    let row = admin_row(st, user, name).await?;
    let (kind, id) = grant_id
        .split_once('-')
        .and_then(|(k, n)| Some((k, n.parse::<i64>().ok()?)))
        .ok_or(Error::NotFound("grant"))?;
    let gone = st
        .db
        .write_with(async |tx| rows::revoke(tx, kind, id, row.id).await)
        .await?;
    if !gone {
        return Err(Error::NotFound("grant"));
    }
    st.skill_access.changed();
    ready(st).await?;
    Ok(())
}
