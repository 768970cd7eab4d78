"""The card's YAML front matter and `.eval_results/*.yaml`, built as data (huggingface_hub's card types).

Never string-built: `ModelCardData.to_yaml` quotes whatever a manifest holds, so a tag or title cannot
close the front matter or inject keys.

`.eval_results/` is the Hub's newer per-benchmark result format (https://huggingface.co/docs/hub/eval-results):
a YAML list of `{dataset: {id, task_id}, value, date, source: {url, name}, notes}` whose dataset must be
a registered Hub Benchmark. Results go to benchmark leaderboards, so only gates that ran the *full*
benchmark (no `limit`) are written: a 100-sample GSM8K subset is not a leaderboard score.
"""

from __future__ import annotations

import yaml
from huggingface_hub import EvalResult, ModelCardData

from hfrelease.cards.measurements import FamilyMeasurements
from hfrelease.cards.text import hub_url
from hfrelease.cards.text import strip_invisible as _strip
from hfrelease.manifest import Artifact, Manifest

LIBRARY = "transformers"


def strip_invisible(text: str) -> str:
    """One line without invisible characters: front-matter strings never span lines."""
    return " ".join(_strip(text).split())

# lm-eval task name prefix -> (Hub Benchmark dataset, task id). Benchmarks registered on the Hub as of
# the eval-results docs; extend as more are registered.
BENCHMARKS = {
    "gpqa_diamond": ("Idavidrein/gpqa", "gpqa_diamond"),
    "mmlu_pro": ("TIGER-Lab/MMLU-Pro", "mmlu_pro"),
    "hle": ("cais/hle", "hle"),
    "aime": ("aime-ai/aime", "default"),
}
REQUIRED_KEYS = ("license", "language", "library_name", "pipeline_tag", "tags")


def base_model(manifest: Manifest, artifact: Artifact) -> tuple[str | None, str | None]:
    """(base_model, base_model_relation) as the Hub's model tree reads them.

    A quant is `quantized` from the family's base model. A draft head (EAGLE/MTP) only runs on its
    target's hidden states, so it is an `adapter` of the target; a standalone draft model is not derived
    from the target (no relation, so the Hub does not claim it is a fine-tune). A variant (an earlier or
    fine-tuned checkpoint) names the base model without claiming a relation the Hub cannot express.
    """
    family = manifest.family
    if artifact.kind == "reference":
        return (None, None) if artifact.repo == family.base_model else (family.base_model, None)
    if artifact.kind == "quant":
        return family.base_model, "quantized"
    if artifact.kind == "draft":
        assert artifact.draft is not None
        target = manifest.artifact_by_id(artifact.draft.target)
        return target.repo, ("adapter" if artifact.draft.method != "draft_model" else None)
    return family.base_model, None


def tags(manifest: Manifest, artifact: Artifact) -> list[str]:
    found = [strip_invisible(t) for t in manifest.family.tags]
    if artifact.quantization:
        found += ["quantized", artifact.quantization.format, artifact.quantization.scheme.lower()]
    if artifact.draft:
        found += ["speculative-decoding", artifact.draft.method]
    found.append("hfrelease")
    return list(dict.fromkeys(found))


def card_data(manifest: Manifest, measured: FamilyMeasurements, artifact: Artifact) -> ModelCardData:
    """The front matter of `artifact`'s card; `model-index` holds its gate values from the ledger."""
    family = manifest.family
    base, relation = base_model(manifest, artifact)
    results = []
    for gate in manifest.gate:
        result = measured.gate(artifact.id, gate.id)
        if result is None or result.value is None:
            continue
        record = result.entry.record
        results.append(EvalResult(
            task_type=family.pipeline_tag, dataset_type=strip_invisible(gate.task or gate.id),
            dataset_name=strip_invisible(gate.label or gate.id), metric_type=strip_invisible(gate.metric),
            metric_name=strip_invisible(gate.metric), metric_value=round(result.value, 4),
            dataset_args={"n": record.n, "mode": gate.mode, "seed": gate.seed, "max_tokens": gate.max_tokens},
            verified=False, source_name="hfrelease ledger", source_url=hub_url(artifact.repo),
        ))
    data = ModelCardData(
        license=family.license, language=list(family.languages), base_model=base, library_name=LIBRARY,
        pipeline_tag=family.pipeline_tag, tags=tags(manifest, artifact),
        model_name=strip_invisible(artifact.title or artifact.repo.split("/")[1]) if results else None,
        eval_results=results or None,
    )
    if relation is not None:
        data["base_model_relation"] = relation
    return data


def eval_result_files(manifest: Manifest, measured: FamilyMeasurements, artifact: Artifact) -> dict[str, str]:
    """`.eval_results/<gate>.yaml` for each full-benchmark gate of a registered Hub Benchmark."""
    files: dict[str, str] = {}
    for gate in manifest.gate:
        result = measured.gate(artifact.id, gate.id)
        if result is None or result.value is None or gate.task is None or gate.limit is not None:
            continue
        benchmark = next((v for k, v in BENCHMARKS.items() if gate.task.startswith(k)), None)
        if benchmark is None:
            continue
        record = result.entry.record
        value = result.value * 100 if 0.0 <= result.value <= 1.0 else result.value
        entry = {
            "dataset": {"id": benchmark[0], "task_id": benchmark[1]},
            "value": round(value, 2),
            "date": record.started_at[:10],
            "source": {"url": hub_url(artifact.repo), "name": "Model Card"},
            "notes": strip_invisible(
                f"{gate.mode}, lm-eval {record.versions.get('lm_eval', '')} task {gate.task}, metric {gate.metric}, "
                f"n={record.n}, seed {gate.seed}, max_tokens {gate.max_tokens}"),
        }
        files[f".eval_results/{gate.id}.yaml"] = str(yaml.safe_dump([entry], sort_keys=False, allow_unicode=True))
    return files
