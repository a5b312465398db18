"""Enrichment without an LLM: intensity, the conversation embedding, and topic clusters.

:func:`refresh` is cheap and runs after every import batch on the conversations it touched: their embedding (the
normalised mean of their user/assistant message embeddings), their intensity, and, once clusters exist, the
cluster and topic of the nearest centroid. :func:`recluster` clusters all of an owner's conversation embeddings with
scikit-learn and labels each cluster by its distinctive words (c-TF-IDF); it runs a full pass only when the number
of conversations grew enough since the last one, and otherwise just places the conversations that have no cluster.
The definitions are documented in ``docs/enrichment.md``.
"""

from __future__ import annotations

import logging
import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from psycopg import Connection
from psycopg.types.json import Jsonb

from ghostmem import db
from ghostmem.models import unnamed_cluster_topic
from ghostmem.text import CJK_RANGES

logger = logging.getLogger(__name__)

__all__ = ["ClusterInfo", "ClusterReport", "recluster", "refresh", "terms"]

# Intensity (see docs/enrichment.md): pace × depth, each squashed to [0, 1).
GAP_CAP_SECONDS = 300.0  # a pause longer than this counts as 5 minutes of activity, not as the whole pause
PACE_SCALE = 1.0  # turns per active minute at which the pace factor reaches 1 - 1/e
DEPTH_SCALE = 8.0  # turns at which the depth factor reaches 1 - 1/e
NOMINAL_MINUTES_PER_TURN = 1.0  # when a platform gives no usable timestamps

# Clustering.
MAX_CLUSTERS = 60
REGROW_FACTOR = 1.25  # a full pass is due when conversations grew by a quarter ...
REGROW_MIN = 10  # ... plus ten since the last one
LABEL_TERMS = 3
LABEL_VOCABULARY = 50_000
LABEL_USER_MESSAGES = 12  # the first user messages of a conversation that feed its label
LABEL_MESSAGE_CHARS = 600
TITLE_WEIGHT = 3  # a title says more about the topic than any one message
SEED = 0
SILHOUETTE_TOLERANCE = 0.01  # the smallest k within this of the best silhouette wins
SELECT_SAMPLE = 1500  # vectors on which the candidate k are compared
FINAL_N_INIT = 10  # k-means restarts of the final fit (the best inertia wins; 4 merged topics in tests)
MINIBATCH_ABOVE = 5000  # conversations above which MiniBatchKMeans replaces KMeans


@dataclass(slots=True)
class ClusterInfo:
    cluster: int
    topic: str
    size: int


@dataclass(slots=True)
class ClusterReport:
    """What :func:`recluster` did."""

    full: bool  # a full pass ran; otherwise only conversations without a cluster were placed
    conversations: int  # conversations with an embedding
    k: int  # clusters now stored
    assigned: int  # conversations given a cluster by this call
    clusters: list[ClusterInfo] = field(default_factory=list)


# --- refresh -------------------------------------------------------------------------------------------------------

_EMBEDDING_SQL = """
UPDATE ghostmem.conversations c
SET embedding = (
    SELECT l2_normalize(avg(m.embedding))
    FROM ghostmem.messages m
    WHERE m.owner = c.owner AND m.tier = c.tier AND m.conv_id = c.conv_id
      AND m.role IN ('user', 'assistant') AND m.embedding IS NOT NULL
)
WHERE c.owner = %(owner)s AND c.tier = %(tier)s AND c.conv_id = ANY(%(ids)s)
"""

# A turn is a maximal run of same-role conversational messages, so split assistant messages and the tool calls
# between them count once; active minutes sum the gaps between conversational messages, each capped.
_INTENSITY_SQL = """
WITH m AS (
    SELECT conv_id, ts,
           role IS DISTINCT FROM lag(role) OVER w AS new_turn,
           extract(epoch FROM ts - lag(ts) OVER w)::float8 AS gap
    FROM ghostmem.messages
    WHERE owner = %(owner)s AND tier = %(tier)s AND conv_id = ANY(%(ids)s)
      AND role IN ('user', 'assistant') AND btrim(text) <> ''
    WINDOW w AS (PARTITION BY conv_id ORDER BY seq)
), s AS (
    SELECT conv_id,
           count(*) FILTER (WHERE new_turn)::float8 AS turns,
           count(ts) AS timed, count(*) AS n, max(ts) > min(ts) AS spans_time,
           coalesce(sum(least(greatest(gap, 0), %(cap)s)), 0) / 60.0 AS active
    FROM m GROUP BY conv_id
), t AS (
    SELECT conv_id, turns,
           CASE WHEN timed * 2 >= n AND spans_time THEN greatest(active, 1.0)
                ELSE turns * %(nominal)s END AS minutes
    FROM s
)
UPDATE ghostmem.conversations c
SET intensity = coalesce((1 - exp(-(t.turns / t.minutes) / %(pace)s)) * (1 - exp(-t.turns / %(depth)s)), 0)
FROM unnest(%(ids)s::text[]) AS ids(conv_id) LEFT JOIN t USING (conv_id)
WHERE c.owner = %(owner)s AND c.tier = %(tier)s AND c.conv_id = ids.conv_id
"""

