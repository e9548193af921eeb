//! Personal skills (reference 002 §8, tier 3): a user's own, kept in the database, never on
//! disk. A skill's SKILL.md and the text files beside it are one sealed value, sealed with
//! the user's data key and bound to (user, name): no user text is in the database in
//! plaintext. Written through `PUT /api/skills/{name}` (a folder imported from the browser
//! is its text files), removed by `DELETE`.

use std::collections::BTreeMap;
use std::path::Component;

use serde::{Deserialize, Serialize};

use super::{Failed, Root, Tier, files, format};
use crate::crypto::{self, SecretKey};
use crate::store::{self, Conn};
use crate::{AppState, Error, Result, now_text};

/// The most personal skills a user may have.
pub const MAX_PER_USER: i64 = 200;
/// The most their personal skills may take in all (sealed).
pub const MAX_BYTES_PER_USER: i64 = 32 << 20;

#[derive(Serialize, Deserialize)]
struct Sealed {
    skill_md: String,
    files: BTreeMap<String, String>,
}

fn aad(user_id: i64, name: &str) -> Vec<u8> {
    format!("personal_skill|{user_id}|{name}").into_bytes()
}

/// The user's personal skills, opened; one that cannot be opened or read is listed as
/// failed with why.
pub async fn read(c: &mut Conn<'_>, dk: &SecretKey, user_id: i64) -> Result<Root> {
    let mut rows = store::skills::list(c, user_id).await?;
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out = Root::default();
    for row in rows {
        let opened = crypto::open(dk, &aad(user_id, &row.name), &row.sealed)
            .map_err(|e| format!("it cannot be opened: {e}"))
            .and_then(|bytes| {
                serde_json::from_slice::<Sealed>(&bytes)
                    .map_err(|e| format!("it cannot be read: {e}"))
            })
            .and_then(|s| super::in_memory(Tier::Personal, &row.name, &s.skill_md, s.files));
        match opened {
            Ok(skill) => out.skills.push(std::sync::Arc::new(skill)),
            Err(error) => out.failed.push(Failed {
                tier: Tier::Personal,
                name: row.name,
                error,
            }),
        }
    }
    Ok(out)
}

