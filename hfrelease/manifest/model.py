"""The release manifest (`model_cards/<family>/release.toml`) as frozen, typed values.

Each class mirrors one TOML table; the names are the manifest's keys. Field-level format rules (ids,
Hub repo ids, URLs, environment names) are validated types in `fields.py`; rules that relate several parts of the
manifest (a draft's target exists, one reference per family, files exist) live in `references.py`,
because they must be checked even when some other field is malformed, to report everything in one go.
Once `load_manifest` returns a `Manifest`, the rest of hfrelease trusts it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from hfrelease.manifest.fields import (
    EnvMap,
    Fraction,
    HttpsUrl,
    Language,
    License,
    NonNegInt,
    PositiveInt,
    RelPath,
    RepoId,
    Seconds,
    Slug,
    Table,
    Version,
)
from hfrelease.manifest.serve_args import args_problems

SCHEMA_VERSION = 1
_COMMIT_SHA = re.compile(r"^[0-9a-f]{40}$")


class Author(Table):
    name: str = Field(min_length=1)
    handle: str | None = None  # Hub user name, e.g. NullSense
    bibtex: str | None = None  # the name as BibTeX should print it, e.g. Pe{\v{c}}iukonis, Matas
    orcid: str | None = None
    # An organisation or team, not a person: cited as one name (a CFF entity, a braced BibTeX name),
    # never split into given and family names.
    entity: bool = False


class Citation(Table):
    key: str = Field(pattern=r"^[A-Za-z0-9_:.-]+$")
    title: str = Field(min_length=1)
    year: int = Field(ge=1900, le=2200)
    url: HttpsUrl | None = None
    note: str | None = None


class Family(Table):
    name: Slug
    display_name: str = Field(min_length=1)
    base_model: RepoId
    base_revision: str | None = None
    owner: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    license: License
    languages: list[Language] = Field(min_length=1)
    authors: list[Author] = Field(min_length=1)
    citation: Citation
    version: Version
    collection: str | None = None
    tags: list[str] = Field(default_factory=list)
    pipeline_tag: str = "text-generation"


class Serve(Table):
    """`vllm serve` settings: `[serve]` holds the family's defaults, `[artifact.serve]` overrides them."""

    args: list[str] | None = None  # extra `vllm serve` arguments, appended after the defaults'
    env: EnvMap | None = None  # merged over the defaults' (e.g. VLLM_ATTENTION_BACKEND = "TRITON_ATTN")
    plugin: RelPath | None = None  # directory of an out-of-tree vLLM plugin (pip install --no-deps)
    reasoning_parser: str | None = None
    tool_call_parser: str | None = None
    enable_auto_tool_choice: bool | None = None
    trust_remote_code: bool | None = None  # off unless said
    max_model_len: PositiveInt | None = None
    kv_cache_dtype: str | None = None
    dtype: str | None = None
    enforce_eager: bool | None = None
    startup_timeout: Annotated[float, Field(gt=0, le=7200)] | None = None  # seconds

    @model_validator(mode="after")
    def _args_do_not_shadow_keys(self) -> Serve:
        # By spelling, as vLLM's argparse reads it (prefixes, '_' for '-', '=', dotted keys); where vLLM is
        # installed, hfrelease.serving.guard also parses the whole command with vLLM's own parser.
        problems = args_problems(self.args or [])
        if problems:
            raise ValueError("; ".join(dict.fromkeys(problems)))
        return self


class Source(Table):
    """Where an artifact's files are: a local directory, or a Hub repo at a pinned commit."""

    path: RelPath | None = None
    hub: RepoId | None = None
    revision: str | None = None

    @model_validator(mode="after")
    def _one_place(self) -> Source:
        if (self.path is None) == (self.hub is None):
            raise ValueError("give exactly one of path (a local directory) or hub (a Hub repo id)")
        if self.hub is not None and (self.revision is None or not _COMMIT_SHA.match(self.revision)):
            raise ValueError("a Hub source needs revision = the 40-character commit sha it is pinned to")
        if self.path is not None and self.revision is not None:
            raise ValueError("revision applies only to a Hub source")
        return self


class Quantization(Table):
    scheme: str = Field(min_length=1)  # FP8_DYNAMIC, NVFP4, NVFP4A16, W8A8, or a named mix
    format: str = "compressed-tensors"
    tool: str = Field(min_length=1)  # e.g. llmcompressor
    tool_version: str = Field(min_length=1)
    modifier: str | None = None  # e.g. QuantizationModifier
    targets: list[str] = Field(default_factory=lambda: ["Linear"])
    ignore: list[str] = Field(default_factory=list)
    data_free: bool = True
    calibration: str | None = None  # dataset and sample count when not data-free
    recipe: RelPath | None = None  # a recipe file shipped beside the manifest, for mixed schemes
    notes: str | None = None


