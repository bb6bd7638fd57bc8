"""`helios user add|list|remove` through the real CLI; the users file: salted hashes, 0600, atomic."""

from __future__ import annotations

import io
import json
import os
import sys

import pytest

import cli
from components.server import users as auth_users
from components.server.users import UserRecord, UsersFileError, load_users, save_users, verify_password

USER_MODULE = "components.commands.user"


@pytest.fixture(autouse=True)
def user_command(monkeypatch):
    """Make sure `helios user` is registered (cli.py lists it once the lead wires it in)."""
    if USER_MODULE not in cli.COMMAND_MODULES:
        monkeypatch.setattr(cli, "COMMAND_MODULES", (*cli.COMMAND_MODULES, USER_MODULE))


@pytest.fixture
def users_path(tmp_path, monkeypatch):
    """The users file path, also in HELIOS_AUTH_FILE."""
    path = tmp_path / "etc" / "users.json"
    monkeypatch.setenv("HELIOS_AUTH_FILE", str(path))
    return path


def helios(argv: list[str], monkeypatch, stdin: str = "") -> int:
    """Run the real `helios` entry point with stdin text."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    return cli.main(argv)


def add(name: str, role: str, password: str, monkeypatch, *extra: str) -> int:
    """Run `helios user add NAME --role ROLE --password-stdin` with the password on stdin."""
    argv = ["user", "add", name, "--role", role, "--password-stdin", *extra]
    return helios(argv, monkeypatch, password + "\n")


def test_add_list_remove(users_path, monkeypatch, capsys):
    assert add("alice", "admin", "correct horse", monkeypatch) == 0
    assert add("victor", "viewer", "battery staple", monkeypatch) == 0
    assert "added user victor (viewer)" in capsys.readouterr().out
    assert helios(["user", "list"], monkeypatch) == 0
    assert capsys.readouterr().out.splitlines() == ["alice\tadmin", "victor\tviewer"]
    assert helios(["user", "remove", "victor"], monkeypatch) == 0
    assert set(load_users(users_path)) == {"alice"}
    assert verify_password(load_users(users_path)["alice"], "correct horse")


def test_file_is_0600_salted_and_has_no_plain_password(users_path, monkeypatch):
    add("alice", "admin", "same password", monkeypatch)
    add("bob", "viewer", "same password", monkeypatch)
    assert users_path.stat().st_mode & 0o777 == 0o600
    text = users_path.read_text()
    assert "same password" not in text
    hashes = [u["password_hash"] for u in json.loads(text)["users"].values()]
    assert hashes[0] != hashes[1] and all(h.startswith("scrypt:") for h in hashes)


def test_crlf_password_line_is_trimmed(users_path, monkeypatch):
    helios(["user", "add", "carol", "--role", "viewer", "--password-stdin"], monkeypatch, "windows-pw\r\n")
    assert verify_password(load_users(users_path)["carol"], "windows-pw")


def test_existing_user_needs_replace(users_path, monkeypatch, capsys):
    add("alice", "viewer", "first password", monkeypatch)
    assert add("alice", "admin", "second password", monkeypatch) == 2
    assert "user 'alice' exists (use --replace" in capsys.readouterr().err
    assert add("alice", "admin", "second password", monkeypatch, "--replace") == 0
    record = load_users(users_path)["alice"]
    assert record.role == "admin" and verify_password(record, "second password")


@pytest.mark.parametrize(
    "name,password,message",
    [
        ("../etc/passwd", "long enough pw", "invalid user name '../etc/passwd'"),
        ("a:b", "long enough pw", "invalid user name 'a:b'"),
        ("", "long enough pw", "invalid user name ''"),
        ("x" * 65, "long enough pw", "invalid user name"),
        ("dave", "short", "password must have 8 to 1024 characters"),
        ("dave", "", "password must have 8 to 1024 characters"),
    ],
)
def test_bad_names_and_passwords_exit_2(users_path, monkeypatch, capsys, name, password, message):
    assert add(name, "viewer", password, monkeypatch) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not users_path.exists()


def test_unknown_role_is_refused_by_argparse(users_path, monkeypatch, capsys):
    with pytest.raises(SystemExit) as info:
        add("dave", "root", "long enough pw", monkeypatch)
    assert info.value.code == 2 and "invalid choice: 'root'" in capsys.readouterr().err


def test_no_users_file_configured(monkeypatch, capsys):
    monkeypatch.delenv("HELIOS_AUTH_FILE", raising=False)
    assert helios(["user", "list"], monkeypatch) == 2
    assert "pass --auth-file PATH or set HELIOS_AUTH_FILE" in capsys.readouterr().err


def test_auth_file_option_overrides_env(users_path, tmp_path, monkeypatch):
    other = tmp_path / "other.json"
    assert add("erin", "viewer", "long enough pw", monkeypatch, "--auth-file", str(other)) == 0
    assert set(load_users(other)) == {"erin"} and not users_path.exists()


def test_remove_unknown_user(users_path, monkeypatch, capsys):
    add("alice", "admin", "long enough pw", monkeypatch)
    assert helios(["user", "remove", "nobody"], monkeypatch) == 2
    assert "no user 'nobody'" in capsys.readouterr().err


def test_password_without_stdin_flag_needs_a_terminal(users_path, monkeypatch, capsys):
    assert helios(["user", "add", "frank", "--role", "viewer"], monkeypatch, "piped\n") == 2
    assert "use --password-stdin" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text,message",
    [
        ("{not json", "not valid JSON (line 1, column 2"),
        ('{"users": []}', "expected an object with a 'users' object"),
        ('{"users": {"eve": {"role": "admin"}}}', "user 'eve' needs an object with 'role'"),
        ('{"users": {"eve": {"role": "root", "password_hash": "x"}}}', "invalid role 'root'"),
        ('{"users": {"e/v": {"role": "admin", "password_hash": "x"}}}', "invalid user name 'e/v'"),
    ],
)
def test_malformed_users_file_is_a_clear_error(users_path, monkeypatch, capsys, text, message):
    users_path.parent.mkdir(parents=True)
    users_path.write_text(text)
    assert helios(["user", "list"], monkeypatch) == 2
    err = capsys.readouterr().err
    assert str(users_path) in err and message in err and err.count("\n") == 1


def test_failed_write_leaves_the_old_file_and_no_temp_file(users_path, monkeypatch, capsys):
    add("alice", "admin", "long enough pw", monkeypatch)
    before = users_path.read_bytes()

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(auth_users.os, "replace", broken_replace)
    assert add("bob", "viewer", "long enough pw", monkeypatch) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert users_path.read_bytes() == before
    assert sorted(p.name for p in users_path.parent.iterdir()) == [".users.json.lock", "users.json"]


def test_save_users_replaces_atomically(tmp_path, monkeypatch):
    path = tmp_path / "users.json"
    save_users(path, {})
    renames = []
    real = os.replace
    monkeypatch.setattr(auth_users.os, "replace", lambda a, b: renames.append((a, b)) or real(a, b))
    save_users(path, {"gina": UserRecord("gina", "viewer", "scrypt:x")})
    assert len(renames) == 1 and renames[0][1] == path and os.path.dirname(renames[0][0]) == str(tmp_path)
    assert load_users(path)["gina"].role == "viewer"


def test_load_users_missing_file_message(tmp_path):
    with pytest.raises(UsersFileError, match="no such users file"):
        load_users(tmp_path / "absent.json")
