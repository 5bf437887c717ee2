"""``/identity/v3/projects``: Keystone's projects (one level under their domain: no hierarchy)."""

from __future__ import annotations

import falcon

from api import policy
from api.errors import BadRequest, ItemNotFound
from api.identity.common import Resource, collection, filters
from api.identity.views import project_view
from commands.keystone.projects import CreateProject, DeleteProject, UpdateProject
from projections import identity_queries as q

SCHEMAS = ("identity.projects.create", "identity.projects.update")


class Projects(Resource):
    """``GET``/``POST /identity/v3/projects``."""

    @falcon.before(policy.require("identity:list_projects"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._read.connection(req) as conn:
            rows = q.list_projects(conn, **filters(req, "name", "domain_id", "enabled"))
        resp.media = collection(req, "projects", [project_view(req, r) for r in rows])

    @falcon.before(policy.require("identity:create_project"))
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        spec = self._body(req, "identity.projects.create")["project"]
        with self._read.connection(req) as conn:
            domain_id = self._domain_param(conn, spec.get("domain_id"))
        if spec.get("parent_id") not in (None, domain_id):
            raise BadRequest("Invalid input for field 'parent_id': Stratus has no project hierarchy.")
        cmd = CreateProject(spec["name"], domain_id, spec.get("description") or "", spec.get("enabled", True))
        row = self._wrote(req, cmd, self._project)
        resp.status = falcon.HTTP_201
        resp.media = {"project": project_view(req, row)}


class ProjectItem(Resource):
    """``GET``/``PATCH``/``DELETE /identity/v3/projects/{id}`` (404 for a project policy hides)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
        actor = req.context.actor
        if not policy.allowed(actor, "identity:get_project", project_id=project_id):
            raise ItemNotFound(f"Could not find project: {project_id}.")
        with self._read.connection(req) as conn:
            row = self._project(conn, project_id)
        resp.media = {"project": project_view(req, row)}

    @falcon.before(policy.require("identity:update_project"))
    def on_patch(self, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
        spec = self._body(req, "identity.projects.update")["project"]
        with self._read.connection(req) as conn:
            self._project(conn, project_id)
        cmd = UpdateProject(
            project_id,
            name=spec.get("name"),
            description=spec.get("description"),
            enabled=spec.get("enabled"),
        )
        row = self._wrote(req, cmd, self._project)
        resp.media = {"project": project_view(req, row)}

    @falcon.before(policy.require("identity:delete_project"))
    def on_delete(self, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
        self._handled(req, DeleteProject(project_id))  # its tokens end once the API sees it
        resp.status = falcon.HTTP_204
