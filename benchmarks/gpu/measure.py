"""GPU measurements, run on the device machine by benchmarks/gpu/run.sh (one short script).

    python benchmarks/gpu/measure.py a|b OUT_DIR

Part a: the network's raw encode rate, the import pipeline's rate (JSON Lines parse, validate,
digest and dedupe, tokenize, encode, Arrow batches written to local disk), and exact search on
the GPU. Both parts: the vectors of every distinct LongMemEval text (int8, per-row scale). The model travels as fp16 weights (the fp32 file is over the transfer limit); LanceDB is
not on that machine, so the store write is measured on the CPU machine instead (see REPORT.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch

DEV = os.environ.get("ESFIS_GPU_DEVICE", "cuda")
SMOKE = os.environ.get("ESFIS_GPU_SMOKE") == "1"  # a tiny run on the CPU, to test the script
ROOT = Path(__file__).resolve().parents[2]
CARRY = ROOT / ".devcarry"
sys.path.insert(0, str(ROOT))


def load():
    from tokenizers import Tokenizer
    from transformers import AutoModel

    model = (
        AutoModel.from_pretrained(str(CARRY / "model"), dtype=torch.float16 if DEV == "cuda" else torch.float32)
        .to(DEV)
        .eval()
    )
    tok = Tokenizer.from_file(str(CARRY / "model" / "tokenizer.json"))
    tok.enable_truncation(max_length=256)
    tok.enable_padding()
    return model, tok


def sync() -> None:
    if DEV == "cuda":
        torch.cuda.synchronize()


@torch.inference_mode()
def forward(model, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    out = model(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids)).last_hidden_state
    m = mask.unsqueeze(-1).to(out.dtype)
    pooled = (out * m).sum(1) / m.sum(1).clamp(min=1e-6)
    return torch.nn.functional.normalize(pooled.float(), dim=-1)


def tokenize(tok, texts):
    enc = tok.encode_batch(texts)
    ids = torch.tensor(np.array([e.ids for e in enc], dtype=np.int64))
    mask = torch.tensor(np.array([e.attention_mask for e in enc], dtype=np.int64))
    return ids, mask


def raw_rate(model, tokens: int, batch: int, batches: int = 20 if not SMOKE else 1) -> float:
    ids = torch.randint(1000, 20000, (batch, tokens), device=DEV)
    mask = torch.ones_like(ids)
    forward(model, ids, mask)
    sync()
    started = time.perf_counter()
    for _ in range(batches):
        forward(model, ids, mask)
    sync()
    return batch * batches / (time.perf_counter() - started)


def _parse(lines: list[bytes]) -> tuple[list[str], int]:
    """One C call for the whole chunk; a chunk with a bad line falls back to line by line."""
    try:
        rows = json.loads(b"[" + b",".join(lines) + b"]")
    except ValueError:
        rows = []
        for line in lines:
            try:
                rows.append(json.loads(line))
            except ValueError:
                rows.append(None)
    texts = [r.get("text") if isinstance(r, dict) else None for r in rows]
    good = [t for t in texts if isinstance(t, str) and t.strip() and len(t) <= 32768]
    return good, len(texts) - len(good)


class _Discard:
    """A sink that drops batches: isolates the disk from the rest of the pipeline."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def write_table(self, table) -> None:
        del table


def import_pipeline(model, tok, lines: list[bytes], batch: int, out: Path, producers: int = 3) -> dict:
    """Parse → validate → digest/dedupe → tokenize (threads) → encode (GPU) → Arrow on disk.

    Producers each take every n-th chunk of lines; tokenizers and hashlib release the GIL, so
    they overlap with each other and with the GPU. Dedupe is by digest under a lock.
    """
    import pyarrow as pa
    import pyarrow.ipc as ipc

    todo: queue.Queue = queue.Queue(maxsize=8)
    seen: set[bytes] = set()
    lock = threading.Lock()
    failed = [0]
    chunks = [lines[i : i + batch] for i in range(0, len(lines), batch)]

    def produce(me: int) -> None:
        for chunk in chunks[me::producers]:
            texts, bad = _parse(chunk)
            digests = [hashlib.sha256(t.encode()).digest() for t in texts]
            with lock:
                failed[0] += bad
                fresh = []
                for i, d in enumerate(digests):
                    if d not in seen:
                        seen.add(d)
                        fresh.append(i)
            texts = sorted((texts[i] for i in fresh), key=len)
            if texts:
                ids, mask = tokenize(tok, texts)
                todo.put(
                    (texts, ids.pin_memory() if DEV == "cuda" else ids, mask.pin_memory() if DEV == "cuda" else mask)
                )
        todo.put(None)

    schema = pa.schema([("text", pa.string()), ("vector", pa.list_(pa.float32(), 384))])
    written, finished = 0, 0
    started = time.perf_counter()
    for me in range(producers):
        threading.Thread(target=produce, args=(me,), daemon=True).start()
    with ipc.new_file(str(out), schema) if out is not None else _Discard() as sink:
        while finished < producers:
            item = todo.get()
            if item is None:
                finished += 1
                continue
            texts, ids, mask = item
            vectors = forward(model, ids.to(DEV, non_blocking=True), mask.to(DEV, non_blocking=True)).cpu().numpy()
            sink.write_table(
                pa.table(
                    {
                        "text": texts,
                        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), 384),
                    },
                    schema=schema,
                )
            )
            written += len(texts)
    seconds = time.perf_counter() - started
    return {
        "lines": len(lines),
        "written": written,
        "failed": failed[0],
        "seconds": round(seconds, 3),
        "memories_per_s": round(written / seconds),
        "lines_per_s": round(len(lines) / seconds),
    }


