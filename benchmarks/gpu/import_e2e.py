"""esfis's own import, end to end, with the model on a GPU: the issue 5 target of ≥ 50k memories/s.

    python benchmarks/gpu/import_e2e.py OUT_DIR [ROWS]

Unlike part a of ``measure.py`` (a pipeline built beside esfis, with no store), this runs
``server.bulk.importer.import_stream`` itself: parse, checks, duplicate queries, the model on the GPU
through ``ESFIS_DEVICE=cuda`` (fp16), LanceDB and catalog writes, into a fresh ``ESFIS_HOME`` on
local disk. It needs LanceDB on the device machine (``run.sh c`` installs it from carried
wheels) and the sentence-transformers folder in ``.devcarry/model``. Writes ``import_e2e.json``:
the model's raw rate on the same texts, the import's rate, and their ratio.

``ESFIS_GPU_DEVICE=cpu ESFIS_GPU_SMOKE=1`` runs a tiny version here, to test the script.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

DEV = os.environ.get("ESFIS_GPU_DEVICE", "cuda")
SMOKE = os.environ.get("ESFIS_GPU_SMOKE") == "1"
MODEL = Path(os.environ.get("ESFIS_GPU_MODEL", ROOT / ".devcarry" / "model"))
WORDS = [
    "acme",
    "auth",
    "login",
    "deploy",
    "billing",
    "invoice",
    "cache",
    "queue",
    "retry",
    "token",
    "client",
    "server",
    "build",
    "test",
]


def lines(rows: int) -> list[str]:
    """Distinct short notes with keys (~12 tokens), as part a's "300k short distinct" lines."""
    import numpy as np

    picks = np.random.default_rng(1).integers(0, len(WORDS), size=(rows, 8))
    return [
        json.dumps({"text": f"note {i}: " + " ".join(WORDS[k] for k in pick), "key": f"k{i}"})
        for i, pick in enumerate(picks)
    ]


def main(out: Path, rows: int) -> dict:
    import lancedb  # noqa: F401  (fails here, early, when the wheels were not installed)

    from indexing.embedding.embedder import load_embedder
    from server.bulk.importer import import_stream
    from server.facade import open_service
    from server.settings import Settings

    data = lines(rows)
    texts = [json.loads(line)["text"] for line in data]
    embedder = load_embedder(str(MODEL), backend="torch", device=DEV)
    embedder.embed_documents(texts[:2048])  # load, warm up, pick kernels

    started = time.perf_counter()
    for start in range(0, len(texts), 8192):
        embedder.embed_documents(texts[start : start + 8192])
    raw = len(texts) / (time.perf_counter() - started)

    results: dict = {"device": DEV, "rows": rows, "raw_encode_texts_per_s": round(raw)}
    for batch_size in (4096, 8192):
        home = Path(tempfile.mkdtemp(prefix="esfis-e2e-", dir="/tmp"))
        service = open_service(Settings(home=home, model=str(MODEL)), embedder=embedder)
        started = time.perf_counter()
        report = import_stream(service._parts, data, batch_size=batch_size)
        seconds = time.perf_counter() - started
        service.close()
        assert (report.imported, report.failed) == (rows, 0), report
        results[f"import_batch_{batch_size}"] = {
            "memories_per_s": round(rows / seconds),
            "seconds": round(seconds, 2),
            "over_raw": round(rows / seconds / raw, 3),
        }
        print(json.dumps(results), flush=True)
    results["target_memories_per_s"] = 50_000
    out.mkdir(parents=True, exist_ok=True)
    (out / "import_e2e.json").write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else (2_000 if SMOKE else 300_000))
