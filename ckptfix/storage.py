"""The only module that talks to fsspec: a checkpoint root as a :class:`Location`.

Design rules (see STYLE.md): list a tree once, read only what is asked, count what was
done (so audits can prove they read the tail and not everything), keep storage errors as
Python's own ``FileNotFoundError`` / ``PermissionError`` with the full URL in the message.
"""

from __future__ import annotations

import errno
import json
import os
import posixpath
import re
import shlex
import stat
import urllib.parse
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ckptfix.errors import MissingExtra, UsageError

ENV_STORAGE_OPTIONS = "CKPTFIX_STORAGE_OPTIONS"
#: ckptfix's own temp files: ``.<name>.<uuid4>.ckptfix.tmp`` next to the file being written
OWN_TEMP = re.compile(r"^\.(?P<name>.+)\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.ckptfix\.tmp$")


@dataclass(frozen=True)
class Entry:
    size: int
    mtime: float | None  # seconds since the epoch, when the store reports it
    is_dir: bool = False


@dataclass
class IOStats:
    list_calls: int = 0
    entries_listed: int = 0
    files_read: int = 0
    bytes_read: int = 0
    paths_read: list[str] = field(default_factory=list)


#: storage options fsspec's backends take as keyword dictionaries (s3fs, gcsfs, adlfs): a string there fails deep
#: inside the backend ("'str' object has no attribute 'copy'")
DICT_OPTIONS = frozenset({"client_kwargs", "config_kwargs", "s3_additional_kwargs", "consistency_kwargs"})


#: storage options whose values a printed command may show: everything else may hold a credential (a key, a token,
#: an Azure connection string with its AccountKey) and is printed as ``***``
SHOWN_OPTIONS = frozenset(
    {
        "anon",
        "endpoint_url",
        "region_name",
        "use_ssl",
        "verify",
        "profile",
        "project",
        "account_name",
        "use_listings_cache",
        "listings_expiry_time",
        "skip_instance_cache",
        "requester_pays",
        "version_aware",
        "default_block_size",
        "default_cache_type",
        "default_fill_cache",
        "max_attempts",
        "retries",
        "mode",
        "signature_version",
        "addressing_style",
    }
)


def command_flags(options: Mapping[str, Any] | None) -> str:
    """The CLI flags that give ``options`` again, for the commands ckptfix prints (undo, the fix of a finding):
    ``--endpoint-url URL`` for ``client_kwargs.endpoint_url`` and ``-o key=value`` (dotted keys) for the rest,
    except what ``$CKPTFIX_STORAGE_OPTIONS`` gives anyway. Only the values of :data:`SHOWN_OPTIONS` are printed;
    any other option's flag reads ``-o key=***``, to fill in: it may be a credential (new-user trial 3: a printed
    undo without the endpoint went to AWS itself)."""
    if not options:
        return ""
    try:
        env = json.loads(os.environ.get(ENV_STORAGE_OPTIONS) or "{}")
    except json.JSONDecodeError:
        env = {}
    env = env if isinstance(env, dict) else {}

    def flat(tree: Mapping[str, Any], inherited: Any, prefix: str = "") -> Iterator[tuple[str, Any, bool]]:
        for key, value in tree.items():
            given = inherited.get(key) if isinstance(inherited, dict) else None
            if isinstance(value, dict):
                yield from flat(value, given, f"{prefix}{key}.")
            else:
                yield f"{prefix}{key}", value, given == value

    flags: list[str] = []
    for key, value, from_env in flat(options, env):
        if from_env:
            continue
        if key == "client_kwargs.endpoint_url" and isinstance(value, str):
            flags.insert(0, f"--endpoint-url {shlex.quote(value)}")
            continue
        shown = value if key.rsplit(".", 1)[-1] in SHOWN_OPTIONS else "***"
        text = shown if isinstance(shown, str) else json.dumps(shown)
        flags.append(f"-o {shlex.quote(f'{key}={text}')}")
    return " ".join(flags)


