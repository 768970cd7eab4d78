"""The serving and download sections of a card: the commands people paste, as they were measured.

The serve commands are built from the manifest the way `hfrelease eval` built the ones it measured
with (repo ids, no host or port), and each is checked against the commands its records hold: a card
never prints a command its numbers were not measured with (`CardError` when the manifest changed since),
and prints a configuration with no record yet as "not measured yet".
"""

from __future__ import annotations

from hfrelease.cards.errors import CardError
from hfrelease.cards.measurements import NONE, FamilyMeasurements
from hfrelease.cards.text import code_block, code_span, escape_markdown, hub_url, link
from hfrelease.manifest import Artifact, Manifest, Speculative
from hfrelease.serving.command import ServeCommand, build_serve_command, merged_serve

Context = dict[str, object]


def _spec_by_id(manifest: Manifest, spec_id: str) -> Speculative | None:
    return next((s for s in manifest.speculative if s.id == spec_id), None)


def public_command(manifest: Manifest, artifact: Artifact, spec_id: str) -> ServeCommand:
    """The serve command a card prints for `artifact` under a speculative config (`none` for none)."""
    spec = _spec_by_id(manifest, spec_id)
    draft = manifest.artifact_by_id(spec.draft) if spec is not None and spec.draft else None
    return build_serve_command(manifest, artifact, model=artifact.repo, speculative=spec,
                               draft_model=draft.repo if draft else None)


def shell_lines(command: ServeCommand) -> str:
    """`command.display()` folded before `vllm` and each option (one flag per line, issue 25)."""
    import shlex

    words = shlex.split(command.display())
    lines: list[str] = []
    current: list[str] = []
    for word in words:
        if (word.startswith("--") and current) or (word == "vllm" and current):
            lines.append(_join(current))
            current = []
        current.append(word)
    lines.append(_join(current))
    return " \\\n  ".join(lines)


def _join(words: list[str]) -> str:
    """One line of a folded command; a long JSON value spread one key per line (`reproduce.quote_word`), so no
    line outgrows the Hub's card column (a draft's --speculative-config was 2,403 px wide in a 730 px one)."""
    from hfrelease.cards.reproduce import quote_word

    line = ""
    for word in words:
        line += (" " if line else "") + quote_word(word, indent=" " * (len(line) + 4))
    return line


def serving_context(manifest: Manifest, measured: FamilyMeasurements, artifact: Artifact) -> Context:
    if artifact.kind == "draft":
        assert artifact.draft is not None
        server = manifest.artifact_by_id(artifact.draft.target)
        configs = [s.id for s in manifest.speculative if s.draft == artifact.id]
        notes = {s: "the configuration this draft was measured in" for s in configs}
    else:
        server = artifact
        configs, notes = [], {}
        won: dict[str, tuple[list[str], list[str]]] = {}
        for workload in manifest.workload:
            verdict = measured.best_verdict(artifact.id, workload.id)
            if verdict is None or (verdict.point.speculative != NONE and verdict.point.baseline is None):
                continue  # never "best" without the no-speculation point it has to beat (SpeedTables.best)
            best = verdict.point
            if best.speculative not in configs:
                configs.append(best.speculative)
            clear_or_not = won.setdefault(best.speculative, ([], []))
            clear_or_not[0 if verdict.clear else 1].append(workload.label or workload.id)
        # The Speed section's verdict in words: "best" only for a clear win (`BestVerdict`), never two verdicts.
        for spec_id, (clear, unclear) in won.items():
            said = [f"best batch-1 config for {', '.join(clear)}"] if clear else []
            if unclear:
                said.append(f"fastest batch-1 config for {', '.join(unclear)}, not a clear win (see Speed)")
            notes[spec_id] = "; ".join(said)
        if NONE not in configs:
            configs.append(NONE)
            notes[NONE] = "without speculation" + ("" if len(configs) > 1 else " (no speed measurement yet)")
    serve = merged_serve(manifest.serve, server.serve)
    commands = []
    for spec_id in configs:
        command = public_command(manifest, server, spec_id)
        was_measured = _check_measured_command(measured, server.id, spec_id, command.display())
        note = notes[spec_id] + ("" if was_measured else " (not measured yet)")
        commands.append({"config": code_span(spec_id), "note": escape_markdown(note), "measured": was_measured,
                         "code": code_block(shell_lines(command), language="bash"), "display": command.display()})
    plugin = None
    if serve.plugin:
        folder = server.repo.split("/")[1]
        plugin = code_block(f"hf download {server.repo} --local-dir {folder}\n"
                            f"pip install --no-deps ./{folder}/vllm_plugin", language="bash")
    from hfrelease.cards.reproduce import hardware_line

    return {"plugin": plugin, "commands": commands, "server": link(server.title or server.repo, hub_url(server.repo)),
            "hardware": hardware_line(manifest, server)}


def recorded_commands(measured: FamilyMeasurements, artifact_id: str, spec_id: str) -> set[str]:
    """The serve commands (as a card prints them) of the records a card shows for `artifact_id` served
    under `spec_id`: its gate records and speed points for "none", its speed points otherwise."""
    entries = [p.entry for p in measured.points(artifact_id=artifact_id) if p.speculative == spec_id]
    if spec_id == NONE:
        entries += [r.entry for (aid, _), r in measured.gates.items() if aid == artifact_id]
    return {e.record.serve.display for e in entries}


def _check_measured_command(measured: FamilyMeasurements, artifact_id: str, spec_id: str, display: str) -> bool:
    """Whether the card's records were measured with this serve command (False: none recorded yet); refuse
    to print a serve command other than the one the card's numbers were measured with."""
    recorded = recorded_commands(measured, artifact_id, spec_id)
    if recorded and display not in recorded:
        raise CardError(
            f"{artifact_id} ({spec_id}): release.toml now serves it with\n    {display}\n"
            f"but its recorded measurements were made with\n" + "\n".join(f"    {d}" for d in sorted(recorded)),
            hint="Re-run `hfrelease eval` (serve settings are part of every measurement's inputs, so it measures "
            "again under the new command), or restore the serve settings that were measured.",
        )
    return bool(recorded)


def download_command(artifact: Artifact) -> str:
    return f"hf download {artifact.repo} --local-dir {artifact.repo.split('/')[1]}"
