//! Arguments checked against a function's schema: the subset of JSON Schema the registry's
//! own schemas use (an object of typed properties, `required`, no other keys; strings with
//! `maxLength` and `enum`, numbers with `minimum` and `maximum`, arrays with `maxItems`
//! and `items`; and Hero's `"unit": "ms"`, read by [`read_durations`] first). Written here rather than
//! taken from a crate: the schemas are ours, and a general validator (with remote
//! references, formats and regexes) would be most of a dependency tree for a page of code.
//! A failure is one sentence for the agent, naming the function, the field and the rule.

use serde_json::Value;

/// Checks `args` against `schema`; `null` stands for no arguments (`{}`).
pub fn validate(function: &str, schema: &Value, args: &Value) -> Result<(), String> {
    let empty = serde_json::Map::new();
    let obj = match args {
        Value::Object(o) => o,
        Value::Null => &empty,
        other => {
            return Err(format!(
                "{function} takes an object of named arguments, not {}",
                kind(other)
            ));
        }
    };
    let props = schema.get("properties").and_then(Value::as_object);
    for key in obj.keys() {
        if props.is_none_or(|p| !p.contains_key(key)) {
            let known: Vec<&str> = props
                .map(|p| p.keys().map(String::as_str).collect())
                .unwrap_or_default();
            return Err(if known.is_empty() {
                format!("{function} takes no arguments, but was given `{key}`")
            } else {
                format!(
                    "{function} has no argument `{key}` (it takes: {})",
                    known.join(", ")
                )
            });
        }
    }
    for req in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if obj.get(req).is_none_or(Value::is_null) {
            let what = props
                .and_then(|p| p.get(req))
                .and_then(|p| p.get("description"))
                .and_then(Value::as_str)
                .map(|d| format!(" ({d})"))
                .unwrap_or_default();
            return Err(format!("{function} needs the argument `{req}`{what}"));
        }
    }
    for (key, value) in obj {
        let Some(rule) = props.and_then(|p| p.get(key)) else {
            continue;
        };
        check(function, key, rule, value)?;
    }
    Ok(())
}

/// Reads the arguments whose rule says `"unit": "ms"` (timeouts) into milliseconds, in
/// place: a number as it is, or text with a unit (`30s`, `2m`: the older form); a bare number
/// under 1,000 is refused with the hint to write milliseconds
/// ([`hero_shared::calls::timeout_ms`]). Run before [`validate`], which then sees numbers.
pub fn read_durations(function: &str, schema: &Value, args: &mut Value) -> Result<(), String> {
    let (Some(props), Some(obj)) = (
        schema.get("properties").and_then(Value::as_object),
        args.as_object_mut(),
    ) else {
        return Ok(());
    };
    for (key, rule) in props {
        if rule.get("unit").and_then(Value::as_str) != Some("ms") {
            continue;
        }
        if let Some(v) = obj.get_mut(key).filter(|v| !v.is_null()) {
            let ms = hero_shared::calls::timeout_ms(v)
                .map_err(|e| format!("{function}'s argument `{key}` {e}"))?;
            *v = Value::from(ms);
        }
    }
    Ok(())
}

fn check(function: &str, key: &str, rule: &Value, value: &Value) -> Result<(), String> {
    let want = rule.get("type").and_then(Value::as_str).unwrap_or("any");
    let fits = match want {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => true,
    };
    if !fits {
        return Err(format!(
            "{function}'s argument `{key}` must be {} {want}, not {}",
            if want.starts_with(['a', 'i', 'o']) {
                "an"
            } else {
                "a"
            },
            kind(value)
        ));
    }
    if let Some(s) = value.as_str() {
        if let Some(max) = rule.get("maxLength").and_then(Value::as_u64)
            && s.chars().count() as u64 > max
        {
            return Err(format!(
                "{function}'s argument `{key}` is too long (at most {max} characters)"
            ));
        }
        if s.trim().is_empty() && rule.get("minLength").and_then(Value::as_u64).unwrap_or(0) > 0 {
            return Err(format!("{function}'s argument `{key}` is empty"));
        }
        if let Some(choices) = rule.get("enum").and_then(Value::as_array)
            && !choices.iter().any(|c| c.as_str() == Some(s))
        {
            let names: Vec<&str> = choices.iter().filter_map(Value::as_str).collect();
            return Err(format!(
                "{function}'s argument `{key}` must be one of: {}",
                names.join(", ")
            ));
        }
    }
    if let Some(items) = value.as_array() {
        if let Some(max) = rule.get("maxItems").and_then(Value::as_u64)
            && items.len() as u64 > max
        {
            return Err(format!(
                "{function}'s argument `{key}` has too many items (at most {max})"
            ));
        }
        if let Some(each) = rule.get("items") {
            for (i, item) in items.iter().enumerate() {
                check(function, &format!("{key}[{i}]"), each, item)?;
            }
        }
    }
    if let Some(n) = value.as_f64() {
        if let Some(min) = rule.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            return Err(format!(
                "{function}'s argument `{key}` must be at least {min}"
            ));
        }
        if let Some(max) = rule.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            return Err(format!(
                "{function}'s argument `{key}` must be at most {max}"
            ));
        }
    }
    Ok(())
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "the words to search for", "maxLength": 10, "minLength": 1},
                "count": {"type": "integer", "minimum": 1, "maximum": 5},
                "mode": {"type": "string", "enum": ["web", "news"]},
            },
            "required": ["query"],
        })
    }

    #[test]
    fn good_arguments_pass_and_each_broken_rule_is_named() {
        let s = schema();
        assert_eq!(
            validate("websearch", &s, &json!({"query": "rust", "count": 3})),
            Ok(())
        );
        let cases = [
            (
                json!({}),
                "websearch needs the argument `query` (the words to search for)",
            ),
            (
                json!({"query": null}),
                "websearch needs the argument `query` (the words to search for)",
            ),
            (
                json!({"query": 3}),
                "websearch's argument `query` must be a string, not a number",
            ),
            (
                json!({"query": "x", "sender_id": 1}),
                "websearch has no argument `sender_id` (it takes: count, mode, query)",
            ),
            (
                json!({"query": "much too long here"}),
                "websearch's argument `query` is too long (at most 10 characters)",
            ),
            (
                json!({"query": "  "}),
                "websearch's argument `query` is empty",
            ),
            (
                json!({"query": "x", "count": 9}),
                "websearch's argument `count` must be at most 5",
            ),
            (
                json!({"query": "x", "count": 1.5}),
                "websearch's argument `count` must be an integer, not a number",
            ),
            (
                json!({"query": "x", "mode": "maps"}),
                "websearch's argument `mode` must be one of: web, news",
            ),
            (
                json!(["x"]),
                "websearch takes an object of named arguments, not an array",
            ),
        ];
        for (args, want) in cases {
            assert_eq!(
                validate("websearch", &s, &args),
                Err(want.to_owned()),
                "{args}"
            );
        }
    }

    #[test]
    fn no_arguments_is_an_empty_object() {
        let s = json!({"type": "object", "properties": {}});
        assert_eq!(validate("ping", &s, &Value::Null), Ok(()));
        assert_eq!(
            validate("ping", &s, &json!({"a": 1})),
            Err("ping takes no arguments, but was given `a`".to_owned())
        );
    }
}
