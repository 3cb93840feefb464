"""How soon ``esfis serve`` answers: launch → the first ``/healthz`` answer, and launch → ``model:
ready`` there, on a home of its own, one worker, as every test and an operator's restart pay it
(``tests/http/conftest.py``'s ``start_server``, polling every 50 ms). Recorded, never asserted: a
start's wall time moves with whatever else the machine runs, so compare arms of one run.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from benchmarks.conftest import FULL
from tests.http.conftest import start_server, stop_server

ROUNDS = 7 if FULL else 3


def test_serve_answers_healthz_soon_after_launch(benchmark, tmp_path: Path):
    healthz: list[float] = []
    model: list[float] = []

    def start_and_stop() -> None:
        base = tmp_path / f"start-{len(healthz)}"
        server = start_server(base / "home", base / "work")
        healthz.append(server.seconds_to_healthz)
        model.append(server.seconds_to_model)
        stop_server(server)

    benchmark.pedantic(start_and_stop, rounds=ROUNDS, iterations=1, warmup_rounds=1)
    kept_healthz, kept_model = healthz[-ROUNDS:], model[-ROUNDS:]  # the warm-up start left out
    benchmark.extra_info.update(
        healthz_s=[round(x, 3) for x in kept_healthz],
        model_ready_s=[round(x, 3) for x in kept_model],
        healthz_median_s=round(statistics.median(kept_healthz), 3),
        model_ready_median_s=round(statistics.median(kept_model), 3),
    )