# A vLLM speculative method (`--speculative-config`'s "method"). Which names exist, and which take a draft
# artifact, is vLLM's to say: `hfrelease check` (and every eval's serve guard) reads them from the installed
# vLLM's own SpeculativeConfig (hfrelease.serving.spec_methods); the load only checks the spelling.
SpecMethod = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]
# The n-gram proposers, the only methods that read prompt_lookup_min/max.
NGRAM_METHODS = frozenset({"ngram", "ngram_gpu"})


class Draft(Table):
    target: Slug  # artifact id of the verifier the head was trained against
    method: SpecMethod  # one that loads a model (eagle3, eagle, draft_model, mtp, medusa, dflash, ...): checked
    num_speculative_tokens: Annotated[int, Field(ge=1, le=16)]
    aux_hidden_state_layer_ids: list[NonNegInt] | None = None
    draft_vocab_size: PositiveInt | None = None
    trained_with: str | None = None
    # Draft gates, judged on every batch-1 workload served with the draft (its own job of the release, or
    # `hfrelease eval --artifact DRAFT`); its acceptance is always measured and must be, thresholds or not.
    min_acceptance_rate: Fraction | None = None  # accepted / draft tokens
    # Mean acceptance length: tokens per verify step, 1 + accepted / drafts (1 = every draft rejected).
    min_acceptance_length: Annotated[float, Field(ge=1.0)] | None = None
    min_speedup: Annotated[float, Field(gt=0.0)] | None = None  # batch-1 output tok/s over no speculation
    # At temperature 0, the share of a workload's prompts whose output tokens with the draft equal no
    # speculation's on the same vLLM build (measured, `hfrelease.speed.acceptance`): below it, the draft fails.
    min_identical_outputs: Fraction | None = None
    # The draft x target matrix: measure the draft against every artifact it is compatible with as a target
    # (same tokenizer files and vocabulary size as its trained target, checked on the files:
    # `hfrelease.speed.matrix`), on every workload that serves it, each beside that target without
    # speculation; its card shows the matrix and recommends pairings. A list names the targets to measure
    # (each still checked: an incompatible one is left out); false: its trained target only.
    matrix: bool | list[Slug] = False


# variant: another checkpoint of the reference model that is neither a quant nor a draft (a fine-tune,
# an earlier training step): gated like a quant, described by `description`.
ArtifactKind = Literal["reference", "quant", "variant", "draft"]


class Artifact(Table):
    id: Slug
    kind: ArtifactKind
    repo: RepoId
    title: str | None = None
    description: str | None = None  # one line saying what the artifact is, shown in cards
    publish: bool = True  # false for a reference published by someone else (e.g. the vendor's bf16)
    source: Source
    serve: Serve | None = None
    quantization: Quantization | None = None
    draft: Draft | None = None
    files: list[RelPath] = Field(default_factory=list)  # train_command.txt, val_metrics.json, ...
    citation: Citation | None = None

    @model_validator(mode="after")
    def _kind_fields(self) -> Artifact:
        if self.kind == "quant" and self.quantization is None:
            raise ValueError("a quant artifact needs a [artifact.quantization] table")
        if self.kind != "quant" and self.quantization is not None:
            raise ValueError(f"[artifact.quantization] applies to quant artifacts, not {self.kind}")
        if self.kind == "draft" and self.draft is None:
            raise ValueError("a draft artifact needs a [artifact.draft] table (target, method, ...)")
        if self.kind != "draft" and self.draft is not None:
            raise ValueError(f"[artifact.draft] applies to draft artifacts, not {self.kind}")
        return self


FIDELITY_METRIC = "kl"  # the headline metric of a fidelity gate: mean per-token KL(reference || artifact)
MAX_SEED = 2**32 - 1  # lm-eval seeds numpy's generator with it, which takes 0 .. 2**32 - 1
MAX_TOP_K = 20  # vLLM's default --max-logprobs: a larger top_k is refused by the server


