//! Copying every row of one database into another, empty one, of either backend (`hero db
//! copy`): the same rows with the same ids, in one transaction on the target, so that a copy
//! that fails leaves the target as empty as it was. What the rows hold stays sealed: nothing
//! is opened here (the command checks afterwards that every frame opens).

use super::{Db, On, Pool, Write};
use crate::{Error, Result};

/// How a column is read and written.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Int,
    Text,
    Bytes,
    /// 0/1 on SQLite, BOOLEAN on PostgreSQL.
    Bool,
}

use Kind::{Bool, Bytes, Int, Text};

/// A table, its columns (every one of them), and whether its `id` is an identity that
/// PostgreSQL must be told has moved on.
struct Table {
    name: &'static str,
    columns: &'static [(&'static str, Kind)],
    identity: bool,
}

/// Every table, parents before the tables that name them.
const TABLES: &[Table] = &[
    Table {
        name: "meta",
        columns: &[("key", Text), ("value", Bytes)],
        identity: false,
    },
    Table {
        name: "users",
        columns: &[
            ("id", Int),
            ("username", Text),
            ("password_hash", Text),
            ("is_admin", Bool),
            ("disabled", Bool),
            ("data_key", Bytes),
            ("created_at", Text),
            ("updated_at", Text),
            ("prompt_gen", Int),
            ("token_scalar_ppm", Int),
        ],
        identity: true,
    },
    Table {
        name: "auth_tokens",
        columns: &[
            ("jti", Text),
            ("user_id", Int),
            ("created_at", Text),
            ("expires_at", Int),
            ("revoked_at", Text),
        ],
        identity: false,
    },
    Table {
        name: "agents",
        columns: &[
            ("id", Int),
            ("user_id", Int),
            ("name", Text),
            ("provider", Text),
            ("model", Text),
            ("base_url", Text),
            ("api_key", Bytes),
            ("config", Bytes),
            ("created_at", Text),
            ("updated_at", Text),
            ("deleted_at", Text),
            ("kind", Text),
            ("status", Text),
            ("files_seeded", Bool),
            ("compact_messages", Int),
            ("compact_tokens", Int),
            ("price", Text),
            ("default_processes", Text),
            ("skill_allow_list", Text),
            ("context_window", Int),
        ],
        identity: true,
    },
    Table {
        name: "sessions",
        columns: &[
            ("id", Int),
            ("user_id", Int),
            ("name", Text),
            ("status", Text),
            ("parent_session_id", Int),
            ("created_at", Text),
            ("updated_at", Text),
            ("agent_id", Int),
            ("streaming", Bool),
            ("started", Bool),
        ],
        identity: true,
    },
    Table {
        name: "frames",
        columns: &[
            ("id", Text),
            ("session_id", Int),
            ("seq", Int),
            ("parent_id", Text),
            ("target_ids", Text),
            ("timestamp", Text),
            ("type", Text),
            ("author_type", Text),
            ("author_id", Int),
            ("payload", Bytes),
            ("seal", Int),
        ],
        identity: false,
    },
    Table {
        name: "usage",
        columns: &[
            ("id", Int),
            ("user_id", Int),
            ("agent_id", Int),
            ("session_id", Int),
            ("frame_id", Text),
            ("provider", Text),
            ("model", Text),
            ("input_tokens", Int),
            ("output_tokens", Int),
            ("created_at", Text),
            ("cache_read_tokens", Int),
            ("cache_write_tokens", Int),
            ("cost_micros", Int),
            ("price_source", Text),
            ("scalar_ppm", Int),
            ("key_fp", Text),
        ],
        identity: true,
    },
    Table {
        name: "spend_corrections",
        columns: &[
            ("id", Int),
            ("user_id", Int),
            ("agent_id", Int),
            ("key_fp", Text),
            ("actual_micros", Int),
            ("delta_micros", Int),
            ("created_at", Text),
        ],
        identity: true,
    },
    Table {
        name: "personal_skills",
        columns: &[
            ("id", Int),
            ("user_id", Int),
            ("name", Text),
            ("sealed", Bytes),
            ("created_at", Text),
            ("updated_at", Text),
        ],
        identity: true,
    },
    Table {
        name: "skills",
        columns: &[
            ("id", Int),
            ("name", Text),
            ("visibility", Text),
            ("version", Int),
            ("hash", Text),
            ("updated_at", Text),
        ],
        identity: true,
    },
    Table {
        name: "skill_versions",
        columns: &[
            ("skill_id", Int),
            ("version", Int),
            ("hash", Text),
            ("content", Text),
            ("created_at", Text),
        ],
        identity: false,
    },
    Table {
        name: "skill_user_grants",
        columns: &[
            ("id", Int),
            ("skill_id", Int),
            ("user_id", Int),
            ("granted_by", Int),
            ("created_at", Text),
        ],
        identity: true,
    },
    Table {
        name: "skill_agent_grants",
        columns: &[
            ("id", Int),
            ("skill_id", Int),
            ("agent_id", Int),
            ("pinned_version", Int),
            ("granted_by", Int),
            ("created_at", Text),
        ],
        identity: true,
    },
    Table {
        name: "embeddings",
        columns: &[
            ("endpoint", Text),
            ("model", Text),
            ("tag", Bytes),
            ("user_id", Int),
            ("vector", Bytes),
            ("created_at", Text),
        ],
        identity: false,
    },
    Table {
        name: "processes",
        columns: &[
            ("id", Int),
            ("user_id", Int),
            ("name", Text),
            ("sealed", Bytes),
            ("created_at", Text),
            ("updated_at", Text),
        ],
        identity: true,
    },
    Table {
        name: "spend_totals",
        columns: &[
            ("user_id", Int),
            ("scope", Text),
            ("cost_micros", Int),
            ("calls", Int),
            ("unpriced_calls", Int),
            ("input_tokens", Int),
            ("output_tokens", Int),
            ("cache_read_tokens", Int),
            ("cache_write_tokens", Int),
        ],
        identity: false,
    },
    Table {
        name: "permissions",
        columns: &[
            ("user_id", Int),
            ("function", Text),
            ("level", Text),
            ("updated_at", Text),
        ],
        identity: false,
    },
    Table {
        name: "context_files",
        columns: &[
            ("id", Int),
            ("agent_id", Int),
            ("user_id", Int),
            ("name", Text),
            ("content", Bytes),
            ("updated_at", Text),
        ],
        identity: true,
    },
    Table {
        name: "memory_files",
        columns: &[
            ("id", Int),
            ("agent_id", Int),
            ("user_id", Int),
            ("owner_id", Int),
            ("path", Text),
            ("content", Bytes),
            ("hash", Bytes),
            ("size", Int),
            ("updated_at", Text),
        ],
        identity: true,
    },
    Table {
        name: "attachments",
        columns: &[
            ("id", Text),
            ("user_id", Int),
            ("session_id", Int),
            ("kind", Text),
            ("media_type", Text),
            ("size", Int),
            ("name", Bytes),
            ("content", Bytes),
            ("text", Bytes),
            ("created_at", Text),
        ],
        identity: false,
    },
    Table {
        name: "config_versions",
        columns: &[
            ("id", Int),
            ("user_id", Int),
            ("key", Text),
            ("agent_id", Int),
            ("version", Int),
            ("sealed", Bytes),
            ("author", Text),
            ("change_id", Text),
            ("created_at", Text),
        ],
        identity: true,
    },
    Table {
        name: "config_changes",
        columns: &[
            ("id", Text),
            ("user_id", Int),
            ("session_id", Int),
            ("key", Text),
            ("agent_id", Int),
            ("base_version", Int),
            ("sealed", Bytes),
            ("status", Text),
            ("version", Int),
            ("created_at", Text),
            ("decided_at", Text),
        ],
        identity: false,
    },
    Table {
        name: "task_teams",
        columns: &[
            ("id", Int),
            ("user_id", Int),
            ("key", Text),
            ("sealed", Bytes),
            ("next_number", Int),
            ("created_at", Text),
        ],
        identity: true,
    },
    Table {
        name: "tasks",
        columns: &[
            ("id", Int),
            ("user_id", Int),
            ("team_id", Int),
            ("number", Int),
            ("status", Text),
            ("priority", Int),
            ("due", Text),
            ("sealed", Bytes),
            ("created_at", Text),
            ("updated_at", Text),
        ],
        identity: true,
    },
    Table {
        name: "task_events",
        columns: &[
            ("id", Int),
            ("task_id", Int),
            ("user_id", Int),
            ("n", Int),
            ("actor", Text),
            ("agent_id", Int),
            ("session_id", Int),
            ("sealed", Bytes),
            ("created_at", Text),
        ],
        identity: true,
    },
    Table {
        name: "mcp_servers",
        columns: &[
            ("id", Int),
            ("user_id", Int),
            ("name", Text),
            ("transport", Text),
            ("enabled", Bool),
            ("timeout_secs", Int),
            ("status", Text),
            ("config", Bytes),
            ("listing", Bytes),
            ("created_at", Text),
            ("updated_at", Text),
        ],
        identity: true,
    },
];