def parse_storage_options(pairs: list[str], endpoint_url: str | None = None) -> dict[str, Any]:
    """``key=value`` pairs from the CLI (dotted keys nest, values parse as JSON when they
    can), on top of the JSON object in $CKPTFIX_STORAGE_OPTIONS."""
    options: dict[str, Any] = {}
    env = os.environ.get(ENV_STORAGE_OPTIONS)
    if env:
        try:
            loaded = json.loads(env)
        except json.JSONDecodeError as exc:
            raise UsageError(
                f"${ENV_STORAGE_OPTIONS}: expected a JSON object, found invalid JSON ({exc.msg})"
            ) from None
        if not isinstance(loaded, dict):
            raise UsageError(f"${ENV_STORAGE_OPTIONS}: expected a JSON object, found {type(loaded).__name__}")
        options.update(loaded)
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            hint = " (-o is --storage-option; the output file is --out)" if "=" not in pair else ""
            raise UsageError(f"-o/--storage-option: expected key=value, found {pair!r}{hint}")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError as exc:
            if raw.lstrip().startswith(("{", "[")):  # meant as JSON: a plain string would reach the backend
                raise UsageError(f"--storage-option {key}: expected a JSON value, found {raw!r} ({exc.msg})") from None
            value = raw
        if key in DICT_OPTIONS and not isinstance(value, dict):
            raise UsageError(f"--storage-option {key}: expected a JSON object, found {raw!r}")
        *parents, leaf = key.split(".")
        if not all(parents) or not leaf:
            raise UsageError(f"--storage-option: empty part in the dotted key {key!r}")
        target = options
        for p in parents:
            target = target.setdefault(p, {})
            if not isinstance(target, dict):
                raise UsageError(f"--storage-option {pair!r}: {p!r} is already set to a value, not an object")
        target[leaf] = value
    if endpoint_url:
        client_kwargs = options.setdefault("client_kwargs", {})
        if not isinstance(client_kwargs, dict):
            raise UsageError("--endpoint-url: storage option 'client_kwargs' is set to a value, not an object")
        client_kwargs["endpoint_url"] = endpoint_url
    return options


def _mtime(info: Mapping[str, Any]) -> float | None:
    for key in ("mtime", "LastModified", "last_modified", "created"):
        value = info.get(key)
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, datetime):
            return value.timestamp()
    return None


def s3_options(storage_options: Mapping[str, Any]) -> dict[str, Any]:
    """The s3fs options ckptfix uses: checkpoint files are small, and with max_concurrency > 1
    s3fs sends a HEAD before every GET to plan ranged reads, doubling the requests for nothing."""
    return {"max_concurrency": 1, **storage_options}


#: scheme -> (the fsspec package that serves it, the ckptfix extra that installs it)
EXTRAS = {
    "s3": ("s3fs", "s3"),
    "s3a": ("s3fs", "s3"),
    "s3n": ("s3fs", "s3"),
    "gs": ("gcsfs", "gcs"),
    "gcs": ("gcsfs", "gcs"),
    "abfs": ("adlfs", "azure"),
    "abfss": ("adlfs", "azure"),
    "az": ("adlfs", "azure"),
    "wasb": ("adlfs", "azure"),
    "wasbs": ("adlfs", "azure"),
}
#: Spark's scheme -> the fsspec protocol for the same objects
ALIASES = {"s3a": "s3", "s3n": "s3", "abfss": "abfs", "wasb": "abfs", "wasbs": "abfs"}


