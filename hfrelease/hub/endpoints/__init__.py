"""What each endpoint does: request in, response out, state in `HubStorage` / `CollectionStore`; one module
a resource, each a class of endpoint methods over `EndpointBase`, and `Endpoints` all of them.

Request and response shapes follow what huggingface_hub 2.x sends and parses; the module of the client
that calls an endpoint is named next to it.
"""

from __future__ import annotations

from hfrelease.hub.endpoints.collections import CollectionEndpoints
from hfrelease.hub.endpoints.discussions import DiscussionEndpoints
from hfrelease.hub.endpoints.downloads import DownloadEndpoints
from hfrelease.hub.endpoints.repos import RepoEndpoints
from hfrelease.hub.endpoints.revisions import RevisionEndpoints
from hfrelease.hub.endpoints.service import ServiceEndpoints
from hfrelease.hub.endpoints.uploads import UploadEndpoints


class Endpoints(RepoEndpoints, UploadEndpoints, RevisionEndpoints, DiscussionEndpoints, CollectionEndpoints,
                DownloadEndpoints, ServiceEndpoints):
    """One method per endpoint name of `routes.ENDPOINTS`."""
