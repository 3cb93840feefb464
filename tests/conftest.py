"""Shared fixtures: a temporary ESFIS_HOME, the real model (loaded once per session), and
services built the one way the product builds them (``open_service``), on the catalog backend
under test (``tests.catalogs``: SQLite, or PostgreSQL with ESFIS_TEST_CATALOG=postgresql)."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from indexing.embedding.embedder import load_embedder
from indexing.embedding.testing import HashingEmbedder
from indexing.partitions import small_file, tail
from server.facade import Esfis, open_service
from server.settings import torch_defaults
from tests import catalogs
from tests.catalogs import catalog_for, settings_for

ESFIS_BIN = str(Path(sys.executable).with_name("esfis"))

# The environment the server gives torch before loading it (``before_torch``), here for the whole
# session: the tests that build a torch embedder themselves load it offline and quiet too.
torch_defaults()

# Property tests draw the same examples on every run of the suite (CI included): a red run is
# a change's doing, never the luck of a draw. ``scripts/test-properties`` runs them with fresh
# seeds (the ``random`` profile, --hypothesis-profile=random); keep what it finds as an
# ``@example`` beside the property.
hypothesis_settings.register_profile("fixed", derandomize=True, database=None, print_blob=True)
hypothesis_settings.register_profile("random", derandomize=False, print_blob=True)
hypothesis_settings.load_profile("fixed")


class MovableClock:
    """A clock tests can fix and move."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> None:
        self.now += timedelta(**kwargs)


# On PostgreSQL the suite runs what touches a catalog. These never open one (vectors, the model)
# or measure SQLite's (the benchmarks): one pass covers them. Tests marked ``postgresql`` are that
# backend's own (a dropped connection, collation), run by its pass only; ``sqlite`` the reverse;
# ``one_catalog`` a promise no catalog changes (a client's interop, a page's layout, the
# importer's memory), run by the SQLite pass only. When scripts/test runs both passes side by
# side (ESFIS_TEST_BOTH=1), tests/indexing runs in the PostgreSQL pass instead, so the two
# passes take about as long as each other.
NO_CATALOG = ("tests/indexing/", "benchmarks/")
BOTH_PASSES = os.environ.get("ESFIS_TEST_BOTH") == "1"
# Benchmarks whose stores are their own (a SQLite catalog in their own folder, whatever the pass):
# side by side, the PostgreSQL pass takes these too, as it takes tests/indexing.
ANY_PASS_BENCHMARKS = ("benchmarks/test_evidence_recall.py", "benchmarks/test_longmemeval.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(config.rootpath)

    def under(item: pytest.Item, folder: str) -> bool:
        return Path(item.path).relative_to(root).as_posix().startswith(folder)

    def moved(item: pytest.Item) -> bool:
        """Run by the PostgreSQL pass when both passes run side by side."""
        return BOTH_PASSES and (under(item, "tests/indexing/") or any(under(item, b) for b in ANY_PASS_BENCHMARKS))

    if catalogs.BACKEND == "sqlite":
        aside = [i for i in items if i.get_closest_marker("postgresql") or moved(i)]
    else:
        aside = [
            i
            for i in items
            if (under(i, "benchmarks/") and not moved(i))
            or (under(i, "tests/indexing/") and not BOTH_PASSES)
            or i.get_closest_marker("sqlite")
            or i.get_closest_marker("one_catalog")
        ]
    if aside:
        config.hook.pytest_deselected(items=aside)
        items[:] = [i for i in items if i not in aside]


@pytest.fixture(scope="session", autouse=True)
def catalog_backend():
    """The backend every catalog of this session lives on; PostgreSQL's cluster is started
    here, once, and torn down after the last test."""
    if catalogs.BACKEND == "postgresql":
        catalogs.CLUSTER = catalogs.Cluster().start()
        yield catalogs.BACKEND
        catalogs.CLUSTER.stop()
        catalogs.CLUSTER = None
    else:
        yield catalogs.BACKEND


@pytest.fixture(scope="session")
def s3():
    """A real S3-compatible server (``tests/objectstore.py``), started once for the session by
    the first test that needs one."""
    from tests import objectstore

    yield objectstore.server()
    objectstore.stop()


@pytest.fixture
def s3_env(s3, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """This process reaches the S3 server as a deployment would, by the AWS variables."""
    for name, value in s3.env.items():
        monkeypatch.setenv(name, value)
    return s3.env


@pytest.fixture(scope="session")
def real_embedder():
    """The product's default embedder for the packaged model (ONNX Runtime), loaded once."""
    embedder = load_embedder(None)
    embedder.load()
    return embedder


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A tiny random sentence-transformers model (mean pooling, Dense to 48-d, Normalize) with
    ``query: `` / ``passage: `` prompts, built here (``tests/tiny_model.py``)."""
    from tests.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model") / "tiny-prompted")


@pytest.fixture(scope="session")
def tiny_cache(tmp_path_factory) -> Path:
    """Where the tiny models' ONNX exports go, apart from this machine's own cache."""
    return tmp_path_factory.mktemp("tiny-onnx-cache")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "esfis-home"
    monkeypatch.setenv("ESFIS_HOME", str(path))
    for var in ("ESFIS_AI", "ESFIS_SPACE", "ESFIS_MODEL", "ESFIS_CATALOG", "ESFIS_VECTORS"):
        monkeypatch.delenv(var, raising=False)
    url = catalog_for(path)
    if url is not None:  # in-process CLI runs read it, as subprocesses do from cli_env
        monkeypatch.setenv("ESFIS_CATALOG", url)
    return path


@pytest.fixture(params=["small file", "table and tail", "table"])
def partition_form(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each form a partition takes on disk: a test that uses this runs with partitions kept as
    small files until they outgrow them (``indexing.partitions.small_file``), then with every
    partition a LanceDB table from its first row and its later writes in the table's tail
    (``indexing.partitions.tail``), then with every write an append to the table."""
    if request.param != "small file":
        monkeypatch.setattr(small_file, "SMALL_ROWS", 0)
    if request.param == "table":
        monkeypatch.setattr(tail, "TAIL_ROWS", 0)
    return request.param


@pytest.fixture
def clock() -> MovableClock:
    return MovableClock()


@pytest.fixture
def service(home: Path, real_embedder, clock: MovableClock) -> Esfis:
    """A service on the real model and real LanceDB, with a clock the test controls."""
    svc = open_service(settings_for(home), embedder=real_embedder, clock=clock)
    yield svc
    svc.close()


@pytest.fixture
def fake_service(home: Path, clock: MovableClock) -> Esfis:
    """A service on the deterministic hashing embedder, for fast tests of logic."""
    svc = open_service(settings_for(home), embedder=HashingEmbedder(), clock=clock)
    yield svc
    svc.close()


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Path]:
    """Client folders: acme (with platform and finance inside), acme2, acme-corp, globex, outside."""
    root = tmp_path / "work"
    made = {}
    for name in [
        "acme",
        "acme/platform",
        "acme/platform/api",
        "acme/finance",
        "acme2",
        "acme-corp",
        "globex",
        "outside",
    ]:
        path = root / name
        path.mkdir(parents=True, exist_ok=True)
        made[name] = path
    return made


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    """A subprocess's environment for ``home``: its catalog (ESFIS_CATALOG) travels with it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ESFIS_")}
    env["ESFIS_HOME"] = str(home)
    url = catalog_for(home)
    if url is not None:
        env["ESFIS_CATALOG"] = url
    env.update(extra)
    return env