/// One column's value of one row.
#[derive(Clone, Debug)]
enum Value {
    Int(Option<i64>),
    Text(Option<String>),
    Bytes(Option<Vec<u8>>),
    Bool(Option<bool>),
}

/// A table's rows as copied: how many the source had, how many the target has now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    pub table: &'static str,
    pub from: i64,
    pub to: i64,
}

/// Copies every row of `from` into `to` (migrated first), which must hold none: answers
/// each table's counts on both sides, read again after the copy.
pub async fn copy(from: &Db, to: &Db) -> Result<Vec<Copied>> {
    super::migrate(to).await?;
    for t in ["users", "meta", "sessions", "frames"] {
        let n = count(to, t).await?;
        if n > 0 {
            return Err(Error::Invalid(format!(
                "the target database is not empty ({t} has {n} rows): copy into an empty one"
            )));
        }
    }
    let mut tx = to.begin().await?;
    for t in TABLES {
        for row in read(from, t).await? {
            insert(&mut tx, t, &row).await?;
        }
    }
    tx.commit().await?;
    if let Pool::Postgres(p) = to.pool() {
        // The identities go on from the highest id copied.
        for t in TABLES.iter().filter(|t| t.identity) {
            let sql = format!(
                "SELECT setval(pg_get_serial_sequence('{0}', 'id'), MAX(id)) FROM {0} HAVING MAX(id) IS NOT NULL",
                t.name
            );
            sqlx::query(&sql).fetch_optional(p).await?;
        }
    }
    let mut out = Vec::new();
    for t in TABLES {
        out.push(Copied {
            table: t.name,
            from: count(from, t.name).await?,
            to: count(to, t.name).await?,
        });
    }
    Ok(out)
}

