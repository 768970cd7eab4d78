"""The rules of a fidelity gate's keys, checked on the raw TOML so that every bad field is reported at once.

Pydantic's model validators run only once every field of a table is valid, and a cross-field rule raised
there has no field location; these run on every load (like `references.py`) whatever else failed, and each
problem names its own key: `gate[4].max_kl`, `gate[4].fidelity` (a prompt-set line: `...fidelity:3`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TypeGuard

from hfrelease.errors import ConfigError, ConfigProblem
from hfrelease.manifest.input_files import InputFileError, read_input_text

# Keys that mean something only on a fidelity gate, and keys a fidelity gate has no use for (it has no
# lm-eval metric, accuracy margin or floor: `max_kl` / `max_flip_rate` judge it).
FIDELITY_ONLY = ("top_k", "max_kl", "max_flip_rate")
NOT_FOR_FIDELITY = ("metric", "margin", "floor", "min_recovery", "higher_is_better", "task_dir", "api", "num_fewshot",
                    "temperature", "top_p", "limit", "max_truncated")
MAX_PROMPTS = 10_000


def _gates(data: Mapping[str, Any]) -> Iterator[tuple[int, Mapping[str, Any]]]:
    items = data.get("gate")
    if isinstance(items, list):
        for index, item in enumerate(items):
            if isinstance(item, Mapping):
                yield index, item


def check_gate_kinds(data: Mapping[str, Any]) -> list[ConfigProblem]:
    """Fidelity keys on fidelity gates only; a fidelity gate has a threshold and no accuracy-gate keys."""
    problems: list[ConfigProblem] = []
    for index, gate in _gates(data):
        where = f"gate[{index}]"
        if gate.get("fidelity") is None:
            problems += [ConfigProblem(location=f"{where}.{key}",
                                       message=f"{key} applies to fidelity gates only (fidelity = \"<prompt set>\")")
                         for key in FIDELITY_ONLY if key in gate]
            continue
        problems += [ConfigProblem(location=f"{where}.{key}",
                                   message=f"a fidelity gate takes no {key}: it is judged by max_kl / max_flip_rate "
                                           "against the reference's own next-token distributions")
                     for key in NOT_FOR_FIDELITY if key in gate]
        if gate.get("mode", "non-thinking") != "non-thinking":
            problems.append(ConfigProblem(location=f"{where}.mode", message=(
                "a fidelity gate scores raw completions of its prompt set: mode must be 'non-thinking' (or left out)")))
        if gate.get("max_kl") is None and gate.get("max_flip_rate") is None:
            problems.append(ConfigProblem(location=f"{where}.max_kl", message=(
                "a fidelity gate needs max_kl (nats per token) or max_flip_rate (share of positions), or both")))
    return problems


MAX_SEEDS = 32  # vendors merge 3 to 8 seeds per number; a longer list is a mistake that would multiply a run


def check_gate_seeds(data: Mapping[str, Any]) -> list[ConfigProblem]:
    """`seeds`: a non-empty list of distinct seeds, instead of `seed`, on a gate that samples.

    Greedy decoding (temperature 0, the default) gives the same answers under every seed: the runs would
    repeat one measurement and the merged interval would look tighter than the evidence, so seeds on a
    greedy lm-eval gate or on a fidelity gate (greedy by construction) are refused. A custom gate decides
    how it samples (it receives each seed as `--seed`), so its seeds are taken as given. Each element's
    type and range are the schema's (`Gate.seeds`).
    """
    problems: list[ConfigProblem] = []
    for index, gate in _gates(data):
        seeds = gate.get("seeds")
        if not isinstance(seeds, list):
            continue  # absent, or the schema reports its type
        where = f"gate[{index}].seeds"

        def problem(message: str, where: str = where) -> None:
            problems.append(ConfigProblem(location=where, message=message))

        if not seeds:
            problem("seeds lists no seed: give at least one (or leave it out for one run with seed)")
        if len(seeds) > MAX_SEEDS:
            problem(f"{len(seeds)} seeds: a gate takes at most {MAX_SEEDS} (each seed is a full run of the gate)")
        counted: dict[int, int] = {}
        for value in seeds:
            if isinstance(value, int) and not isinstance(value, bool):
                counted[value] = counted.get(value, 0) + 1
        repeated = sorted(v for v, count in counted.items() if count > 1)
        if repeated:
            problem(f"seed(s) {', '.join(map(str, repeated))} listed more than once: a repeated seed repeats the "
                    "same run and would count its samples twice")
        if "seed" in gate:
            problems.append(ConfigProblem(location=f"gate[{index}].seed", message=(
                "give seed (one run) or seeds (one run per seed), not both: with seeds, list every seed")))
        if gate.get("fidelity") is not None:
            problem("a fidelity gate is greedy (the reference's greedy continuations): every seed would give the "
                    "same figures, so it takes no seeds")
        elif gate.get("task") is not None and gate.get("temperature", 0.0) == 0:
            problem("the gate is greedy (temperature 0): every seed would give the same answers; set temperature "
                    "(e.g. 0.6, with top_p) to sample, or remove seeds")
    return problems


def check_gate_concurrency(data: Mapping[str, Any]) -> list[ConfigProblem]:
    """A custom gate declares no more requests at once than the `[eval] in_flight` budget it would share.

    A custom gate holds `num_concurrent` slots of its artifact's budget while it runs (its command sends
    that many requests at once): more than the whole budget, the gates together would keep more requests
    in flight than the budget allows. Checked when `[eval] in_flight` is given and the schedule is the
    concurrent one; a budget taken from a measured sweep is only known at run time, where such a gate
    holds every slot (`hfrelease.evaluation.schedule.gate_slots`). The value's type and sign are the
    schema's (`Gate.num_concurrent`).
    """
    table = data.get("eval")
    budget = table.get("in_flight") if isinstance(table, Mapping) else None
    schedule = table.get("schedule", "concurrent") if isinstance(table, Mapping) else "concurrent"
    if not _is_int(budget) or schedule != "concurrent":
        return []
    problems: list[ConfigProblem] = []
    for index, gate in _gates(data):
        value = gate.get("num_concurrent")
        if (gate.get("command") is None and gate.get("entry_point") is None) or not _is_int(value):
            continue
        if value > budget:
            problems.append(ConfigProblem(location=f"gate[{index}].num_concurrent", message=(
                f"this custom gate sends {value} requests at once, more than [eval] in_flight = {budget}, the "
                "budget the artifact's gates share: lower num_concurrent to at most "
                f"{budget} or raise in_flight")))
    return problems


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def check_prompt_sets(data: Mapping[str, Any], root: Path) -> list[ConfigProblem]:
    """Each fidelity gate's prompt set is a JSONL file of {"id": str, "prompt": non-empty str}, ids unique."""
    problems: list[ConfigProblem] = []
    for index, gate in _gates(data):
        value = gate.get("fidelity")
        if not isinstance(value, str) or not value or "\x00" in value:
            continue  # the schema reports it
        where = f"gate[{index}].fidelity"
        try:
            text = _read_prompt_text(root / value)
        except FileNotFoundError:
            problems.append(ConfigProblem(location=where,
                                          message=f"file {value!r} does not exist (relative to {root})"))
            continue
        except InputFileError as exc:
            problems.append(ConfigProblem(location=where, message=f"{value}: {exc}"))
            continue
        problems += [ConfigProblem(location=f"{where}:{line}", message=f"{value}: {message}")
                     for line, message in prompt_set_problems(text)]
    return problems


