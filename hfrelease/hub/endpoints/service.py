"""The server's own endpoints: trusted publishing's token exchange and the test-only administration."""

from __future__ import annotations

from hfrelease.hub import errors
from hfrelease.hub.endpoints.base import EndpointBase
from hfrelease.hub.faults import FaultRule
from hfrelease.hub.messages import Request, Response, json_response
from hfrelease.hub.oidc import OidcExchange
from hfrelease.hub.routes import Route


class ServiceEndpoints(EndpointBase):
    """Trusted publishing (`hfrelease.hub.oidc`) and the administration tests use (stats, injected faults)."""

    def _exchange(self) -> OidcExchange:
        if self.oidc is None:
            raise errors.HubHTTPError(404, "Trusted publishing is not set up on this Hub")
        return self.oidc

    def oidc_exchange(self, route: Route, request: Request) -> Response:
        return json_response(self._exchange().exchange(request.json_object(), audience=request.base_url))

    def oidc_id_token(self, route: Route, request: Request) -> Response:
        audience = (request.query.get("audience") or [request.base_url])[0]
        return json_response(self._exchange().id_token(audience=audience,
                                                       authorization=request.headers.get("Authorization")))

    def admin_stats(self, route: Route, request: Request) -> Response:
        return json_response(self.stats.snapshot())

    def admin_faults(self, route: Route, request: Request) -> Response:
        if request.method == "DELETE":
            self.faults.clear()
        elif request.method == "POST":
            data = request.json()
            try:
                rules = [FaultRule.from_json(r) for r in (data if isinstance(data, list) else [data])]
            except (TypeError, ValueError) as error:
                raise errors.bad_request(f"Invalid fault rule: {error}") from None
            for rule in rules:
                self.faults.add(rule)
        return json_response(self.faults.describe())
