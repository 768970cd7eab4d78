"""The card's YAML front matter and `.eval_results/*.yaml`, built as data (huggingface_hub's card types).

Never string-built: `ModelCardData.to_yaml` quotes whatever a manifest holds, so a tag or title cannot
close the front matter or inject keys.

`.eval_results/` is the Hub's newer per-benchmark result format (https://huggingface.co/docs/hub/eval-results):
a YAML list of `{dataset: {id, task_id}, value, date, source: {url, name}, notes}` whose dataset must be
a registered Hub Benchmark. Results go to benchmark leaderboards, so only gates that ran the *full*
benchmark (no `limit`) are written: a 100-sample GSM8K subset is not a leaderboard score.

Each gate is its own model-index result: huggingface_hub groups `EvalResult`s by (task type, dataset type,
config, split, revision) (`EvalResult.unique_identifier`), and the Hub's sidebar shows one entry per group,
so two gates on one task (`arith` and `arith-sampled`) would merge into one entry with two values.
`dataset.config` is the gate id; `dataset.type` is the Hub dataset the gate's lm-eval task loads (its task
YAML's `dataset_path`) where there is one, else the task (or gate) name. Every result's `source.url` is the
evidence: the gate's Every Eval Ever record (`every_eval_ever.py`) in the repo at the release tag, which
names the ledger records it was exported from.
"""

from __future__ import annotations

import yaml
from huggingface_hub import EvalResult, ModelCardData

from hfrelease.cards.evidence import at_tag, record_path
from hfrelease.cards.fidelity import accuracy_gates
from hfrelease.cards.measurements import FamilyMeasurements, GateResult
from hfrelease.cards.text import strip_invisible as _strip
from hfrelease.manifest import Artifact, Gate, Manifest

LIBRARY = "transformers"
# A head drafted from its target's hidden states (EAGLE, EAGLE-3, MTP) does not load in transformers on
# its own: vLLM serves it, beside its target. A standalone draft model is a causal LM transformers loads.
HEAD_LIBRARY = "vllm"
HEADS = {"eagle", "eagle3", "mtp"}


def strip_invisible(text: str) -> str:
    """One line without invisible characters: front-matter strings never span lines."""
    return " ".join(_strip(text).split())

# lm-eval task -> the Hub dataset its task YAML loads (`dataset_path`; for a group, every task of the group),
# read from lm-eval 0.4.13's own task definitions and checked against the installed lm-eval's task index by
# tests/cards/test_frontmatter.py. Exact names: a prefix would be wrong (`gsm8k_platinum` loads
# madrylab/gsm8k-platinum, `mmlu_pro_plus` saeidasgari/mmlu-pro-plus, `ifeval_ca` projecte-aina/IFEval_ca).
HUB_DATASETS = {
    **dict.fromkeys(("gsm8k", "gsm8k_cot", "gsm8k_cot_zeroshot", "gsm8k_cot_llama", "gsm8k_cot_self_consistency"),
                    "openai/gsm8k"),
    **dict.fromkeys(("gpqa_diamond_zeroshot", "gpqa_diamond_n_shot", "gpqa_diamond_cot_zeroshot",
                     "gpqa_diamond_cot_n_shot", "gpqa_diamond_generative_n_shot"), "Idavidrein/gpqa"),
    "mmlu_pro": "TIGER-Lab/MMLU-Pro",
    "ifeval": "google/IFEval",
    **dict.fromkeys(("bbh_cot_fewshot", "bbh_cot_zeroshot", "bbh_fewshot", "bbh_zeroshot"), "SaylorTwift/bbh"),
    "aime": "gneubig/aime-1983-2024",
    "aime24": "Maxwell-Jia/AIME_2024",
    "aime25": "math-ai/aime25",
}
# lm-eval task -> (registered Hub Benchmark, its task id), only where the task loads that benchmark's own
# dataset (HUB_DATASETS, checked by the same test). Task ids as the Hub's own result files name them
# (Hugging Face staff's .eval_results/gpqa.yaml in MiniMaxAI/MiniMax-M2.5, commit f710177: `diamond`, the
# GPQA configuration lm-eval's gpqa_diamond_* tasks load, `dataset_name: gpqa_diamond`). Benchmarks whose
# lm-eval task loads another copy of the data (lm-eval's aime* tasks do not load a registered AIME benchmark;
# no lm-eval 0.4.13 task loads cais/hle) are not written: a leaderboard entry must be that benchmark's run.
BENCHMARKS = {
    **{task: ("Idavidrein/gpqa", "diamond") for task, dataset in HUB_DATASETS.items() if dataset == "Idavidrein/gpqa"},
    "mmlu_pro": ("TIGER-Lab/MMLU-Pro", "mmlu_pro"),
}
EVIDENCE_NAME = "Every Eval Ever record (hfrelease ledger)"  # how a result's source link reads on the Hub
REQUIRED_KEYS = ("license", "language", "library_name", "pipeline_tag", "tags")


