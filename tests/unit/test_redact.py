"""Redaction: every planted fake secret is gone with the right type; look-alikes survive byte for byte."""

from __future__ import annotations

import base64
import hashlib
import random
import string
import uuid

import pytest
from ghostmem.redact import KINDS, placeholder, redact
from hypothesis import given, settings
from hypothesis import strategies as st

_RNG = random.Random(20261129)
_ALNUM = string.ascii_letters + string.digits


def _rand(n: int, alphabet: str = _ALNUM) -> str:
    """Random token text that always mixes letters and digits, like a generated key."""
    body = "".join(_RNG.choice(alphabet) for _ in range(n - 2))
    return body + "7" + ("Q" if "Q" in alphabet else "a")


def _jwt() -> str:
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=").decode()
    payload = (
        base64.urlsafe_b64encode(b'{"sub":"1234567890","name":"Jane","iat":1516239022}').rstrip(b"=").decode()
    )
    return f"{header}.{payload}.{_rand(43, _ALNUM + '-_')}"


_PEM_BODY = "\n".join(_rand(64, _ALNUM + "+/") for _ in range(6))
OPENAI = "sk-" + _rand(48)
OPENAI_PROJ = "sk-proj-" + _rand(120, _ALNUM + "-_")
ANTHROPIC = "sk-ant-api03-" + _rand(93, _ALNUM + "-_") + "AA"
GOOGLE = "AIza" + _rand(35, _ALNUM + "-_")
GITHUB = "ghp_" + _rand(36)
GITHUB_PAT = "github_pat_11" + _rand(20) + "_" + _rand(59)
JWT = _jwt()
AWS_SECRET = _rand(40, _ALNUM + "/+")
STRIPE_LIVE = "sk_live_" + _rand(24)
STRIPE_RK = "rk_test_" + _rand(24)
HF = "hf_" + _rand(34)
GROQ = "gsk_" + _rand(52)
XAI = "xai-" + _rand(80)
REPLICATE = "r8_" + _rand(37)
NPM = "npm_" + _rand(36)
PYPI = "pypi-AgEIcHlwaS5vcmc" + _rand(60, _ALNUM + "-_")
GHO, GHS = "gho_" + _rand(36), "ghs_" + _rand(36)
GITLAB = "glpat-" + _rand(20, _ALNUM + "-_")
SLACK_BOT = "xoxb-1234567890-1234567890123-" + _rand(24)
SLACK_USER = "xoxp-1234567890-" + _rand(30)
SLACK_HOOK = "T0123ABCD/B0123ABCD/" + _rand(24)
AZURE_KEY = _rand(86, _ALNUM + "+/") + "=="
AWS_ID = "AKIA" + _rand(16, string.ascii_uppercase + string.digits)

