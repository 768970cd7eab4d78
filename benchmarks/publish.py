"""Publishing a family to the built-in Hub: hfrelease's staged, verified, tagged release against a bare
huggingface_hub `create_commit` of the same files, measured side by side; then a no-op re-publish.

    .venv/bin/python benchmarks/publish.py [--artifacts 3] [--mb 250] [--rounds 6]

The family is generated locally: `--artifacts` quant artifacts of `--mb` MB of random safetensors each
(random, so nothing deduplicates), with config, tokenizer, card and citation. Each round publishes to a
fresh Hub root with a cold hash cache (huggingface_hub hashes every byte too), baseline and hfrelease
side by side. Which one goes first alternates from round to round, and the page cache's dirty data is
written out (`os.sync`) before each timed run: whichever side ran second used to pay for the writeback
of the first one's 786 MB (up to 1.7x on its time). Printed: per round both times and the ratio, the
median of each and the ratio of the medians (bar: <= 1.10) with the per-round spread, the requests per
endpoint each side made, and the file bytes the server received for a no-op re-publish (bar: 0).
"""

from __future__ import annotations

import argparse
import json
import os

os.environ["HF_HUB_DISABLE_XET"] = "1"  # read by huggingface_hub at import
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"

import shutil
import statistics
import struct
import tempfile
import time
from pathlib import Path

from huggingface_hub import CommitOperationAdd, HfApi

from hfrelease.files.hashing import HashCache
from hfrelease.hub import serve
from hfrelease.manifest import load_manifest
from hfrelease.publish import publish_family

TOKEN = "hf_benchmark_0123456789abcdef"  # noqa: S105 - the throwaway local Hub's token


def write_safetensors(path: Path, size: int) -> None:
    """A valid safetensors file: one U8 tensor of `size` random bytes, written in 16 MiB chunks."""
    header = json.dumps({"w": {"dtype": "U8", "shape": [size], "data_offsets": [0, size]}}).encode()
    header += b" " * (-len(header) % 8)
    with path.open("wb") as handle:
        handle.write(struct.pack("<Q", len(header)) + header)
        left = size
        while left:
            chunk = min(left, 16 * 1024 * 1024)
            handle.write(os.urandom(chunk))
            left -= chunk


def make_family(root: Path, *, artifacts: int, size: int) -> Path:
    blocks = ['[[artifact]]\nid = "ref"\nkind = "reference"\nrepo = "upstream/Bench"\npublish = false\n'
              'source = { path = "ckpt/ref" }\n']  # fmt: skip
    (root / "ckpt" / "ref").mkdir(parents=True)
    write_safetensors(root / "ckpt" / "ref" / "model.safetensors", 1024)
    for n in range(artifacts):
        checkpoint = root / "ckpt" / f"q{n}"
        checkpoint.mkdir(parents=True)
        write_safetensors(checkpoint / "model.safetensors", size)
        for name, text in {"config.json": f'{{"n": {n}}}', "tokenizer.json": "{}", "tokenizer_config.json": "{}",
                           "generation_config.json": "{}"}.items():  # fmt: skip
            (checkpoint / name).write_text(text)
        (root / f"q{n}").mkdir()
        (root / f"q{n}" / "README.md").write_text(f"# Bench q{n}\n")
        (root / f"q{n}" / "CITATION.cff").write_text("cff-version: 1.2.0\n")
        blocks.append(f'[[artifact]]\nid = "q{n}"\nkind = "quant"\nrepo = "bench/Bench-Q{n}"\n'
                      f'source = {{ path = "ckpt/q{n}" }}\n[artifact.quantization]\nscheme = "W8A8"\n'
                      'tool = "llmcompressor"\ntool_version = "0"\n')  # fmt: skip
    (root / "release.toml").write_text(
        '[family]\nname = "bench"\ndisplay_name = "Bench"\nbase_model = "upstream/Bench"\nowner = "bench"\n'
        'license = "mit"\nlanguages = ["en"]\nversion = "1.0"\n[[family.authors]]\nname = "B"\n'
        '[family.citation]\nkey = "b"\ntitle = "B"\nyear = 2026\n\n' + "\n".join(blocks)
    )
    return root


Requests = dict[str, int]


class Timer:
    """Wall seconds, and CPU seconds of this process (client and in-process Hub server alike).

    CPU time is the steadier figure on a shared machine: another tenant's load stretches wall time
    but not the work this process does.
    """

    def __enter__(self) -> Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *_: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def bare_create_commit(family: Path, hub_root: Path) -> tuple[Timer, Requests]:
    """What a hand-written upload does: create each repo, one create_commit of every file, nothing else."""
    manifest = load_manifest(family)
    with serve(hub_root, tokens=[TOKEN]) as server:
        api = HfApi(endpoint=server.url, token=TOKEN)
        os.sync()
        with Timer() as timer:
            for artifact in (a for a in manifest.artifact if a.publish):
                api.create_repo(artifact.repo)
                files = [*(family / "ckpt" / artifact.id).iterdir(), *(family / artifact.id).iterdir()]
                ops = [CommitOperationAdd(path_in_repo=p.name, path_or_fileobj=str(p)) for p in files]
                api.create_commit(artifact.repo, ops, commit_message="upload")
        return timer, server.stats()["requests"]


