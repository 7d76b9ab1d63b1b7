"""``executor="serial"``: every task in this process, one after the other (the default)."""

from __future__ import annotations

from collections.abc import Iterator

from .base import Backend, Outcome, execute


class SerialBackend(Backend):
    """Runs tasks in the calling process; progress is live and nothing is pickled."""

    name = "serial"
    in_process = True

    def run(self, payloads: list[bytes]) -> Iterator[tuple[int, Outcome]]:
        for index, payload in enumerate(payloads):
            yield index, execute(payload)
