"""What race-free quotas cost: the ways a create can be checked against its project's usage, side by side.

Paths, in interleaved rounds on one JetStream server (ratios within a round, then the median):

- ``no quota``: the create's ``Instance.Requested`` alone, one plain publish (the floor);
- ``project filter check``: the same event as one publish carrying
  ``Nats-Expected-Last-Subject-Sequence-Subject`` over a per-project wildcard (the alternative
  design: it needs the project in every subject, and a usage computed elsewhere at that position);
- ``ProjectUsage``: what Stratus does, ``Handlers.create_server`` (loads the project's usage,
  checks the limits, appends ``InstanceCharged`` + ``Requested`` as one atomic batch);
- contention: 16 clients creating at once in one project vs each in its own project.

Run: ``python -m tests.bench.bench_quota [--creates 300] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import threading
import uuid
from functools import partial

import orjson

from commands.app import Stratus
from commands.flavors.create import CreateFlavor
from commands.instance import Instance
from commands.quota import ProjectQuota
from commands.servers.create import CreateServer
from stratus.config import Settings
from stratus.eventstore import Factory, NatsBridge
from tests.bench.harness import Bench, CpuMeter, loadavg, machine_lines, nats_server
from tests.fixtures.facades.handlers import Handlers

UNLIMITED = {"instances": -1, "cores": -1, "ram": -1}


def unlimited(app: Stratus, project_id: str) -> None:
    quota = ProjectQuota(project_id)  # type: ignore[call-arg]
    quota.set_limits(UNLIMITED, {})
    app.save(quota)


def instance(project_id: str) -> Instance:
    return Instance.request(
        uuid.uuid4(), name="vm", project_id=project_id, user_id="u", flavor={"vcpus": 1, "ram": 512},
        image_ref="", metadata={}, availability_zone=None, request_key=None,
    )  # fmt: skip


def no_quota(app: Stratus, n: int) -> int:
    for _ in range(n):
        app.save(instance("free"))
    return n


def project_filter(bridge: NatsBridge, settings: Settings, n: int, project: str) -> int:
    """One publish per create, checked against the last sequence of anything in the project."""
    prefix = f"{settings.subject_prefix}.q.{project}"

    async def go() -> None:
        last = 0
        for _ in range(n):
            ack = await bridge.js.publish(
                f"{prefix}.{uuid.uuid4()}.requested",
                orjson.dumps({"name": "vm", "project_id": project, "flavor": {"vcpus": 1, "ram": 512}}),
                stream=settings.stream,
                headers={
                    "Nats-Expected-Last-Subject-Sequence": str(last),
                    "Nats-Expected-Last-Subject-Sequence-Subject": f"{prefix}.>",
                },
            )
            last = ack.seq

    bridge.run(go, 300)
    return n


def with_usage(handlers: Handlers, n: int, project: str) -> int:
    for i in range(n):
        handlers.create_server(CreateServer(f"vm-{i}", project, "u", "1", networks="none"))
    return n


def contended(settings: Settings, clients: int, per_client: int, same_project: bool, tag: str) -> int:
    errors: list[BaseException] = []

    def client(c: int) -> None:
        with NatsBridge(settings.nats_urls, name=f"bench-{c}").start() as b:
            h = Handlers(Stratus(Factory(bridge=b, settings=settings)))
            try:
                with_usage(h, per_client, f"{tag}-shared" if same_project else f"{tag}-{c}")
            except BaseException as e:
                errors.append(e)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return clients * per_client


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_quota", description=__doc__)
    parser.add_argument("--creates", type=int, default=300, help="sequential creates per path per round")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    with nats_server() as server:
        settings = dataclasses.replace(
            Settings(), nats_urls=(server.url,), stream="BENCHQ", subject_prefix="bq.ev"
        )
        bridge = NatsBridge(settings.nats_urls, name="bench").start()
        try:
            app = Stratus(Factory(bridge=bridge, settings=settings))
            handlers = Handlers(app)
            handlers.create_flavor(CreateFlavor("1", "m1.tiny", vcpus=1, ram=512, disk=1))
            print("\n".join(machine_lines()))
            bench = Bench(CpuMeter(server.pid))
            per_client = max(args.creates // args.clients, 1)
            for r in range(args.rounds):
                print(f"round {r + 1}/{args.rounds} (load {loadavg()})")
                project = f"r{r}"
                unlimited(app, project)
                for c in range(args.clients):
                    unlimited(app, f"c{r}-{c}")
                unlimited(app, f"c{r}-shared")
                bench.measure("no quota (Requested alone)", "creates", lambda: no_quota(app, args.creates))
                bench.measure(
                    "project filter check (one publish)", "creates",
                    partial(project_filter, bridge, settings, args.creates, project),
                    floor="no quota (Requested alone)",
                )  # fmt: skip
                bench.measure(
                    "ProjectUsage (Handlers.create_server)", "creates",
                    partial(with_usage, handlers, args.creates, project),
                    floor="no quota (Requested alone)",
                )  # fmt: skip
                bench.measure(
                    f"{args.clients} clients, own projects", "creates",
                    partial(contended, settings, args.clients, per_client, False, f"c{r}"),
                )  # fmt: skip
                bench.measure(
                    f"{args.clients} clients, one project", "creates",
                    partial(contended, settings, args.clients, per_client, True, f"c{r}"),
                    floor=f"{args.clients} clients, own projects",
                )  # fmt: skip
            print(f"load average at end: {loadavg()}; recorder stats: {dict(app.recorder.stats)}")  # type: ignore[attr-defined]
            print()
            print(bench.table(f"Quota checks at create ({args.creates} creates per path per round)"))
        finally:
            bridge.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
