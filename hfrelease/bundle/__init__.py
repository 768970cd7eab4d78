"""Bundle: the files each repo of a release will hold, with a MANIFEST of their sha256 and size (see `plan.py`)."""

from hfrelease.bundle.candidates import Refusal
from hfrelease.bundle.checksums import MANIFEST_NAME, parse_manifest, render_manifest
from hfrelease.bundle.plan import BundleFile, BundleRefusedError, FamilyBundle, RepoBundle, bundle_family
from hfrelease.bundle.plugin_check import PluginCheckError, PluginReport, check_plugin
from hfrelease.bundle.problems import file_problems
from hfrelease.bundle.write import ATTESTATION_NAME, BundleMismatchError, read_bundle, write_bundle

__all__ = [
    "ATTESTATION_NAME",
    "MANIFEST_NAME",
    "BundleFile",
    "BundleMismatchError",
    "BundleRefusedError",
    "FamilyBundle",
    "PluginCheckError",
    "PluginReport",
    "Refusal",
    "RepoBundle",
    "bundle_family",
    "check_plugin",
    "file_problems",
    "parse_manifest",
    "read_bundle",
    "render_manifest",
    "write_bundle",
]