_ASSIGN_SQL = """
UPDATE ghostmem.conversations c
SET (cluster, topic) = (
    SELECT k.cluster, k.topic FROM ghostmem.clusters k
    WHERE k.owner = c.owner ORDER BY k.centroid <=> c.embedding LIMIT 1
)
WHERE c.owner = %(owner)s AND c.embedding IS NOT NULL
  AND EXISTS (SELECT 1 FROM ghostmem.clusters k WHERE k.owner = %(owner)s)
  AND CASE WHEN %(ids)s::text[] IS NULL THEN c.cluster IS NULL
           ELSE c.tier = %(tier)s AND c.conv_id = ANY(%(ids)s) END
"""


def _assign_nearest(
    conn: Connection[Any], owner: str, tier: str | None = None, conv_ids: Sequence[str] | None = None
) -> int:
    """Give conversations the cluster and topic of their nearest stored centroid: those in ``conv_ids`` (of
    ``tier``), or, without ids, every conversation of the owner that has no cluster yet. Returns how many."""
    cur = conn.execute(
        _ASSIGN_SQL, {"owner": owner, "tier": tier, "ids": list(conv_ids) if conv_ids is not None else None}
    )
    return cur.rowcount


def refresh(conn: Connection[Any], owner: str, tier: str, conv_ids: Sequence[str]) -> None:
    """Recompute embedding, intensity, and nearest cluster of these conversations, in the caller's transaction.

    Call it after an import batch and again after their messages were embedded (``--no-embed`` then ``embed``).
    """
    if not conv_ids:
        return
    ids = list(dict.fromkeys(conv_ids))
    conn.execute(_EMBEDDING_SQL, {"owner": owner, "tier": tier, "ids": ids})
    conn.execute(
        _INTENSITY_SQL,
        {
            "owner": owner,
            "tier": tier,
            "ids": ids,
            "cap": GAP_CAP_SECONDS,
            "nominal": NOMINAL_MINUTES_PER_TURN,
            "pace": PACE_SCALE,
            "depth": DEPTH_SCALE,
        },
    )
    _assign_nearest(conn, owner, tier, ids)


# --- labels ---------------------------------------------------------------------------------------------------------

_HIRAGANA = re.compile("[\u3040-\u309f]")
_TOKEN = re.compile(
    rf"(?P<cjk>[{CJK_RANGES}]+)|(?P<word>[^\W\d_{CJK_RANGES}][\w+#.-]*[\w+#]|[^\W\d_{CJK_RANGES}])"
)
# URLs, fenced code, and redaction placeholders (ours, [REDACTED:kind], and the platforms' own, e.g. Codex's).
_NOISE = re.compile(r"https?://\S+|\[REDACTED[^\]\n]{0,80}\]|`{3}.*?`{3}", re.DOTALL | re.IGNORECASE)
# Hex ids and hashes (c002ff99, 3f2a9c1), and long tokens with digits: identifiers, not topics.
_ID_LIKE = re.compile(r"(?=.*\d)(?:[0-9a-f]{7,}|.{13,})")
# English function words plus the filler of chat requests ("please help me make ..."), which names no topic.
_STOP_TEXT = """
    a about above after again against all also am an and any are aren as at be because been before being below
    between both but by can cannot could couldn did didn do does doesn doing don down during each few for from
    further had hadn has hasn have haven having he her here hers herself him himself his how i if in into is isn it
    its itself just let ll me more most mustn my myself no nor not now of off on once only or other ought our ours
    ourselves out over own re same shan she should shouldn so some such than that the their theirs them themselves
    then there these they this those through to too under until up ve very was wasn we were weren what when where
    which while who whom why will with won would wouldn you your yours yourself yourselves
    able actually already always another anything around back best better bit could done each else etc even ever
    every example fine first get gets getting give go going good got great hello help hey hi idea instead keep know
    last like look looks lot make makes many maybe mean might much must need needs new next nothing ok okay one
    please possible pretty probably put quite rather really right say see seems show something still sure take tell
    thank thanks thing things think though try trying two us use used using want wants way well whether work works
    yes yet
    advice anyone appreciate curious currently different explain feel find hoping ideas info information
    interested lately looking question questions recently recommend recommendation recommendations share specific
    suggest suggestion suggestions tips today trouble understand various wanted wondering write
"""
_STOP_WORDS: frozenset[str] = frozenset(_STOP_TEXT.split())


