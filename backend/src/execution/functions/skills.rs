//! `skill_search` and `skill_get` (reference 002 §9–10): an agent finds the skills that fit a
//! task, and reads one, or one of its files. Both see the skills of the user the agent
//! works for ([`crate::skills`]). Safe, allowed always.

use futures::future::BoxFuture;
use hero_shared::calls::{DangerLevel, FunctionPermissions, Permission};
use serde_json::{Value, json};

use super::{Ctx, Function, Spec};
use crate::skills::{self, Skill};

/// The skills the calling agent may use: its user's, less those the user's last message
/// (its `skill_filter`) or else the agent's allow list leaves out.
async fn allowed(cx: &Ctx<'_>) -> Result<Vec<std::sync::Arc<Skill>>, String> {
    let filter =
        crate::conversation::context::current_skill_filter(cx.st, cx.user_id, cx.session_id)
            .await
            .map_err(|e| format!("the conversation could not be read: {e}"))?;
    let allow = match (filter, cx.agent_id) {
        (Some(filter), _) => Some(filter),
        (None, Some(agent)) => crate::agents::skill_allow_list(&cx.st.db, cx.user_id, agent)
            .await
            .map_err(|e| format!("the agent's skills could not be read: {e}"))?,
        (None, None) => None,
    };
    let view = skills::of_user(
        cx.st,
        match cx.agent_id {
            Some(agent_id) => skills::Seer::Agent {
                user_id: cx.user_id,
                agent_id,
            },
            None => skills::Seer::User {
                id: cx.user_id,
                admin: false,
            },
        },
    )
    .await
    .map_err(|e| format!("your skills could not be read: {e}"))?;
    Ok(view.allowed(allow.as_deref()))
}

pub struct SkillSearch;

impl Function for SkillSearch {
    fn spec(&self) -> Spec {
        Spec {
            name: "skill_search".into(),
            description: "Finds the skills (instructions for kinds of task) that best fit what a task is about: the best 5 by default, each with its name, description, score and location. Read one with skill_get.".into(),
            plugin: None,
            default: Permission::Always,
            permissions: FunctionPermissions::allowed(DangerLevel::Safe),
            answered_by_user: false,
            schema: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "what the task is about", "minLength": 1, "maxLength": 1000},
                    "limit": {"type": "integer", "description": "how many results (default 5)", "minimum": 1, "maximum": 20}
                },
                "required": ["query"]
            }),
            examples: vec![json!({"query": "fill in a PDF form"})],
        }
    }

    fn run<'a>(
        &'a self,
        cx: &'a Ctx<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let query = args
                .get("query")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let limit = args
                .get("limit")
                .and_then(Value::as_u64)
                .map_or(skills::DEFAULT_RESULTS, |l| l as usize);
            let among = allowed(cx).await?;
            // Vectors where embeddings are on: the installation's endpoint, else the
            // agent's own if it speaks OpenAI's API.
            let at = match cx.agent_id {
                Some(agent) => crate::agents::runtime(&cx.st.db, &cx.st.keys, cx.user_id, agent)
                    .await
                    .ok()
                    .and_then(|a| cx.st.settings.embeddings.for_agent(&a.endpoint)),
                None => cx.st.settings.embeddings.shared(),
            };
            let dk = crate::accounts::users::data_key(&cx.st.db, &cx.st.keys, cx.user_id)
                .await
                .map_err(|e| format!("your skills could not be read: {e}"))?;
            let found = skills::vectors::search(
                cx.st,
                at.as_ref(),
                Some((cx.user_id, &dk)),
                &among,
                query,
                limit,
            )
            .await?;
            let note = found.note.map(|n| format!("({n})\n")).unwrap_or_default();
            if found.hits.is_empty() {
                return Ok(format!("{note}No skill fits {query:?}."));
            }
            let listed = found
                .hits
                .iter()
                .map(|h| {
                    format!(
                        "- {} (score {:.2}, {}): {} [{}/SKILL.md]",
                        h.skill.name(),
                        h.score,
                        h.skill.tier.as_str(),
                        h.skill.md.description,
                        h.skill.base_dir()
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            Ok(format!("{note}{listed}"))
        })
    }
}

pub struct SkillGet;

impl Function for SkillGet {
    fn spec(&self) -> Spec {
        Spec {
            name: "skill_get".into(),
            description: "Reads a skill: its instructions (SKILL.md's body), or with `file` one of the text files beside it.".into(),
            plugin: None,
            default: Permission::Always,
            permissions: FunctionPermissions::allowed(DangerLevel::Safe),
            answered_by_user: false,
            schema: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "the skill's name", "minLength": 1, "maxLength": 64},
                    "file": {"type": "string", "description": "a file of the skill's folder, by its path in it", "maxLength": 1024}
                },
                "required": ["name"]
            }),
            examples: vec![
                json!({"name": "writing-skills"}),
                json!({"name": "pdf-forms", "file": "scripts/fill.py"}),
            ],
        }
    }

    fn run<'a>(
        &'a self,
        cx: &'a Ctx<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let name = args.get("name").and_then(Value::as_str).unwrap_or_default();
            let among = allowed(cx).await?;
            let Some(skill) = among.iter().find(|s| s.name() == name) else {
                return Err(format!(
                    "there is no skill {name:?}; skill_search finds them"
                ));
            };
            match args.get("file").and_then(Value::as_str) {
                None | Some("" | "SKILL.md") => Ok(skill.body()),
                Some(file) => skill.file(file),
            }
        })
    }
}