class Gate(Table):
    """A quality gate: an lm-eval task, a custom command / Python entry point, or a fidelity gate.

    A fidelity gate (`fidelity = "<prompt set>"`) compares an artifact's next-token distributions with the
    reference's on the reference's own greedy continuations (`hfrelease.evaluation.fidelity`); it is judged
    by `max_kl` / `max_flip_rate` instead of `margin`, and its kind-specific rules live in
    `hfrelease.manifest.gate_rules` (checked on the raw TOML, so every bad field is reported at once).
    """

    @model_validator(mode="before")
    @classmethod
    def _fidelity_defaults(cls, data: object) -> object:
        # A fidelity gate has no lm-eval metric, accuracy margin or chat mode of its own: the fields every
        # other gate must give get their fidelity meaning here (gate_rules refuses a margin written anyway).
        if isinstance(data, dict) and data.get("fidelity") is not None:
            return {"metric": FIDELITY_METRIC, "margin": 0.0, "mode": "non-thinking", **data}
        # A custom gate's num_concurrent declares how many requests its command or function sends at once
        # (the slots of the artifact's budget it holds while it runs: hfrelease.evaluation.schedule); one
        # unless it says more, where an lm-eval gate's default is the 8 lm-eval keeps in flight.
        if isinstance(data, dict) and (data.get("command") is not None or data.get("entry_point") is not None):
            return {"num_concurrent": 1, **data}
        return data

    id: Slug
    label: str | None = None  # how cards name it, e.g. "GSM8K"
    task: str | None = None  # lm-eval task (or group) name
    task_dir: RelPath | None = None  # local lm-eval task YAMLs (include_path)
    command: list[str] | None = None  # custom gate: argv, handed --base-url/--model/--out
    entry_point: str | None = Field(default=None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    api: Literal["chat", "completions"] = "chat"  # local-chat-completions or local-completions
    mode: Literal["thinking", "non-thinking"]
    limit: PositiveInt | None = None  # samples per task (per subtask for groups)
    max_tokens: PositiveInt  # generation budget
    seed: int = 1234
    # A sampled gate run once per seed (vendors merge 3 to 8 seeds per number): each run is `seed` set to one
    # of these, so it reaches lm-eval's generators and every request's `seed` (vLLM's per-request sampling
    # seed), and is recorded under its own key (a seed already measured is never re-run). The runs are judged
    # together, each item with all of its seeds as one resampling unit (`hfrelease.verdicts.seeds`). Rules
    # (non-empty, distinct, not beside `seed`, not on a greedy or fidelity gate) live in `gate_rules`.
    seeds: list[Annotated[int, Field(ge=0, le=MAX_SEED)]] | None = None
    num_fewshot: NonNegInt | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] = 0.0
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    metric: str = Field(min_length=1)  # e.g. "exact_match,strict-match"
    higher_is_better: bool = True
    margin: Annotated[float, Field(ge=0.0)]  # allowed drop against the reference (non-inferiority)
    floor: float | None = None  # absolute minimum, when set
    # Minimum recovery (artifact mean / reference mean; the field's >= 0.95 convention), when set
    min_recovery: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    max_truncated: Fraction = 0.05  # above this share of cut-off/empty answers the run is void
    # lm-eval gate: its requests in flight when gates run one after another ([eval] schedule). Custom gate
    # (default 1): the requests it sends at once, which it holds of the shared budget under the concurrent one.
    num_concurrent: PositiveInt = 8
    # Seconds one request may take before it counts as failed; default derived from max_tokens
    # (hfrelease.evaluation.timeouts). Not part of what a result is keyed by: it bounds a wait, not a value.
    request_timeout: Seconds | None = None
    artifacts: list[Slug] | None = None  # default: every artifact that is not a draft
    description: str | None = None
    # Truncation compared: the share of answers cut by the budget or empty (a thinking block never closed)
    # may exceed the reference's by at most this much (paired, upper CI bound): a quant that loops more
    # fails even when its accuracy holds.
    truncation_margin: Fraction = 0.05
    # Fidelity gates only (see the class docstring); None elsewhere, so other gates' input keys are unchanged.
    fidelity: RelPath | None = None  # JSONL prompt set: one {"id": ..., "prompt": "..."} per line
    top_k: Annotated[int, Field(ge=1, le=MAX_TOP_K)] | None = None  # logprobs per position (default MAX_TOP_K)
    max_kl: Annotated[float, Field(ge=0.0)] | None = None  # nats per token, mean over prompts (upper CI bound)
    max_flip_rate: Fraction | None = None  # share of positions whose top-1 token differs (upper CI bound)

    @property
    def is_fidelity(self) -> bool:
        return self.fidelity is not None

    @model_validator(mode="after")
    def _one_harness(self) -> Gate:
        given = [name for name in ("task", "command", "entry_point", "fidelity") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of task (an lm-eval task), command or entry_point (a custom gate), "
                "or fidelity (a prompt set); "
                f"got {', '.join(given) or 'none'}"
            )
        if self.command is not None and not self.command:
            raise ValueError("command must not be empty")
        return self