def _fs_for(url: str, storage_options: Mapping[str, Any]) -> tuple[Any, str]:
    import fsspec

    if url.startswith("dbfs:"):
        raise UsageError(
            f"{url}: dbfs:/ is Databricks' file system, which ckptfix cannot reach from here: on a Databricks "
            "cluster give the local mount (/dbfs/...), elsewhere copy it out first (databricks fs cp -r dbfs:/... DIR)"
        )
    protocol = url.split("://", 1)[0].lower() if "://" in url else "file"
    if protocol in EXTRAS:
        module, extra = EXTRAS[protocol]
        try:
            __import__(module)
        except ImportError:
            raise MissingExtra(module, extra) from None
    if protocol in ALIASES:
        url = f"{ALIASES[protocol]}://" + url.split("://", 1)[1]
    if protocol in ("s3", "s3a", "s3n"):
        storage_options = s3_options(storage_options)
    if protocol in ("hdfs", "viewfs"):
        _check_hadoop_client(url)
    if protocol in ("gs", "gcs") and _gcs_plain_http(storage_options):
        from gcsfs.core import GCSFileSystem

        fs = GCSFileSystem(**dict(storage_options))
        return fs, fs._strip_protocol(url).rstrip("/") or "/"
    try:
        fs, path = fsspec.core.url_to_fs(url, **dict(storage_options))
    except ValueError as exc:
        if "Protocol not known" in str(exc) or "not known" in str(exc):
            raise UsageError(
                f"{url}: unknown scheme '{protocol}': expected a local path, s3://, gs://, abfs(s)://, hdfs:// or "
                "another fsspec protocol installed here"
            ) from None
        raise
    except ImportError as exc:
        raise UsageError(f"{url}: the '{protocol}' file system needs a package that is not installed: {exc}") from None
    return fs, path.rstrip("/") or "/"


def _gcs_plain_http(storage_options: Mapping[str, Any]) -> bool:
    """Whether gs:// goes to a plain-HTTP endpoint (an emulator): ``endpoint_url``, else $STORAGE_EMULATOR_HOST.

    gcsfs's default file system asks Google's gRPC control plane for each bucket's type, at the same host:port
    over TLS; a JSON-API-only emulator never answers that, and each bucket costs a minute of retries and warnings.
    Such an endpoint gets gcsfs's JSON API file system, which is all an emulator speaks."""
    endpoint = storage_options.get("endpoint_url") or os.environ.get("STORAGE_EMULATOR_HOST") or ""
    if not isinstance(endpoint, str) or endpoint in ("", "default"):
        return False
    return not endpoint.startswith("https://")  # gcsfs reads "host:port" as http://host:port


def _check_hadoop_client(url: str) -> None:
    """hdfs:// goes through pyarrow's libhdfs, which needs a Hadoop client and a JVM; without them it prints
    dlopen noise and fails. Say what is needed instead."""
    try:
        import pyarrow.fs  # noqa: F401
    except ImportError:
        raise MissingExtra("pyarrow", "arrow") from None
    dirs = [os.environ.get("ARROW_LIBHDFS_DIR"), os.path.join(os.environ.get("HADOOP_HOME", ""), "lib", "native")]
    if not any(d and os.path.exists(os.path.join(d, "libhdfs.so")) for d in dirs) or not os.environ.get("CLASSPATH"):
        raise UsageError(
            f"{url}: hdfs:// needs a Hadoop client here: HADOOP_HOME (or ARROW_LIBHDFS_DIR) with libhdfs.so, "
            "JAVA_HOME, and CLASSPATH=$(hadoop classpath --glob); or copy the checkpoint out first "
            "(hdfs dfs -get URL DIR)"
        )


def _missing_container(exc: BaseException) -> str | None:
    """``"bucket"`` / ``"container"`` when an object store's "not found" is about the bucket or container itself
    (S3's and GCS's ``NoSuchBucket``, "The specified bucket does not exist"; Azure's ``ContainerNotFound``), not
    about a path in it; else None."""
    texts = [str(exc), type(exc.__cause__).__name__ if exc.__cause__ is not None else ""]
    joined = " ".join(texts).lower()
    if "nosuchbucket" in joined or "bucket does not exist" in joined:
        return "bucket"
    if "containernotfound" in joined or "container does not exist" in joined:
        return "container"
    return None


def _file_kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "a special file"


