"""The publish token: found the way huggingface_hub finds it, and kept out of every output.

Resolution is huggingface_hub's own (`get_token`): trusted publishing (an OIDC token exchanged in CI when
`HF_OIDC_RESOURCE` is set), then `HF_TOKEN`, then the token file (`hf auth login`). With none of these, a
job that can mint an OIDC id token publishes a family with one exchanged token per repo (`trusted.py`).
hfrelease only adds that the value is registered with `hfrelease.redact`, so whatever path it takes into a
message, log, record or file it comes out as `***`, and that a `Token` prints as its source, never its value.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from hfrelease.redact import register_secret


@dataclass(frozen=True)
class Token:
    """A credential and where it came from; `repr`/`str` show only the source."""

    value: str = field(repr=False)
    source: str

    def __post_init__(self) -> None:
        register_secret(self.value)

    def __str__(self) -> str:
        return f"<token from {self.source}>"


def _huggingface_hub_token() -> str | None:
    from huggingface_hub import get_token

    return get_token()


def _source(env: Mapping[str, str]) -> str:
    if env.get("HF_OIDC_RESOURCE"):
        return "trusted publishing (OIDC)"
    if env.get("HF_TOKEN"):
        return "HF_TOKEN"
    if env.get("HUGGING_FACE_HUB_TOKEN"):
        return "HUGGING_FACE_HUB_TOKEN"
    from huggingface_hub import constants

    return f"token file {constants.HF_TOKEN_PATH}"


def resolve_token(
    *,
    explicit: str | None = None,
    env: Mapping[str, str] | None = None,
    resolver: Callable[[], str | None] = _huggingface_hub_token,
) -> Token | None:
    """The token to publish with, or None when there is none (publish then defaults to a dry run)."""
    if explicit:
        return Token(explicit, "the caller")
    value = resolver()
    if not value:
        return None
    return Token(value, _source(os.environ if env is None else env))
