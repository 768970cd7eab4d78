"""What a run of the gates tells its live view (`EvalEvents`), and a view that listens to nothing."""

from __future__ import annotations

from typing import Protocol


class EvalEvents(Protocol):
    """What the live view is told; every method is optional to act on."""

    def server_state(self, artifact_id: str, state: str) -> None: ...
    def gate_progress(self, artifact_id: str, gate_id: str, done: int, total: int) -> None: ...
    def gate_finished(self, artifact_id: str, gate_id: str, summary: str) -> None: ...
    def server_load(self, artifact_id: str, summary: str) -> None: ...
    def log(self, message: str) -> None: ...


class NullEvents:
    def server_state(self, artifact_id: str, state: str) -> None:
        pass

    def gate_progress(self, artifact_id: str, gate_id: str, done: int, total: int) -> None:
        pass

    def gate_finished(self, artifact_id: str, gate_id: str, summary: str) -> None:
        pass

    def server_load(self, artifact_id: str, summary: str) -> None:
        pass

    def log(self, message: str) -> None:
        pass
