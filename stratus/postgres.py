"""Where the read models live: a PostgreSQL URL, from the environment or from an embedded server.

Deployments name their PostgreSQL with ``DATABASE_URL``. A developer's machine needs nothing: without
it, Stratus runs PostgreSQL 16 from the ``pgserver`` wheel under ``<data_dir>/pg``, listening on a
Unix socket only. The wheel's binaries are driven directly with ``pg_ctl`` so that starting and
stopping are explicit calls (the wheel's own ``PostgresServer`` stops the server from ``atexit``
handlers keyed by process ids, which does not fit a supervisor that owns the server).

psycopg and subprocess errors are translated here into this module's exceptions.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import pwd
import shlex
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
from psycopg import sql

from stratus.config import Settings
from stratus.embedded import EmbeddedServer
from stratus.parentdeath import die_with_parent

# As root, PostgreSQL refuses to run; the server then runs as this system user (the name the
# pgserver wheel itself uses, so a machine that ran either has one user, not two).
SYSTEM_USER = "pgserver"
SUPERUSER = "postgres"
_SOCKET_NAME = ".s.PGSQL.5432"
# sun_path is 108 bytes on Linux, including the terminating NUL.
_MAX_SOCKET_PATH = 107


class PostgresError(Exception):
    """A PostgreSQL operation failed."""


class PostgresUnavailable(PostgresError):
    """The server cannot be reached (not running, wrong address, refused the login)."""


class DatabaseAlreadyExists(PostgresError):
    """``create_database`` was asked for a name that is taken."""


class EmbeddedPostgresError(PostgresError):
    """The embedded server could not be initialised, started or stopped."""


def database_url(settings: Settings) -> str:
    """The read models' PostgreSQL URL: ``DATABASE_URL`` if set, else the embedded server's.

    The embedded server is started if it is not already running under ``<data_dir>/pg`` and keeps
    running after this process exits, so that every part on one machine shares it; ``stratus run``
    owns it and stops it on exit (``EmbeddedPostgres.stop``).
    """
    if settings.database_url:
        return settings.database_url
    return EmbeddedPostgres(settings.data_dir / "pg").start()


def with_database(url: str, name: str) -> str:
    """``url`` with its database name replaced by ``name`` (URL or ``key=value`` form)."""
    if "://" in url:
        parts = urlsplit(url)
        return urlunsplit(parts._replace(path="/" + quote(name, safe="")))
    return psycopg.conninfo.make_conninfo(url, dbname=name)


def check_connection(url: str, timeout: float = 5.0) -> None:
    """Raise ``PostgresUnavailable`` unless a session can be opened at ``url``."""
    with _connect(url, timeout):
        pass


def create_database(admin_url: str, name: str) -> str:
    """Create database ``name`` on the server of ``admin_url``; return the new database's URL."""
    try:
        with _connect(admin_url) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.errors.DuplicateDatabase as e:
        raise DatabaseAlreadyExists(f"database {name!r} already exists") from e
    except psycopg.Error as e:
        raise PostgresError(f"cannot create database {name!r}: {e}") from e
    return with_database(admin_url, name)


def drop_database(admin_url: str, name: str) -> None:
    """Drop database ``name`` if it exists, disconnecting its sessions first."""
    try:
        with _connect(admin_url) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    except psycopg.Error as e:
        raise PostgresError(f"cannot drop database {name!r}: {e}") from e


@contextlib.contextmanager
def _connect(url: str, timeout: float = 10.0) -> Iterator[psycopg.Connection[Any]]:
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(timeout)))
    except psycopg.OperationalError as e:
        raise PostgresUnavailable(f"cannot connect to PostgreSQL: {e}") from e
    try:
        yield conn
    finally:
        conn.close()


