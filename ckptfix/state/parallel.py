"""Read partitions in parallel worker processes, each turning its rows into text.

The partitions of a store are independent, so ``state read --jobs N`` forks N workers that
take partitions from a queue, read them with the local engine (the already listed
checkpoint is inherited, nothing is listed again) and send back chunks of JSON lines, CSV
rows or Arrow IPC. The output is in partition order, as a one-process read gives it: the
chunks of the lowest partition not yet written go out as they come; the chunks of a later
partition wait in the parent until the partitions before it are written. Partitions are handed
out at most ``WINDOW_PER_JOB * N`` ahead of the one being written, so the parent holds at most
that many partitions' chunks (a slow partition makes the workers wait, not the memory grow
without end). A worker's error reaches the parent as the same one-line error, and the
remaining workers are stopped.

Forking needs a platform with ``fork`` and a process that has not used RocksDB yet; elsewhere, and for one
job, reading stays in-process.
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queue_module
from collections.abc import Callable, Iterator
from typing import Any

from ckptfix.errors import CkptfixError
from ckptfix.stores import rocks

CHUNK_ROWS = 4096
#: how many partitions per job may be handed out ahead of the one being written
WINDOW_PER_JOB = 2
_DONE = "done"
_ERROR = "error"
_TEXT = "text"
_END = "end"  # one partition's last chunk has been sent


def available() -> bool:
    """Forked readers: a platform with ``fork``, and a process that has not used RocksDB yet (a fork after
    that can deadlock in RocksDB, :func:`ckptfix.stores.rocks.used_in_this_process`): else reading stays
    in-process."""
    return "fork" in multiprocessing.get_all_start_methods() and not rocks.used_in_this_process()


def default_jobs(partitions: int) -> int:
    return max(1, min(partitions, os.cpu_count() or 1))


def _worker(
    read_partition: Callable[[int], Iterator[Any]],
    encode: Callable[[Any], Any],
    tasks: Any,
    out: Any,
    columnar: bool,
) -> None:
    try:
        for part in iter(tasks.get, None):
            source = read_partition(part)
            if columnar and hasattr(source, "batches"):
                for item in source.batches():
                    if isinstance(item, list):  # rows decoded one by one
                        for at in range(0, len(item), CHUNK_ROWS):
                            chunk = item[at : at + CHUNK_ROWS]
                            out.put((_TEXT, (part, (encode(chunk), len(chunk)))))
                    else:  # an Arrow record batch
                        out.put((_TEXT, (part, (encode(item), item.num_rows))))
                out.put((_END, part))
                continue
            rows: list[Any] = []
            for row in source:
                rows.append(row)
                if len(rows) >= CHUNK_ROWS:
                    out.put((_TEXT, (part, (encode(rows), len(rows)))))
                    rows = []
            if rows:
                out.put((_TEXT, (part, (encode(rows), len(rows)))))
            out.put((_END, part))
        out.put((_DONE, None))
    except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
        out.put((_ERROR, (type(exc), str(exc), getattr(exc, "__dict__", {}))))


def _rebuilt(kind: type, message: str, attrs: dict[str, Any]) -> BaseException:
    if isinstance(kind, type) and issubclass(kind, CkptfixError):
        exc = kind.__new__(kind)
        exc.__dict__.update(attrs)
        exc.args = (message,)
        return exc
    if isinstance(kind, type) and issubclass(kind, OSError):
        return kind(message)
    return RuntimeError(f"{kind.__name__}: {message}")


def parallel_text(
    partitions: list[int],
    read_partition: Callable[[int], Iterator[Any]],
    to_text: Callable[[Any], str],
    jobs: int,
) -> Iterator[tuple[str, int]]:
    """(text, rows in it) chunks of every partition's rows, read by ``jobs`` forked workers. A
    ``to_text`` with a ``batch`` method (:class:`ckptfix.state.export.JsonLines`) gets the Arrow
    record batches of partitions decoded in bulk."""
    batch_text = getattr(to_text, "batch", None)

    def encode(rows: Any) -> str:
        return "".join(map(to_text, rows)) if isinstance(rows, list) else batch_text(rows)  # type: ignore[misc]

    return parallel_chunks(partitions, read_partition, encode, jobs, columnar=batch_text is not None)


def parallel_chunks(
    partitions: list[int],
    read_partition: Callable[[int], Iterator[Any]],
    encode: Callable[[Any], Any],
    jobs: int,
    columnar: bool = True,
) -> Iterator[tuple[Any, int]]:
    """(encoded chunk, rows in it) of every partition's rows, read by ``jobs`` forked workers, in the order of
    ``partitions`` (see the module's docstring for what that holds in memory);
    ``encode`` turns a list of rows into something picklable (text, Arrow IPC bytes). Where a
    partition's rows offer ``batches()`` (:class:`ckptfix.state.read.Rows`) and ``columnar`` is
    true, ``encode`` also gets its Arrow record batches (as :func:`ckptfix.state.export.arrow_chunk`
    takes them)."""
    if columnar:  # imported once here, before the fork, instead of once in every worker
        try:
            import numpy  # noqa: F401
            import pyarrow.compute  # noqa: F401
        except ImportError:
            pass
    ctx = multiprocessing.get_context("fork")
    tasks = ctx.Queue()
    out = ctx.Queue(maxsize=4 * jobs)
    order = list(partitions)
    window = WINDOW_PER_JOB * jobs
    handed = 0  # partitions put in the task queue so far (in order)
    head = 0  # index in ``order`` of the partition being written
    waiting: dict[int, list[Any]] = {}  # chunks of later partitions, held until their turn
    ended: set[int] = set()

    def hand_out() -> None:
        nonlocal handed
        while handed < len(order) and handed < head + window:
            tasks.put(order[handed])
            handed += 1
            if handed == len(order):
                for _ in range(jobs):
                    tasks.put(None)

    hand_out()
    if not order:
        for _ in range(jobs):
            tasks.put(None)
    workers = [
        ctx.Process(target=_worker, args=(read_partition, encode, tasks, out, columnar), daemon=True)
        for _ in range(jobs)
    ]
    for w in workers:
        w.start()
    running = len(workers)
    try:
        while running:
            try:
                tag, payload = out.get(timeout=1.0)
            except queue_module.Empty:
                if not any(w.is_alive() for w in workers):
                    raise RuntimeError("a state reader process died without a word") from None
                continue
            if tag == _TEXT:
                part, chunk = payload
                if part == order[head]:
                    yield chunk
                else:
                    waiting.setdefault(part, []).append(chunk)
            elif tag == _END:
                ended.add(payload)
                while head < len(order) and order[head] in ended:
                    head += 1
                    if head < len(order):
                        yield from waiting.pop(order[head], [])
                hand_out()
            elif tag == _DONE:
                running -= 1
            else:
                raise _rebuilt(*payload)
    finally:
        for w in workers:
            if w.is_alive():
                w.terminate()
        for w in workers:
            w.join(timeout=5)
