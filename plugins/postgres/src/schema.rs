//! The schema (`schema.sql`, run once by an administrator) and its check. sf creates nothing:
//! it connects as a role that can only INSERT and SELECT evidence, and before it trusts the
//! database it compares, in full, what the catalog says with what `schema.sql` makes, for both tables
//! (the evidence and the fence): each one's columns, indexes, triggers (by their
//! definitions, enabled), trigger function's body, and the role's privileges on it (the
//! evidence: INSERT and SELECT only; the fence: INSERT, SELECT and UPDATE only; never the
//! owner), that the role is not a superuser (who could switch triggers off), and the
//! server's durability settings. Any difference is `corrupt` with every difference named;
//! nothing is created or repaired.

use postgres::Client;
use sf_contracts::EvidenceStoreError;

/// The statements that make the schema, with `:"sf_role"` for the role sf connects as
/// (psql's `-v sf_role=…`).
pub const SCHEMA_SQL: &str = include_str!("../schema.sql");

/// One table sf uses, as `schema.sql` makes it.
struct Table {
    /// Its name in `public`.
    name: &'static str,
    /// Its columns: name, type, nullable, identity, identity generation.
    columns: &'static [(
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
    )],
    /// Its indexes, by name and definition.
    indexes: &'static [(&'static str, &'static str)],
    /// Its triggers, by name and definition; each must be enabled (`O`).
    triggers: &'static [(&'static str, &'static str)],
    /// The trigger function: its name and its body, as the catalog holds it.
    function: (&'static str, &'static str),
    /// What the role sf connects as must be granted, and what it must not be.
    granted: &'static [&'static str],
    refused: &'static [&'static str],
}

/// The evidence table: write-once.
const EVIDENCE: Table = Table {
    name: "sf_evidence",
    columns: &[
        ("seq", "bigint", "NO", "YES", "ALWAYS"),
        ("id", "text", "NO", "NO", ""),
        ("pins", "text", "NO", "NO", ""),
        ("record", "bytea", "NO", "NO", ""),
    ],
    indexes: &[
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
    ],
    triggers: &[
        (
            "sf_evidence_no_delete",
            "CREATE TRIGGER sf_evidence_no_delete BEFORE DELETE ON public.sf_evidence FOR EACH \
             ROW EXECUTE FUNCTION sf_evidence_write_once()",
        ),
        (
            "sf_evidence_no_truncate",
            "CREATE TRIGGER sf_evidence_no_truncate BEFORE TRUNCATE ON public.sf_evidence FOR \
             EACH STATEMENT EXECUTE FUNCTION sf_evidence_write_once()",
        ),
        (
            "sf_evidence_no_update",
            "CREATE TRIGGER sf_evidence_no_update BEFORE UPDATE ON public.sf_evidence FOR EACH \
             ROW EXECUTE FUNCTION sf_evidence_write_once()",
        ),
    ],
    function: (
        "sf_evidence_write_once",
        "\nBEGIN\n    RAISE EXCEPTION 'sf evidence is write-once: % refused', TG_OP;\nEND\n",
    ),
    granted: &["INSERT", "SELECT"],
    refused: &["UPDATE", "DELETE", "TRUNCATE"],
};

/// The fence table: one row per Product, its epoch only growing.
const FENCE: Table = Table {
    name: "sf_fence",
    columns: &[
        ("product", "text", "NO", "NO", ""),
        ("epoch", "bigint", "NO", "NO", ""),
        ("holder", "text", "NO", "NO", ""),
        ("session", "integer", "NO", "NO", ""),
        ("acquired_at", "timestamp with time zone", "NO", "NO", ""),
        ("released_at", "timestamp with time zone", "YES", "NO", ""),
    ],
    indexes: &[(
        "sf_fence_pkey",
        "CREATE UNIQUE INDEX sf_fence_pkey ON public.sf_fence USING btree (product)",
    )],
    triggers: &[
        (
            "sf_fence_no_truncate",
            "CREATE TRIGGER sf_fence_no_truncate BEFORE TRUNCATE ON public.sf_fence FOR EACH \
             STATEMENT EXECUTE FUNCTION sf_fence_only_grows()",
        ),
        (
            "sf_fence_only_grows",
            "CREATE TRIGGER sf_fence_only_grows BEFORE DELETE OR UPDATE ON public.sf_fence FOR \
             EACH ROW EXECUTE FUNCTION sf_fence_only_grows()",
        ),
    ],
    function: (
        "sf_fence_only_grows",
        "\nBEGIN\n    IF TG_OP <> 'UPDATE' OR NEW.product <> OLD.product OR NEW.epoch < OLD.epoch \
         THEN\n        RAISE EXCEPTION 'sf fence epochs only grow: % refused', TG_OP;\n    END \
         IF;\n    RETURN NEW;\nEND\n",
    ),
    granted: &["INSERT", "SELECT", "UPDATE"],
    refused: &["DELETE", "TRUNCATE"],
};