class Location:
    """A checkpoint root (or any directory) on some filesystem."""

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None) -> None:
        if not url:  # os.path.abspath("") is the current directory: never what an empty argument meant
            raise UsageError("expected a location (a path or URL), found an empty string")
        if url.startswith("file:/") and not url.startswith("file://"):  # Hadoop's qualified form file:/abs
            url = "file://" + url[len("file:") :]
        if url.startswith("file://"):  # as Spark logs it: a URI, percent-encoded ("with%20space")
            url = "file://" + urllib.parse.unquote(url[len("file://") :])
        elif "://" not in url:  # "~/ckpt" quoted past the shell: read and named as the same place
            url = os.path.expanduser(url)
        self.storage_options: dict[str, Any] = dict(storage_options or {})
        self.fs, self.root = _fs_for(url, self.storage_options)
        self.url = url.rstrip("/") if "://" in url else os.path.abspath(url)
        self.stats = IOStats()
        #: rel -> real path of symbolic links that leave the root (local trees; filled by :meth:`list_tree`)
        self.outside_links: dict[str, str] = {}

    # -- paths -----------------------------------------------------------------------
    def path(self, rel: str) -> str:
        return posixpath.join(self.root, rel) if rel else self.root

    def display(self, rel: str) -> str:
        """How a file is named to the user: the URL they gave plus the relative path."""
        return f"{self.url.rstrip('/')}/{rel}" if rel else self.url  # the root "/" names "/x", not "//x"

    # -- errors ----------------------------------------------------------------------
    def _storage_error(self, rel: str, exc: BaseException) -> OSError:
        where = self.display(rel)
        if isinstance(exc, FileNotFoundError):
            container = _missing_container(exc) or (self._container_missing() if not rel else None)
            if container is not None:
                name = self.root.split("/", 1)[0]
                return FileNotFoundError(f"{where}: no such {container} '{name}' (or these credentials cannot see it)")
            return FileNotFoundError(f"{where}: no such file or directory")
        if isinstance(exc, PermissionError):
            return PermissionError(f"{where}: permission denied")
        if isinstance(exc, IsADirectoryError):
            return IsADirectoryError(f"{where}: expected a file, found a directory")
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return OSError(f"{where}: storage error: {text}")

    def _container_missing(self) -> str | None:
        """For a root that is not there on an object store: ``"bucket"`` / ``"container"`` when the bucket or
        container itself does not exist (or cannot be seen), asked of the store (one more request, on this error
        only: its own error does not always say, e.g. adlfs' listing answers "no such file")."""
        scheme = self.url.split("://", 1)[0] if "://" in self.url else "file"
        extra = EXTRAS.get(scheme, (None, None))[1]
        kind = "container" if extra == "azure" else "bucket" if extra in ("s3", "gcs") else None
        if kind is None or "/" not in self.root.strip("/"):
            return None
        try:
            return kind if not self.fs.exists(self.root.split("/", 1)[0]) else None
        except Exception:  # noqa: BLE001 - cannot tell: the plain message stands
            return None

    # -- listing and reading -----------------------------------------------------------
    def require_directory(self, rel: str = "") -> None:
        """:class:`FileNotFoundError` / :class:`NotADirectoryError` (one line naming the path) unless ``rel`` is a
        directory: for commands that would otherwise answer "nothing recorded" about a path that is not there."""
        try:
            info = self.fs.info(self.path(rel))
        except Exception as exc:  # noqa: BLE001 - normalised below
            raise self._storage_error(rel, exc) from None
        if info.get("type") != "directory":
            raise NotADirectoryError(f"{self.display(rel)}: expected a directory, found a file")

    def list_tree(self, rel: str = "") -> dict[str, Entry]:
        """Every file and directory below ``rel`` (relative posix paths), in one listing."""
        base = self.path(rel)
        self.require_directory(rel)
        if self.is_local:
            # fsspec's local find skips directories it cannot read; a checkpoint that looks
            # empty because of permissions would be a silently wrong answer, so walk ourselves
            local = self._walk_local(rel)
            self.stats.list_calls += 1
            self.stats.entries_listed += len(local)
            return local
        try:
            found = self.fs.find(base, withdirs=True, detail=True)
        except Exception as exc:  # noqa: BLE001
            raise self._storage_error(rel, exc) from None
        self.stats.list_calls += 1
        prefix = self.root.rstrip("/") + "/"
        out: dict[str, Entry] = {}
        for name, meta in found.items():
            name = name.rstrip("/")
            if not name.startswith(prefix) or name == base.rstrip("/"):  # below ``rel``, not rel itself
                continue
            out[name[len(prefix) :]] = Entry(int(meta.get("size") or 0), _mtime(meta), meta.get("type") == "directory")
        self.stats.entries_listed += len(out)
        return out

    @property
    def is_local(self) -> bool:
        protocol = self.fs.protocol
        return "file" in (protocol if isinstance(protocol, (tuple, list)) else (protocol,))

    def _walk_local(self, rel: str) -> dict[str, Entry]:
        """Every entry below ``rel``; a symbolic link that resolves outside the root is left out (never read,
        copied or deleted through) and recorded in :attr:`outside_links` with where it points."""
        out: dict[str, Entry] = {}
        self.outside_links = {}
        root = os.path.realpath(self.root)
        pending = [rel]
        while pending:
            current = pending.pop()
            try:
                with os.scandir(self.path(current)) as it:
                    entries = list(it)
            except FileNotFoundError:
                if current == rel:
                    raise self._storage_error(current, FileNotFoundError()) from None
                continue  # a directory removed while the tree was listed: as a listing a moment later shows it
            except OSError as exc:
                raise self._storage_error(current, exc) from None
            for d in entries:
                child = f"{current}/{d.name}" if current else d.name
                link = d.is_symlink()
                if link:
                    real = os.path.realpath(d.path)
                    if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
                        self.outside_links[child] = real
                        continue
                try:
                    st = d.stat(follow_symlinks=True)
                except FileNotFoundError:
                    if not link:
                        continue  # removed while the tree was listed
                    raise FileNotFoundError(
                        f"{self.display(child)}: expected a file or directory, found a symbolic link to "
                        f"'{os.readlink(d.path)}', which does not exist"
                    ) from None
                except OSError as exc:
                    what = f"a symbolic link to '{os.readlink(d.path)}'" if link else "an entry"
                    raise OSError(
                        f"{self.display(child)}: expected a file or directory, found {what} that cannot be followed "
                        f"({exc.strerror or type(exc).__name__})"
                    ) from None
                is_dir = stat.S_ISDIR(st.st_mode)
                if not is_dir and not stat.S_ISREG(st.st_mode):  # reading a FIFO would block forever
                    raise OSError(
                        f"{self.display(child)}: expected a file or directory, found {_file_kind(st.st_mode)}"
                    )
                out[child] = Entry(0 if is_dir else st.st_size, st.st_mtime, is_dir)
                if is_dir:
                    pending.append(child)
        return out

    def read(self, rel: str) -> bytes:
        try:
            data: bytes = self.fs.cat_file(self.path(rel))
        except Exception as exc:  # noqa: BLE001
            raise self._storage_error(rel, exc) from None
        self.stats.files_read += 1
        self.stats.bytes_read += len(data)
        self.stats.paths_read.append(rel)
        return data

    def read_many(self, rels: list[str]) -> dict[str, bytes]:
        """Read several files in one call (concurrent on object stores)."""
        if not rels:
            return {}
        paths = {self.path(r): r for r in rels}
        try:
            got = self.fs.cat(list(paths), on_error="return")
        except Exception as exc:  # noqa: BLE001
            raise self._storage_error(rels[0], exc) from None
        out: dict[str, bytes] = {}
        for path, value in got.items():
            rel = paths.get(path) or paths.get(path.rstrip("/")) or paths.get("/" + path.lstrip("/"))
            if rel is None or isinstance(value, BaseException):
                continue  # a failed file is read (and reported) again one by one
            out[rel] = value
            self.stats.files_read += 1
            self.stats.bytes_read += len(value)
            self.stats.paths_read.append(rel)
        return out

    def iter_chunks(self, rel: str, chunk_size: int = 8 << 20) -> Iterator[bytes]:
        """Read ``rel`` in pieces of at most ``chunk_size`` bytes (bounded memory for big files)."""
        try:
            fh = self.fs.open(self.path(rel), "rb", block_size=chunk_size)
        except Exception as exc:  # noqa: BLE001
            raise self._storage_error(rel, exc) from None
        self.stats.files_read += 1
        self.stats.paths_read.append(rel)
        with fh:
            while True:
                try:
                    piece = fh.read(chunk_size)
                except Exception as exc:  # noqa: BLE001
                    raise self._storage_error(rel, exc) from None
                if not piece:
                    return
                self.stats.bytes_read += len(piece)
                yield piece

    # -- writing (the repair engine is the only caller) -----------------------------------
    def _inside(self, rel: str) -> None:
        """Refuse to write or delete through a symbolic link that leads out of the root (local trees)."""
        if not self.is_local:
            return
        root = os.path.realpath(self.root)
        target = self.path(rel)
        real = os.path.realpath(target if os.path.lexists(target) else os.path.dirname(target))
        if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
            raise PermissionError(
                f"{self.display(rel)}: expected a path inside {self.url}, found a symbolic link to {real}: "
                "ckptfix never writes or deletes through a link that leaves the checkpoint"
            )

    def write_atomic(self, rel: str, data: bytes) -> None:
        """Replace or create ``rel`` so that readers see the old or the new bytes, never a mix:
        locally a temp file in the same directory, fsync, rename; on object stores one PUT."""
        self._inside(rel)
        try:
            if self.is_local:
                self._local_atomic(rel, data, exclusive=False)
            else:
                self.fs.pipe_file(self.path(rel), data)
        except Exception as exc:  # noqa: BLE001
            raise self._storage_error(rel, exc) from None

    def create_exclusive(self, rel: str, data: bytes) -> None:
        """Create ``rel`` with ``data``; FileExistsError if it exists (a concurrent writer).
        Locally link(2) of a complete temp file; on S3 a conditional PUT (If-None-Match)."""
        self._inside(rel)
        try:
            if self.is_local:
                self._local_atomic(rel, data, exclusive=True)
            else:
                self.fs.pipe_file(self.path(rel), data, mode="create")
        except FileExistsError:
            if self._holds(rel, data):
                return
            raise FileExistsError(f"{self.display(rel)}: expected no file, found one (written concurrently?)") from None
        except Exception as exc:  # noqa: BLE001
            if "PreconditionFailed" in str(exc) or "412" in str(exc):
                if self._holds(rel, data):
                    return
                raise FileExistsError(f"{self.display(rel)}: expected no file, found one") from None
            raise self._storage_error(rel, exc) from None

    def _holds(self, rel: str, data: bytes) -> bool:
        """On an object store, whether ``rel`` holds exactly ``data``: a conditional PUT that was carried out but
        whose answer was lost is retried by botocore and refused (412) by its own first attempt. Same bytes: the
        object is this write's (a lock names its owner and time, a backup its digest), not a concurrent one."""
        if self.is_local:
            return False
        try:
            return bool(self.fs.cat_file(self.path(rel)) == data)
        except Exception:  # noqa: BLE001 - cannot tell: not ours
            return False

    def create_exclusive_chunks(self, rel: str, chunks: Iterable[bytes]) -> int:
        """:meth:`create_exclusive` for content that arrives in pieces (never all in memory):
        locally a temp file + link(2); on object stores a one-PUT conditional create when it
        fits in one piece, else an existence check and a streamed (multipart) upload that
        becomes visible only when complete. Returns the bytes written."""
        it = iter(chunks)
        first = next(it, b"")
        second = next(it, None)  # errors of the producer propagate unchanged here
        if second is None:
            self.create_exclusive(rel, first)
            return len(first)
        written = 0
        self._inside(rel)
        try:
            if self.is_local:
                target = self.path(rel)
                directory = os.path.dirname(target)
                os.makedirs(directory, exist_ok=True)
                tmp = os.path.join(directory, f".{os.path.basename(target)}.{uuid.uuid4()}.ckptfix.tmp")
                try:
                    with open(tmp, "wb") as fh:
                        for piece in _chain(first, second, it):
                            fh.write(piece)
                            written += len(piece)
                        fh.flush()
                        os.fsync(fh.fileno())
                    os.link(tmp, target)
                finally:
                    if os.path.lexists(tmp):
                        os.unlink(tmp)
            else:
                if self.fs.exists(self.path(rel)):
                    raise FileExistsError(rel)
                with self.fs.open(self.path(rel), "wb") as fh:
                    for piece in _chain(first, second, it):
                        fh.write(piece)
                        written += len(piece)
        except _Upstream as up:
            raise up.exc from None
        except FileExistsError:
            raise FileExistsError(f"{self.display(rel)}: expected no file, found one (written concurrently?)") from None
        except Exception as exc:  # noqa: BLE001
            raise self._storage_error(rel, exc) from None
        return written

    def _local_atomic(self, rel: str, data: bytes, exclusive: bool) -> None:
        target = self.path(rel)
        directory = os.path.dirname(target)
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{os.path.basename(target)}.{uuid.uuid4()}.ckptfix.tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            if exclusive:
                os.link(tmp, target)  # fails with FileExistsError, never overwrites
            else:
                os.replace(tmp, target)
        finally:
            if os.path.lexists(tmp):
                os.unlink(tmp)
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def delete(self, rel: str) -> None:
        self._inside(rel)
        try:
            self.fs.rm_file(self.path(rel))
        except FileNotFoundError:
            return
        except Exception as exc:  # noqa: BLE001
            raise self._storage_error(rel, exc) from None

    def missing_directories(self, rel: str) -> list[str]:
        """The directories (relative, deepest first) that writing the file ``rel`` would create: those of its
        parents that do not exist. Object stores have no directories: none there."""
        if not self.is_local:
            return []
        out: list[str] = []
        parent = posixpath.dirname(rel)
        while parent and not os.path.isdir(self.path(parent)):
            out.append(parent)
            parent = posixpath.dirname(parent)
        return out

    def remove_empty_directory(self, rel: str) -> bool:
        """Remove the directory ``rel`` if it is empty (local trees; object stores have none): True if removed,
        False if it holds anything or is not there."""
        if not self.is_local:
            return False
        self._inside(rel)
        try:
            os.rmdir(self.path(rel))
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                return False
            raise self._storage_error(rel, exc) from None
        return True

    def read_if_exists(self, rel: str) -> bytes | None:
        try:
            return self.read(rel)
        except (FileNotFoundError, IsADirectoryError):
            return None

    def exists(self, rel: str) -> bool:
        try:
            return bool(self.fs.exists(self.path(rel)))
        except Exception as exc:  # noqa: BLE001
            raise self._storage_error(rel, exc) from None


