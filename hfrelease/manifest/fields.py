"""The manifest's field formats: ids, Hub repo ids, URLs, paths, environment names, versions, languages and
licenses as validated types, and the base of every table (`Table`): frozen, unknown keys refused, no coercion."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from hfrelease.manifest.serve_args import env_name_problem, env_value_problem

_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
# The Hub's own rule (huggingface_hub.utils.validate_repo_id) plus a mandatory namespace: every repo
# hfrelease reads or writes is "owner/name".
_REPO_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VERSION = re.compile(r"^[0-9]+(\.[0-9]+)*([.+-]?[A-Za-z0-9.]+)?$")
_LANGUAGE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})?$")
_LICENSE = re.compile(r"^[a-z0-9][a-z0-9.+-]*$")


def _slug(value: str) -> str:
    if not _SLUG.match(value):
        raise ValueError(
            f"{value!r} is not a valid id: use 1-64 lowercase letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return value


def repo_id_problem(value: str) -> str | None:
    """Why `value` is not a valid Hub repo id of the form owner/name, or None when it is."""
    if "://" in value or value.startswith(("http:", "https:", "www.")):
        return f"{value!r} is a URL, not a Hub repo id (write it as owner/name)"
    parts = value.split("/")
    if len(parts) != 2:
        return f"{value!r} is not a Hub repo id of the form owner/name"
    if len(value) > 96:
        return f"{value!r} is longer than the Hub's 96-character limit"
    for part in parts:
        if not _REPO_PART.match(part) or ".." in part or "--" in part or part.endswith((".", "-")):
            return (
                f"{value!r} is not a valid Hub repo id: each part uses letters, digits, '.', '_' "
                "or '-', without '..' or '--', and neither starts nor ends with '.' or '-'"
            )
    if value.endswith(".git"):
        return f"{value!r} must not end with .git"
    return None


def _repo_id(value: str) -> str:
    problem = repo_id_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def endpoint_problem(value: str) -> str | None:
    """Endpoints must be https; plain http is allowed only for a server on this machine (tests, local Hub)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
    except ValueError:
        return f"{value!r} is not a URL"
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname in {"127.0.0.1", "localhost", "::1"}:
        return None
    return f"{value!r} must be an https:// URL (http:// only for 127.0.0.1/localhost)"


def _https_url(value: str) -> str:
    problem = endpoint_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _relative_path(value: str) -> str:
    if not value or "\x00" in value:
        raise ValueError("must be a non-empty path")
    return value


def _env_name(value: str) -> str:
    # Each name is judged on its own, so every bad one is reported at its place (`serve.env.PYTHONPATH`).
    if not _ENV_NAME.match(value):
        raise ValueError("not a valid name: environment variable names are letters, digits and '_', not starting "
                         "with a digit")
    # Credentials come from the environment or the token file at run time, never from a committed manifest
    # (they would end up in ledger records and cards); variables that load code are refused with them.
    problem = env_name_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _env_value(value: str) -> str:
    problem = env_value_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _version(value: str) -> str:
    if not _VERSION.match(value):
        raise ValueError(f"{value!r} is not a release version such as 1.3 or 2.0.1")
    return value


def _language(value: str) -> str:
    if not _LANGUAGE.match(value):
        raise ValueError(f"{value!r} is not an ISO 639 language code such as 'en' or 'zh'")
    return value


def _license(value: str) -> str:
    if not _LICENSE.match(value):
        raise ValueError(f"{value!r} is not a Hub license id such as 'apache-2.0' or 'mit'")
    return value


Slug = Annotated[str, AfterValidator(_slug)]
RepoId = Annotated[str, AfterValidator(_repo_id)]
HttpsUrl = Annotated[str, AfterValidator(_https_url)]
RelPath = Annotated[str, AfterValidator(_relative_path)]
EnvMap = dict[Annotated[str, AfterValidator(_env_name)], Annotated[str, AfterValidator(_env_value)]]
Version = Annotated[str, AfterValidator(_version)]
Language = Annotated[str, AfterValidator(_language)]
License = Annotated[str, AfterValidator(_license)]
PositiveInt = Annotated[int, Field(ge=1)]
NonNegInt = Annotated[int, Field(ge=0)]
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
Seconds = Annotated[float, Field(gt=0, le=86400)]


class Table(BaseModel):
    """Base of every manifest table: frozen, unknown keys refused, no silent type coercion."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)
