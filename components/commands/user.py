"""`helios user add|list|remove`: manage the dashboard's users file ($HELIOS_AUTH_FILE or --auth-file)."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from pathlib import Path

from analytics.commands.common import fail
from components.server.users import (
    ROLES,
    UserRecord,
    UsersFileError,
    check_role,
    check_user_name,
    hash_password,
    load_users,
    locked_users,
)


def _auth_file(args: argparse.Namespace) -> Path:
    path = args.auth_file or os.environ.get("HELIOS_AUTH_FILE")
    if not path:
        raise UsersFileError("no users file: pass --auth-file PATH or set HELIOS_AUTH_FILE")
    return Path(path)


def read_password(from_stdin: bool) -> str:
    """The new password: the first line of stdin with --password-stdin, else typed twice at a prompt."""
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    if not sys.stdin.isatty():
        raise UsersFileError("stdin is not a terminal: use --password-stdin to pipe the password")
    first = getpass.getpass("Password: ")
    if getpass.getpass("Repeat password: ") != first:
        raise UsersFileError("the two passwords differ")
    return first


def run_add(args: argparse.Namespace) -> int:
    """Run `helios user add`: add (or with --replace, update) a user with a role and a hashed password."""
    try:
        path = _auth_file(args)
        name, role = check_user_name(args.name), check_role(args.role)
        password_hash = hash_password(read_password(args.password_stdin))
        with locked_users(path) as users:
            if name in users and not args.replace:
                raise UsersFileError(f"{path}: user {name!r} exists (use --replace to change it)")
            action = "updated" if name in users else "added"
            users[name] = UserRecord(name, role, password_hash)
    except (UsersFileError, OSError) as exc:
        return fail(str(exc))
    print(f"{action} user {name} ({role}) in {path}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    """Run `helios user list`: print each user's name and role."""
    try:
        users = load_users(_auth_file(args))
    except (UsersFileError, OSError) as exc:
        return fail(str(exc))
    for user in sorted(users.values(), key=lambda u: u.name):
        print(f"{user.name}\t{user.role}")
    return 0


def run_remove(args: argparse.Namespace) -> int:
    """Run `helios user remove`: delete a user (their sessions end on their next request)."""
    try:
        path = _auth_file(args)
        with locked_users(path) as users:
            if args.name not in users:
                raise UsersFileError(f"{path}: no user {args.name!r}")
            del users[args.name]
    except (UsersFileError, OSError) as exc:
        return fail(str(exc))
    print(f"removed user {args.name} from {path}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `user` sub-command with its add, list and remove actions."""
    p = subparsers.add_parser(
        "user",
        help="manage dashboard users (admin | viewer) in the users file",
        description="Users file: --auth-file PATH or $HELIOS_AUTH_FILE (JSON, salted scrypt hashes, 0600).",
    )
    actions = p.add_subparsers(dest="user_action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="add a user (reads the password from stdin or a prompt)")
    add.add_argument("name", metavar="NAME", help="user name (letters, digits, '.', '_', '@', '-')")
    add.add_argument("--role", required=True, choices=ROLES, help="admin may upload and delete datasets")
    add.add_argument("--password-stdin", action="store_true", help="read it from stdin's first line")
    add.add_argument("--replace", action="store_true", help="update an existing user's role and password")
    add.set_defaults(func=run_add)
    lst = actions.add_parser("list", help="list users and roles")
    lst.set_defaults(func=run_list)
    rm = actions.add_parser("remove", help="remove a user")
    rm.add_argument("name", metavar="NAME")
    rm.set_defaults(func=run_remove)
    for sub in (add, lst, rm):
        sub.add_argument("--auth-file", type=Path, metavar="PATH", help="default $HELIOS_AUTH_FILE")
