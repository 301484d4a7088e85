//! The schema (`schema.sql`, run once by an administrator) and its check. sf creates nothing:
//! it connects as a role that can only INSERT and SELECT, and before it trusts the database it
//! compares, in full, what the catalog says with what `schema.sql` makes: the table's columns,
//! its indexes, its triggers (by their definitions, enabled), the trigger function's body,
//! the role's privileges (no UPDATE, DELETE or TRUNCATE; not the table's owner; not a
//! superuser, who could switch triggers off), and the server's durability settings. Any
//! difference is `corrupt` with every difference named; nothing is created or repaired.

use postgres::Client;
use sf_contracts::EvidenceStoreError;

/// The statements that make the schema, with `:"sf_role"` for the role sf connects as
/// (psql's `-v sf_role=…`).
pub const SCHEMA_SQL: &str = include_str!("../schema.sql");

/// The table's columns: name, type, nullable, identity, identity generation.
const COLUMNS: &[(&str, &str, &str, &str, &str)] = &[
    ("seq", "bigint", "NO", "YES", "ALWAYS"),
    ("id", "text", "NO", "NO", ""),
    ("pins", "text", "NO", "NO", ""),
    ("record", "bytea", "NO", "NO", ""),
];

/// Its indexes, by name and definition.
const INDEXES: &[(&str, &str)] = &[
    (
        "sf_evidence_by_pins",
        "CREATE INDEX sf_evidence_by_pins ON public.sf_evidence USING btree (pins, seq)",
    ),
    (
        "sf_evidence_id_key",
        "CREATE UNIQUE INDEX sf_evidence_id_key ON public.sf_evidence USING btree (id)",
    ),
    (
        "sf_evidence_pkey",
        "CREATE UNIQUE INDEX sf_evidence_pkey ON public.sf_evidence USING btree (seq)",
    ),
];

/// Its triggers, by name and definition; each must be enabled (`O`).
const TRIGGERS: &[(&str, &str)] = &[
    (
        "sf_evidence_no_delete",
        "CREATE TRIGGER sf_evidence_no_delete BEFORE DELETE ON public.sf_evidence FOR EACH ROW \
         EXECUTE FUNCTION sf_evidence_write_once()",
    ),
    (
        "sf_evidence_no_truncate",
        "CREATE TRIGGER sf_evidence_no_truncate BEFORE TRUNCATE ON public.sf_evidence FOR EACH \
         STATEMENT EXECUTE FUNCTION sf_evidence_write_once()",
    ),
    (
        "sf_evidence_no_update",
        "CREATE TRIGGER sf_evidence_no_update BEFORE UPDATE ON public.sf_evidence FOR EACH ROW \
         EXECUTE FUNCTION sf_evidence_write_once()",
    ),
];

/// The trigger function's body, as the catalog holds it.
const FUNCTION_BODY: &str =
    "\nBEGIN\n    RAISE EXCEPTION 'sf evidence is write-once: % refused', TG_OP;\nEND\n";