async fn count(db: &Db, table: &str) -> Result<i64> {
    let sql = format!("SELECT COUNT(*) FROM {table}");
    Ok(on_pool!(db, |p| sqlx::query_scalar(&sql)
        .fetch_one(p)
        .await?))
}

/// Every row of `t`, in the order of its first column.
async fn read(db: &Db, t: &Table) -> Result<Vec<Vec<Value>>> {
    let columns: Vec<&str> = t.columns.iter().map(|(c, _)| *c).collect();
    let sql = format!(
        "SELECT {} FROM {} ORDER BY {}",
        columns.join(", "),
        t.name,
        columns[0]
    );
    macro_rules! decode {
        ($rows:expr) => {
            $rows
                .iter()
                .map(|r| {
                    t.columns
                        .iter()
                        .enumerate()
                        .map(|(i, (_, kind))| {
                            use sqlx::Row;
                            Ok(match kind {
                                Int => Value::Int(r.try_get(i)?),
                                Text => Value::Text(r.try_get(i)?),
                                Bytes => Value::Bytes(r.try_get(i)?),
                                Bool => Value::Bool(r.try_get(i)?),
                            })
                        })
                        .collect::<Result<Vec<_>>>()
                })
                .collect::<Result<Vec<_>>>()
        };
    }
    match db.pool() {
        Pool::Sqlite(p) => decode!(sqlx::query(&sql).fetch_all(p).await?),
        Pool::Postgres(p) => decode!(sqlx::query(&sql).fetch_all(p).await?),
    }
}

