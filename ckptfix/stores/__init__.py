"""The state store model, below audit, state and repair: one answer for every command.

- ``provider`` which provider wrote an operator's stores (recorded class, session default, files' layout;
               custom classes marked as such)
- ``chain``    which files build version N of one store (snapshot/zip + deltas/changelogs, checkpoint v2
               lineage), with ``--from-snapshot`` and fallback past a damaged base (``exclude``)
- ``verify``   what is wrong with one state file, as facts (sidecars, framing, a zip's SSTs and blocks)
- ``records``  the raw (key bytes, value bytes) pairs of version N, streamed
- ``rocks``    RocksDB zips + SSTs through rocksdict: materialize, iterate, replay, build

``audit`` turns the facts into a restart prediction, ``state ls`` into loadable versions, ``state read`` and
``state rebuild`` into rows: the chain and the facts are the same for all of them
(tests/stores/test_one_model.py).
"""