/// Compares the database `client` is connected to with the schema; `corrupt` naming every
/// difference, `unavailable` when the catalog cannot be read.
pub fn check(client: &mut Client) -> Result<(), EvidenceStoreError> {
    let mut differences = Vec::new();
    let unreadable = |error: postgres::Error| EvidenceStoreError::Unavailable {
        reason: format!("reading the catalog: {}", describe(&error)),
    };

    let columns: Vec<(String, String, String, String, String)> = client
        .query(
            "SELECT column_name::text, data_type::text, is_nullable::text, is_identity::text, \
             coalesce(identity_generation::text, '') FROM information_schema.columns \
             WHERE table_schema = 'public' AND table_name = 'sf_evidence' \
             ORDER BY ordinal_position",
            &[],
        )
        .map_err(unreadable)?
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4)))
        .collect();
    let expected: Vec<_> = COLUMNS
        .iter()
        .map(|(a, b, c, d, e)| {
            (
                a.to_string(),
                b.to_string(),
                c.to_string(),
                d.to_string(),
                e.to_string(),
            )
        })
        .collect();
    if columns.is_empty() {
        return Err(EvidenceStoreError::Corrupt {
            id: "database".into(),
            what: "the table public.sf_evidence does not exist: an administrator runs \
                   schema.sql once (sf creates nothing)"
                .into(),
        });
    }
    if columns != expected {
        differences.push(format!("the table's columns are {columns:?}, not sf's"));
    }

    let indexes: Vec<(String, String)> = client
        .query(
            "SELECT indexname::text, indexdef FROM pg_indexes \
             WHERE schemaname = 'public' AND tablename = 'sf_evidence' ORDER BY 1",
            &[],
        )
        .map_err(unreadable)?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    compare("index", &indexes, INDEXES, &mut differences);

    let triggers: Vec<(String, String, String)> = client
        .query(
            "SELECT tgname::text, pg_get_triggerdef(t.oid), tgenabled::text FROM pg_trigger t \
             WHERE tgrelid = to_regclass('public.sf_evidence') AND NOT tgisinternal ORDER BY 1",
            &[],
        )
        .map_err(unreadable)?
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    let enabled: Vec<(String, String)> = triggers
        .iter()
        .map(|(name, definition, state)| {
            if state == "O" {
                (name.clone(), definition.clone())
            } else {
                (name.clone(), format!("{definition} (disabled: {state})"))
            }
        })
        .collect();
    compare("trigger", &enabled, TRIGGERS, &mut differences);

    let bodies: Vec<String> = client
        .query(
            "SELECT p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
             WHERE n.nspname = 'public' AND p.proname = 'sf_evidence_write_once'",
            &[],
        )
        .map_err(unreadable)?
        .iter()
        .map(|row| row.get(0))
        .collect();
    if bodies != [FUNCTION_BODY] {
        differences.push(format!(
            "the function sf_evidence_write_once is {bodies:?}, not sf's"
        ));
    }

    let row = client
        .query_one(
            "SELECT has_table_privilege('public.sf_evidence', 'INSERT'), \
                    has_table_privilege('public.sf_evidence', 'SELECT'), \
                    has_table_privilege('public.sf_evidence', 'UPDATE'), \
                    has_table_privilege('public.sf_evidence', 'DELETE'), \
                    has_table_privilege('public.sf_evidence', 'TRUNCATE'), \
                    (SELECT rolsuper FROM pg_roles WHERE rolname = current_user), \
                    (SELECT c.relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user) \
                       FROM pg_class c WHERE c.oid = to_regclass('public.sf_evidence')), \
                    current_setting('synchronous_commit'), current_setting('fsync')",
            &[],
        )
        .map_err(unreadable)?;
    let (insert, select): (Option<bool>, Option<bool>) = (row.get(0), row.get(1));
    let (update, delete, truncate): (Option<bool>, Option<bool>, Option<bool>) =
        (row.get(2), row.get(3), row.get(4));
    let superuser: Option<bool> = row.get(5);
    let owner: Option<bool> = row.get(6);
    let (synchronous, fsync): (String, String) = (row.get(7), row.get(8));
    if insert != Some(true) || select != Some(true) {
        differences.push("the role sf connects as cannot INSERT and SELECT the table".into());
    }
    for (what, granted) in [
        ("UPDATE", update),
        ("DELETE", delete),
        ("TRUNCATE", truncate),
    ] {
        if granted != Some(false) {
            differences.push(format!(
                "the role sf connects as may {what} the table (it must have INSERT and SELECT only)"
            ));
        }
    }
    if superuser != Some(false) {
        differences
            .push("the role sf connects as is a superuser, who can switch the triggers off".into());
    }
    if owner != Some(false) {
        differences.push(
            "the role sf connects as owns the table, and could alter or drop its triggers".into(),
        );
    }
    if synchronous != "on" || fsync != "on" {
        differences.push(format!(
            "the server runs with synchronous_commit = {synchronous} and fsync = {fsync}; a put \
             is durable only with both on"
        ));
    }
    if differences.is_empty() {
        Ok(())
    } else {
        Err(EvidenceStoreError::Corrupt {
            id: "database".into(),
            what: differences.join("; "),
        })
    }
}

fn compare(
    kind: &str,
    found: &[(String, String)],
    expected: &[(&str, &str)],
    differences: &mut Vec<String>,
) {
    for (name, definition) in expected {
        match found.iter().find(|(found, _)| found == name) {
            None => differences.push(format!("the {kind} {name} is missing")),
            Some((_, actual)) if actual != definition => {
                differences.push(format!("the {kind} {name} is {actual:?}, not sf's"));
            }
            Some(_) => {}
        }
    }
    for (name, _) in found {
        if expected.iter().all(|(expected, _)| expected != name) {
            differences.push(format!("the {kind} {name} is not sf's"));
        }
    }
}

/// A client error in words: the server's message when there is one (never a password: the
/// server does not echo it).
pub fn describe(error: &postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => error.to_string(),
    }
}