# (text containing the secret, the secret itself, its expected kind)
SECRETS: list[tuple[str, str, str]] = [
    (f"export OPENAI_API_KEY={OPENAI}", OPENAI, "openai_key"),
    (f'client = OpenAI(api_key="{OPENAI_PROJ}")', OPENAI_PROJ, "openai_key"),
    (f"ANTHROPIC_API_KEY='{ANTHROPIC}'", ANTHROPIC, "anthropic_key"),
    (f"const key = '{GOOGLE}';", GOOGLE, "google_api_key"),
    (f"stripe.api_key = '{STRIPE_LIVE}'", STRIPE_LIVE, "stripe_key"),
    (f"STRIPE_RK={STRIPE_RK}", STRIPE_RK, "stripe_key"),
    (f"HF_TOKEN={HF}", HF, "huggingface_token"),
    (f"groq key {GROQ} works", GROQ, "groq_key"),
    (XAI, XAI, "xai_key"),
    (f"REPLICATE_API_TOKEN={REPLICATE}", REPLICATE, "replicate_token"),
    (f"//registry.npmjs.org/:_authToken={NPM}", NPM, "npm_token"),
    (f"password = {PYPI}", PYPI, "pypi_token"),
    (f"git clone https://{GITHUB}@github.com/acme/repo.git", GITHUB, "github_token"),
    (f"GH_TOKEN: {GITHUB_PAT}", GITHUB_PAT, "github_token"),
    (f"{GHO} and {GHS}", GHS, "github_token"),
    (f"CI_TOKEN={GITLAB}", GITLAB, "gitlab_token"),
    (f"SLACK_BOT_TOKEN={SLACK_BOT}", SLACK_BOT, "slack_token"),
    (SLACK_USER, SLACK_USER, "slack_token"),
    (f"curl -X POST https://hooks.slack.com/services/{SLACK_HOOK}", SLACK_HOOK, "slack_webhook"),
    (f"aws_access_key_id = {AWS_ID}", AWS_ID, "aws_access_key_id"),
    (f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET, "aws_secret_key"),
    (
        f'{{"AccessKeyId": "ASIAXYZ0123456789ABC", "SecretAccessKey": "{AWS_SECRET}"}}',
        AWS_SECRET,
        "aws_secret_key",
    ),
    (f"token={JWT}", JWT, "jwt"),
    (
        f"-----BEGIN RSA PRIVATE KEY-----\n{_PEM_BODY}\n-----END RSA PRIVATE KEY-----",
        _PEM_BODY.splitlines()[2],
        "private_key",
    ),
    (
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{_PEM_BODY}\n-----END OPENSSH PRIVATE KEY-----",
        _PEM_BODY.splitlines()[4],
        "private_key",
    ),
    ("DATABASE_URL=postgres://app:Tr0ub4dor&3@db.internal:5432/app", "Tr0ub4dor&3", "url_password"),
    ("mysql://root:p%40ssW0rd@localhost/app", "p%40ssW0rd", "url_password"),
    ("postgres://admin:p@ssW0rd!@db.internal:5432/app", "p@ssW0rd!", "url_password"),
    ("redis://:a@b@c@cache.local/0 and more", "a@b@c", "url_password"),
    (
        "SENTRY_DSN=https://0123456789abcdef0123456789abcdef@o12345.ingest.sentry.io/678",
        "0123456789abcdef0123456789abcdef",
        "sentry_dsn",
    ),
    (
        "dsn: https://0123456789abcdef0123456789abcdef:fedcba9876543210fedcba9876543210@sentry.io/1",
        "fedcba9876543210fedcba9876543210",
        "sentry_dsn",
    ),
    (
        "SLACK_APP_TOKEN=xapp-1-A0123BCDEFG-4567890123456-" + _rand(64, "0123456789abcdef"),
        "xapp-1-",
        "slack_token",
    ),
    (
        '{"content": "-----BEGIN EC PRIVATE KEY-----\\n'
        + _PEM_BODY.replace("\n", "\\n")
        + '\\n-----END EC PRIVATE KEY-----"}',
        _PEM_BODY.splitlines()[1],
        "private_key",
    ),
    ("redis://:s3cretRedisPw@cache:6379/0", "s3cretRedisPw", "url_password"),
    ("mongodb+srv://admin:Zx81!pw@cluster0.mongodb.net/", "Zx81!pw", "url_password"),
    ("DB_PASSWORD=hunter2hunter", "hunter2hunter", "password"),
    ('{"username": "bob", "password": "correct horse battery staple"}', "correct horse", "password"),
    ('{\\"password\\": \\"escaped-in-json-9\\"}', "escaped-in-json-9", "password"),
    ("db:\n  user: app\n  password: Sup3rS3cret!\n", "Sup3rS3cret!", "password"),
    ("mysql --user=root --password=Qwerty123 app", "Qwerty123", "password"),
    ("psql --password S0mething app", "S0mething", "password"),
    ("passwd: letmein99", "letmein99", "password"),
    ("**Password**: Summer2024!", "Summer2024!", "password"),
    ("- **password:** Winter99x", "Winter99x", "password"),
    ("curl -u admin:S3cretPass https://api.internal/v1", "S3cretPass", "password"),
    ("machine api.heroku.com login me@example.com password 0a1b2c3d-heroku", "0a1b2c3d-heroku", "password"),
    ("SECRET_KEY = 'django-insecure-8f3k2m1x9q'", "django-insecure-8f3k2m1x9q", "secret"),
    ("client_secret: 9aF3kL0pQ7zX2vB6", "9aF3kL0pQ7zX2vB6", "secret"),
    ("GOOGLE_CLIENT_SECRET=GOCSPX-" + _rand(28, _ALNUM + "-_"), "GOCSPX-", "google_oauth_secret"),
    ("shopify: shpat_" + _rand(32, "0123456789abcdef"), "shpat_", "shopify_token"),
    ("DATABRICKS_TOKEN=dapi" + _rand(32, "0123456789abcdef"), "dapi", "databricks_token"),
    ("LINEAR=lin_api_" + _rand(40), "lin_api_", "linear_key"),
    ("notion ntn_" + _rand(46), "ntn_", "notion_token"),
    ("supabase sbp_" + _rand(40, "0123456789abcdef"), "sbp_", "supabase_token"),
    (f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={AZURE_KEY};", AZURE_KEY, "secret"),
    ("MISTRAL_API_KEY=Xk4mP9qR2sT7vW1yZ3bC5dF8gH0jK6nL", "Xk4mP9qR2sT7vW1yZ3bC5dF8gH0jK6nL", "api_key"),
    ("x-api-key: 0a1b2c3d4e5f6a7b8c9d", "0a1b2c3d4e5f6a7b8c9d", "api_key"),
    ("--token 4f9a8b7c6d5e4f3a2b1c", "4f9a8b7c6d5e4f3a2b1c", "token"),
    ("access_token: ya29.a0AfH6SMBx3kLm9", "ya29.a0AfH6SMBx3kLm9", "token"),
    ("Authorization: Bearer abc123def456ghi789jkl", "abc123def456ghi789jkl", "bearer_token"),
    ('curl -H "Authorization: token 0123456789abcdef0123"', "0123456789abcdef0123", "bearer_token"),
    ("headers = {'Authorization': 'Basic dXNlcjpwYXNzd29yZA=='}", "dXNlcjpwYXNzd29yZA==", "bearer_token"),
    ("then send Bearer Zm9vYmFyYmF6cXV4MTIzNDU2 in the header", "Zm9vYmFyYmF6cXV4MTIzNDU2", "bearer_token"),
    # A block cut off before its END line is redacted to the end of the text: keep it last.
    (f"pasted: -----BEGIN PRIVATE KEY-----\n{_PEM_BODY}", _PEM_BODY.splitlines()[5], "private_key"),
]

_B64_IMAGE = base64.b64encode(random.Random(7).randbytes(6000)).decode()
LOOKALIKES: list[str] = [
    "commit 3f2a9c1e8b7d6f5a4c3b2a1908f7e6d5c4b3a291 fixed it",
    "sha256: " + hashlib.sha256(b"ghostmem").hexdigest(),
    f"request id {uuid.UUID(int=_RNG.getrandbits(128))}",
    f"![chart](data:image/png;base64,{_B64_IMAGE})",
    f'{{"type": "image", "source": {{"type": "base64", "data": "{_B64_IMAGE}"}}}}',
    "We need to design the password reset flow before Friday.",
    "Password: reset it via the email link, then log in.",
    "Forgot password? The token expired, so request a new secret link.",
    "see https://example.com/docs?page=2 and http://localhost:8080/api/v1/users",
    "git clone git@github.com:acme/repo.git && ssh deploy@10.0.0.5",
    "https://user@example.com/path has a user but no password",
    "Use the sk- prefix check; sk-learn is the old name of scikit-learn.",
    "set max_tokens: 1024 and token_count=55; the tokenizer splits keys",
    "def login(password: str, api_key: Optional[str] = None) -> Token:",
    "password=password, api_key=settings.API_KEY, token=self.token",
    'api_key = os.environ["OPENAI_API_KEY"]; token = get_token()',
    "Authorization: Bearer $TOKEN or Bearer ${GITHUB_TOKEN} or Bearer <token>",
    "Bearer authentication is described in RFC 6750.",
    "password: ********",
    "docker run -u 1000:1000 app && git push -u origin main",
    "**Password** reset is handled by the auth service.",
    "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@laptop",
    "the meeting is at 12:30:45 and the key: value pairs go in a dict",
    "primary_key=True, sort_key: created_at, monkey=bananas123, next_page_token_count: 12345678",
    '{"usage": {"input_tokens": 1234567, "cache_read_input_tokens": 89012345}}',
    "会話の履歴を検索する: パスワードのリセット手順",
    "",
]


@pytest.mark.parametrize(
    ("text", "secret", "kind"), SECRETS, ids=[s[2] + str(i) for i, s in enumerate(SECRETS)]
)
def test_secret_is_replaced_by_its_kind(text: str, secret: str, kind: str) -> None:
    out = redact(text)
    assert placeholder(kind) in out, out
    assert secret not in out, out
    assert kind in KINDS


@pytest.mark.parametrize("text", SECRETS, ids=[s[2] + str(i) for i, s in enumerate(SECRETS)])
def test_redaction_is_idempotent(text: tuple[str, str, str]) -> None:
    once = redact(text[0])
    assert redact(once) == once


@pytest.mark.parametrize("text", LOOKALIKES)
def test_lookalike_survives_unchanged(text: str) -> None:
    assert redact(text) == text


def test_context_is_kept_around_the_secret() -> None:
    assert redact("postgres://app:Tr0ub4dor3@db.internal:5432/app") == (
        "postgres://app:[REDACTED:url_password]@db.internal:5432/app"
    )
    assert redact(f"export OPENAI_API_KEY={OPENAI}") == "export OPENAI_API_KEY=[REDACTED:openai_key]"
    assert (
        redact(f"-H 'Authorization: Bearer {OPENAI}'") == "-H 'Authorization: Bearer [REDACTED:openai_key]'"
    )


def test_every_secret_of_a_transcript_goes_in_one_pass() -> None:
    transcript = "\n".join(f"line {i}: {text}" for i, (text, _, _) in enumerate(SECRETS))
    out = redact(transcript)
    for _, secret, kind in SECRETS:
        assert placeholder(kind) in out
        assert secret not in out, (kind, secret)


_FRAGMENTS = (
    [text for text, _, _ in SECRETS] + LOOKALIKES + ["password=", "://", "@", ":", '"', "Bearer ", "sk-"]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=30)), max_size=8))
def test_redaction_is_idempotent_on_any_mix(parts: list[str]) -> None:
    once = redact(" ".join(parts))
    assert redact(once) == once


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=900))
def test_any_base64_image_survives(data: bytes) -> None:
    text = f"![shot](data:image/png;base64,{base64.b64encode(data).decode()})"
    assert redact(text) == text


@settings(max_examples=300, deadline=None)
@given(st.uuids(), st.binary(min_size=20, max_size=20), st.binary(min_size=32, max_size=32))
def test_ids_and_digests_survive(value: uuid.UUID, sha1: bytes, sha256: bytes) -> None:
    text = f"id={value} commit {sha1.hex()} sha256:{sha256.hex()} etag: {sha256.hex()[:32]}"
    assert redact(text) == text
