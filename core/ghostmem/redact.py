"""Secret redaction: every message passes through :func:`redact` before it is stored or embedded.

A secret is replaced by a typed placeholder, ``[REDACTED:<kind>]``; what surrounds it (the variable name, the URL's
user and host, the ``Authorization: Bearer`` prefix) is kept so the conversation still reads. Provider tokens are
recognised by their documented prefixes and shapes; passwords, tokens and keys without a recognisable shape only by
their context (an assignment, a CLI flag, a URL, a header). Look-alikes with no such prefix or context (git SHAs,
sha256 digests, UUIDs, base64 images) are left alone.

It runs on every message, so each rule runs only when its literal needles occur in the text, and it is idempotent: a
placeholder never matches a rule, so redacting twice equals redacting once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["KINDS", "placeholder", "redact"]

_PLACEHOLDER_PREFIX = "[REDACTED:"


def placeholder(kind: str) -> str:
    """The text that replaces a secret of this kind."""
    return f"{_PLACEHOLDER_PREFIX}{kind}]"


def _has_digit(value: str) -> bool:
    return any(c.isdigit() for c in value)


def _looks_random(value: str) -> bool:
    """Has both letters and digits: what a generated token has and a word or identifier has not."""
    return _has_digit(value) and any(c.isalpha() for c in value)


def _upper_or_digit(value: str) -> bool:
    return any(c.isdigit() or c.isupper() for c in value)


def _not_reference(value: str) -> bool:
    """Not a variable (``$DB_PASS``, ``${X}``, ``<password>``, ``{{ secret }}``), a mask or a placeholder."""
    return not (value[:1] in "$<{%" or set(value) <= set("*xX.•-_") or value.startswith(_PLACEHOLDER_PREFIX))


@dataclass(frozen=True, slots=True)
class _Rule:
    """One pattern; its ``secret*`` groups are replaced, everything else in the match is kept.

    The pattern runs only on text whose lower-cased form contains one of ``needles``: substring tests are what
    keeps clean text cheap.
    """

    kind: str | Callable[[re.Match[str]], str]
    needles: tuple[str, ...]
    pattern: re.Pattern[str]
    check: Callable[[re.Match[str], str], bool] | None = None


def _rule(
    kind: str | Callable[[re.Match[str]], str],
    needles: str,
    pattern: str,
    check: Callable[[re.Match[str], str], bool] | None = None,
    flags: int = 0,
) -> _Rule:
    return _Rule(kind, tuple(needles.split()), re.compile(pattern, flags), check)


def _value_is(predicate: Callable[[str], bool]) -> Callable[[re.Match[str], str], bool]:
    return lambda _m, value: predicate(value)


# A token starts where no letter, digit or underscore precedes it (a hyphen may: Claude Code names a project's folder
# after its path with "/" turned into "-", so a token that was a folder name follows one).
_B = r"(?<![A-Za-z0-9_])"
# ... and ends where no token character follows (for fixed-length shapes).
_E = r"(?![A-Za-z0-9_-])"

# Keys whose value is a secret, in assignments (env, JSON, YAML, code) and as CLI flags. The key must END with one of
# these words, so ``max_tokens``, ``token_count`` and ``password_hash`` are not keys of secrets.
_PASSWORD_WORDS = r"password|passwd|passphrase|pwd"
_SECRET_WORDS = (
    r"client[_-]?secret|secret[_-]?key|secret|api[_-]?key|apikey|access[_-]?key|private[_-]?key|account[_-]?key"
    r"|signing[_-]?key|encryption[_-]?key|master[_-]?key"
    r"|auth[_-]?token|access[_-]?token|refresh[_-]?token|session[_-]?token|token"
)

# Values that name a type, a variable or nothing: the key is being declared or passed on, not given a secret.
_NON_SECRET_TEXT = "none null nil true false undefined str string bytes int optional required secret secretstr password token"
_NON_SECRET_WORDS = frozenset(_NON_SECRET_TEXT.split())
# settings.API_KEY, self.token, os.getenv("X"), Optional[str]: code naming where the secret is, not the secret.
_CODE_REFERENCE = re.compile(r"[A-Za-z_][A-Za-z_]*(?:\.[A-Za-z_][A-Za-z_]*)+|[A-Za-z_][\w.]*[(\[].*")
_PROSE_WORD = re.compile(r"[a-z]{1,12}")


_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_SECRET_KEY = re.compile(rf"(?:{_PASSWORD_WORDS}|{_SECRET_WORDS})$", re.IGNORECASE)


def _key(m: re.Match[str]) -> str:
    """The name a value is assigned to: the ``key`` group, or the key characters before the matched keyword."""
    if "key" in m.re.groupindex:
        return m.group("key")
    text, start = m.string, m.start()
    while start > 0 and text[start - 1] in _KEY_CHARS:
        start -= 1
    return text[start : m.start("sep")]


def _assignment_kind(m: re.Match[str]) -> str:
    key = _key(m).lower()
    if re.search(_PASSWORD_WORDS + "$", key):
        return "password"
    for word, kind in (("api", "api_key"), ("secret", "secret"), ("key", "secret"), ("token", "token")):
        if word in key:
            return kind
    return "secret"


def _assignment_value_ok(m: re.Match[str], value: str) -> bool:
    if not value.strip() or not _not_reference(value) or not _SECRET_KEY.search(_key(m)):
        return False
    unquoted = m.group("secret4") is not None
    if unquoted:
        if value.lower() in _NON_SECRET_WORDS or _CODE_REFERENCE.fullmatch(value):
            return False
        normalise = str.maketrans("", "", "_-.")
        if value.lower().translate(normalise) == _key(m).lower().translate(normalise):
            return False  # password=password: a variable passed on
        # "Password: reset via email" is prose; "password: sunshine" at the end of a line is a value.
        rest = m.string[m.end() : m.end() + 2]
        if ":" in m.group("sep") and _PROSE_WORD.fullmatch(value) and re.match(r" [A-Za-z]", rest):
            return False
    if _assignment_kind(m) == "password":
        return len(value) >= 3
    return len(value) >= 8 and (_has_digit(value) or (value.lower() != value and value.upper() != value))


# Quoted (plain or JSON-escaped) or bare; a bare value ends before trailing punctuation.
_VALUE = (
    r"(?:\"(?P<secret1>[^\"\n]{1,300}?)\"|'(?P<secret2>[^'\n]{1,300}?)'"
    r"|\\\"(?P<secret3>[^\"\n\\]{1,300}?)\\\"|(?P<secret4>[^\s\"'`]{0,299}[^\s\"'`,;:)}\].]))"
)

_RULES: tuple[_Rule, ...] = (
    # Whole blocks first, so the base64 inside them is never seen by the token rules.
    _rule(
        "private_key",
        "private",
        r"(?P<secret>-----BEGIN[A-Z0-9 ]{0,30} PRIVATE KEY(?: BLOCK)?-----"
        r"[\s\S]*?(?:-----END[A-Z0-9 ]{0,30} PRIVATE KEY(?: BLOCK)?-----|\Z))",
    ),
    _rule("anthropic_key", "sk-ant-", _B + r"(?P<secret>sk-ant-[A-Za-z0-9_-]{20,})"),
    _rule(
        "openai_key",
        "sk-",
        _B + r"(?P<secret>sk-(?!ant-)(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,})",
        _value_is(_looks_random),
    ),
    _rule("google_api_key", "aiza", _B + r"(?P<secret>AIza[0-9A-Za-z_-]{35})" + _E),
    _rule(
        "stripe_key",
        "sk_ rk_ whsec_",
        _B + r"(?P<secret>(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{10,}|whsec_[A-Za-z0-9+/=]{20,})",
    ),
    _rule(
        "huggingface_token", "hf_", _B + r"(?P<secret>hf_[A-Za-z0-9]{30,})" + _E, _value_is(_upper_or_digit)
    ),
    _rule("groq_key", "gsk_", _B + r"(?P<secret>gsk_[A-Za-z0-9]{40,})"),
    _rule("xai_key", "xai-", _B + r"(?P<secret>xai-[A-Za-z0-9]{40,})"),
    _rule("perplexity_key", "pplx-", _B + r"(?P<secret>pplx-[A-Za-z0-9]{40,})"),
    _rule("replicate_token", "r8_", _B + r"(?P<secret>r8_[A-Za-z0-9]{30,})"),
    _rule("npm_token", "npm_", _B + r"(?P<secret>npm_[A-Za-z0-9]{36,})"),
    _rule("pypi_token", "pypi-", _B + r"(?P<secret>pypi-AgE[A-Za-z0-9_-]{50,})"),
    _rule("digitalocean_token", "_v1_", _B + r"(?P<secret>do[por]_v1_[a-f0-9]{64})"),
    _rule("sendgrid_key", "sg.", _B + r"(?P<secret>SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43})"),
    _rule("google_oauth_secret", "gocspx-", _B + r"(?P<secret>GOCSPX-[A-Za-z0-9_-]{24,})"),
    _rule("google_oauth_token", "ya29.", _B + r"(?P<secret>ya29\.[A-Za-z0-9_-]{20,})", _value_is(_has_digit)),
    _rule(
        "shopify_token", "shpat_ shpss_ shpca_ shppa_", _B + r"(?P<secret>shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32})"
    ),
    _rule("databricks_token", "dapi", _B + r"(?P<secret>dapi[a-f0-9]{32}(?:-\d)?)" + _E),
    _rule("linear_key", "lin_api_", _B + r"(?P<secret>lin_api_[A-Za-z0-9]{40})"),
    _rule(
        "notion_token", "ntn_ secret_", _B + r"(?P<secret>ntn_[A-Za-z0-9]{40,}|secret_[A-Za-z0-9]{43})" + _E
    ),
    _rule("supabase_token", "sbp_", _B + r"(?P<secret>sbp_[a-f0-9]{40})"),
    _rule(
        "github_token",
        "ghp_ gho_ ghu_ ghs_ ghr_ github_pat_",
        _B + r"(?P<secret>gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{50,})",
    ),
    _rule(
        "gitlab_token",
        "glpat- gldt- glptt- glrt-",
        _B + r"(?P<secret>gl(?:pat|dt|ptt|rt)-[A-Za-z0-9_-]{20,})",
    ),
    _rule("slack_token", "xox", _B + r"(?P<secret>xox[abposre]-[A-Za-z0-9-]{10,})", _value_is(_has_digit)),
    # App-level tokens: xapp-<version>-<app id>-<number>-<hex>.
    _rule("slack_token", "xapp-", _B + r"(?P<secret>xapp-\d-[A-Za-z0-9]+-\d+-[A-Za-z0-9]{16,})"),
    _rule(
        "slack_webhook",
        "hooks.slack",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9/_-]{10,})",
    ),
    _rule(
        "discord_webhook", "discord", r"discord(?:app)?\.com/api/webhooks/(?P<secret>\d+/[A-Za-z0-9_-]{20,})"
    ),
    _rule(
        "aws_access_key_id",
        "akia asia abia acca agpa aida aroa anpa anva aipa",
        r"(?<![A-Za-z0-9/+])(?P<secret>(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16})(?![A-Za-z0-9])",
    ),
    # An AWS secret key is 40 base64 characters with no prefix: only recognisable next to its name.
    _rule(
        "aws_secret_key",
        "secret",
        r"(?i:secret_?access_?key|aws[\w.-]{0,30}secret[\w.-]{0,30})\\?[\"']?\s*[:=]\s*\\?[\"']?\s*"
        r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
    ),
    _rule(
        "jwt",
        "eyj",
        _B + r"(?P<secret>eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*)",
    ),
    # A Sentry DSN's key is its user part: https://<32 hex>[:<32 hex>]@o1.ingest.sentry.io/2 (the secret half too).
    _rule(
        "sentry_dsn",
        "sentry",
        r"://(?P<secret>[a-f0-9]{32}(?::[a-f0-9]{32})?)@(?=[A-Za-z0-9.-]*sentry)",
    ),
    # The password runs to the authority's last "@": one that is not escaped (p@ss) belongs to it.
    _rule(
        "url_password",
        "://",
        r"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/@'\"\[\]]*:(?P<secret>[^\s/'\"]+)@(?=[\w.\[-][^\s@/'\"]*(?:[/:?#\s'\"]|$))",
        _value_is(_not_reference),
    ),
    _rule(
        "bearer_token",
        "authorization",
        r"(?i:\b(?:proxy-)?authorization\\?[\"']?\s*[:=]\s*\\?[\"']?\s*(?:bearer|token|basic|bot)\s+)"
        r"(?P<secret>[A-Za-z0-9._~+/-]{8,}=*)",
    ),
    _rule(
        "bearer_token",
        "bearer",
        r"(?i:\bbearer\s+)(?P<secret>[A-Za-z0-9._~+/-]{16,}=*)",
        _value_is(_looks_random),
    ),
    # curl -u user:password, and .netrc's "login me password secret".
    _rule(
        "password",
        "-u --user",
        r"(?<!\S)(?:-u|--user)(?:\s+|=)[\"']?[^\s:'\"]+:(?P<secret>[^\s'\"]+)",
        _value_is(lambda v: _not_reference(v) and not v.isdigit()),
    ),
    _rule("password", "login", r"(?i:\blogin\s+\S+\s+password\s+)(?P<secret>\S+)", _value_is(_not_reference)),
    _rule(
        _assignment_kind,
        "pass pwd secret key token",
        r"(?<![A-Za-z0-9_.-])--?(?P<key>[A-Za-z0-9-]{0,40}?(?:"
        + _PASSWORD_WORDS
        + "|"
        + _SECRET_WORDS
        + r"))"
        r"(?P<sep>=|\s+)" + _VALUE,
        _assignment_value_ok,
        re.IGNORECASE,
    ),
    # Anchored on the word that ends the key (a scan for a few literals); the check reads the whole key backwards.
    _rule(
        _assignment_kind,
        "pass pwd secret key token",
        r"(?:password|passwd|passphrase|pwd|secret|key|token)"
        r"(?P<sep>(?:\*\*|__)?\\?[\"']?[ \t]*(?::=|=>|=|:(?!//))(?:\*\*|__)?[ \t]*)" + _VALUE,
        _assignment_value_ok,
        re.IGNORECASE,
    ),
)

KINDS: frozenset[str] = frozenset(r.kind for r in _RULES if isinstance(r.kind, str)) | {
    "password",
    "secret",
    "api_key",
    "token",
}


def _apply(rule: _Rule, text: str) -> str:
    def replace(m: re.Match[str]) -> str:
        name = next(n for n in ("secret", "secret1", "secret2", "secret3", "secret4") if m.groupdict().get(n))
        value = m.group(name)
        if rule.check is not None and not rule.check(m, value):
            return m.group(0)
        kind = rule.kind if isinstance(rule.kind, str) else rule.kind(m)
        start, end = m.span(name)
        whole = m.group(0)
        return whole[: start - m.start()] + placeholder(kind) + whole[end - m.start() :]

    return rule.pattern.sub(replace, text)


def redact(text: str) -> str:
    """``text`` with every recognised secret replaced by ``[REDACTED:<kind>]``; unchanged when there is none."""
    lowered = text.lower()
    for rule in _RULES:
        # Rules only insert placeholders, which match no rule: the original text decides which rules can match.
        if any(needle in lowered for needle in rule.needles):
            text = _apply(rule, text)
    return text