/// The user's personal skills as their folders hold them: `(name, SKILL.md, other files)`,
/// for an export (one that cannot be opened is left out, as [`read`] lists it failed).
pub async fn folders(
    c: &mut Conn<'_>,
    dk: &SecretKey,
    user_id: i64,
) -> Result<Vec<(String, String, BTreeMap<String, String>)>> {
    let mut out = Vec::new();
    for row in store::skills::list(c, user_id).await? {
        let Ok(bytes) = crypto::open(dk, &aad(user_id, &row.name), &row.sealed) else {
            continue;
        };
        if let Ok(s) = serde_json::from_slice::<Sealed>(&bytes) {
            out.push((row.name, s.skill_md, s.files));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// A file's path in a skill's folder, checked: relative, no `..`, at most
/// [`files::MAX_DEPTH`] levels, not `SKILL.md` itself.
fn check_path(path: &str) -> Result<(), String> {
    let p = std::path::Path::new(path);
    let ok = !path.is_empty()
        && path.len() <= 1024
        && !path.contains('\0')
        && !path.contains('\\')
        && p.components().all(|c| matches!(c, Component::Normal(_)))
        && p.components().count() <= files::MAX_DEPTH;
    if !ok {
        let shown: String = path.chars().take(80).collect();
        return Err(format!(
            "{shown:?} is not a path in a skill's folder (relative, no `..`, at most {} levels)",
            files::MAX_DEPTH
        ));
    }
    if path == "SKILL.md" {
        return Err("SKILL.md is the skill's content, not one of its files".into());
    }
    Ok(())
}

/// Checks a personal skill before anything is stored: its SKILL.md (named `name`) and its
/// files, within the bounds a skill's folder has.
pub(super) fn check(name: &str, skill_md: &str, files_in: &BTreeMap<String, String>) -> Result<()> {
    format::check_name(name).map_err(Error::Invalid)?;
    format::parse(skill_md.as_bytes(), name).map_err(Error::Invalid)?;
    if files_in.len() + 1 > files::MAX_FILES {
        return Err(Error::Invalid(format!(
            "a skill holds at most {} files",
            files::MAX_FILES
        )));
    }
    let mut total = skill_md.len() as u64;
    for (path, text) in files_in {
        check_path(path).map_err(Error::Invalid)?;
        // A file cannot also be a folder of another's path (`a` and `a/b`).
        for dir in std::path::Path::new(path).ancestors().skip(1) {
            let dir = dir.to_string_lossy();
            if dir == "SKILL.md" || files_in.contains_key(dir.as_ref()) {
                return Err(Error::Invalid(format!(
                    "{dir} is a file, so it cannot also hold {path}"
                )));
            }
        }
        if text.contains('\0') {
            return Err(Error::Invalid(format!("{path} is not text")));
        }
        if text.len() as u64 > files::MAX_FILE_BYTES {
            return Err(Error::Invalid(format!(
                "{path} is more than {} MiB",
                files::MAX_FILE_BYTES >> 20
            )));
        }
        total += text.len() as u64;
    }
    if total > files::MAX_FOLDER_BYTES {
        return Err(Error::Invalid(format!(
            "a skill holds at most {} MiB",
            files::MAX_FOLDER_BYTES >> 20
        )));
    }
    Ok(())
}

/// Stores the user's personal skill `name` (new, or replacing theirs); answers whether it is
/// new.
pub async fn put(
    st: &AppState,
    user_id: i64,
    name: &str,
    skill_md: &str,
    files_in: BTreeMap<String, String>,
) -> Result<bool> {
    check(name, skill_md, &files_in)?;
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user_id).await?;
    let plain = serde_json::to_vec(&Sealed {
        skill_md: skill_md.replace("\r\n", "\n"),
        files: files_in,
    })
    .map_err(|e| Error::Internal(format!("a skill could not be sealed: {e}")))?;
    let sealed = crypto::seal(&dk, &aad(user_id, name), &plain);
    let now = now_text();
    st.db
        .write_with(async |tx| {
            // Counted in the transaction that writes: two at once cannot both slip past.
            store::users::lock(tx, user_id).await?;
            let (count, bytes) = store::skills::usage_but(tx, user_id, name).await?;
            let new = !store::skills::exists(tx, user_id, name).await?;
            if new && count >= MAX_PER_USER {
                return Err(Error::Limit(format!(
                    "you have {MAX_PER_USER} personal skills, the most one may; delete one first"
                )));
            }
            if bytes + sealed.len() as i64 > MAX_BYTES_PER_USER {
                return Err(Error::Limit(format!(
                    "your personal skills would take more than {} MiB",
                    MAX_BYTES_PER_USER >> 20
                )));
            }
            store::skills::put(tx, user_id, name, &sealed, &now).await?;
            Ok(new)
        })
        .await
}

/// Removes the user's personal skill `name`.
pub async fn delete(st: &AppState, user_id: i64, name: &str) -> Result<()> {
    let gone = st
        .db
        .write_with(async |tx| store::skills::delete(tx, user_id, name).await)
        .await?;
    if gone {
        Ok(())
    } else {
        Err(Error::NotFound("skill"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A user holds at most 200 personal skills and 32 MiB of them; past either, a write
    /// is refused saying why and stores nothing. Replacing one of the 200 is allowed.
    #[tokio::test]
    async fn a_users_personal_skills_are_bounded() {
        let (_dir, st) = crate::test_support::state().await;
        let user = crate::test_support::signed_in(&st, "ann").await.id();
        let md = |name: &str| format!("---\nname: {name}\ndescription: d\n---\nBody");
        for i in 0..MAX_PER_USER {
            let name = format!("s{i:03}");
            assert!(
                put(&st, user, &name, &md(&name), BTreeMap::new())
                    .await
                    .unwrap()
            );
        }
        let err = put(&st, user, "one-more", &md("one-more"), BTreeMap::new())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Limit(_)), "{err}");
        assert!(
            !put(&st, user, "s000", &md("s000"), BTreeMap::new())
                .await
                .unwrap()
        );
        let mut c = st.db.conn().await.unwrap();
        assert_eq!(
            crate::store::skills::list(&mut c, user)
                .await
                .unwrap()
                .len(),
            200
        );
        drop(c);

        let other = crate::test_support::signed_in(&st, "bea").await.id();
        // Seven files of 1 MiB and SKILL.md: about 7 MiB sealed a skill.
        let files: BTreeMap<String, String> = (0..7)
            .map(|i| (format!("f{i}.txt"), "x".repeat(1 << 20)))
            .collect();
        for i in 0..4 {
            let name = format!("big{i}");
            put(&st, other, &name, &md(&name), files.clone())
                .await
                .unwrap();
        }
        let err = put(&st, other, "big4", &md("big4"), files)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("32 MiB"), "{err}");
        let mut c = st.db.conn().await.unwrap();
        assert_eq!(
            crate::store::skills::list(&mut c, other)
                .await
                .unwrap()
                .len(),
            4
        );
    }

    #[test]
    fn paths_stay_in_the_folder() {
        for good in ["fill.py", "scripts/fill.py", "a/b/c.txt"] {
            assert!(check_path(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "../x",
            "/etc/passwd",
            "a/../../x",
            "a\\b",
            "SKILL.md",
            "./x/../y",
            "a/b/c/d/e/f/g/h/i",
        ] {
            assert!(check_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_skill_is_checked_whole() {
        let md = "---\nname: pdf\ndescription: PDFs.\n---\nBody";
        let mut files = BTreeMap::new();
        assert!(check("pdf", md, &files).is_ok());
        assert!(
            check("other", md, &files).is_err(),
            "the name is its SKILL.md's"
        );
        files.insert(
            "big.txt".to_owned(),
            "x".repeat((files::MAX_FILE_BYTES + 1) as usize),
        );
        assert!(check("pdf", md, &files).is_err());
        files.clear();
        files.insert("nul.bin".to_owned(), "a\0b".to_owned());
        assert!(check("pdf", md, &files).is_err());
        files.clear();
        files.insert("a".to_owned(), "x".to_owned());
        files.insert("a/b/c".to_owned(), "y".to_owned());
        assert!(
            check("pdf", md, &files).is_err(),
            "a is a file and a folder"
        );
        files.clear();
        files.insert("SKILL.md/x".to_owned(), "y".to_owned());
        assert!(check("pdf", md, &files).is_err());
        files.clear();
        files.insert("a/b".to_owned(), "x".to_owned());
        files.insert("a/c".to_owned(), "y".to_owned());
        assert!(check("pdf", md, &files).is_ok());
    }
}