def hfrelease_publish(family: Path, hub_root: Path, cache_path: Path) -> tuple[Timer, Requests, int]:
    """hfrelease's release (bundle with hashing, stage, verify, promote, tag); then a no-op re-publish's bytes."""
    manifest = load_manifest(family)
    with serve(hub_root, tokens=[TOKEN]) as server:
        api = HfApi(endpoint=server.url, token=TOKEN)
        os.sync()
        with Timer() as timer:
            report = publish_family(manifest, api=api, cache=HashCache(cache_path))
        requests = server.stats()["requests"]
        assert report.outcome is not None and report.outcome.status == "published", report.outcome
        server.reset_stats()
        again = publish_family(manifest, api=api, cache=HashCache(cache_path))
        assert again.outcome is not None and again.outcome.status == "already-published"
        return timer, requests, int(server.stats()["file_bytes_received"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--artifacts", type=int, default=3)
    parser.add_argument("--mb", type=int, default=250, help="weight MB per artifact")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hfrelease-bench-") as scratch:
        root = Path(scratch)
        family = make_family(root / "family", artifacts=args.artifacts, size=args.mb * 1024 * 1024)
        total = sum(p.stat().st_size for p in (root / "family").rglob("*") if p.is_file())
        print(f"family: {args.artifacts} artifacts x {args.mb} MB = {total / 1e6:.0f} MB")
        baseline: list[float] = []
        ours: list[float] = []
        cpu: dict[str, list[float]] = {"baseline": [], "ours": []}
        noop: list[int] = []
        base_requests: Requests = {}
        our_requests: Requests = {}

        def run_baseline(round_: int) -> None:
            nonlocal base_requests
            timer, base_requests = bare_create_commit(family, root / f"hub-base-{round_}")
            baseline.append(timer.wall)
            cpu["baseline"].append(timer.cpu)
            shutil.rmtree(root / f"hub-base-{round_}")

        def run_ours(round_: int) -> None:
            nonlocal our_requests
            timer, our_requests, sent = hfrelease_publish(family, root / f"hub-ours-{round_}",
                                                          root / f"cache-{round_}.json")  # fmt: skip
            ours.append(timer.wall)
            cpu["ours"].append(timer.cpu)
            noop.append(sent)
            shutil.rmtree(root / f"hub-ours-{round_}")

        for round_ in range(args.rounds):
            first, second = (run_baseline, run_ours) if round_ % 2 == 0 else (run_ours, run_baseline)
            first(round_)
            second(round_)
            print(
                f"round {round_ + 1} ({'baseline' if round_ % 2 == 0 else 'hfrelease'} first): create_commit "
                f"{baseline[-1]:.2f} s, hfrelease publish {ours[-1]:.2f} s, ratio {ours[-1] / baseline[-1]:.2f}"
            )
    base, mine = statistics.median(baseline), statistics.median(ours)
    ratios = sorted(o / b for o, b in zip(ours, baseline, strict=True))
    print("| measure | value |\n| --- | --- |")
    print(f"| bare create_commit, median s | {base:.2f} (min {min(baseline):.2f}, max {max(baseline):.2f}) |")
    print(f"| hfrelease publish, median s | {mine:.2f} (min {min(ours):.2f}, max {max(ours):.2f}) |")
    print(f"| ratio of medians publish / create_commit | {mine / base:.2f} (bar <= 1.10) |")
    print(f"| per-round ratios | median {statistics.median(ratios):.2f}, "
          f"{', '.join(f'{r:.2f}' for r in ratios)} |")  # fmt: skip
    base_cpu, our_cpu = statistics.median(cpu["baseline"]), statistics.median(cpu["ours"])
    print(f"| CPU s of this process, median: create_commit / publish | {base_cpu:.2f} / {our_cpu:.2f} "
          f"(ratio {our_cpu / base_cpu:.2f}) |")  # fmt: skip
    print(f"| requests, create_commit | {sum(base_requests.values())}: {_endpoints(base_requests)} |")
    print(f"| requests, hfrelease publish | {sum(our_requests.values())}: {_endpoints(our_requests)} |")
    print(f"| no-op re-publish: file bytes received | {max(noop)} (bar 0) |")


def _endpoints(requests: Requests) -> str:
    return ", ".join(f"{name} {count}" for name, count in sorted(requests.items()))


if __name__ == "__main__":
    main()