def gpu_search(rows: int, scope: int, queries: int = 200) -> dict:
    gen = torch.Generator(device=DEV).manual_seed(0)
    store = torch.nn.functional.normalize(torch.randn(rows, 384, device=DEV, generator=gen), dim=-1)
    qs = torch.nn.functional.normalize(torch.randn(queries, 384, device=DEV, generator=gen), dim=-1)
    if DEV == "cuda":
        store, qs = store.half(), qs.half()
    out = {}
    for name, matrix in (("scope_10k", store[:scope]), ("partition_1m", store)):
        torch.topk(matrix @ qs[0], 10)
        sync()
        times = []
        for q in qs:
            started = time.perf_counter()
            torch.topk(matrix @ q, 10).indices.cpu()
            times.append(time.perf_counter() - started)
        started = time.perf_counter()
        torch.topk(qs @ matrix.T, 10, dim=1).indices.cpu()
        batched = time.perf_counter() - started
        out[name] = {
            "p50_ms": round(float(np.median(times)) * 1000, 3),
            "p95_ms": round(float(np.percentile(times, 95)) * 1000, 3),
            "batched_queries_per_s": round(queries / batched),
        }
    return out


def embed_all(model, tok, texts: list[str], out: Path) -> dict:
    """Every distinct text, as int8 with a per-row scale (the fp16 file would pass the transfer
    limit): cosine to the unquantised vector ≥ 0.9999 (checked below)."""
    order = np.argsort([len(t) for t in texts], kind="stable")
    vectors = np.zeros((len(texts), 384), dtype=np.float32)
    started = time.perf_counter()
    for s in range(0, len(texts), 1024):
        chosen = order[s : s + 1024]
        ids, mask = tokenize(tok, [texts[i] for i in chosen])
        vectors[chosen] = forward(model, ids.to(DEV), mask.to(DEV)).cpu().numpy()
    seconds = time.perf_counter() - started
    scale = np.abs(vectors).max(axis=1) / 127.0
    quantised = np.round(vectors / scale[:, None]).astype(np.int8)
    back = quantised * scale[:, None]
    back /= np.linalg.norm(back, axis=1, keepdims=True)
    np.save(out / "lme-scale.npy", scale.astype(np.float32))
    for i, chunk in enumerate(np.array_split(quantised, 3)):
        np.save(out / f"lme-q{i}.npy", chunk)
    return {
        "texts": len(texts),
        "seconds": round(seconds, 2),
        "texts_per_s": round(len(texts) / seconds),
        "int8_cosine_min": float(np.min(np.sum(back * vectors, axis=1))),
    }


def main() -> None:
    part, out = sys.argv[1], Path(sys.argv[2])
    import benchmarks.longmemeval as lme
    from benchmarks.longmemeval import load_workload

    lme.LME_FILE = CARRY / "longmemeval_s_user_turns.json.gz"
    workload = load_workload()
    model, tok = load()
    if SMOKE:
        workload = lme.Workload(
            workload.texts[:3000],
            workload.memory_text[:4000] % 3000,
            workload.memory_space[:4000],
            workload.spaces,
            workload.questions,
        )
    report: dict = {"device": torch.cuda.get_device_name() if DEV == "cuda" else "cpu", "torch": torch.__version__}
    if part == "a":
        report["raw_encode_texts_per_s"] = {
            f"{t}_tokens_batch_{b}": round(raw_rate(model, t, b))
            for t in (32, 128)
            for b in ((1024, 4096) if not SMOKE else (8,))
        }
        texts = [workload.texts[i] for i in workload.memory_text.tolist()]
        lines = [json.dumps({"text": t}).encode() for t in texts]
        report["import_pipeline_lme_121k_lines"] = import_pipeline(model, tok, lines, 2048, Path("/tmp/import.arrow"))
        short = [
            json.dumps({"text": f"memory {i}: the deploy of service {i % 977} moved to region {i % 13}"}).encode()
            for i in range(300_000 if not SMOKE else 500)
        ]
        for sink, where in (
            ("local_disk", Path("/tmp/import2.arrow")),
            ("tmpfs", Path("/dev/shm/import2.arrow")),
            ("no_write", None),
        ):
            report[f"import_pipeline_300k_short_distinct_{sink}"] = import_pipeline(model, tok, short, 4096, where)
        report["search"] = gpu_search(1_000_000 if not SMOKE else 20_000, 10_000)
        cpu = CARRY / "cpu-chunk0.npy"
        if cpu.exists():
            ref = np.load(cpu)
            ids, mask = tokenize(tok, workload.texts[: len(ref)])
            got = forward(model, ids.to(DEV), mask.to(DEV)).cpu().numpy()
            report["fp16_gpu_vs_cpu_fp32_cosine_min"] = float(np.min(np.sum(got * ref, axis=1)))
    if part == "b":
        report["lme_embed"] = embed_all(model, tok, workload.texts, out)
    (out / f"gpu-{part}.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
