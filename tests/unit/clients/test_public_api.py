"""The public names of `ckptlog` (as httpx checks its own): what `__all__` lists is what the package
offers, every name is importable and documented, and each sync client and its `Async` twin offer
the same methods (issue 21 item 9: one naming scheme, the plain name synchronous)."""

from __future__ import annotations

import inspect
import re
import warnings
from pathlib import Path

import pytest

import ckptlog
import ckptlog.client

DOCS = (Path(__file__).resolve().parents[3] / "docs" / "clients.md").read_text()
TWINS = [("Reporter", "AsyncReporter"), ("Reader", "AsyncReader"), ("Evaluator", "AsyncEvaluator")]


def _public(cls: type) -> set[str]:
    """The public methods (attributes and properties are per instance, and documented)."""
    return {name for name in dir(cls) if not name.startswith("_") and callable(getattr(cls, name))}


def test_all_is_sorted_and_names_exactly_the_packages_public_objects() -> None:
    assert ckptlog.__all__ == sorted(ckptlog.__all__) == ckptlog.client.__all__
    offered = {n for n, v in vars(ckptlog.client).items() if not n.startswith("_") and not inspect.ismodule(v)}
    assert offered == set(ckptlog.__all__)
    # `ckptlog` itself defines none of them until asked (PEP 562): importing a subpackage stays cheap
    lazy = {n for n, v in vars(ckptlog).items() if not n.startswith("_") and not inspect.ismodule(v)}
    assert lazy <= set(ckptlog.__all__)


@pytest.mark.parametrize("name", ckptlog.__all__)
def test_every_public_name_is_importable_and_documented(name: str) -> None:
    assert getattr(ckptlog, name) is not None
    assert re.search(rf"\b{name}\b", DOCS) or name in _DOCUMENTED_ELSEWHERE, f"{name} is not in docs/clients.md"


_DOCUMENTED_ELSEWHERE = {"Topics", "Outcome", "Problem", "KafkaConnection", "DecodeLimits", "ClientError"}


@pytest.mark.parametrize(("sync", "async_"), TWINS)
def test_sync_and_async_twins_offer_the_same_methods(sync: str, async_: str) -> None:
    blocking, awaited = getattr(ckptlog, sync), getattr(ckptlog, async_)
    assert _public(blocking) == _public(awaited)
    for name in _public(awaited):
        member = getattr(awaited, name)
        if inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member):
            assert not inspect.iscoroutinefunction(getattr(blocking, name)), f"{sync}.{name} must block"


def test_the_evaluator_exposes_no_kafka_callbacks() -> None:
    for cls in (ckptlog.Evaluator, ckptlog.AsyncEvaluator):
        assert not {"partitions_assigned", "partitions_revoked"} & set(dir(cls))


def test_the_old_sync_reader_name_warns_and_is_the_reader() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert ckptlog.SyncReader is ckptlog.Reader
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    with pytest.raises(AttributeError):
        _ = ckptlog.NoSuchThing  # type: ignore[attr-defined]


async def test_old_async_spellings_name_the_async_twin() -> None:
    reader = ckptlog.Reader(bootstrap_servers="127.0.0.1:9")
    with pytest.raises(ckptlog.ClientError, match="AsyncReader"):
        async with reader:
            pass
    evaluator = ckptlog.Evaluator(lambda path: {}, bootstrap_servers="127.0.0.1:9")
    with pytest.raises(ckptlog.ClientError, match="AsyncEvaluator"):
        evaluator.run()
