//! A skill's `SKILL.md` in the Agent Skills format: frontmatter between two `---` lines,
//! YAML (or JSON, as reference 002 allows), then a Markdown body.
//!
//! ```text
//! ---
//! name: pdf-forms                  # 1–64 of a-z 0-9 -, no - at either end, no --; the folder's name
//! description: Fill PDF forms…     # 1–1,024 characters
//! license: MIT                     # optional
//! compatibility: needs poppler     # optional, ≤ 500 characters
//! metadata: {author: ada}          # optional, strings
//! allowed-tools: bash              # optional, shown, never a permission
//! ---
//! Body, with {baseDir} for where the skill's files are.
//! ```
//!
//! A byte-order mark and CRLF line ends are accepted; unknown keys are kept. What is wrong is
//! said in one line naming `SKILL.md` and, for the frontmatter, its line.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// The largest `SKILL.md` read.
pub const MAX_SKILL_MD_BYTES: usize = 256 << 10;
/// The longest name.
pub const MAX_NAME_CHARS: usize = 64;
/// The longest description.
pub const MAX_DESCRIPTION_CHARS: usize = 1_024;
/// The longest `compatibility`.
pub const MAX_COMPATIBILITY_CHARS: usize = 500;

/// A `SKILL.md` read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillMd {
    pub name: String,
    pub description: String,
    pub license: Option<String>,
    pub compatibility: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub allowed_tools: Option<String>,
    /// Keys the format does not name, as written.
    pub other: BTreeMap<String, Value>,
    /// The Markdown after the frontmatter.
    pub body: String,
}

#[derive(Deserialize)]
struct Front {
    name: Option<String>,
    description: Option<String>,
    license: Option<String>,
    compatibility: Option<String>,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
    #[serde(rename = "allowed-tools")]
    allowed_tools: Option<String>,
    #[serde(flatten)]
    other: BTreeMap<String, Value>,
}

/// Whether `name` is a skill's name: 1–64 lowercase letters, digits and hyphens, none at
/// either end, no two together.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_CHARS
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if ok {
        Ok(())
    } else {
        let shown: String = name.chars().take(80).collect();
        Err(format!(
            "the name {shown:?} is not 1 to {MAX_NAME_CHARS} lowercase letters, digits and single hyphens, with no hyphen at either end"
        ))
    }
}