class Speculative(Table):
    """A speculative-decoding configuration that workloads compare (`none` is always available)."""

    id: Slug
    method: SpecMethod
    num_speculative_tokens: Annotated[int, Field(ge=1, le=16)]
    # The draft artifact: required by the methods whose vLLM config needs a model (eagle3, eagle, draft_model,
    # medusa, mlp_speculator, dflash), optional where vLLM defaults to the target's own weights (mtp, dspark),
    # refused where it loads none (ngram, ngram_gpu, suffix): judged at check time (hfrelease.serving.spec_methods).
    draft: Slug | None = None
    prompt_lookup_min: PositiveInt | None = None  # ngram / ngram_gpu only
    prompt_lookup_max: PositiveInt | None = None  # ngram / ngram_gpu only
    # vLLM's verification (`rejection_sample_method`): "standard" (the default) keeps the target's outputs;
    # "synthetic" accepts drafts at a set rate whatever the target says (a lossy mode, for load tests), with
    # `synthetic_acceptance_length` its mean acceptance length; "block" verifies the drafts jointly.
    rejection_sample_method: Literal["standard", "synthetic", "block"] | None = None
    synthetic_acceptance_length: Annotated[float, Field(ge=1.0)] | None = None
    # The gate of a head the served artifact ships itself (native MTP: no draft artifact carries gates): on every
    # workload listing this config, each other artifact's batch-1 acceptance must reach this share of the
    # reference's (the lower bound of its 95 % interval over prompts: `hfrelease.speed.verdict.own_head_checks`).
    # A quant whose MTP layers were lost in export accepts almost nothing and fails it. A threshold, not a
    # measured input: it stays out of the points' keys (`hfrelease.speed.plan.point_input_key`).
    min_acceptance_vs_reference: Annotated[float, Field(gt=0.0, le=1.0)] | None = None

    @model_validator(mode="after")
    def _method_fields(self) -> Speculative:
        if self.id == "none":
            raise ValueError("'none' is reserved for serving without speculation")
        if self.min_acceptance_vs_reference is not None and self.draft is not None:
            raise ValueError("min_acceptance_vs_reference gates a head the artifact ships itself (no draft): a draft "
                             "artifact's gates are its [artifact.draft] table's min_acceptance_rate")
        if (self.rejection_sample_method == "synthetic") != (self.synthetic_acceptance_length is not None):
            raise ValueError("synthetic_acceptance_length is set exactly when rejection_sample_method = 'synthetic'")
        if self.method in NGRAM_METHODS:
            if self.prompt_lookup_max is None:
                raise ValueError(f"{self.method} speculation needs prompt_lookup_max")
            if self.prompt_lookup_min is not None and self.prompt_lookup_min > self.prompt_lookup_max:
                raise ValueError("prompt_lookup_min must not exceed prompt_lookup_max")
        elif self.prompt_lookup_min is not None or self.prompt_lookup_max is not None:
            raise ValueError("prompt_lookup_min/max apply to ngram and ngram_gpu speculation only")
        return self


class Workload(Table):
    """A speed anchor: a prompt set served at given concurrencies under several speculative configs."""

    id: Slug
    label: str | None = None
    prompts: RelPath  # JSONL prompt set
    output_len: PositiveInt
    thinking: bool = False
    # Generate exactly `output_len` tokens per request (`vllm bench serve --ignore-eos`), as throughput
    # sweeps do; off by default, because tokens generated past EOS are text no draft predicts, so a
    # speculative config's acceptance would describe noise (see hfrelease.speed.bench).
    ignore_eos: bool = False
    concurrency: list[PositiveInt] = Field(default_factory=lambda: [1], min_length=1)
    # Sampling settings, recorded with the numbers: acceptance depends on temperature, so a draft is measured
    # at the settings it is served with (the seeds: T=0.6, top-p 0.95). Greedy by default, the setting a
    # comparison with `vllm bench serve` typed by hand needs (it would sample at 1.0 otherwise).
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] = 0.0
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    # A context-length sweep: the workload's prompt text cut (or repeated) to each of these many tokens, each
    # length measured at concurrency 1 with the workload's output_len and configs (records of kind
    # "speed-sweep", beside the workload's own points; `hfrelease.speed.context`).
    input_lens: Annotated[list[PositiveInt], Field(min_length=1, max_length=16)] | None = None
    speculative: list[Slug] = Field(default_factory=lambda: ["none"], min_length=1)
    repeats: PositiveInt = 3
    warmups: NonNegInt = 2
    num_prompts: PositiveInt | None = None
    request_timeout: Seconds | None = None  # per request; default derived from output_len
    artifacts: list[Slug] | None = None  # default: every artifact that is not a draft
    # Every quant of the family is also measured without speculation at the workload's lowest concurrency
    # when the workload runs on the reference and does not list it: a quant card states its decode speedup
    # over the reference on the reference's own workloads. False: only `artifacts` are measured.
    compare_quants: bool = True
    description: str | None = None


