"""Reading Spark's JVM objects through py4j: private fields, Scala Options, Seqs and Maps, plan trees.

Shared by ``audit --against`` (:mod:`ckptfix.spark.queryshape`) and ``async-off``
(:mod:`ckptfix.spark.async_off`), which both read an unstarted ``DataStreamWriter`` and its plan.
Nothing here imports PySpark; every function takes py4j objects.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, NamedTuple


def field(obj: Any, name: str) -> Any:
    """A (private) field of a JVM object, looked up through its class hierarchy (None: no such field)."""
    cls = obj.getClass()
    while cls is not None:
        try:
            f = cls.getDeclaredField(name)
            f.setAccessible(True)
            return f.get(obj)
        except Exception:
            cls = cls.getSuperclass()
    return None


def opt(joption: Any) -> Any:
    """A Scala Option's value, None for None or an empty Option; anything else is returned as is."""
    if joption is None:
        return None
    try:
        return joption.get() if joption.isDefined() else None
    except Exception:
        return joption


def seq(jseq: Any) -> list[Any]:
    """A Scala Seq as a list."""
    return [jseq.apply(i) for i in range(jseq.length())]


def map_get(jmap: Any, key: str) -> Any:
    """``jmap.get(key)`` (case-insensitive on Spark's CaseInsensitiveMap), an Option unwrapped; None if absent."""
    if jmap is None:
        return None
    try:
        got = jmap.get(key)
    except Exception:
        return None
    return opt(got) if hasattr(got, "isDefined") else got


def as_dict(jvm: Any, jmap: Any) -> dict[str, str]:
    """A Scala Map / CaseInsensitiveMap (the user's spelling of keys) / CaseInsensitiveStringMap as a dict."""
    if jmap is None:
        return {}
    with contextlib.suppress(Exception):
        jmap = jmap.originalMap()  # CaseInsensitiveMap: keep the user's spelling
    for conv in (
        lambda m: jvm.scala.jdk.javaapi.CollectionConverters.asJava(m),
        lambda m: jvm.scala.collection.JavaConverters.mapAsJavaMap(m),
        lambda m: m.asCaseSensitiveMap(),  # CaseInsensitiveStringMap
    ):
        try:
            java = conv(jmap)
            return {str(k): str(java.get(k)) for k in list(java.keySet().toArray())}
        except Exception:
            continue
    return {}


def simple_name(obj: Any) -> str:
    """The class name of a JVM object without package and without a Scala object's ``$``."""
    return str(obj.getClass().getName()).rsplit(".", 1)[-1].rstrip("$")


def walk(node: Any) -> Iterator[Any]:
    """A plan's nodes in pre-order, children left to right (the order Spark numbers sources in)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(seq(current.children())))


class Relation(NamedTuple):
    """A streaming source in an analyzed plan."""

    node: Any
    v2: bool  # StreamingRelationV2 (sourceName/extraOptions) or StreamingRelation (a V1 DataSource)
    name: str  # the V1 source's format (``className``, as given to ``.format()``) or the V2 ``sourceName``
    options: Any  # the JVM options map (read it with map_get / as_dict)


def streaming_relations(plan: Any) -> list[Relation]:
    """The streaming sources of an analyzed plan, one per relation node, in the order Spark numbers them. A
    source read twice (``df.union(df)``, or two reads of one path) is two sources: Spark 3.5.9 and 4.3.0 write
    two offsets for it (seen live)."""
    out: list[Relation] = []
    for node in walk(plan):
        cls = simple_name(node)
        if cls == "StreamingRelation":
            ds = node.dataSource()
            out.append(Relation(node, False, str(ds.className()), ds.options()))
        elif cls == "StreamingRelationV2":
            out.append(Relation(node, True, str(node.sourceName()), node.extraOptions()))
    return out
