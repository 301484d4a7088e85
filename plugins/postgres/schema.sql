-- sf's evidence store on PostgreSQL (sf-postgres-evidence/1). Run once by an administrator,
-- with the role sf connects as in :sf_role; sf checks every object below when it connects and
-- creates nothing itself.
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
