#!/bin/sh
# Sets up PostgreSQL for sf's evidence store and attempt fence, on a running cluster, from
# nothing: the roles, the database, schema.sql, the grants and the pg_hba.conf lines.
# docs/operations.md ("PostgreSQL from nothing") explains each step; tests/tests/
# cli_postgres_setup.rs runs this very file against a throwaway cluster.
#
#   setup.sh BINDIR PORT DATADIR
#
# BINDIR   the cluster's programs (psql): /usr/lib/postgresql/15/bin
# PORT     the port the server listens on: 5432
# DATADIR  its data directory, whose pg_hba.conf gets sf's lines: /var/lib/postgresql/15/main
#          (on Debian the file is in /etc/postgresql/15/main: set SF_HBA_FILE)
#
# The administrator's connection is psql's own environment: PGHOST (a socket directory, or
# 127.0.0.1), PGUSER (a superuser: postgres) and PGPASSWORD or ~/.pgpass when it asks for one.
# What to make (defaults in brackets):
#   SF_PASSWORD_FILE  a file holding the password of the role sf connects as (required;
#                     yours alone, mode 0600: sf reads the same file, password_file)
#   SF_DATABASE [sf]  SF_ROLE [sf_writer]  SF_OWNER [sf_owner]
#   SF_CLIENTS [127.0.0.1/32]  the addresses sf connects from, for pg_hba.conf
#   SF_HOST [127.0.0.1]  the server's address as sf reaches it, for the printed section
#   SF_HBA_FILE [DATADIR/pg_hba.conf]
#
# Run it once. It stops at the first error (a role or database that exists already is one):
# nothing it made is dropped, so read the error and finish by hand.
set -eu

if [ "$#" -ne 3 ]; then
    echo "usage: $0 BINDIR PORT DATADIR (see the comments at its top)" >&2
    exit 2
fi
bin=$1 port=$2 data=$3
database=${SF_DATABASE:-sf}
role=${SF_ROLE:-sf_writer}
owner=${SF_OWNER:-sf_owner}
clients=${SF_CLIENTS:-127.0.0.1/32}
host=${SF_HOST:-127.0.0.1}
hba=${SF_HBA_FILE:-$data/pg_hba.conf}
password_file=${SF_PASSWORD_FILE:?set SF_PASSWORD_FILE to a file holding the sf role\'s password}
schema=$(dirname "$0")/../../../plugins/postgres/schema.sql
[ -r "$schema" ] || schema=${SF_SCHEMA:?set SF_SCHEMA to plugins/postgres/schema.sql}

# psql as the administrator; what it prints goes to stderr, so that stdout is sf.toml's section.
psql() {
    "$bin/psql" -X -q -v ON_ERROR_STOP=1 -p "$port" "$@" >&2
}

# 1. Passwords are stored as SCRAM-SHA-256 verifiers (the default since PostgreSQL 14; said
#    here so that an older configuration cannot store an MD5 hash). The owner of the
#    database and of sf's tables logs in never; the role sf connects as logs in with a
#    password, read from the file by psql itself (never on a command line) and quoted by it.
export SF_PASSWORD_FILE="$password_file"
psql -d postgres -v role="$role" -v owner="$owner" <<'SQL'
ALTER SYSTEM SET password_encryption = 'scram-sha-256';
SELECT pg_reload_conf();
SET password_encryption = 'scram-sha-256';
\set password `cat "$SF_PASSWORD_FILE"`
CREATE ROLE :"owner" NOLOGIN;
CREATE ROLE :"role" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD :'password';
SQL

# 2. The database, owned by the owner: not by sf's role, which must own nothing it could
#    disable a trigger on. Only sf's role may connect.
psql -d postgres -v database="$database" -v role="$role" -v owner="$owner" <<'SQL'
CREATE DATABASE :"database" OWNER :"owner";
REVOKE ALL ON DATABASE :"database" FROM PUBLIC;
GRANT CONNECT ON DATABASE :"database" TO :"role";
SQL

# 3. schema.sql, in that database (-d), as the owner (SET ROLE): the tables, indexes,
#    triggers and functions are the owner's, and the grants schema.sql makes are the only
#    ones sf's role has: SELECT and INSERT on sf_evidence, SELECT, INSERT and UPDATE on
#    sf_fence. sf checks exactly these when it connects, and creates nothing.
psql -d "$database" -v sf_role="$role" -c "SET ROLE \"$owner\"" -f "$schema"

# 4. pg_hba.conf: sf's role reaches only its database, over TCP, from its clients, with
#    SCRAM; anything else it tries is rejected. The lines go first (the first matching line
#    decides, so a broader line further down cannot widen them); the file keeps its owner
#    and mode.
lines=""
for client in $clients; do
    lines="${lines}host    $database    $role    $client    scram-sha-256
"
done
lines="${lines}host    all    $role    all    reject
"
{ printf '# sf: its evidence store and fence (docs/operations.md)\n%s' "$lines"; cat "$hba"; } >"$hba.sf-new"
cat "$hba.sf-new" >"$hba"
rm -f "$hba.sf-new"
psql -d postgres -c 'SELECT pg_reload_conf()'

# 5. The section of sf.toml that names it (the fence comes with it).
cat <<TOML
[evidence_store]
type = "postgres"
host = "$host"
port = $port
database = "$database"
user = "$role"
password_file = "$password_file"
TOML
