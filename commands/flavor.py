"""Flavor: a named size (vCPUs, RAM, disk) that servers are built from."""

from __future__ import annotations

from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from commands.errors import AlreadyExists, ConflictingState, InvalidInput, NotFound

_NS = uuid5(NAMESPACE_URL, "urn:stratus:flavor")


def flavor_aggregate_id(flavorid: str) -> UUID:
    """Flavors are addressed by Nova's string flavor id; the aggregate id is derived from it."""
    return uuid5(_NS, flavorid)


class Flavor(Aggregate):
    """A named size (vCPUs, RAM, disk, ephemeral, swap) servers are built from, with extra specs, access."""

    @staticmethod
    def create_id(flavorid: str) -> UUID:
        return flavor_aggregate_id(flavorid)

    class Created(Aggregate.Created):
        """A flavor (a named size for servers) was created."""

        flavorid: str
        name: str
        vcpus: int
        ram: int
        disk: int
        ephemeral: int
        swap: int
        rxtx_factor: float
        is_public: bool
        description: str | None

    @event(Created)
    def __init__(
        self,
        flavorid: str,
        name: str,
        vcpus: int,
        ram: int,
        disk: int,
        ephemeral: int = 0,
        swap: int = 0,
        rxtx_factor: float = 1.0,
        is_public: bool = True,
        description: str | None = None,
    ) -> None:
        self.flavorid = flavorid
        self.name = name
        self.vcpus = vcpus
        self.ram = ram
        self.disk = disk
        self.ephemeral = ephemeral
        self.swap = swap
        self.rxtx_factor = rxtx_factor
        self.is_public = is_public
        self.description = description
        self.deleted = False
        self.extra_specs: dict[str, str] = {}
        # Projects given access to a private flavor (os-flavor-access).
        self.projects: list[str] = []

    @classmethod
    def create(cls, **fields: object) -> Flavor:
        flavorid = str(fields["flavorid"])
        if not flavorid or len(flavorid) > 255 or not all(c.isalnum() or c in "._- " for c in flavorid):
            raise InvalidInput("Invalid input for field/attribute id: 1-255 of [A-Za-z0-9._- ]")
        for name in ("vcpus", "ram"):
            if int(fields[name]) < 1:  # type: ignore[call-overload]
                raise InvalidInput(f"Invalid input for field/attribute {name}: must be >= 1")
        for name in ("disk", "ephemeral", "swap"):
            if int(fields.get(name, 0)) < 0:  # type: ignore[call-overload]
                raise InvalidInput(f"Invalid input for field/attribute {name}: must be >= 0")
        return cls(**fields)  # type: ignore[arg-type]

    def ensure_usable(self) -> None:
        if self.deleted:
            raise NotFound(f"Flavor {self.flavorid} could not be found.")

    def delete(self) -> None:
        self.ensure_usable()
        self._deleted()

    class Deleted(Aggregate.Event):
        """A flavor was deleted; servers built from it keep their copy."""

    @event(Deleted)
    def _deleted(self) -> None:
        self.deleted = True

    def accessible_to(self, project_id: str) -> bool:
        """A public flavor is everyone's; a private one only the projects given access (admins aside)."""
        return self.is_public or project_id in self.projects

    def describe(self, description: str | None) -> None:
        """Change the description (Nova's ``PUT /flavors/{id}``, 2.55): the only field that changes."""
        self.ensure_usable()
        if description != self.description:
            self._description_updated(description)

    class DescriptionUpdated(Aggregate.Event):
        """A flavor's description was changed (Nova's PUT /flavors/{id}, microversion 2.55); null clears
        it."""

        description: str | None

    @event(DescriptionUpdated)
    def _description_updated(self, description: str | None) -> None:
        self.description = description

    # -- extra specs (os-extra_specs) -------------------------------------------------------------
    def set_extra_specs(self, specs: dict[str, str]) -> None:
        self.ensure_usable()
        for key, value in specs.items():
            if not key or len(key) > 255 or not all(c.isalnum() or c in "-_:. " for c in key):
                raise InvalidInput(f"Invalid input for field/attribute extra_specs key {key[:64]!r}")
            if len(value) > 255:
                raise InvalidInput(f"Invalid input for field/attribute extra_specs.{key}: 0-255 characters")
        changed = {k: v for k, v in specs.items() if self.extra_specs.get(k) != v}
        if changed:
            self._extra_specs_set(changed)

    class ExtraSpecsSet(Aggregate.Event):
        """Extra specs of a flavor were set (merged into the existing ones)."""

        extra_specs: dict[str, str]

    @event(ExtraSpecsSet)
    def _extra_specs_set(self, extra_specs: dict[str, str]) -> None:
        self.extra_specs = {**self.extra_specs, **extra_specs}

    def delete_extra_spec(self, key: str) -> None:
        self.ensure_usable()
        if key not in self.extra_specs:
            raise NotFound(f"Flavor {self.flavorid} has no extra specs with key {key}.")
        self._extra_spec_deleted(key)

    class ExtraSpecDeleted(Aggregate.Event):
        """An extra spec of a flavor was deleted."""

        key: str

    @event(ExtraSpecDeleted)
    def _extra_spec_deleted(self, key: str) -> None:
        self.extra_specs = {k: v for k, v in self.extra_specs.items() if k != key}

    # -- access lists (os-flavor-access) --------------------------------------------------------
    def add_access(self, project_id: str) -> None:
        self.ensure_usable()
        if self.is_public:
            raise ConflictingState("Can not add access to a public flavor.")
        if project_id in self.projects:
            raise AlreadyExists(
                f"Flavor access already exists for flavor {self.flavorid} "
                f"and project {project_id} combination."
            )
        self._access_added(project_id)

    class AccessAdded(Aggregate.Event):
        """A project was given access to a private flavor."""

        project_id: str

    @event(AccessAdded)
    def _access_added(self, project_id: str) -> None:
        self.projects = [*self.projects, project_id]

    def remove_access(self, project_id: str) -> None:
        self.ensure_usable()
        if project_id not in self.projects:
            raise NotFound(f"Flavor access not found for {self.flavorid} / {project_id} combination.")
        self._access_removed(project_id)

    class AccessRemoved(Aggregate.Event):
        """A project's access to a private flavor was removed."""

        project_id: str

    @event(AccessRemoved)
    def _access_removed(self, project_id: str) -> None:
        self.projects = [p for p in self.projects if p != project_id]

    def snapshot_for_instance(self) -> dict[str, object]:
        """What a server keeps of its flavor (Nova embeds the flavor in the instance)."""
        return {
            "id": self.flavorid,
            "name": self.name,
            "vcpus": self.vcpus,
            "ram": self.ram,
            "disk": self.disk,
            "ephemeral": self.ephemeral,
            "swap": self.swap,
            "extra_specs": dict(self.extra_specs),
        }
