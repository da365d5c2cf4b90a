"""Where Spark keeps a state key: the shuffle partition ``HashPartitioning`` gives the key's
partitioning columns, ``pmod(Murmur3Hash(columns, seed 42), numPartitions)``
(:mod:`ckptfix.formats.sparkhash`).

Which key columns are the partitioning columns (the stateful operators' required
``StatefulOpClusteredDistribution``; Spark 4.3's ``StatePartitionKeyExtractor`` for each
operator says the same):

- streaming aggregation (windowed or not), the three deduplications,
  flatMapGroupsWithState / applyInPandasWithState, and a join's ``keyToNumValues`` stores:
  the whole state key (grouping / dedup / join keys, a window struct included);
- a join's ``keyWithIndexToValue`` stores: the key without its last column (``index``);
- session windows (a store whose key is scanned by a prefix): the prefix columns (the
  grouping keys; ``sessionStartTime`` is not partitioned on).

transformWithState column families: the grouping key inside each family's key
(:func:`tws_grouping`); :func:`placement` raises :class:`~ckptfix.errors.UsageError` for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ckptfix.errors import UsageError
from ckptfix.formats import sparkhash
from ckptfix.formats.unsaferow import StructType
from ckptfix.state.schemas import OperatorInfo, StoreSchema

INDEX_SUFFIX = "-keyWithIndexToValue"


@dataclass(frozen=True)
class Placement:
    """The partitioning columns of a store's keys: the first ``width`` fields of the key."""

    key: StructType
    width: int
    why: str  # which rule chose the columns, for messages

    @property
    def columns(self) -> StructType:
        return StructType(self.key.fields[: self.width])

    def partition(self, key: Mapping[str, Any], num_partitions: int) -> int:
        """The partition Spark gives a decoded key (a dict keyed by :attr:`StructType.keys`)."""
        if num_partitions < 1:
            raise UsageError(f"a partition count: expected at least 1, found {num_partitions}")
        values = [key[k] for k in self.key.keys[: self.width]]
        return sparkhash.hash_row(values, self.columns) % num_partitions


def placement(info: OperatorInfo, store: StoreSchema) -> Placement:
    """The partitioning columns of ``store`` (a store of the operator ``info`` describes)."""
    n = len(store.key.fields)
    if info.is_tws:
        raise UsageError(
            f"operator {info.operator} is a transformWithState operator: its column families' keys are not placed"
        )
    if store.name.endswith(INDEX_SUFFIX):
        if n < 2:
            raise UsageError(f"store {store.name}: expected join keys + index in the key, found {n} column(s)")
        return Placement(store.key, n - 1, "join keys (the key without its index)")
    if store.encoding.kind == "prefix":
        return Placement(store.key, store.encoding.num_prefix, "the session window's grouping keys (key prefix)")
    if store.encoding.kind == "range":
        raise UsageError(f"store {store.name}: range-scan keys are not placed")
    return Placement(store.key, n, "the whole state key")


def tws_grouping(info: OperatorInfo, store: StoreSchema, key: Mapping[str, Any]) -> tuple[list[Any], StructType]:
    """The grouping key (values, type) inside a decoded key of a transformWithState column family: the whole key
    of a ValueState / ListState (and of a ListState's ``$rowCounter_`` family), the ``key`` struct of a MapState's
    composite key (grouping key + ``userKey``) and of both timer families (``keyToTimestamp``: key + expiry;
    ``timestampToKey``: expiry + key). TTL index families (Spark's ``TTLState``): ``$ttl_<var>`` keys are
    ``(expirationMs, elementKey)``, the element key being the variable's own key (so a MapState's holds the
    grouping key in its ``key`` field); a ListState's ``$min_<var>`` and ``$count_<var>`` are keyed by the grouping
    key. Anything else (an unknown internal family, a layout other than these) raises :class:`UsageError`."""
    var = info.state_variables.get(store.name)
    kind = var.kind if var is not None else None
    if kind in ("ValueState", "ListState") or store.name.startswith(("$rowCounter_", "$count_", "$min_")):
        return [key[k] for k in store.key.keys], store.key
    fields, struct = key, store.key
    if store.name.startswith("$ttl_"):
        element = _struct_field(struct, fields, "elementKey")
        if element is None:
            raise UsageError(
                f"column family {store.name}: expected an elementKey struct in its keys, found {struct.names}"
            )
        fields, struct = element
        owner = info.state_variables.get(store.name[len("$ttl_") :])
        if owner is None or owner.kind != "MapState":  # a ValueState's or ListState's element key: the grouping key
            return [fields[k] for k in struct.keys], struct
        kind = "MapState"  # a MapState's element key: its composite key
    timers = store.name.startswith("$") and "Timers_" in store.name
    inner = _struct_field(struct, fields, "key") if kind == "MapState" or timers else None
    if inner is None:
        raise UsageError(f"column family {store.name}: its keys are not placed (no grouping key found in them)")
    values, t = inner
    return [values[k] for k in t.keys], t


class TwsPlacer:
    """The partition of a raw transformWithState key (RocksDB; 2-byte column family id first): the family's key
    decoded with its schema, the grouping key in it (:func:`tws_grouping`) hashed. ``families``: the zip
    metadata's ``columnFamilyMapping`` (name -> id). Raises :class:`UsageError` for a family without a schema or
    whose keys hold no grouping key, :class:`~ckptfix.errors.FormatError` for a key that does not decode."""

    def __init__(
        self,
        info: OperatorInfo,
        families: Mapping[str, int],
        path: str,
        *,
        delimiter: bytes | None = b",",
        row_checksum: bool = False,
        avro: bool = False,
    ) -> None:
        self.info, self.path = info, path
        self.by_id = {int(i): n for n, i in families.items()}
        self.options = {"delimiter": delimiter, "row_checksum": row_checksum, "avro_encoded": avro}
        self.decoders: dict[int, tuple[Any, StoreSchema]] = {}

    def partition(self, key: bytes, num_partitions: int) -> int:
        from ckptfix.state.decode import Decoder, column_family_of

        cf = column_family_of(key)
        if cf not in self.decoders:
            name = self.by_id.get(cf)
            sch = self.info.column_families.get(name) if name is not None else None
            if sch is None:
                raise UsageError(f"column family {name or cf!r} has no schema in the state schema files")
            dec = Decoder(sch, "rocksdb", self.path, column_family=True, **self.options)  # type: ignore[arg-type]
            self.decoders[cf] = (dec, sch)
        dec, sch = self.decoders[cf]
        values, t = tws_grouping(self.info, sch, dec.key(key))
        return sparkhash.hash_row(values, t) % num_partitions


def _struct_field(
    struct: StructType, values: Mapping[str, Any], name: str
) -> tuple[Mapping[str, Any], StructType] | None:
    """The struct field ``name`` of a decoded key (its values and type), or None."""
    if name not in struct.names:
        return None
    i = struct.names.index(name)
    t = struct.fields[i].data_type
    return (values[struct.keys[i]], t) if isinstance(t, StructType) else None


__all__ = ["Placement", "TwsPlacer", "placement", "tws_grouping"]