def terms(text: str) -> list[str]:
    """The label vocabulary of a text: lower-cased words without stop words, and CJK character bigrams.

    CJK has no spaces, so runs of Han, kana and Hangul become overlapping bigrams; a bigram with hiragana in it is
    mostly grammar (particles, inflections) and is dropped, which keeps 会話 and 検索 out of 会話を検索する.
    """
    text = _NOISE.sub(" ", unicodedata.normalize("NFKC", text).lower())
    out: list[str] = []
    for m in _TOKEN.finditer(text):
        run = m.group("cjk")
        if run is None:
            word = m.group("word").strip(".-")
            if len(word) >= 2 and word not in _STOP_WORDS and not _ID_LIKE.fullmatch(word):
                out.append(word)
            continue
        out.extend(b for b in (run[i : i + 2] for i in range(len(run) - 1)) if not _HIRAGANA.search(b))
    return out


def _label(weights: NDArray[np.float64], vocab: NDArray[np.str_]) -> list[tuple[str, float]]:
    """The top terms of one cluster's c-TF-IDF row; a term inside an already chosen one adds nothing."""
    chosen: list[tuple[str, float]] = []
    for idx in np.argsort(-weights, kind="stable"):
        if weights[idx] <= 0 or len(chosen) == LABEL_TERMS:
            break
        term = str(vocab[idx])
        if any(term in t or t in term for t, _ in chosen):
            continue
        chosen.append((term, float(weights[idx])))
    return chosen


def _ctfidf_labels(docs: Sequence[str], labels: NDArray[np.int64], k: int) -> list[list[tuple[str, float]]]:
    """Class-based TF-IDF: a term's weight in a cluster is its frequency there × how much more frequent it is there
    than in all clusters (``tf · log(tf / tf_all)``, the IDF of c-TF-IDF measured against the whole corpus, so a
    word every cluster uses weighs nothing), × the share of the cluster's conversations that contain it (one
    conversation's pet word, however repeated, does not name its cluster). A cluster with no term more frequent
    than average (a single cluster) is named by frequency × share alone. The vocabulary is capped to bound memory.
    """
    from scipy import sparse
    from sklearn.feature_extraction.text import CountVectorizer

    vectorizer = CountVectorizer(analyzer=terms, max_features=LABEL_VOCABULARY)
    try:
        counts = vectorizer.fit_transform(docs)
    except ValueError:  # no term at all in any document
        return [[] for _ in range(k)]
    membership = sparse.csr_matrix(
        (np.ones(len(labels)), (labels, np.arange(len(labels)))), shape=(k, len(labels))
    )
    per_cluster = np.asarray((membership @ counts).todense(), dtype=np.float64)
    doc_freq = np.asarray((membership @ (counts > 0).astype(np.float64)).todense())
    share = doc_freq / np.maximum(np.asarray(membership.sum(axis=1)), 1.0)
    totals = per_cluster.sum(axis=1, keepdims=True)
    tf = np.divide(per_cluster, totals, out=np.zeros_like(per_cluster), where=totals > 0)
    tf_all = per_cluster.sum(axis=0) / max(float(per_cluster.sum()), 1.0)
    lift = np.log(np.divide(tf, tf_all, out=np.ones_like(tf), where=tf > 0))
    weights = tf * np.maximum(lift, 0.0) * share
    vocab = vectorizer.get_feature_names_out()
    return [_label(weights[c], vocab) or _label(tf[c] * share[c], vocab) for c in range(k)]


# --- clustering -----------------------------------------------------------------------------------------------------


