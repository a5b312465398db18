"""The one table from database errors to ghostmem errors."""

from __future__ import annotations

import psycopg
import pytest
from ghostmem.errors import (
    DatabaseError,
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
        # too large for an index entry is an OperationalError too, but no lost connection: running it again fails
        (
            pg.ProgramLimitExceeded("index row size 3024 exceeds btree version 4 maximum 2704 for index \"k\""),
            InvalidArgument,
            "cannot hold a value this large (index row size 3024",
        ),
        (pg.InsufficientPrivilege("permission denied for table messages"), PermissionDenied, "may not do that"),
        # a cancelled statement is an OperationalError, but no lost connection
        (pg.QueryCanceled("canceling statement due to statement timeout"), DatabaseError, "cancelled the call"),
        (pg.LockNotAvailable("canceling statement due to lock timeout"), DatabaseError, "waiting for a lock"),
        (pg.DeadlockDetected("deadlock detected"), DatabaseError, "rolled the call back (deadlock detected)"),
        (pg.SerializationFailure("canceling statement due to conflict with recovery"), DatabaseError, "run it again"),
    ],
)  # fmt: skip
def test_database_errors_become_one_ghostmem_sentence(
    error: psycopg.Error, expected: type[GhostMemError], fragment: str
) -> None:
    translated_error = translate(error)
    assert type(translated_error) is expected
    message = str(translated_error)
    assert fragment in message and "\n" not in message


def test_errors_not_in_the_table_are_one_sentence_naming_them() -> None:
    """A model calling a tool gets a sentence, not an exception that ends its run; the driver's error stays the
    cause (a bug shows in the traceback of whoever logs it)."""
    bug = pg.UndefinedTable('relation "ghostmem.nope" does not exist')
    with pytest.raises(DatabaseError) as info, translated():
        raise bug
    assert (
        str(info.value)
        == 'the database could not do that (relation "ghostmem.nope" does not exist; SQLSTATE 42P01)'
    )
    assert info.value.__cause__ is bug
    driver = psycopg.ProgrammingError("the query has 1 placeholder but 2 parameters were passed")
    assert str(translate(driver)) == (
        "the database could not do that (the query has 1 placeholder but 2 parameters were passed; ProgrammingError)"
    )


def test_a_listed_error_of_a_failed_cleanup_wins_over_an_unlisted_first_one() -> None:
    with pytest.raises(DatabaseUnavailable, match="the connection is closed"), translated():
        try:
            raise psycopg.ProgrammingError("a bug")
        finally:
            raise psycopg.OperationalError("the connection is closed")


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
