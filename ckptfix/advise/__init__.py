"""``ckptfix advise``: read StreamingQueryProgress events and say what the state commit costs.

``advise(urls, ...)`` reads each file through ckptfix.storage, parses it (``parse.parse``), merges and
de-duplicates the events, groups them per query id and analyses them (``analyze.analyze``). Pure apart from
the reads; never prints.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # loaded on use: ``import ckptfix`` loads this package (its API function shares the name)
    from ckptfix.advise.analyze import Advice

__all__ = ["Advice", "advise", "advise_data", "read_one"]


def __getattr__(name: str) -> Any:
    if name == "Advice":
        from ckptfix.advise.analyze import Advice

        return Advice
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def read_one(url: str, storage_options: Mapping[str, Any] | None = None) -> bytes:
    """The bytes of one file (local path or fsspec URL)."""
    from ckptfix.storage import open_location

    if "://" in url:
        parent, name = url.rstrip("/").rsplit("/", 1)
        if parent.endswith(":/") or parent.endswith(":"):  # "s3://bucket" has no parent
            parent, name = url, ""
    else:
        parent, name = posixpath.split(url) if "/" in url else (".", url)
        parent = parent or "/"
    return open_location(parent, storage_options).read(name)


def advise_data(
    items: list[tuple[str, bytes]],
    concurrency: int | None = None,
    query: str | None = None,
) -> Advice:
    """Analyse already-read inputs: ``[(display_path, bytes), ...]``."""
    from ckptfix.advise.analyze import analyze
    from ckptfix.advise.model import Parsed
    from ckptfix.advise.parse import merge, parse

    parsed: list[Parsed] = [parse(data, path) for path, data in items]
    events, dups = merge(parsed)
    return analyze(
        events,
        concurrency=concurrency,
        query=query,
        inputs=[p.summary for p in parsed],
        skipped=[s for p in parsed for s in p.skipped],
        duplicates=dups,
    )


def advise(
    urls: list[str],
    storage_options: Mapping[str, Any] | None = None,
    concurrency: int | None = None,
    query: str | None = None,
) -> Advice:
    return advise_data([(u, read_one(u, storage_options)) for u in urls], concurrency=concurrency, query=query)