/// Inserts one row of `t`, its values in its columns' order.
async fn insert(tx: &mut Write<'_>, t: &Table, row: &[Value]) -> Result<()> {
    let columns: Vec<&str> = t.columns.iter().map(|(c, _)| *c).collect();
    let marks: Vec<String> = (1..=columns.len()).map(|i| format!("${i}")).collect();
    let sql = format!(
        "INSERT INTO {} ({}) VALUES ({})",
        t.name,
        columns.join(", "),
        marks.join(", ")
    );
    match tx.on() {
        On::Sqlite(h) => {
            use rusqlite::types::Value as V;
            let values: Vec<V> = row
                .iter()
                .map(|v| match v {
                    Value::Int(i) => i.map_or(V::Null, V::Integer),
                    Value::Text(s) => s.clone().map_or(V::Null, V::Text),
                    Value::Bytes(b) => b.clone().map_or(V::Null, V::Blob),
                    Value::Bool(b) => b.map_or(V::Null, |b| V::Integer(b.into())),
                })
                .collect();
            h.run(|c| {
                c.prepare_cached(&sql)?
                    .execute(rusqlite::params_from_iter(values.iter()))?;
                Ok(())
            })
            .await
        }
        On::Postgres(pg) => {
            let mut q = sqlx::query(&sql);
            for v in row {
                q = match v {
                    Value::Int(i) => q.bind(*i),
                    Value::Text(s) => q.bind(s.clone()),
                    Value::Bytes(b) => q.bind(b.clone()),
                    Value::Bool(b) => q.bind(*b),
                };
            }
            q.execute(pg).await?;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tables not copied: the running instances' own state (who is alive, who holds a
    /// lease, events waiting to be fanned out), which a copy's instances make afresh.
    const NOT_COPIED: &[&str] = &["fanout_spill", "instances", "leases"];

    /// The copy names every table and every column the migrations make: a column left out
    /// would be lost in a copy without a word.
    #[tokio::test]
    async fn the_copy_names_every_table_and_column() {
        use std::collections::BTreeSet;
        let dir = tempfile::tempdir().unwrap();
        let lite = Db::open(dir.path()).await.unwrap();
        super::super::migrate(&lite).await.unwrap();
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT m.name, c.name FROM sqlite_master m \
             JOIN pragma_table_info(m.name) c WHERE m.type = 'table' \
             AND m.name NOT LIKE 'sqlite_%' AND m.name <> '_sqlx_migrations'",
        )
        .fetch_all(lite.sqlite_pool().unwrap())
        .await
        .unwrap();
        let schema: BTreeSet<(String, String)> = rows
            .into_iter()
            .filter(|(t, _)| !NOT_COPIED.contains(&t.as_str()))
            .collect();
        let copied: BTreeSet<(String, String)> = TABLES
            .iter()
            .flat_map(|t| {
                t.columns
                    .iter()
                    .map(|(c, _)| (t.name.to_owned(), (*c).to_owned()))
            })
            .collect();
        let missed: Vec<_> = schema.difference(&copied).collect();
        let unknown: Vec<_> = copied.difference(&schema).collect();
        assert!(
            missed.is_empty() && unknown.is_empty(),
            "not copied: {missed:?}\nnot in the schema: {unknown:?}"
        );
    }
}