def prompt_set_problems(text: str) -> list[tuple[int, str]]:
    """(line, message) for each bad line of a prompt set; an empty set is one problem at line 0."""
    problems: list[tuple[int, str]] = []
    seen: dict[str, int] = {}
    count = 0
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        count += 1
        try:
            item = json.loads(raw)
        except ValueError as exc:
            problems.append((line, f"not JSON: {exc}"))
            continue
        if not isinstance(item, dict):
            problems.append((line, "each line must be a JSON object with \"id\" and \"prompt\""))
            continue
        ident, prompt = item.get("id"), item.get("prompt")
        if not isinstance(ident, str) or not ident:
            problems.append((line, "\"id\" must be a non-empty string"))
        elif ident in seen:
            problems.append((line, f"duplicate id {ident!r} (also line {seen[ident]})"))
        else:
            seen[ident] = line
        if not isinstance(prompt, str) or not prompt:
            problems.append((line, "\"prompt\" must be a non-empty string"))
    if count == 0:
        problems.append((0, "the prompt set is empty"))
    elif count > MAX_PROMPTS:
        problems.append((0, f"{count} prompts: a fidelity gate takes at most {MAX_PROMPTS}"))
    return problems


def _read_prompt_text(path: Path) -> str:
    """A prompt set's text: a regular file of at most MAX_INPUT_BYTES (never /dev/zero or a FIFO)."""
    return read_input_text(path, what="a prompt set", expected="a JSONL file of at most "
                           f"{MAX_PROMPTS} prompts")


def read_prompt_set(path: Path) -> list[tuple[str, str]]:
    """(id, prompt) of each line of a prompt set `check_prompt_sets` accepted, in file order; ConfigError (exit 3)
    when the file is no longer one it could accept (replaced by a device or a larger file since)."""
    try:
        text = _read_prompt_text(path)
    except (FileNotFoundError, InputFileError) as exc:
        message = str(exc) if isinstance(exc, InputFileError) else "the prompt set does not exist"
        raise ConfigError(str(path), [ConfigProblem(location="", message=message)]) from None
    items = (json.loads(raw) for raw in text.splitlines() if raw.strip())
    return [(str(item["id"]), str(item["prompt"])) for item in items]