def base_model(manifest: Manifest, artifact: Artifact) -> tuple[str | None, str | None]:
    """(base_model, base_model_relation) as the Hub's model tree reads them, the relation always explicit:
    without one the Hub infers it from the files, and guesses a draft model to be a fine-tune.

    A quant is `quantized` from the family's base model. A draft (an EAGLE/MTP head, or a standalone
    draft model) only ever serves beside its target, adding to it: `adapter` of the target, the relation
    the Hub has for "used with that model". A variant (an earlier or further-trained checkpoint) and a
    reference that is not the base model itself are `finetune`s of the base model.
    """
    family = manifest.family
    if artifact.kind == "reference":
        return (None, None) if artifact.repo == family.base_model else (family.base_model, "finetune")
    if artifact.kind == "quant":
        return family.base_model, "quantized"
    if artifact.kind == "draft":
        assert artifact.draft is not None
        target = manifest.artifact_by_id(artifact.draft.target)
        return target.repo, "adapter"
    return family.base_model, "finetune"


def library_name(artifact: Artifact) -> str:
    """The library the Hub shows a snippet for: transformers, except for a head only vLLM can serve."""
    if artifact.draft is not None and artifact.draft.method in HEADS:
        return HEAD_LIBRARY
    return LIBRARY


def metric_id(metric: str) -> str:
    """A Hub-style metric id from an lm-eval metric key: `exact_match,strict-match` -> `exact_match`
    (the filter is a setting of the run, named in the metric's display name, not part of the metric)."""
    return metric.split(",", 1)[0]


def metric_name(metric: str) -> str:
    name, _, filtered = metric.partition(",")
    pretty = name.replace("_", " ")
    return f"{pretty} ({filtered})" if filtered and filtered != "none" else pretty


def scaled(manifest: Manifest, measured: FamilyMeasurements, gate_id: str, value: float) -> float:
    """`value` on the card's scale: points for a gate whose values are all fractions, as the body prints."""
    values = [r.value for (_, gid), r in measured.gates.items() if gid == gate_id and r.value is not None]
    percent = bool(values) and all(0.0 <= v <= 1.0 for v in values)
    return round(value * 100, 2) if percent else round(value, 4)


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
    # A fidelity gate's figures are distances from this family's reference (KL in nats, flips), not a score
    # on a benchmark: its own section shows them, on their own scale; model-index holds benchmark scores.
    for gate in accuracy_gates(manifest):
        result = measured.gate(artifact.id, gate.id)
        if result is None or result.value is None:
            continue
        results.append(EvalResult(
            task_type=family.pipeline_tag, dataset_type=strip_invisible(dataset_type(gate)),
            dataset_config=gate.id, dataset_name=strip_invisible(gate.label or gate.id),
            metric_type=strip_invisible(metric_id(gate.metric)), metric_name=strip_invisible(metric_name(gate.metric)),
            metric_value=scaled(manifest, measured, gate.id, result.value),
            dataset_args=dataset_args(gate, result.entry.record.n), verified=False,
            source_name=EVIDENCE_NAME, source_url=evidence_url(manifest, artifact, result),
        ))
    data = ModelCardData(
        license=family.license, language=list(family.languages), base_model=base, library_name=library_name(artifact),
        pipeline_tag=family.pipeline_tag, tags=tags(manifest, artifact),
        model_name=strip_invisible(artifact.title or artifact.repo.split("/")[1]) if results else None,
        eval_results=results or None,
    )
    if relation is not None:
        data["base_model_relation"] = relation
    return data


