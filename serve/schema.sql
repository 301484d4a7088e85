-- sf serve's queue in PostgreSQL (with `[evidence_store] type = "postgres"`). Run once by an
-- administrator in sf's database, as the role that owns sf's tables, with the role sf
-- connects as in :sf_role:
--   psql -d sf -v sf_role=sf_writer -c 'SET ROLE sf_owner' -f serve/schema.sql
-- sf creates nothing: when it connects it checks that both tables have these columns and
-- that the role may SELECT, INSERT and UPDATE them. No DELETE: nothing the queue stores is
-- lost (a proposal that ends keeps its row, as in SQLite).

-- One row per proposal; it mirrors the sealing the proposal stands on.
CREATE TABLE sf_serve_proposals (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id text NOT NULL UNIQUE,
    repository text NOT NULL,
    slice text NOT NULL,
    kind text NOT NULL,
    body bytea NOT NULL,
    client text NOT NULL,
    state text NOT NULL,
    frozen_slice text,
    candidate text,
    verdict text,
    commit_id text,
    reasons text NOT NULL DEFAULT '[]',
    error text,
    queued_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    generation bigint NOT NULL DEFAULT 1,
    base text,
    attempt bigint,
    trial text
);
-- A repository's open proposals in order (the worker), and a client's open ones (its limit).
CREATE INDEX sf_serve_proposals_open ON sf_serve_proposals (repository, state, seq);
CREATE INDEX sf_serve_proposals_client ON sf_serve_proposals (client, state);

-- One row per sealing of a proposal on a base, numbered per proposal (its landing's action
-- occurrence, never reused).
CREATE TABLE sf_serve_sealings (
    proposal text NOT NULL,
    number bigint NOT NULL,
    base text NOT NULL,
    frozen_slice text,
    candidate text,
    commit_id text,
    attempt bigint,
    trial text,
    refusal text,
    PRIMARY KEY (proposal, number),
    UNIQUE (proposal, base)
);

REVOKE ALL ON sf_serve_proposals, sf_serve_sealings FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE ON sf_serve_proposals, sf_serve_sealings TO :"sf_role";