def bin_dir() -> Path:
    """The pgserver wheel's PostgreSQL binaries, found without importing the wheel.

    (Importing ``pgserver`` creates lock files under the user's runtime directory.)
    """
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedPostgresError("the pgserver package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


class EmbeddedPostgres(EmbeddedServer):
    """PostgreSQL from the pgserver wheel, with its data in ``pgdata`` and a Unix socket only.

    ``start`` initialises the data directory on first use and adopts a server that is already
    running there; ``stop`` shuts it down (fast mode: sessions are disconnected, nothing is lost).
    """

    def __init__(self, pgdata: Path, *, start_timeout: float = 60.0) -> None:
        self.pgdata = pgdata.expanduser().absolute()
        self.log_file = self.pgdata / "server.log"
        self.start_timeout = start_timeout
        self._bin = bin_dir()
        self._user = SYSTEM_USER if os.geteuid() == 0 else None

    @property
    def socket_dir(self) -> Path:
        if len(str(self.pgdata / _SOCKET_NAME).encode()) <= _MAX_SOCKET_PATH:
            return self.pgdata
        digest = hashlib.sha256(str(self.pgdata).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"stratus-pg-{digest}"

    @property
    def url(self) -> str:
        return f"postgresql://{SUPERUSER}@/{SUPERUSER}?host={quote(str(self.socket_dir), safe='/')}"

    def is_running(self) -> bool:
        if not (self.pgdata / "PG_VERSION").exists():
            return False
        # pg_ctl status: 0 running, 3 not running, 4 no accessible data directory.
        return self._pg_ctl("status", check=False).returncode == 0

    def is_alive(self) -> bool:
        """A cheap liveness check for a started server: its postmaster process exists."""
        pid = self.postmaster_pid()
        return pid is not None and _process_exists(pid)

    def postmaster_pid(self) -> int | None:
        """The server's process id while it runs (first line of ``postmaster.pid``)."""
        try:
            first = (self.pgdata / "postmaster.pid").read_text().split("\n", 1)[0]
        except OSError:
            return None
        return int(first) if first.strip().isdigit() else None

    def start(self) -> str:
        """Start the server (initialising ``pgdata`` if new) and return its URL."""
        self._prepare()
        if not (self.pgdata / "PG_VERSION").exists():
            self._initdb()
        if not self.is_running():
            # pg_ctl hands these to a shell.
            options = f"-c listen_addresses='' -k {shlex.quote(str(self.socket_dir))}"
            self._pg_ctl(
                "start",
                "-w",
                "-t",
                str(int(self.start_timeout)),
                "-l",
                str(self.log_file),
                "-o",
                options,
            )
        return self.url

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server if it runs; a no-op otherwise."""
        if self.is_running():
            self._pg_ctl("stop", "-w", "-m", "fast", "-t", str(int(timeout)))
        if self.socket_dir != self.pgdata:
            # The short socket directory outside pgdata is empty once the server has stopped.
            with contextlib.suppress(OSError):
                self.socket_dir.rmdir()

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def _prepare(self) -> None:
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        socket_dir = self.socket_dir
        if socket_dir != self.pgdata:
            socket_dir.mkdir(mode=0o700, exist_ok=True)
            self._own(socket_dir)
        if self._user is not None:
            # The server's user must be able to reach its directories and the wheel's binaries.
            for path in (self.pgdata, socket_dir, self._bin):
                _ensure_traversable(path.parent)

    def _initdb(self) -> None:
        """Initialise a data directory beside ``pgdata`` and move it into place once complete.

        An initdb that is interrupted (its caller killed, say) then never leaves a half-made
        ``pgdata`` behind, which PostgreSQL could neither use nor initialise again.
        """
        if self.pgdata.exists():
            if any(self.pgdata.iterdir()):
                raise EmbeddedPostgresError(
                    f"{self.pgdata} exists and holds no PostgreSQL data directory (no PG_VERSION); "
                    "move it away or delete it"
                )
            self.pgdata.rmdir()
        prefix = f".{self.pgdata.name}.initdb-"
        for abandoned in self.pgdata.parent.glob(prefix + "*"):
            pid = abandoned.name.removeprefix(prefix)
            if not (pid.isdigit() and _process_exists(int(pid))):
                shutil.rmtree(abandoned, ignore_errors=True)
        staging = self.pgdata.parent / f"{prefix}{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(mode=0o700)
        self._own(staging)
        try:
            self._run(
                [
                    str(self._bin / "initdb"),
                    "-D",
                    str(staging),
                    "-U",
                    SUPERUSER,
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--locale=C",
                ],
                "initdb",
            )
            staging.rename(self.pgdata)
        except OSError as e:
            if not (self.pgdata / "PG_VERSION").exists():
                raise EmbeddedPostgresError(f"cannot move {staging} to {self.pgdata}: {e}") from e
            # Another process initialised the same directory first: use theirs.
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _own(self, directory: Path) -> None:
        if self._user is not None:
            entry = _ensure_system_user(self._user)
            os.chown(directory, entry.pw_uid, entry.pw_gid)

    def _pg_ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self._run(
            [str(self._bin / "pg_ctl"), "-D", str(self.pgdata), *args],
            f"pg_ctl {args[0]}",
            check=check,
        )

    def _run(self, argv: list[str], what: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        # pg_ctl's daemonised server inherits stdout/stderr: pipes would keep them open forever,
        # so output goes to a temporary file.
        # As root, drop to the server's user *and* its groups: with root's group kept, a directory
        # like pytest's (rwx-----x, root:root) would deny the group bits instead of granting "other".
        as_user: dict[str, Any] = {}
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            as_user = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
        with tempfile.TemporaryFile("w+") as out:
            try:
                done = subprocess.run(
                    argv,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    text=True,
                    cwd="/",
                    timeout=self.start_timeout + 30,
                    **as_user,
                    # initdb and pg_ctl end with their caller (the server pg_ctl starts does not).
                    preexec_fn=die_with_parent(),
                )
            except (OSError, subprocess.SubprocessError) as e:
                raise EmbeddedPostgresError(f"{what} failed for {self.pgdata}: {e}") from e
            out.seek(0)
            output = out.read()
        if check and done.returncode != 0:
            log = self.log_tail()
            raise EmbeddedPostgresError(
                f"{what} failed for {self.pgdata} (exit status {done.returncode}):\n{output}"
                + (f"\nserver log:\n{log}" if log else "")
            )
        return subprocess.CompletedProcess(argv, done.returncode, output, None)


def _ensure_system_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    try:
        subprocess.run(
            [useradd, "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            check=True,
            capture_output=True,
            text=True,
        )
    except (OSError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", "") or str(e)
        raise EmbeddedPostgresError(f"cannot create system user {name!r}: {detail}") from e
    return pwd.getpwnam(name)


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ensure_traversable(directory: Path) -> None:
    """Give others search permission on ``directory`` and its ancestors where it is missing."""
    for d in (directory, *directory.parents):
        mode = d.stat().st_mode
        if not mode & stat.S_IXOTH:
            d.chmod(mode | stat.S_IXOTH)