/// Reads `SKILL.md`'s bytes, for the skill in the folder `folder`.
pub fn parse(bytes: &[u8], folder: &str) -> Result<SkillMd, String> {
    if bytes.len() > MAX_SKILL_MD_BYTES {
        return Err(format!(
            "SKILL.md is {} bytes, more than {} KiB",
            bytes.len(),
            MAX_SKILL_MD_BYTES >> 10
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| format!("SKILL.md is not UTF-8: {e}"))?;
    if text.contains('\0') {
        return Err("SKILL.md holds a NUL character".into());
    }
    let text = text
        .strip_prefix('\u{feff}')
        .unwrap_or(text)
        .replace("\r\n", "\n");
    let rest = text
        .strip_prefix("---\n")
        .ok_or("SKILL.md line 1: expected `---`, the start of its frontmatter")?;
    let (front, body) = match rest.find("\n---\n") {
        Some(end) => (&rest[..end], &rest[end + 5..]),
        None => match rest.strip_suffix("\n---") {
            Some(front) => (front, ""),
            None if rest.starts_with("---\n") => ("", &rest[4..]),
            None => {
                return Err("SKILL.md: its frontmatter has no closing `---` line".into());
            }
        },
    };
    let parsed: Front = if front.trim_start().starts_with('{') {
        serde_json::from_str(front).map_err(|e| {
            format!(
                "SKILL.md line {}: {}",
                e.line() + 1,
                strip_position(&e.to_string())
            )
        })?
    } else {
        yaml_serde::from_str(front).map_err(|e| {
            let line = e.location().map_or(2, |l| l.line() + 1);
            format!("SKILL.md line {line}: {}", strip_position(&e.to_string()))
        })?
    };
    let name = parsed
        .name
        .ok_or("SKILL.md: the frontmatter has no `name`")?;
    check_name(&name).map_err(|why| format!("SKILL.md: {why}"))?;
    if name != folder {
        return Err(format!(
            "SKILL.md: the name {name:?} is not its folder's name ({folder:?})"
        ));
    }
    let description = parsed
        .description
        .filter(|d| !d.trim().is_empty())
        .ok_or("SKILL.md: the frontmatter has no `description`")?;
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(format!(
            "SKILL.md: the description is longer than {MAX_DESCRIPTION_CHARS} characters"
        ));
    }
    if parsed
        .compatibility
        .as_ref()
        .is_some_and(|c| c.chars().count() > MAX_COMPATIBILITY_CHARS)
    {
        return Err(format!(
            "SKILL.md: compatibility is longer than {MAX_COMPATIBILITY_CHARS} characters"
        ));
    }
    Ok(SkillMd {
        name,
        description: description.trim().to_owned(),
        license: parsed.license,
        compatibility: parsed.compatibility,
        metadata: parsed.metadata,
        allowed_tools: parsed.allowed_tools,
        other: parsed.other,
        body: body.to_owned(),
    })
}

/// A parser's message without the position it appends (the line is said first).
fn strip_position(message: &str) -> String {
    match message.find(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "---\nname: pdf-forms\ndescription: Fill in PDF forms.\nlicense: MIT\nmetadata:\n  author: ada\nallowed-tools: bash\nx-rating: 5\n---\n# PDF forms\nUse {baseDir}/fill.py.\n";

    #[test]
    fn yaml_frontmatter_and_body() {
        let s = parse(GOOD.as_bytes(), "pdf-forms").unwrap();
        assert_eq!(s.name, "pdf-forms");
        assert_eq!(s.description, "Fill in PDF forms.");
        assert_eq!(s.license.as_deref(), Some("MIT"));
        assert_eq!(s.metadata["author"], "ada");
        assert_eq!(s.allowed_tools.as_deref(), Some("bash"));
        assert_eq!(s.other["x-rating"], 5);
        assert_eq!(s.body, "# PDF forms\nUse {baseDir}/fill.py.\n");
    }

    #[test]
    fn json_frontmatter_crlf_and_a_byte_order_mark() {
        let text = "\u{feff}---\r\n{\"name\": \"pdf-forms\", \"description\": \"Fill in PDF forms.\"}\r\n---\r\nBody\r\n";
        let s = parse(text.as_bytes(), "pdf-forms").unwrap();
        assert_eq!(s.description, "Fill in PDF forms.");
        assert_eq!(s.body, "Body\n");
        let crlf = GOOD.replace('\n', "\r\n");
        assert_eq!(
            parse(crlf.as_bytes(), "pdf-forms").unwrap(),
            parse(GOOD.as_bytes(), "pdf-forms").unwrap()
        );
    }

    #[test]
    fn what_is_wrong_is_said_with_its_line() {
        let bad = "---\nname: pdf-forms\ndescription: [unclosed\n---\nBody\n";
        let why = parse(bad.as_bytes(), "pdf-forms").unwrap_err();
        assert!(why.starts_with("SKILL.md line "), "{why}");
        let why = parse(b"no frontmatter", "x").unwrap_err();
        assert!(why.contains("line 1"), "{why}");
        let why = parse(b"---\nname: pdf\n", "pdf").unwrap_err();
        assert!(why.contains("no closing"), "{why}");
        let why = parse(b"---\nname: other\ndescription: d\n---\n", "pdf").unwrap_err();
        assert!(why.contains("not its folder's name"), "{why}");
        let why = parse(b"---\nname: pdf\n---\n", "pdf").unwrap_err();
        assert!(why.contains("no `description`"), "{why}");
        assert!(
            parse(b"---\nname: p\xff\n---\n", "p")
                .unwrap_err()
                .contains("UTF-8")
        );
        assert!(
            parse(b"---\nname: p\0\n---\n", "p")
                .unwrap_err()
                .contains("NUL")
        );
        let long = format!("---\nname: pdf\ndescription: {}\n---\n", "d".repeat(1_025));
        assert!(parse(long.as_bytes(), "pdf").unwrap_err().contains("1024"));
        let huge = format!(
            "---\nname: pdf\ndescription: d\n---\n{}",
            "x".repeat(MAX_SKILL_MD_BYTES)
        );
        assert!(
            parse(huge.as_bytes(), "pdf")
                .unwrap_err()
                .contains("256 KiB")
        );
    }

    #[test]
    fn names() {
        for good in ["pdf", "pdf-forms", "a1", &"a".repeat(64)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "-pdf",
            "pdf-",
            "pdf--forms",
            "PDF",
            "pdf_forms",
            "pdf/x",
            "..",
            &"a".repeat(65),
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
