"""``stratus conformance``: tempest's API tests, unmodified, against a Stratus stack of its own.

Operators' tools (tempest, gophercloud, Terraform, Ansible, Horizon) check Nova's, Keystone's and
Glance's responses strictly, per microversion; tempest's API tests are the most complete statement
of that contract. This runner:

1. installs tempest (pinned, ``TEMPEST_VERSION``) into a virtualenv of its own, apart from Stratus's
   (its dependencies are not ours), once per machine: ``~/.cache/stratus/tempest-<version>``;
2. starts a stack: the pinned JetStream server, PostgreSQL (``DATABASE_URL``'s server, in a fresh
   database, or an embedded one), ``stratus run`` on free ports and ``stratus simulate`` with
   simulated hosts, so that the servers tempest boots have room;
3. makes what tempest needs through the public APIs, as an operator would: projects and users with
   the admin, manager, member and reader roles (tempest's pre-provisioned accounts), a public
   image, two flavors;
4. writes ``tempest.conf`` and runs the selected tests (``--regex``, default the compute, identity
   v3 and image v2 API tests);
5. compares the results with the list of tests known to pass (``tests/conformance/passing.txt``):
   the run fails when one of them does not pass. ``--update`` rewrites the list from this run.

It talks to Stratus only through subprocesses (``stratus run``, ``stratus simulate``) and HTTP, as an
operator's tools do. Results: ``<workdir>/results.json`` (every test's status) and the summary printed
at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stratus.config import ADMIN_PASSWORD_ENV

ROOT = Path(__file__).resolve().parent.parent
TEMPEST_VERSION = "47.0.0"
PASSING_LIST = ROOT / "tests" / "conformance" / "passing.txt"
DEFAULT_REGEX = r"^tempest\.api\.(compute|identity\.(v3|admin\.v3)|image\.v2)\."
# Accounts per persona in tempest's pre-provisioned accounts file: tempest locks one per test class
# running at a time, so there must be at least as many as workers (and primary + alt per class).
ACCOUNTS_PER_PERSONA = 10
PERSONAS = ("member", "reader", "manager", "admin")
# The scheduler filters Stratus applies, under Nova's names (tempest skips tests of the others).
SCHEDULER_FILTERS = (
    "AvailabilityZoneFilter", "ComputeFilter", "ComputeCapabilitiesFilter", "ImagePropertiesFilter",
    "ServerGroupAntiAffinityFilter", "ServerGroupAffinityFilter",
)  # fmt: skip


class ConformanceError(Exception):
    """The stack or tempest could not be prepared."""


# -- tempest's virtualenv -------------------------------------------------------------------------


# Tempest's virtualenv lives outside the checkout, one per tempest version, so that a fresh clone on
# a machine that ran it before (a developer's, CI's) does not install it again.
TEMPEST_VENV = Path.home() / ".cache" / "stratus" / f"tempest-{TEMPEST_VERSION}"


def ensure_tempest(venv: Path = TEMPEST_VENV) -> Path:
    """``venv``'s tempest command, installing tempest ``TEMPEST_VERSION`` there first if needed;
    one installer at a time (two test workers may ask at once)."""
    stamp = venv / f".tempest-{TEMPEST_VERSION}"
    tempest = venv / "bin" / "tempest"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and tempest.exists():
            return tempest
        print(f"conformance: installing tempest {TEMPEST_VERSION} into {venv}", flush=True)
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"tempest=={TEMPEST_VERSION}"],
            check=True,
        )
        stamp.touch()
    return tempest


# -- the stack ------------------------------------------------------------------------------------


def own_listeners(port: Callable[[], int]) -> dict[str, str]:
    """Settings that put every listener of a ``stratus run`` but the API on ports of its own (each
    ``port()``; the parts' metrics on any free port), so that it runs beside another one on the
    machine (a developer's, CI's)."""
    serial, novnc = port(), port()
    return {
        "STRATUS_WATCH_BIND": f"127.0.0.1:{port()}",
        "STRATUS_METADATA_BIND": f"127.0.0.1:{port()}",
        "STRATUS_SERIALPROXY_BIND": f"127.0.0.1:{serial}",
        "STRATUS_SERIALPROXY_BASE_URL": f"ws://127.0.0.1:{serial}/",
        "STRATUS_NOVNCPROXY_BIND": f"127.0.0.1:{novnc}",
        "STRATUS_NOVNCPROXY_BASE_URL": f"http://127.0.0.1:{novnc}/vnc_lite.html",
        **{f"STRATUS_{part}_METRICS_BIND": "127.0.0.1:0" for part in METRICS_PARTS},
    }


METRICS_PARTS = ("PROJECTOR", "SCHEDULER", "HYPERVISOR", "NOTIFIER")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Stack:
    """A running Stratus: ``api`` (http://127.0.0.1:port) and the admin password."""

    api: str
    admin_password: str
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)


CHEAP_HASHES = {"STRATUS_PASSWORD_HASH_MEMORY_KIB": "32", "STRATUS_PASSWORD_HASH_ITERATIONS": "1"}


@contextlib.contextmanager
def running_stack(workdir: Path, *, hosts: int) -> Iterator[Stack]:
    """A whole control plane in ``workdir``, stopped (and its database dropped) on exit."""
    from stratus import natsserver, postgres
    from stratus.config import Settings

    data_dir = workdir / "stratus"
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    log_dir = workdir / "logs"
    log_dir.mkdir(exist_ok=True)
    admin_url = Settings.from_env().database_url
    database: str | None = None
    embedded: postgres.EmbeddedPostgres | None = None
    if admin_url:
        database = f"conformance_{uuid.uuid4().hex[:8]}"
        url = postgres.create_database(admin_url, database)
    else:
        embedded = postgres.EmbeddedPostgres(Path(tempfile.mkdtemp(prefix="stratus-conformance-")) / "pg")
        url = embedded.start()
    nats = natsserver.NatsServer(store_dir=data_dir / "nats")
    password = secrets.token_urlsafe(16)
    port = free_port()
    processes: list[subprocess.Popen[bytes]] = []
    try:
        nats_url = nats.start()
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "STRATUS_NATS_URL": nats_url,
            "STRATUS_DATA_DIR": str(data_dir),
            "STRATUS_API_BIND": f"127.0.0.1:{port}",
            **own_listeners(free_port),
            "PYTHONUNBUFFERED": "1",
            # argon2id at its least cost, unless asked otherwise: the stack is thrown away with its
            # random passwords, and tempest logs in ~350 times and makes ~100 users (at RFC 9106's
            # profile, 0.13 s of CPU each here: about half of the run's CPU)
            **{name: os.environ.get(name, value) for name, value in CHEAP_HASHES.items()},
        }
        stratus = [sys.executable, "-m", "processes.cli"]
        with open(log_dir / "run.log", "wb") as out:
            processes.append(
                subprocess.Popen(
                    [*stratus, "run"],
                    env={**env, ADMIN_PASSWORD_ENV: password},
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        if hosts:
            with open(log_dir / "simulate.log", "wb") as out:
                processes.append(
                    subprocess.Popen(
                        [
                            *stratus,
                            "simulate",
                            "--hosts",
                            str(hosts),
                            "--vcpus",
                            "64",
                            "--memory-mb",
                            "262144",
                            "--disk-gb",
                            "4000",
                            "--threads",
                            "4",
                        ],
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        api = f"http://127.0.0.1:{port}"
        _wait_for(api, processes, timeout=120)
        yield Stack(api, password, processes)
    finally:
        for proc in reversed(processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(processes):
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        nats.close()
        if database and admin_url:
            postgres.drop_database(admin_url, database)
        if embedded is not None:
            embedded.stop()


def _wait_for(api: str, processes: list[subprocess.Popen[bytes]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in processes:
            if proc.poll() is not None:
                raise ConformanceError(f"{proc.args!r} exited with {proc.returncode} while starting")
        try:
            with urllib.request.urlopen(f"{api}/", timeout=2):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.5)
    raise ConformanceError(f"the API at {api} did not answer within {timeout:.0f} s")


# -- the accounts and resources tempest needs -----------------------------------------------------


class Client:
    """Just enough of Keystone, Nova and Glance over HTTP to prepare a tempest run."""

    def __init__(self, api: str, password: str) -> None:
        self.api = api
        self.identity = f"{api}/identity/v3"
        # The admin is seeded on the log before the API starts; the read model may take a moment
        # (longer on a loaded machine). Each 401 meanwhile counts as a failed login, and the tenth in
        # five minutes makes the API answer 429 (api/identity/credentials.py): at most eight
        # attempts, further and further apart, over about a minute.
        for wait in (0.5, 1, 2, 4, 8, 15, 30, None):
            try:
                self.token = self._token("admin", password, "admin")
                break
            except urllib.error.HTTPError as e:
                if e.code != 401 or wait is None:
                    raise
                time.sleep(wait)

    def _token(self, user: str, password: str, project: str) -> str:
        body = {
            "auth": {
                "identity": {
                    "methods": ["password"],
                    "password": {"user": {"name": user, "domain": {"id": "default"}, "password": password}},
                },
                "scope": {"project": {"name": project, "domain": {"id": "default"}}},
            }
        }
        request = urllib.request.Request(
            f"{self.identity}/auth/tokens",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as r:
            return str(r.headers["X-Subject-Token"])

    def call(
        self,
        method: str,
        url: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        content_type: str = "application/json",
    ) -> Any:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        headers = {"X-Auth-Token": self.token, "Content-Type": content_type}
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=60) as r:
                text = r.read()
        except urllib.error.HTTPError as e:
            raise ConformanceError(f"{method} {url}: {e.code} {e.read()[:300]!r}") from e
        return json.loads(text) if text.strip() else None

    def role_ids(self) -> dict[str, str]:
        roles = self.call("GET", f"{self.identity}/roles")["roles"]
        return {r["name"]: r["id"] for r in roles}

    def make_project(self, name: str) -> str:
        project = self.call(
            "POST", f"{self.identity}/projects", {"project": {"name": name, "domain_id": "default"}}
        )
        return str(project["project"]["id"])

    def make_account(
        self, name: str, project: tuple[str, str], role: str, role_ids: dict[str, str]
    ) -> dict[str, Any]:
        """A user with ``role`` in ``project`` (name, id), in tempest's accounts-file shape."""
        password = secrets.token_urlsafe(12)
        project_name, project_id = project
        user = self.call(
            "POST",
            f"{self.identity}/users",
            {
                "user": {
                    "name": name,
                    "password": password,
                    "domain_id": "default",
                    "default_project_id": project_id,
                }
            },
        )
        self.call(
            "PUT", f"{self.identity}/projects/{project_id}/users/{user['user']['id']}/roles/{role_ids[role]}"
        )
        account: dict[str, Any] = {
            "username": name,
            "password": password,
            "project_name": project_name,
            "user_domain_name": "Default",
            "project_domain_name": "Default",
            "roles": [role],
        }
        if role == "admin":
            account["types"] = ["admin"]
        return account

    def make_system_account(self, name: str, role: str, role_ids: dict[str, str]) -> dict[str, Any]:
        """A user with ``role`` on the system (tempest's ``system_reader``), in the accounts-file shape."""
        password = secrets.token_urlsafe(12)
        body = {"user": {"name": name, "password": password, "domain_id": "default"}}
        user = self.call("POST", f"{self.identity}/users", body)
        self.call("PUT", f"{self.identity}/system/users/{user['user']['id']}/roles/{role_ids[role]}")
        return {"username": name, "password": password, "system": "all", "roles": [role]}

    def make_flavor(self, name: str, ram: int, vcpus: int, disk: int) -> str:
        body = {"flavor": {"name": name, "ram": ram, "vcpus": vcpus, "disk": disk}}
        return str(self.call("POST", f"{self.api}/v2.1/flavors", body)["flavor"]["id"])

    def make_image(self, name: str, data: bytes) -> str:
        image = self.call(
            "POST",
            f"{self.api}/image/v2/images",
            {"name": name, "disk_format": "raw", "container_format": "bare", "visibility": "public"},
        )
        self.call(
            "PUT",
            f"{self.api}/image/v2/images/{image['id']}/file",
            raw=data,
            content_type="application/octet-stream",
        )
        return str(image["id"])


@dataclass(frozen=True)
class Prepared:
    """What the stack was given for tempest: its accounts, two images and two flavors."""

    accounts: list[dict[str, Any]]
    image: str
    image_alt: str
    flavor: str
    flavor_alt: str


def prepare(stack: Stack) -> Prepared:
    client = Client(stack.api, stack.admin_password)
    role_ids = client.role_ids()
    accounts = []
    # Tempest's personas (project_member, project_reader, project_manager, admin) are users of one
    # project with one role each: it looks a persona up in the primary's project.
    for i in range(ACCOUNTS_PER_PERSONA):
        name = f"tempest-{i}"
        project = (name, client.make_project(name))
        for persona in PERSONAS:
            accounts.append(client.make_account(f"{name}-{persona}", project, persona, role_ids))
        # Tempest's identity admin tests read with a system reader (Keystone's default policy).
        accounts.append(client.make_system_account(f"{name}-system-reader", "reader", role_ids))
    image_data = b"\0" * (1024 * 1024)
    return Prepared(
        accounts=accounts,
        image=client.make_image("tempest-image", image_data),
        image_alt=client.make_image("tempest-image-alt", image_data),
        flavor=client.make_flavor("tempest-flavor", 128, 1, 1),
        flavor_alt=client.make_flavor("tempest-flavor-alt", 192, 1, 1),
    )


# -- tempest.conf ---------------------------------------------------------------------------------


def tempest_conf(stack: Stack, prepared: Prepared, accounts_file: Path, log_dir: Path) -> str:
    admin = next(a for a in prepared.accounts if a["roles"] == ["admin"])
    identity = f"{stack.api}/identity/v3"
    return f"""[DEFAULT]
log_dir = {log_dir}
log_file = tempest.log

[auth]
use_dynamic_credentials = False
test_accounts_file = {accounts_file}
admin_username = {admin["username"]}
admin_password = {admin["password"]}
admin_project_name = {admin["project_name"]}
admin_domain_name = Default
default_credentials_domain_name = Default
tempest_roles = member
create_isolated_networks = False

[identity]
uri_v3 = {identity}
auth_version = v3
region = RegionOne
disable_ssl_certificate_validation = True

[identity-feature-enabled]
api_v2 = False
api_v3 = True
security_compliance = False
project_tags = False
application_credentials = True
access_rules = True

[compute]
image_ref = {prepared.image}
image_ref_alt = {prepared.image_alt}
flavor_ref = {prepared.flavor}
flavor_ref_alt = {prepared.flavor_alt}
min_microversion = 2.1
max_microversion = latest
build_timeout = 60
build_interval = 1
min_compute_nodes = 2

[compute-feature-enabled]
# Stratus sets no guest password (no agent in the guest): create answers no adminPass.
enable_instance_password = False
resize = True
cold_migration = True
live_migration = False
block_migration_for_live_migration = False
console_output = True
pause = True
suspend = True
shelve = True
shelve_migrate = False
rescue = False
snapshot = False
change_password = False
interface_attach = False
attach_encrypted_volume = False
vnc_console = False
spice_console = False
serial_console = False
metadata_service = False
config_drive = False
personality = False
cinder = False
scheduler_enabled_filters = {",".join(SCHEDULER_FILTERS)}

[image]
# Waits for an image's deletion: a protected image tempest cannot unprotect (no PATCH yet) would
# otherwise hold a worker for 300 s.
build_timeout = 30
image_path =
disk_formats = raw,qcow2,ami,ari,aki,vhd,vmdk,vdi,iso,ploop
container_formats = bare,ami,ari,aki,ovf,ova,docker,compressed

[image-feature-enabled]
api_v2 = True
import_image = False
os_glance_reserved = False

[network-feature-enabled]
ipv6 = False

[service_available]
nova = True
glance = True
neutron = False
cinder = False
swift = False
heat = False
horizon = False

[validation]
run_validation = False
connect_method = fixed
"""


def write_accounts(path: Path, accounts: list[dict[str, Any]]) -> None:
    lines = []
    for a in accounts:
        lines.append(f"- username: '{a['username']}'")
        lines.append(f"  password: '{a['password']}'")
        lines.append("  user_domain_name: 'Default'")
        if "system" in a:
            lines.append(f"  system: '{a['system']}'")
        else:
            lines.append(f"  project_name: '{a['project_name']}'")
            lines.append("  project_domain_name: 'Default'")
        lines.append(f"  roles: [{', '.join(repr(r) for r in a['roles'])}]")
        if "types" in a:
            lines.append(f"  types: [{', '.join(repr(t) for t in a['types'])}]")
    path.write_text("\n".join(lines) + "\n")


# -- running tempest and reading its results ------------------------------------------------------

# Run in tempest's own interpreter (python-subunit is installed there): test id -> status.
_READ_SUBUNIT = r"""
import json, sys
import subunit, testtools
statuses = {}
class Collect(testtools.StreamResult):
    def status(self, test_id=None, test_status=None, **kw):
        if test_id and test_status in ("success", "fail", "skip", "xfail", "uxsuccess"):
            if statuses.get(test_id) != "fail":
                statuses[test_id] = test_status
stream = subunit.ByteStreamToStreamResult(sys.stdin.buffer, non_subunit_name="stdout")
result = Collect()
result.startTestRun()
stream.run(result)
result.stopTestRun()
json.dump(statuses, sys.stdout)
"""


def run_tempest(tempest: Path, workspace: Path, conf: str, regex: str, concurrency: int) -> dict[str, str]:
    """Run the tests matching ``regex`` in a fresh workspace; every test id's status."""
    shutil.rmtree(workspace, ignore_errors=True)
    (workspace / "etc").mkdir(parents=True)
    # What `tempest init` writes, without registering the workspace in ~/.tempest.
    package = subprocess.run(
        [
            str(tempest.parent / "python"),
            "-c",
            "import os, tempest; print(os.path.dirname(tempest.__file__))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (workspace / ".stestr.conf").write_text(
        f"[DEFAULT]\ntest_path={package}/test_discover\ntop_dir={package}\ngroup_regex=([^\\.]*\\.)*\n"
    )
    (workspace / "etc" / "tempest.conf").write_text(
        conf + f"\n[oslo_concurrency]\nlock_path = {workspace / 'tempest_lock'}\n"
    )
    subprocess.run(
        [str(tempest), "run", "--regex", regex, "--concurrency", str(concurrency)],
        cwd=workspace,
        check=False,  # failures are read from the results below
    )
    stestr = tempest.parent / "stestr"
    last = subprocess.run([str(stestr), "last", "--subunit"], cwd=workspace, capture_output=True, check=False)
    python = tempest.parent / "python"
    read = subprocess.run(
        [str(python), "-c", _READ_SUBUNIT], input=last.stdout, capture_output=True, check=True
    )
    statuses: dict[str, str] = json.loads(read.stdout)
    return {_bare(test_id): status for test_id, status in statuses.items()}


def _bare(test_id: str) -> str:
    """``tempest.api.x.Test.test_y[id-...,smoke]`` -> ``tempest.api.x.Test.test_y`` (stable across tags)."""
    return test_id.split("[", 1)[0]


def compare(statuses: dict[str, str], expected: set[str]) -> tuple[list[str], list[str]]:
    """Tests expected to pass that did not (regressions), and tests passing that are not listed."""
    passed = {t for t, s in statuses.items() if s == "success"}
    return sorted(expected - passed), sorted(passed - expected)


def listed_regex(tests: set[str]) -> str:
    """A regex selecting exactly ``tests`` (ids without their ``[id-...]`` attributes)."""
    return "^(" + "|".join(re.escape(t) for t in sorted(tests)) + r")(\[|$)"


def read_list(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {
        line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")
    }


def write_list(path: Path, tests: set[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        "# Tempest tests that pass against Stratus (stratus conformance --update writes this file).\n"
        f"# tempest {TEMPEST_VERSION}; CI fails when one of them stops passing (docs/conformance.md).\n"
    )
    path.write_text(header + "".join(f"{t}\n" for t in sorted(tests)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="stratus conformance", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=ROOT / ".stratus" / "conformance",
        help="the stack's data, logs and results (default .stratus/conformance)",
    )
    parser.add_argument(
        "--tempest-venv",
        type=Path,
        default=TEMPEST_VENV,
        help=f"tempest's virtualenv, made when missing (default {TEMPEST_VENV})",
    )
    parser.add_argument("--regex", default=DEFAULT_REGEX, help=f"tests to run (default {DEFAULT_REGEX})")
    parser.add_argument("--concurrency", type=int, default=2, help="tempest workers (default 2)")
    parser.add_argument("--hosts", type=int, default=4, help="simulated compute hosts besides compute-1")
    parser.add_argument("--list", type=Path, default=PASSING_LIST, help="the tests expected to pass")
    parser.add_argument("--update", action="store_true", help="rewrite the list from this run's passes")
    parser.add_argument(
        "--only-listed",
        action="store_true",
        help="run only the tests of the list (CI: minutes instead of the whole set's)",
    )
    args = parser.parse_args(argv)
    if args.only_listed:
        listed = read_list(args.list)
        if not listed:
            print(f"conformance: {args.list} lists no test")
            return 2
        args.regex = listed_regex(listed)
    workdir = args.workdir.absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    tempest = ensure_tempest(args.tempest_venv.absolute())
    started = time.monotonic()
    with running_stack(workdir, hosts=args.hosts) as stack:
        prepared = prepare(stack)
        accounts = workdir / "accounts.yaml"
        write_accounts(accounts, prepared.accounts)
        conf = tempest_conf(stack, prepared, accounts, workdir / "logs")
        statuses = run_tempest(tempest, workdir / "workspace", conf, args.regex, args.concurrency)
    (workdir / "results.json").write_text(json.dumps(statuses, indent=1, sort_keys=True))
    counts: dict[str, int] = {}
    for status in statuses.values():
        counts[status] = counts.get(status, 0) + 1
    if not statuses:
        print("conformance: tempest ran no test (see its output above: a discovery or configuration error)")
        return 2
    expected = read_list(args.list)
    regressions, new = compare(statuses, expected)
    print(
        f"conformance: {len(statuses)} tests in {time.monotonic() - started:.0f} s: "
        + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    )
    if args.update:
        write_list(args.list, {t for t, s in statuses.items() if s == "success"})
        print(f"conformance: wrote {args.list}")
        return 0
    if new:
        print(f"conformance: {len(new)} passing tests are not in {args.list} yet (--update adds them)")
    if regressions:
        print(f"conformance: {len(regressions)} listed tests did not pass:")
        for test in regressions:
            print(f"  {test}: {statuses.get(test, 'not run')}")
        return 1
    print(f"conformance: every one of the {len(expected)} listed tests passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
