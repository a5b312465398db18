"""The one table from database errors to ghostmem errors."""

from __future__ import annotations

import psycopg
import pytest
from ghostmem.errors import (
    DatabaseUnavailable,
    GhostMemError,
    InvalidArgument,
    PermissionDenied,
    translate,
    translated,
)
from psycopg import errors as pg


@pytest.mark.parametrize(
    ("error", "expected", "fragment"),
    [
        (pg.AdminShutdown("terminating connection due to administrator command"), DatabaseUnavailable, "run it again"),
        (pg.CrashShutdown("the database system is in recovery mode"), DatabaseUnavailable, "lost the connection"),
        (pg.CannotConnectNow("the database system is starting up"), DatabaseUnavailable, "try again in a moment"),
        (pg.TooManyConnections("sorry, too many clients already"), DatabaseUnavailable, "ran out of a resource"),
        (pg.ConnectionFailure("connection to server lost"), DatabaseUnavailable, "lost the connection"),
        (
            psycopg.OperationalError(
                "server closed the connection unexpectedly\n\tThis probably means the server terminated abnormally"
            ),
            DatabaseUnavailable,
            "(server closed the connection unexpectedly)",
        ),
        (psycopg.InterfaceError("the connection is closed"), DatabaseUnavailable, "the connection is closed"),
        (pg.UndefinedObject("there is no database role nobody"), InvalidArgument, "there is no database role nobody"),
        (pg.InvalidParameterValue("the project name is empty"), InvalidArgument, "the project name is empty"),
        (pg.NumericValueOutOfRange("integer out of range"), InvalidArgument, "cannot take a value"),
        (psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes"), InvalidArgument, "NUL"),
        (pg.InsufficientPrivilege("permission denied for table messages"), PermissionDenied, "may not do that"),
    ],
)  # fmt: skip
def test_database_errors_become_one_ghostmem_sentence(
    error: psycopg.Error, expected: type[GhostMemError], fragment: str
) -> None:
    translated_error = translate(error)
    assert type(translated_error) is expected
    message = str(translated_error)
    assert fragment in message and "\n" not in message


def test_errors_not_in_the_table_stay_the_drivers() -> None:
    bug = pg.UndefinedTable('relation "ghostmem.nope" does not exist')
    assert translate(bug) is None
    with pytest.raises(pg.UndefinedTable), translated():
        raise bug


def test_translated_keeps_the_database_error_as_the_cause() -> None:
    cause = pg.AdminShutdown("terminating connection due to administrator command")
    with pytest.raises(DatabaseUnavailable) as info, translated():
        raise cause
    assert info.value.__cause__ is cause


def test_the_first_database_error_explains_a_failed_cleanup() -> None:
    with pytest.raises(DatabaseUnavailable, match="administrator command") as info, translated():
        try:
            raise pg.AdminShutdown("terminating connection due to administrator command")
        finally:
            raise psycopg.OperationalError("the connection is closed")
    assert isinstance(info.value.__cause__, pg.AdminShutdown)
