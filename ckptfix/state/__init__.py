"""Offline state: read any committed version of a state store, its change feed, rebuild and
write back snapshots, export rows -- without a JVM.

Modules (import directions: state imports formats, storage, checkpoint; never cli):

- ``chain``    which files build version N of one store (snapshot/zip + deltas/changelogs,
               checkpoint v2 lineage), with ``--from-snapshot`` and fallback past a corrupt one
- ``records``  the raw (key bytes, value bytes) pairs of version N, streamed
- ``rocks``    RocksDB zips + SSTs through rocksdict: materialize, iterate, replay, build
- ``schemas``  key/value schemas of a store (schema files v1-v3, operator metadata, DDL)
- ``decode``   raw pairs -> rows as Spark's ``statestore`` reader shows them, per operator
- ``read``     the public entry points ``read_state`` / ``read_changes``
- ``export``   jsonl / csv / parquet writers (encoders compiled from the column types)
- ``parallel`` partitions read by forked worker processes (``--jobs``)
- ``inventory`` ``state ls``: which versions each store can load, and what is missing
- ``rebuild``  plan a snapshot for version N (and ``--prune``) through the repair engine
"""
