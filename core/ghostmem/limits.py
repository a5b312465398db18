"""How much text ghostmem keeps, reads back and shows: every cut of a text, each under its own name.

A message is cut at four points, for four reasons:

* **stored** (``STORED_*``): the write path (:mod:`ghostmem.store`, the importers, live capture) keeps at most this
  much, and embeds at most ``EMBEDDED_CHARS`` of it.
* **read** (``READ_*``): the statements of :mod:`ghostmem.search` fetch at most this much of each message (and
  say ``truncated`` when there was more), so one huge message never travels whole for an excerpt. These bound the
  ``text`` of the structured results (``MessageView``) that code reads.
* **shown** (``SHOWN_*``): :mod:`ghostmem.render` cuts each text of the answer a model reads, and marks every cut
  (an ellipsis in a one-line excerpt; in a thread, how many characters were shown of how many).
* **answer** (:data:`ANSWER_CHARS`): the whole rendered answer, so one tool call never floods a model's context;
  the lines that no longer fit are counted in a last line.

A shown limit is never larger than the read limit of the same text, nor a read limit than the stored one (a test
checks it): what is read is at least what is shown.

Ids and owners are never cut (they are a conversation's, a message's and a memory's identity): an id longer than
:data:`STORED_ID_BYTES`, an owner longer than :data:`STORED_OWNER_BYTES`, a LangGraph store item's namespace or key
longer than :data:`STORED_NAMESPACE_BYTES` / :data:`STORED_ITEM_KEY_BYTES`, is refused, and so is an embedder's name
longer than :data:`STORED_EMBEDDER_NAME_BYTES` (it says which model made a vector). A label (a conversation's
project, a message's speaker, a file's path in the import state) longer than its bound is shortened by
:func:`ghostmem.records.shortened`, which keeps it distinct.
"""

from __future__ import annotations


def utf8_bytes(text: str) -> int:
    """How many bytes ``text`` takes in UTF-8, as every byte bound below is counted (a lone surrogate counts as the
    three bytes it would take, so a value is measured before anything cleans it)."""
    return len(text.encode("utf-8", "surrogatepass"))


# -- stored: what the write path keeps -------------------------------------------------------------------------------
# User and assistant text (also what the lexical index reads of it: ghostmem.lexemes in migration 020 cuts at the
# same 200,000, a tsvector being limited to 1 MB).
STORED_MESSAGE_CHARS = 200_000
# Tool output and other non-conversational text is stored (get_conversation shows it) but bounded: a 5 MB log line
# would only bloat the table. Only user and assistant text is indexed for words and embedded.
STORED_TOOL_CHARS = 20_000
STORED_TITLE_CHARS = 200  # a conversation's title, the platform's own or one made from the first prompt
# The model reads ~256 tokens, so longer text is cut before hashing and embedding; tiny texts ("ok") carry no
# meaning worth a vector.
EMBEDDED_CHARS = 2_000
EMBEDDED_MIN_CHARS = 3

# A conversation's id (the platform's own, or the application's in live capture) and a message's native id are at
# most this many bytes (UTF-8). Both are in the keys and indexes of every message of the conversation, with the
# owner, and a btree entry holds at most 2,704 bytes: an id of about 2,600 bytes fitted some of them and not others
# (the window index of migration 107), so one longer than this is refused, as a problem of its import or an error of
# the capture call, and a store holding one cannot apply such a migration until it is removed (ghostmem.db.migrate
# says how). get_conversation accepts ids as long.
STORED_ID_BYTES = 1_000
# An owner (whose memory: GhostMem(owner=...), --owner, GHOSTMEM_OWNER, a call's user_id, a capture's owner, the
# LangGraph store's namespace label, an MCP token's owner) is at most this many bytes (UTF-8). It leads every key and
# index of every table, beside up to two ids (a conversation's and a message's native id): 256 + 2 × 1,000 bytes and
# the rest of the key stay under the 2,704 bytes of a btree entry. A longer owner (some 2,650 random bytes fitted no
# key) was refused only when its first row was written, with PostgreSQL's "index row size" text; it is now refused
# where it comes in (ghostmem.context.checked_owner), before anything is written. An email address, a UUID or an
# OAuth subject fits.
STORED_OWNER_BYTES = 256
# Every other value in a key or index is bounded too, so none fails only when written (PostgreSQL's "index row
# size ... exceeds btree version 4 maximum 2704", which ghostmem reports as "cannot hold a value this large"):
# A conversation's project (the (owner, tier, project, ts) indexes of message_vectors and message_bits, the
# (owner, tier, platform, project) key of message_counts) is a label matched by substring, chosen by the platform
# (Claude Code's and Codex's working directory, a ChatGPT project's or a Claude.ai project's name) or by the
# application: one longer than this is kept shortened (ghostmem.records.shortened: its start and its end around a
# digest of the whole), never refused, so an import or a capture loses no conversation for it.
STORED_PROJECT_BYTES = 1_000
# The import state's key of a file (its path, or ``zip!member``, or a LangChain table's DSN and name) in
# import_state's (owner, tier, path): shortened the same way beyond this, so a deep folder is imported and resumed
# like any other.
STORED_PATH_BYTES = 1_000
# A message's speaker (a person's name in a multi-party chat, an import line's "speaker") is in the (owner,
# lower(speaker)) index that name hints read: shortened the same way beyond this (lower() may grow a text by half:
# 'Ⱥ' is 2 bytes, 'ⱥ' 3).
STORED_SPEAKER_BYTES = 1_000
# A LangGraph store item's namespace (its labels, counted as LangGraph writes them: joined by '.') and key are its
# identity in store_items' (owner, namespace, key), so they are refused beyond these, before anything is written.
# A text[] spends up to 7 more bytes per label, hence a bound on labels too: 256 + (1,000 + 24 + 7 × 32) + 1,000
# stay under 2,704.
STORED_NAMESPACE_BYTES = 1_000
STORED_NAMESPACE_LABELS = 32
STORED_ITEM_KEY_BYTES = 1_000
# An embedder's name (its ``name``: a model's hub name or path, ``hash``, or what an application's own embedder calls
# itself) keys ghostmem.embedding_cache with a text's hash, so every text it embeds is written under it: refused
# beyond this where the embedder is configured (ghostmem.config.checked_embedder_name), before anything is written. It
# says which model made a vector and the application chooses it, so it is never shortened. A hub name or a path fits.
STORED_EMBEDDER_NAME_BYTES = 1_000

# -- read: what a statement fetches of each message ------------------------------------------------------------------
READ_THREAD_CHARS = 20_000  # get_conversation
READ_MATCH_CHARS = 1_000  # a search hit's matching messages
READ_SUMMARY_CHARS = 1_000  # get_conversation_summary's head and tail

# -- shown: what the rendered answer holds of each text -------------------------------------------------------------
SHOWN_MESSAGE_CHARS = 2_000  # a message of a thread (get_conversation)
SHOWN_MATCH_CHARS = 300  # a matching message under a search hit, on one line
SHOWN_SUMMARY_CHARS = 600  # a message of a summary, on one line
SHOWN_SNIPPET_CHARS = 160  # the first-message snippet under a list row
SHOWN_TITLE_CHARS = 80  # the title in a row header
SHOWN_MEMORY_CHARS = 400  # a ghost memory's content

# -- answer: the whole text of one operation's answer ----------------------------------------------------------------
ANSWER_CHARS = 24_000