def _seed_args(gate: Gate) -> dict[str, int | list[int]]:
    """`seed`, or for a gate run under several seeds (its value their mean) `seeds`."""
    return {"seed": gate.seed} if gate.seeds is None else {"seeds": list(gate.seeds)}


def hub_dataset(gate: Gate) -> str | None:
    """The Hub dataset the gate's lm-eval task loads, where `HUB_DATASETS` knows it."""
    return HUB_DATASETS.get(gate.task) if gate.task is not None else None


def dataset_type(gate: Gate) -> str:
    """model-index `dataset.type`: the Hub dataset id where the task loads one, else the task or gate name."""
    return hub_dataset(gate) or gate.task or gate.id


def dataset_args(gate: Gate, n: int) -> dict[str, object]:
    """What makes this gate's figure this gate's: n, mode, seed(s), and the sampling and limit where set."""
    args: dict[str, object] = {"n": n, "mode": gate.mode, **_seed_args(gate), "max_tokens": gate.max_tokens}
    if gate.task is not None:
        args["task"] = gate.task
    if gate.limit is not None:
        args["limit"] = gate.limit
    if gate.temperature:
        args["temperature"] = gate.temperature
    if gate.top_p is not None:
        args["top_p"] = gate.top_p
    return args


def evidence_url(manifest: Manifest, artifact: Artifact, result: GateResult) -> str:
    """The gate's Every Eval Ever record in the artifact's repo at the release tag."""
    return at_tag(manifest, artifact, record_path(artifact, result.gate, [e.name for e in result.entries]))


def eval_result_files(manifest: Manifest, measured: FamilyMeasurements, artifact: Artifact) -> dict[str, str]:
    """`.eval_results/<gate>.yaml` for each full-benchmark gate of a registered Hub Benchmark."""
    files: dict[str, str] = {}
    for gate in manifest.gate:
        result = measured.gate(artifact.id, gate.id)
        if result is None or result.value is None or gate.task is None or gate.limit is not None:
            continue
        benchmark = BENCHMARKS.get(gate.task)
        if benchmark is None:
            continue
        record = result.entry.record
        entry = {
            "dataset": {"id": benchmark[0], "task_id": benchmark[1]},
            # The scale of the card's body and model-index (points for percentage metrics), which is also
            # the scale of the Hub's own result files (HLE `value: 20.90` in the eval-results docs, GPQA
            # `value: 85.2` in Hugging Face staff's .eval_results/gpqa.yaml of MiniMaxAI/MiniMax-M2.5).
            "value": scaled(manifest, measured, gate.id, result.value),
            "date": record.started_at,  # ISO-8601 datetime, as the docs give it
            "source": {"url": evidence_url(manifest, artifact, result), "name": EVIDENCE_NAME},
            "notes": strip_invisible(
                f"{gate.mode}, lm-eval {record.versions.get('lm_eval', '')} task {gate.task}, metric {gate.metric}, "
                f"n={record.n}, " + ", ".join(f"{k} {v}" for k, v in _seed_args(gate).items())
                + f", max_tokens {gate.max_tokens}"),
        }
        files[f".eval_results/{gate.id}.yaml"] = str(yaml.safe_dump([entry], sort_keys=False, allow_unicode=True))
    return files
