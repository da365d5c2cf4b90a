"""Offline state: read any committed version of a state store, its change feed, rebuild and
write back snapshots, export rows -- without a JVM.

Modules (import directions: state imports formats, storage, checkpoint and the store model
``ckptfix.stores`` (chain, provider, verify, records, rocks); never cli):

- ``schemas``  key/value schemas of a store (schema files v1-v3, operator metadata, DDL)
- ``decode``   raw pairs -> rows as Spark's ``statestore`` reader shows them, per operator
- ``read``     the public entry points ``read_state`` / ``read_changes``
- ``export``   jsonl / csv / parquet writers (encoders compiled from the column types)
- ``parallel`` partitions read by forked worker processes (``--jobs``)
- ``inventory`` ``state ls``: which versions each store can load, and what is missing
"""
