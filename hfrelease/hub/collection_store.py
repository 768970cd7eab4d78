"""Collections: titled, ordered lists of repositories, stored in one `collections.json` under the root."""

from __future__ import annotations

import json
import re
import threading
import uuid
from pathlib import Path
from typing import Any

from hfrelease.hub import errors
from hfrelease.hub.objects import atomic_write
from hfrelease.hub.repo_state import now_iso

ITEM_TYPES = ("model", "dataset", "space", "paper", "collection", "kernel")
LISTED_ITEMS = 4  # the Hub's collection listing truncates each item list (get_collection has them all)


def _slugify(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "collection"


class CollectionStore:
    def __init__(self, root: Path, *, tmp_dir: Path) -> None:
        self.path = root / "collections.json"
        self.tmp_dir = tmp_dir
        self._lock = threading.Lock()

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            data: dict[str, dict[str, Any]] = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        return data

    def _save(self, collections: dict[str, dict[str, Any]]) -> None:
        atomic_write(self.path, json.dumps(collections, indent=1).encode(), tmp_dir=self.tmp_dir)

    def create(self, *, namespace: str, title: str, description: str | None, private: bool) -> dict[str, Any]:
        with self._lock:
            collections = self._load()
            for existing in collections.values():
                if existing["owner"]["name"] == namespace and existing["title"] == title:
                    # huggingface_hub's `create_collection(exists_ok=True)` reads the slug from this 409.
                    raise errors.conflict("Collection already exists", slug=existing["slug"])
            object_id = uuid.uuid4().hex[:24]
            slug = f"{namespace}/{_slugify(title)}-{object_id}"
            collection: dict[str, Any] = {
                "slug": slug,
                "title": title,
                "description": description,
                "owner": {"name": namespace, "type": "user"},
                "items": [],
                "lastUpdated": now_iso(),
                "position": len(collections),
                "private": private,
                "theme": "default",
                "upvotes": 0,
                "isUpvotedByUser": False,
            }
            collections[slug] = collection
            self._save(collections)
            return collection

    def get(self, slug: str) -> dict[str, Any]:
        collection = self._load().get(slug)
        if collection is None:
            raise errors.HubHTTPError(404, "Collection not found")
        return collection

    def list(self, *, owner: str | None) -> list[dict[str, Any]]:
        return [c for c in self._load().values() if owner is None or c["owner"]["name"] == owner]

    def delete(self, slug: str) -> None:
        with self._lock:
            collections = self._load()
            if collections.pop(slug, None) is None:
                raise errors.HubHTTPError(404, "Collection not found")
            self._save(collections)

    def add_item(self, slug: str, *, item_id: str, item_type: str, note: str | None) -> dict[str, Any]:
        with self._lock:
            collections = self._load()
            collection = collections.get(slug)
            if collection is None:
                raise errors.HubHTTPError(404, "Collection not found")
            if any(i["id"] == item_id and i["type"] == item_type for i in collection["items"]):
                raise errors.conflict("Item already in collection")
            item: dict[str, Any] = {
                "_id": uuid.uuid4().hex[:24],
                "id": item_id,
                "type": item_type,
                "position": len(collection["items"]),
            }
            if note is not None:
                item["note"] = {"text": note, "html": note}
            collection["items"].append(item)
            collection["lastUpdated"] = now_iso()
            self._save(collections)
            return collection

    def delete_item(self, slug: str, item_object_id: str) -> None:
        with self._lock:
            collections = self._load()
            collection = collections.get(slug)
            if collection is None:
                raise errors.HubHTTPError(404, "Collection not found")
            kept = [i for i in collection["items"] if i["_id"] != item_object_id]
            if len(kept) == len(collection["items"]):
                raise errors.HubHTTPError(404, "Item not found")
            collection["items"] = [{**item, "position": n} for n, item in enumerate(kept)]
            self._save(collections)
