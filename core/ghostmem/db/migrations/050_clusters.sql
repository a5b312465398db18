-- Topic clusters of each owner's conversations (ghostmem.enrich.recluster): one row per cluster with its centroid
-- and label, so a conversation imported after the last full pass joins the nearest cluster without re-clustering.

CREATE TABLE ghostmem.clusters (
    owner   text    NOT NULL,
    cluster integer NOT NULL,
    topic   text    NOT NULL,
    size    integer NOT NULL,
    terms   jsonb   NOT NULL DEFAULT '[]'::jsonb,  -- the label's terms with their c-TF-IDF weights
    PRIMARY KEY (owner, cluster)
);

-- The last full pass per owner: how many conversations it saw decides when the next one is due.
CREATE TABLE ghostmem.cluster_runs (
    owner           text        PRIMARY KEY,
    conversations   integer     NOT NULL,
    k               integer     NOT NULL,
    ran_at          timestamptz NOT NULL DEFAULT now()
);

DO $$
DECLARE
    d integer := current_setting('ghostmem.dims')::integer;
BEGIN
    IF d < 1 OR d > 16000 THEN
        RAISE EXCEPTION 'ghostmem.dims out of range: %', d;
    END IF;
    EXECUTE format('ALTER TABLE ghostmem.clusters ADD COLUMN centroid vector(%s) NOT NULL', d);
END
$$;