class EvalSchedule(Table):
    """How `hfrelease eval` schedules an artifact's gates on its server (`[eval]`): nothing here changes what a
    gate measures, so none of it is part of a result's input key."""

    # Requests an artifact's gates keep in flight together when no concurrency sweep of the artifact is
    # recorded (with one, its knee is used: hfrelease.evaluation.budget); default: the gates' largest num_concurrent.
    in_flight: PositiveInt | None = None
    # "concurrent": the gates of an artifact run at once, sharing the budget; "sequential": one after another,
    # each with its own num_concurrent.
    schedule: Literal["concurrent", "sequential"] = "concurrent"


class Publish(Table):
    tag: str = "v{version}"  # placeholders: {version}, {family}
    pr: bool = False  # stop after staging each repo as a pull request, for human review
    collection: str | None = None  # collection title (or slug) the family's repos are added to
    endpoint: HttpsUrl = "https://huggingface.co"
    private: bool = False

    @model_validator(mode="after")
    def _tag_template(self) -> Publish:
        import string

        try:
            names = {f for _, f, _, _ in string.Formatter().parse(self.tag) if f is not None}
        except ValueError as exc:
            raise ValueError(f"tag template {self.tag!r} is malformed: {exc}") from None
        unknown = names - {"version", "family"}
        if unknown:
            raise ValueError(f"tag template may use {{version}} and {{family}} only, not {sorted(unknown)}")
        rendered = self.tag.replace("{version}", "1.0").replace("{family}", "f")
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$", rendered) or ".." in rendered:
            raise ValueError(f"tag template {self.tag!r} does not make a valid git tag name")
        return self


class Manifest(Table):
    """A whole family: the value every later stage (eval, render, bundle, publish) starts from."""

    schema_version: Literal[1] = 1  # SCHEMA_VERSION; a Literal default must be spelled out for mypy

    @field_validator("schema_version", mode="before")
    @classmethod
    def _integer_version(cls, value: object) -> object:
        # Literal[1] accepts True (True == 1 in Python); the schema version is an integer.
        if isinstance(value, bool) or not isinstance(value, int):
            got = "a boolean" if isinstance(value, bool) else f"a {type(value).__name__}"
            raise ValueError(f"expected the integer {SCHEMA_VERSION}, got {got}")
        return value

    family: Family
    serve: Serve = Field(default_factory=Serve)
    artifact: list[Artifact] = Field(min_length=1)
    gate: list[Gate] = Field(default_factory=list)
    speculative: list[Speculative] = Field(default_factory=list)
    workload: list[Workload] = Field(default_factory=list)
    eval: EvalSchedule = Field(default_factory=EvalSchedule)
    publish: Publish = Field(default_factory=Publish)
    # Set by the loader, not by the TOML: the directory relative paths are resolved against.
    _root: Path = PrivateAttr(default_factory=Path)

    @property
    def root(self) -> Path:
        return self._root

    @property
    def ledger_dir(self) -> Path:
        """The family's ledger: `results/` beside the manifest (every record of every stage goes there)."""
        return self._root / "results"

    def artifact_by_id(self, artifact_id: str) -> Artifact:
        for artifact in self.artifact:
            if artifact.id == artifact_id:
                return artifact
        raise KeyError(artifact_id)

    @property
    def reference(self) -> Artifact:
        return next(a for a in self.artifact if a.kind == "reference")

    def resolve(self, relative: str) -> Path:
        """A manifest path made absolute against the manifest's directory."""
        return (self.root / relative).resolve()

    def tag_name(self) -> str:
        return self.publish.tag.format(version=self.family.version, family=self.family.name)