def _candidate_ks(n: int) -> list[int]:
    """Cluster counts worth trying: around sqrt(n/2), from half to twice it, at most six of them."""
    if n < 4:
        return [1]
    k0 = max(2, round(math.sqrt(n / 2)))
    low, high = max(2, k0 // 2), min(n - 1, 2 * k0, MAX_CLUSTERS)
    if high <= low:
        return [low]
    return sorted({round(low * (high / low) ** (i / 5)) for i in range(6)})


def _fit(vectors: NDArray[np.float64], k: int, n_init: int) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    from sklearn.cluster import KMeans, MiniBatchKMeans

    if k == 1:
        return np.zeros(len(vectors), dtype=np.int64), vectors.mean(axis=0, keepdims=True)
    model: KMeans | MiniBatchKMeans
    if len(vectors) > MINIBATCH_ABOVE:
        model = MiniBatchKMeans(n_clusters=k, random_state=SEED, n_init=n_init, batch_size=2048)
    else:
        model = KMeans(n_clusters=k, random_state=SEED, n_init=n_init)
    labels = model.fit_predict(vectors).astype(np.int64)
    return labels, np.asarray(model.cluster_centers_, dtype=np.float64)


def _choose_k(vectors: NDArray[np.float64]) -> int:
    """The candidate k with the best cosine silhouette, each tried once on a sample of the vectors."""
    from sklearn.metrics import silhouette_score

    candidates = _candidate_ks(len(vectors))
    if len(vectors) > SELECT_SAMPLE:
        pick = np.random.default_rng(SEED).choice(len(vectors), SELECT_SAMPLE, replace=False)
        vectors = vectors[np.sort(pick)]
    # No more clusters than distinct vectors (the same conversation imported under many ids embeds alike): k-means
    # asked for more makes empty clusters, and scikit-learn says so on the terminal of the command that imported them.
    # A sample holds at most as many distinct vectors as the whole, so the k chosen here fits the final pass too.
    distinct = len(np.unique(vectors, axis=0))
    candidates = [k for k in candidates if k <= distinct] or [distinct]
    if len(candidates) == 1:
        return candidates[0]
    scores: dict[int, float] = {}
    for k in candidates:
        if k >= len(vectors):
            break
        labels, _ = _fit(vectors, k, n_init=1)
        if len(np.unique(labels)) >= 2:
            scores[k] = float(silhouette_score(vectors, labels, metric="cosine"))
    logger.debug("silhouette by k: %s", scores)
    if not scores:
        return candidates[0]
    # Near-ties go to fewer, broader clusters: on small sets the silhouette differs by noise.
    best = max(scores.values())
    return min(k for k, score in scores.items() if score >= best - SILHOUETTE_TOLERANCE)


def _cluster(vectors: NDArray[np.float64]) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """k-means on all vectors at the k chosen on a sample.

    BLAS and OpenMP run single-threaded here: k-means makes many small products, and on a busy machine the pools'
    spin-waiting made them ten times slower than one thread.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        return _fit(vectors, _choose_k(vectors), n_init=FINAL_N_INIT)


def recluster(conn: Connection[Any], owner: str, *, force: bool = False) -> ClusterReport:
    """Cluster the owner's conversations and label the clusters, in the caller's transaction.

    A full pass runs when ``force`` is set, when there was none yet, or when the number of conversations with an
    embedding grew by more than a quarter (plus ten) since the last; otherwise only conversations without a cluster
    are placed at their nearest centroid.
    """
    db.use_vectors(conn)  # vectors are read and written
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('ghostmem.recluster:' || %s, 0))", (owner,))
    row = conn.execute(
        "SELECT count(*) FROM ghostmem.conversations WHERE owner = %s AND embedding IS NOT NULL", (owner,)
    ).fetchone()
    n = int(row[0]) if row else 0
    last = conn.execute(
        "SELECT conversations FROM ghostmem.cluster_runs WHERE owner = %s", (owner,)
    ).fetchone()
    if not force and last is not None and n < last[0] * REGROW_FACTOR + REGROW_MIN:
        assigned = _assign_nearest(conn, owner)
        return ClusterReport(False, n, _stored_k(conn, owner), assigned, _stored_clusters(conn, owner))
    return _full_pass(conn, owner)


def _stored_k(conn: Connection[Any], owner: str) -> int:
    row = conn.execute("SELECT count(*) FROM ghostmem.clusters WHERE owner = %s", (owner,)).fetchone()
    return int(row[0]) if row else 0


def _stored_clusters(conn: Connection[Any], owner: str) -> list[ClusterInfo]:
    rows = conn.execute(
        "SELECT cluster, topic, size FROM ghostmem.clusters WHERE owner = %s ORDER BY cluster", (owner,)
    ).fetchall()
    return [ClusterInfo(int(r[0]), str(r[1]), int(r[2])) for r in rows]


_LABEL_DOCS_SQL = """
SELECT c.tier, c.conv_id, c.embedding::real[] AS embedding,
       concat_ws(' ', repeat(coalesce(c.title, '') || ' ', %(title_weight)s), u.text) AS doc
FROM ghostmem.conversations c
LEFT JOIN LATERAL (
    SELECT string_agg(left(m.text, %(chars)s), ' ' ORDER BY m.seq) AS text
    FROM (SELECT text, seq FROM ghostmem.messages m
          WHERE m.owner = c.owner AND m.tier = c.tier AND m.conv_id = c.conv_id AND m.role = 'user'
          ORDER BY m.seq LIMIT %(messages)s) m
) u ON true
WHERE c.owner = %(owner)s AND c.embedding IS NOT NULL
ORDER BY c.tier, c.conv_id
"""


def _full_pass(conn: Connection[Any], owner: str) -> ClusterReport:
    rows = conn.execute(
        _LABEL_DOCS_SQL,
        {
            "owner": owner,
            "title_weight": TITLE_WEIGHT,
            "chars": LABEL_MESSAGE_CHARS,
            "messages": LABEL_USER_MESSAGES,
        },
    ).fetchall()
    conn.execute("DELETE FROM ghostmem.clusters WHERE owner = %s", (owner,))
    conn.execute(
        "UPDATE ghostmem.conversations SET cluster = NULL, topic = NULL WHERE owner = %s AND embedding IS NULL",
        (owner,),
    )
    if not rows:
        conn.execute("DELETE FROM ghostmem.cluster_runs WHERE owner = %s", (owner,))
        return ClusterReport(True, 0, 0, 0)
    vectors = np.asarray([r[2] for r in rows], dtype=np.float64)
    raw_labels, raw_centroids = _cluster(vectors)
    # Number clusters by size (largest first), ties by first member, so the numbering is stable across runs.
    present = sorted(
        set(raw_labels.tolist()),
        key=lambda c: (-int((raw_labels == c).sum()), int(np.argmax(raw_labels == c))),
    )
    renumber = {old: new for new, old in enumerate(present)}
    labels = np.asarray([renumber[c] for c in raw_labels.tolist()], dtype=np.int64)
    k = len(present)
    centroids = raw_centroids[present]
    centroids = centroids / np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-12)
    label_terms = _ctfidf_labels([str(r[3] or "") for r in rows], labels, k)
    topics = [" · ".join(t for t, _ in lt) or unnamed_cluster_topic(c) for c, lt in enumerate(label_terms)]
    sizes = np.bincount(labels, minlength=k)
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO ghostmem.clusters (owner, cluster, topic, size, terms, centroid) "
            "VALUES (%s, %s, %s, %s, %s, %s::vector)",
            [
                (owner, c, topics[c], int(sizes[c]), Jsonb([[t, round(w, 5)] for t, w in label_terms[c]]),
                 db.vector(centroids[c]))
                for c in range(k)
            ],
        )  # fmt: skip
    conn.execute(
        """
        UPDATE ghostmem.conversations c SET cluster = u.cluster, topic = u.topic
        FROM unnest(%s::text[], %s::text[], %s::int[], %s::text[]) AS u(tier, conv_id, cluster, topic)
        WHERE c.owner = %s AND c.tier = u.tier AND c.conv_id = u.conv_id
        """,
        (
            [r[0] for r in rows],
            [r[1] for r in rows],
            labels.tolist(),
            [topics[c] for c in labels.tolist()],
            owner,
        ),
    )
    conn.execute(
        """
        INSERT INTO ghostmem.cluster_runs (owner, conversations, k) VALUES (%s, %s, %s)
        ON CONFLICT (owner) DO UPDATE SET conversations = EXCLUDED.conversations, k = EXCLUDED.k, ran_at = now()
        """,
        (owner, len(rows), k),
    )
    logger.info("reclustered %d conversations of %s into %d clusters", len(rows), owner, k)
    return ClusterReport(
        True, len(rows), k, len(rows), [ClusterInfo(c, topics[c], int(sizes[c])) for c in range(k)]
    )
