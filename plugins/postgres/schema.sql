-- sf's evidence store and attempt fence on PostgreSQL (sf-postgres-evidence/1). Run once by
-- an administrator, with the role sf connects as in :sf_role; sf checks every object below
-- when it connects and creates nothing itself.
CREATE TABLE sf_evidence (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id text NOT NULL UNIQUE,
    pins text NOT NULL,
    record bytea NOT NULL
);
CREATE INDEX sf_evidence_by_pins ON sf_evidence (pins, seq);
CREATE FUNCTION sf_evidence_write_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'sf evidence is write-once: % refused', TG_OP;
END
$$;
CREATE TRIGGER sf_evidence_no_update BEFORE UPDATE ON sf_evidence
    FOR EACH ROW EXECUTE FUNCTION sf_evidence_write_once();
CREATE TRIGGER sf_evidence_no_delete BEFORE DELETE ON sf_evidence
    FOR EACH ROW EXECUTE FUNCTION sf_evidence_write_once();
CREATE TRIGGER sf_evidence_no_truncate BEFORE TRUNCATE ON sf_evidence
    FOR EACH STATEMENT EXECUTE FUNCTION sf_evidence_write_once();
REVOKE ALL ON sf_evidence FROM PUBLIC;
GRANT SELECT, INSERT ON sf_evidence TO :"sf_role";
-- The attempt fence (sf-postgres-fence/1): a row per Product (named by its id: the last epoch
-- handed out for it) and a row per Candidate of it (named PRODUCT@sha256:…: the epoch and
-- lease of its newest hold). One holder at a time per Candidate is a session-level advisory
-- lock held by the holder's own connection; epochs only grow (the trigger refuses anything
-- else).
CREATE TABLE sf_fence (
    product text PRIMARY KEY,
    epoch bigint NOT NULL CHECK (epoch > 0),
    holder text NOT NULL,
    session integer NOT NULL,
    acquired_at timestamptz NOT NULL,
    released_at timestamptz
);
CREATE FUNCTION sf_fence_only_grows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'UPDATE' OR NEW.product <> OLD.product OR NEW.epoch < OLD.epoch THEN
        RAISE EXCEPTION 'sf fence epochs only grow: % refused', TG_OP;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER sf_fence_only_grows BEFORE UPDATE OR DELETE ON sf_fence
    FOR EACH ROW EXECUTE FUNCTION sf_fence_only_grows();
CREATE TRIGGER sf_fence_no_truncate BEFORE TRUNCATE ON sf_fence
    FOR EACH STATEMENT EXECUTE FUNCTION sf_fence_only_grows();
REVOKE ALL ON sf_fence FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE ON sf_fence TO :"sf_role";
