"""Collections: list, create, read, delete, and their items."""

from __future__ import annotations

from typing import Any

from hfrelease.hub import errors
from hfrelease.hub.collection_store import ITEM_TYPES, LISTED_ITEMS
from hfrelease.hub.endpoints.base import EndpointBase
from hfrelease.hub.messages import Request, Response, json_response
from hfrelease.hub.repo_state import REPO_TYPES, RepoRef
from hfrelease.hub.routes import Route


class CollectionEndpoints(EndpointBase):
    """hf_api.create_collection, get_collection, add_collection_item, ..."""

    def _collection(self, slug: str, user: str | None) -> dict[str, Any]:
        collection = self.collections.get(slug)
        if collection["private"] and user is None:
            raise errors.HubHTTPError(404, "Collection not found")
        return collection

    def collection_list(self, route: Route, request: Request) -> Response:
        """The listing's shape is the Hub's, not `get_collection`'s: no `position` and at most 4 items each.

        huggingface_hub's `list_collections` numbers the collections itself (`Collection(position=n, **data)`),
        so a `position` in the answer is a TypeError on the client.
        """
        owners = set(request.query.get("owner") or ())
        # `item` is "<type>s/<id>" (models/alice/x, datasets/..., papers/2311.12983), as the Hub takes it.
        wanted = {tuple(i.split("/", 1)) for i in request.query.get("item") or () if "/" in i}
        listed = []
        for collection in self.collections.list(owner=None):
            if collection["private"] and not request.user:
                continue
            if owners and collection["owner"]["name"] not in owners:
                continue
            items = collection["items"]
            if wanted and not any((f"{i['type']}s", i["id"]) in wanted for i in items):
                continue
            listed.append({k: v for k, v in collection.items() if k != "position"} | {"items": items[:LISTED_ITEMS]})
        if request.param("sort") == "lastModified":
            listed.sort(key=lambda c: str(c["lastUpdated"]), reverse=True)
        elif request.param("sort") == "upvotes":
            listed.sort(key=lambda c: int(c["upvotes"]), reverse=True)
        return self._paginate(request, listed, int(request.param("limit") or 100))

    def collection_create(self, route: Route, request: Request) -> Response:
        body = request.json_object()
        title = str(body.get("title") or "").strip()
        namespace = body.get("namespace") or request.user
        if not title or not isinstance(namespace, str):
            raise errors.bad_request("A collection needs a title and a namespace")
        description = body.get("description")
        collection = self.collections.create(
            namespace=namespace, title=title, private=bool(body.get("private")),
            description=str(description) if description is not None else None,
        )  # fmt: skip
        return json_response(collection)

    def collection_get(self, route: Route, request: Request) -> Response:
        return json_response(self._collection(route.args[0], request.user))

    def collection_delete(self, route: Route, request: Request) -> Response:
        self.collections.delete(route.args[0])
        return json_response({})

    def collection_item_add(self, route: Route, request: Request) -> Response:
        body = request.json_object()
        item = body.get("item") or {}
        item_id, item_type = item.get("id"), item.get("type")
        if not isinstance(item_id, str) or item_type not in ITEM_TYPES:
            raise errors.bad_request(f"An item needs an `id` and a `type` among {list(ITEM_TYPES)}")
        if item_type in REPO_TYPES and not self.storage.exists(RepoRef(item_type, item_id)):
            raise errors.HubHTTPError(404, f"{item_type} {item_id} does not exist")
        note = body.get("note")
        collection = self.collections.add_item(
            route.args[0], item_id=item_id, item_type=item_type, note=str(note) if note is not None else None
        )
        return json_response(collection)

    def collection_item_delete(self, route: Route, request: Request) -> Response:
        self.collections.delete_item(route.args[0], route.args[1])
        return json_response({})