class _Upstream(Exception):
    """An error of the piece producer (e.g. the source of a copy), passed through unchanged."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(str(exc))
        self.exc = exc


def _next_piece(it: Iterator[bytes]) -> bytes | None:
    try:
        return next(it, None)
    except Exception as exc:  # noqa: BLE001 - re-raised unchanged by the consumer
        raise _Upstream(exc) from None


def _chain(first: bytes, second: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield second
    while (piece := _next_piece(rest)) is not None:
        yield piece


#: the connectors under which Spark names one S3 bucket
S3_SCHEMES = ("s3", "s3a", "s3n")


def split_url(url: str) -> tuple[str, str]:
    """(scheme, path without scheme) for a Location URL; local paths get scheme 'file'."""
    if "://" in url:
        scheme, rest = url.split("://", 1)
        return scheme.lower(), rest.rstrip("/")
    return "file", os.path.abspath(url)


def uri_forms(url: str) -> tuple[str, ...]:
    """Every spelling under which Spark may have written ``url`` into a file, longest first.

    Local: ``file:/p`` (Hadoop's qualified path, operator metadata), ``file:///p`` (``Path.toUri``
    of a listed file, file-source logs), bare ``/p``; the real path too when ``url`` goes through a
    symlink. S3: ``s3://``, ``s3a://`` and ``s3n://`` (one bucket, three connectors)."""
    scheme, path = split_url(url)
    forms: list[str] = []
    if scheme == "file":
        for p in dict.fromkeys([path, os.path.realpath(path)]):
            forms += [f"file:///{p.lstrip('/')}", f"file:/{p.lstrip('/')}", p]
    elif scheme in S3_SCHEMES:
        forms += [f"{s}://{path}" for s in S3_SCHEMES]
    else:
        forms.append(f"{scheme}://{path}")
    return tuple(sorted(dict.fromkeys(forms), key=len, reverse=True))


def open_location(url: str, storage_options: Mapping[str, Any] | None = None) -> Location:
    return Location(url, storage_options)