/// Compares the database `client` is connected to with the schema; `corrupt` naming every
/// difference, `unavailable` when the catalog cannot be read.
pub fn check(client: &mut Client) -> Result<(), EvidenceStoreError> {
    let mut differences = Vec::new();
    for table in [&EVIDENCE, &FENCE] {
        check_table(client, table, &mut differences)?;
    }
    let row = client
        .query_one(
            "SELECT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user), \
                    current_setting('synchronous_commit'), current_setting('fsync')",
            &[],
        )
        .map_err(unreadable)?;
    let superuser: Option<bool> = row.get(0);
    let (synchronous, fsync): (String, String) = (row.get(1), row.get(2));
    if superuser != Some(false) {
        differences
            .push("the role sf connects as is a superuser, who can switch the triggers off".into());
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

fn unreadable(error: postgres::Error) -> EvidenceStoreError {
    EvidenceStoreError::Unavailable {
        reason: format!("reading the catalog: {}", describe(&error)),
    }
}

/// Adds every difference between `table` in the catalog and in `schema.sql`.
fn check_table(
    client: &mut Client,
    table: &Table,
    differences: &mut Vec<String>,
) -> Result<(), EvidenceStoreError> {
    let name = table.name;
    let qualified = format!("public.{name}");
    let columns: Vec<(String, String, String, String, String)> = client
        .query(
            "SELECT column_name::text, data_type::text, is_nullable::text, is_identity::text, \
             coalesce(identity_generation::text, '') FROM information_schema.columns \
             WHERE table_schema = 'public' AND table_name = $1 \
             ORDER BY ordinal_position",
            &[&name],
        )
        .map_err(unreadable)?
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4)))
        .collect();
    let expected: Vec<_> = table
        .columns
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
        differences.push(format!(
            "the table {qualified} does not exist: an administrator runs schema.sql once (sf \
             creates nothing)"
        ));
        return Ok(());
    }
    if columns != expected {
        differences.push(format!("the columns of {name} are {columns:?}, not sf's"));
    }

    let indexes: Vec<(String, String)> = client
        .query(
            "SELECT indexname::text, indexdef FROM pg_indexes \
             WHERE schemaname = 'public' AND tablename = $1 ORDER BY 1",
            &[&name],
        )
        .map_err(unreadable)?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    compare("index", &indexes, table.indexes, differences);

    let triggers: Vec<(String, String, String)> = client
        .query(
            "SELECT tgname::text, pg_get_triggerdef(t.oid), tgenabled::text FROM pg_trigger t \
             WHERE tgrelid = to_regclass($1) AND NOT tgisinternal ORDER BY 1",
            &[&qualified],
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
    compare("trigger", &enabled, table.triggers, differences);

    let (function, body) = table.function;
    let bodies: Vec<String> = client
        .query(
            "SELECT p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
             WHERE n.nspname = 'public' AND p.proname = $1",
            &[&function],
        )
        .map_err(unreadable)?
        .iter()
        .map(|row| row.get(0))
        .collect();
    if bodies != [body] {
        differences.push(format!("the function {function} is {bodies:?}, not sf's"));
    }

    let owner: Option<bool> = client
        .query_one(
            "SELECT c.relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user) \
             FROM pg_class c WHERE c.oid = to_regclass($1)",
            &[&qualified],
        )
        .map_err(unreadable)?
        .get(0);
    if owner != Some(false) {
        differences.push(format!(
            "the role sf connects as owns the table {name}, and could alter or drop its triggers"
        ));
    }
    for (privilege, wanted) in table
        .granted
        .iter()
        .map(|p| (p, true))
        .chain(table.refused.iter().map(|p| (p, false)))
    {
        let granted: Option<bool> = client
            .query_one(
                "SELECT has_table_privilege($1, $2)",
                &[&qualified, privilege],
            )
            .map_err(unreadable)?
            .get(0);
        if granted != Some(wanted) {
            differences.push(format!(
                "the role sf connects as {} {privilege} {name} (it must have {} only)",
                if wanted { "cannot" } else { "may" },
                table.granted.join(" and ")
            ));
        }
    }
    Ok(())
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

/// A client error in words (moved with the connection to sf-postgres-config).
pub use sf_postgres_config::describe;
