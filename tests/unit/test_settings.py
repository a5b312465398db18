"""Settings read from arguments and the environment: pool sizes, and DSNs in the forms applications already have."""

from __future__ import annotations

import pytest
import sqlalchemy
from ghostmem import InvalidArgument, Settings
from ghostmem.config import normalize_dsn


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GHOSTMEM_DSN", "GHOSTMEM_OWNER", "GHOSTMEM_RUNTIME_ROLE", "GHOSTMEM_POOL_MIN_SIZE", "GHOSTMEM_POOL_MAX_SIZE", "GHOSTMEM_POOL_TIMEOUT",
                 "GHOSTMEM_READ_DSN", "GHOSTMEM_READ_WAIT", "GHOSTMEM_READ_RETRY"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)


def test_pool_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GHOSTMEM_POOL_MAX_SIZE", "3")
    monkeypatch.setenv("GHOSTMEM_POOL_MIN_SIZE", "0")
    monkeypatch.setenv("GHOSTMEM_POOL_TIMEOUT", "2.5")
    settings = Settings.from_env()
    assert (settings.pool_min_size, settings.pool_max_size, settings.pool_timeout) == (0, 3, 2.5)
    # An argument wins over the environment.
    assert Settings.from_env(pool_max_size=5).pool_max_size == 5


def test_pool_defaults() -> None:
    settings = Settings.from_env()
    assert (settings.pool_min_size, settings.pool_max_size, settings.pool_timeout) == (1, 8, 10.0)
    # A maximum of one keeps the minimum within it.
    assert Settings.from_env(pool_max_size=1).pool_min_size == 1


@pytest.mark.parametrize(
    ("env", "value", "message"),
    [
        ("GHOSTMEM_POOL_MAX_SIZE", "ten", r"GHOSTMEM_POOL_MAX_SIZE='ten' is not a int"),
        ("GHOSTMEM_POOL_MAX_SIZE", "0", r"max >= 1"),
        ("GHOSTMEM_POOL_MIN_SIZE", "9", r"0 <= min \(9\) <= max \(8\)"),
        ("GHOSTMEM_POOL_TIMEOUT", "-1", r"positive number of seconds"),
        ("GHOSTMEM_POOL_TIMEOUT", "nan", r"positive number of seconds"),
        (
            "GHOSTMEM_READ_WAIT",
            "0",
            r"read_wait \(or GHOSTMEM_READ_WAIT\) must be a positive number of seconds",
        ),
        ("GHOSTMEM_READ_RETRY", "soon", r"GHOSTMEM_READ_RETRY='soon' is not a float"),
    ],
)
def test_bad_pool_settings_are_one_sentence(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, message: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(InvalidArgument, match=message):
        Settings.from_env()


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgresql+psycopg://u:p@db:5433/app", "postgresql://u:p@db:5433/app"),
        ("postgresql+psycopg2://u@db/app?sslmode=require", "postgresql://u@db/app?sslmode=require"),
        ("POSTGRESQL+ASYNCPG://u@db/app", "postgresql://u@db/app"),
        ("postgres://u@db/app", "postgresql://u@db/app"),
        ("postgresql://u@db/app", "postgresql://u@db/app"),
        ("host=/tmp dbname=app", "host=/tmp dbname=app"),
        ("", None),
        (None, None),
    ],
)
def test_dsn_forms(given: str | None, expected: str | None) -> None:
    assert normalize_dsn(given) == expected


def test_sqlalchemy_engine_and_url_keep_their_password() -> None:
    url = "postgresql+psycopg://app:s3cr%40t@db:5432/memory"
    assert normalize_dsn(sqlalchemy.make_url(url)) == "postgresql://app:s3cr%40t@db:5432/memory"
    assert normalize_dsn(sqlalchemy.create_engine(url)) == "postgresql://app:s3cr%40t@db:5432/memory"


def test_read_replica_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (Settings.from_env().read_dsn, Settings.from_env().read_wait, Settings.from_env().read_retry) == (
        None,
        0.25,
        5.0,
    )
    monkeypatch.setenv("GHOSTMEM_READ_DSN", "postgresql+psycopg://u@standby/app")
    monkeypatch.setenv("GHOSTMEM_READ_WAIT", "0.5")
    monkeypatch.setenv("GHOSTMEM_READ_RETRY", "2")
    settings = Settings.from_env()
    assert (settings.read_dsn, settings.read_wait, settings.read_retry) == (
        "postgresql://u@standby/app",
        0.5,
        2.0,
    )
    assert (
        Settings.from_env(read_dsn="host=/replica dbname=app", read_wait=1).read_dsn
        == "host=/replica dbname=app"
    )
    assert Settings.from_env(read_wait=1).read_wait == 1.0


def test_environment_dsn_is_normalised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GHOSTMEM_DSN", "postgresql+psycopg://u@db/app")
    assert Settings.from_env().dsn == "postgresql://u@db/app"


def test_a_dsn_of_another_type_is_one_sentence() -> None:
    with pytest.raises(InvalidArgument, match=r"dsn must be a connection string .* \(got a dict\)"):
        normalize_dsn({"host": "db"})


@pytest.mark.parametrize(
    ("env", "over", "at", "message"),
    [
        (
            "GHOSTMEM_OWNER",
            "o" * 257,
            "o" * 256,
            r"the owner 'o+'… is 257 bytes, longer than the 256 bytes ghostmem",
        ),
        (
            "GHOSTMEM_OWNER",
            "é" * 129,
            "é" * 128,
            r"is 258 bytes, longer than the 256 bytes ghostmem keeps of an owner",
        ),
        # PostgreSQL would cut it to 63 bytes and create, grant and switch to another name than ghostmem records
        (
            "GHOSTMEM_RUNTIME_ROLE",
            "r" * 64,
            "r" * 63,
            r"the runtime role name 'r+'… is 64 bytes, longer than the 63",
        ),
        (
            "GHOSTMEM_RUNTIME_ROLE",
            "é" * 32,
            "é" * 31 + "e",
            r"is 64 bytes, longer than the 63 bytes PostgreSQL keeps",
        ),
    ],
)
def test_names_longer_than_the_database_keeps_are_one_sentence(
    monkeypatch: pytest.MonkeyPatch, env: str, over: str, at: str, message: str
) -> None:
    monkeypatch.setenv(env, over)
    with pytest.raises(InvalidArgument, match=message):
        Settings.from_env()
    monkeypatch.setenv(env, at)
    settings = Settings.from_env()
    assert at in (settings.owner, settings.runtime_role)
