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

CALL ghostmem.add_vector_column('ghostmem.clusters', 'centroid', not_null => true);
