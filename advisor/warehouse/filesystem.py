"""The warehouse's files behind one small interface, for local paths and any Hadoop file system URI.

``for_path(path, spark)`` gives the file system of a path: a local path (or ``file:`` URI) is read
and written with the operating system; any other scheme (``hdfs:``, ``s3a:``, ...) through Spark's
own JVM Hadoop ``FileSystem`` over py4j, configured by the session's Hadoop configuration
(``spark.hadoop.*``: name nodes, ``fs.s3a.*`` endpoints and credentials).  That choice, rather than
``pyarrow.fs.HadoopFileSystem`` or fsspec, means one configuration serves Spark's executors and the
driver alike, with no libhdfs, no JNI library path and no second set of credentials: whatever
URI Spark can read, the driver can too.  Driver-side I/O on a warehouse is metadata and small
files (state files, sample and net-delta Parquet, layout block starts); bulk data goes through
Spark's readers and writers.

Renames: HDFS renames a directory atomically, which the crash-consistent write order
(``advisor.warehouse.atomic``) relies on; an object store (S3) copies and deletes, so there a
rename is not atomic and a killed writer can leave a partial final directory: recovery on open
removes it, since no store row names it (``advisor.warehouse.reconcile``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq

from advisor.warehouse import page_index
from advisor.warehouse.stored_paths import has_scheme


def is_local(path: str | Path) -> bool:
    """Whether ``path`` is on this machine's disk (a plain path or a ``file:`` URI).

    >>> is_local("/tmp/w"), is_local("file:///tmp/w"), is_local("hdfs://nn:8020/w"), is_local("s3a://b/w")
    (True, True, False, False)
    """
    p = str(path)
    return not has_scheme(p) or p.startswith("file:")


def local_path(path: str | Path) -> str:
    """A local path or ``file:`` URI as a plain path.

    >>> local_path("file:///tmp/a%20b"), local_path("/tmp/x")
    ('/tmp/a b', '/tmp/x')
    """
    p = str(path)
    return unquote(urlparse(p).path) if p.startswith("file:") else p


class LocalFS:
    """The operating system's file system (paths or ``file:`` URIs)."""

    scheme = "file"

    def exists(self, path) -> bool:
        return os.path.exists(local_path(path))

    def is_dir(self, path) -> bool:
        return os.path.isdir(local_path(path))

    def is_file(self, path) -> bool:
        return os.path.isfile(local_path(path))

    def list(self, path) -> list[str]:
        """Full paths of the entries of directory ``path``, sorted ([] if it does not exist)."""
        d = local_path(path)
        try:
            return sorted(os.path.join(d, n) for n in os.listdir(d))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def mkdirs(self, path) -> None:
        os.makedirs(local_path(path), exist_ok=True)

    def rename(self, src, dst) -> None:
        os.rename(local_path(src), local_path(dst))

    def remove(self, path) -> None:
        """Remove a file or a directory tree if present."""
        p = Path(local_path(path))
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)

    def size(self, path) -> int:
        """Bytes of a file, or of the Parquet files in a directory tree."""
        p = Path(local_path(path))
        if p.is_file():
            return p.stat().st_size
        return sum(f.stat().st_size for f in p.rglob("*.parquet"))

    def read_bytes(self, path) -> bytes:
        return Path(local_path(path)).read_bytes()

    def write_bytes(self, path, data: bytes) -> None:
        with open(local_path(path), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    def create_new(self, path, data: bytes) -> bool:
        """Write ``data`` to a file that must not exist yet: False (nothing written) if it does."""
        try:
            with open(local_path(path), "xb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except FileExistsError:
            return False
        return True

    def upload(self, local: str, path) -> None:
        """Copy the local file or directory tree ``local`` to ``path`` (replacing what is there)."""
        self.remove(path)
        if os.path.isdir(local):
            shutil.copytree(local, local_path(path))
        else:
            shutil.copyfile(local, local_path(path))

    def stamp(self, path) -> tuple:
        """What changes when the file or directory at ``path`` is replaced (inode, mtime)."""
        st = os.stat(local_path(path))
        return (st.st_ino, st.st_mtime_ns)


class HadoopFS:
    """A Hadoop file system reached through the Spark session's JVM (module docstring)."""

    def __init__(self, spark, uri: str):
        sc = spark.sparkContext
        self._jvm = sc._jvm
        self._conf = sc._jsc.hadoopConfiguration()
        self._fs = self._jvm.org.apache.hadoop.fs.FileSystem.get(self._jvm.java.net.URI(uri), self._conf)
        self.scheme = urlparse(uri).scheme

    def _p(self, path):
        return self._jvm.org.apache.hadoop.fs.Path(str(path))

    def exists(self, path) -> bool:
        return bool(self._fs.exists(self._p(path)))

    def is_dir(self, path) -> bool:
        try:
            return bool(self._fs.getFileStatus(self._p(path)).isDirectory())
        except Exception:  # FileNotFoundException through py4j
            return False

    def is_file(self, path) -> bool:
        try:
            return bool(self._fs.getFileStatus(self._p(path)).isFile())
        except Exception:
            return False

    def list(self, path) -> list[str]:
        """Full URIs of the entries of directory ``path``, sorted ([] if it does not exist)."""
        if not self.exists(path):
            return []
        base = str(path).rstrip("/")
        return sorted(f"{base}/{s.getPath().getName()}" for s in self._fs.listStatus(self._p(path)))

    def mkdirs(self, path) -> None:
        self._fs.mkdirs(self._p(path))

    def rename(self, src, dst) -> None:
        if not self._fs.rename(self._p(src), self._p(dst)):
            raise OSError(f"could not rename {src} to {dst}")

    def remove(self, path) -> None:
        self._fs.delete(self._p(path), True)

    def size(self, path) -> int:
        """Bytes of a file, or of the Parquet files in a directory tree."""
        st = self._fs.getFileStatus(self._p(path))
        if st.isFile():
            return int(st.getLen())
        it = self._fs.listFiles(self._p(path), True)
        total = 0
        while it.hasNext():
            f = it.next()
            if f.getPath().getName().endswith(".parquet"):
                total += int(f.getLen())
        return total

    def read_bytes(self, path) -> bytes:
        stream = self._fs.open(self._p(path))
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def write_bytes(self, path, data: bytes) -> None:
        out = self._fs.create(self._p(path), True)
        try:
            out.write(bytearray(data))
            out.hsync() if self.scheme == "hdfs" else out.flush()
        finally:
            out.close()

    def create_new(self, path, data: bytes) -> bool:
        """Write ``data`` to a file that must not exist yet: False (nothing written) if it does.
        HDFS's create without overwrite is atomic; an object store checks, then writes."""
        try:
            out = self._fs.create(self._p(path), False)
        except Exception:  # FileAlreadyExistsException through py4j
            if self.exists(path):
                return False
            raise
        try:
            out.write(bytearray(data))
            out.hsync() if self.scheme == "hdfs" else out.flush()
        finally:
            out.close()
        return True

    def upload(self, local: str, path) -> None:
        """Copy the local file or directory tree ``local`` to ``path`` (replacing what is there).
        ``FileUtil.copy`` from a ``java.io.File``: ``copyFromLocalFile`` needs the checksummed local
        file system, which the session replaces with the raw one (``advisor.engine.session``)."""
        self.remove(path)
        jvm = self._jvm
        if not jvm.org.apache.hadoop.fs.FileUtil.copy(jvm.java.io.File(str(Path(local).absolute())), self._fs,
                                                      self._p(path), False, self._conf):
            raise OSError(f"could not copy {local} to {path}")

    def stamp(self, path) -> tuple:
        st = self._fs.getFileStatus(self._p(path))
        return (int(st.getModificationTime()), int(st.getLen()))


_LOCAL = LocalFS()
_remote: dict = {}  # (scheme, authority) -> HadoopFS of the active session


def for_path(path: str | Path, spark=None):
    """The file system holding ``path``: ``LocalFS`` for local paths, else a ``HadoopFS`` through
    ``spark`` (the active session if None)."""
    if is_local(path):
        return _LOCAL
    u = urlparse(str(path))
    if spark is None:
        # start-up time: Spark's Python side only when no Spark is given
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:
            raise RuntimeError(f"{path}: a Spark session is needed to reach {u.scheme}:// file systems")
    key = (u.scheme, u.netloc, id(spark.sparkContext._jsc))
    if key not in _remote:
        _remote[key] = HadoopFS(spark, f"{u.scheme}://{u.netloc}/")
    return _remote[key]


def read_parquet(path: str, spark=None, columns=None):
    """A Parquet file (or a directory of them) as a pyarrow Table, from any file system."""
    if is_local(path):
        return pq.read_table(local_path(path), columns=columns)
    fs = for_path(path, spark)
    files = [f for f in fs.list(path) if f.endswith(".parquet")] if fs.is_dir(path) else [str(path)]
    parts = [pq.read_table(pa.BufferReader(fs.read_bytes(f)), columns=columns) for f in files]
    return pa.concat_tables(parts, promote_options="permissive") if len(parts) > 1 else parts[0]


def write_parquet(table, path: str, spark=None, **kwargs) -> None:
    """Write a pyarrow Table as one Parquet file at ``path`` on any file system."""
    if is_local(path):
        pq.write_table(table, local_path(path), **kwargs)
        return
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **kwargs)
    for_path(path, spark).write_bytes(path, sink.getvalue().to_pybytes())


class RemotePath:
    """A location on a Hadoop file system with the few ``pathlib.Path`` operations the warehouse's
    writers use (``/``, ``name``, ``parent``, ``mkdir``, ``exists``, ``is_dir``), so code that
    builds artefact paths under a local warehouse builds them the same way under an ``hdfs:`` or
    ``s3a:`` one (``pathlib`` would fold ``hdfs://nn`` into ``hdfs:/nn``).

    >>> p = RemotePath("hdfs://nn:8020/w/") / "tables" / "t"; str(p), p.name, str(p.parent)
    ('hdfs://nn:8020/w/tables/t', 't', 'hdfs://nn:8020/w/tables')
    """

    def __init__(self, uri: str):
        self.uri = str(uri).rstrip("/")

    def __truediv__(self, name) -> "RemotePath":
        return RemotePath(f"{self.uri}/{name}")

    def __str__(self) -> str:
        return self.uri

    def __repr__(self) -> str:
        return f"RemotePath({self.uri!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, RemotePath) and other.uri == self.uri

    def __hash__(self) -> int:
        return hash(self.uri)

    @property
    def name(self) -> str:
        return self.uri.rsplit("/", 1)[-1]

    @property
    def parent(self) -> "RemotePath":
        return RemotePath(self.uri.rsplit("/", 1)[0])

    def absolute(self) -> "RemotePath":
        return self

    def resolve(self) -> "RemotePath":
        return self

    def mkdir(self, parents: bool = True, exist_ok: bool = True) -> None:
        for_path(self.uri).mkdirs(self.uri)

    def exists(self) -> bool:
        return for_path(self.uri).exists(self.uri)

    def is_dir(self) -> bool:
        return for_path(self.uri).is_dir(self.uri)

    def is_file(self) -> bool:
        return for_path(self.uri).is_file(self.uri)


def location(path: str | Path):
    """``path`` as the object the warehouse builds paths with: a ``pathlib.Path`` for a local path
    or ``file:`` URI, a ``RemotePath`` for any other URI.

    >>> location("file:///tmp/w"), location("s3a://bucket/w")
    (PosixPath('/tmp/w'), RemotePath('s3a://bucket/w'))
    """
    return Path(local_path(path)) if is_local(path) else RemotePath(str(path))


def exists(path) -> bool:
    """Whether a file or directory exists at ``path`` (local or on a Hadoop file system)."""
    return for_path(str(path)).exists(str(path))


def column_pages(path: str, column: str, spark=None):
    """The page index of ``column`` in a Parquet file, per row group (``advisor.warehouse.page_index``),
    or None without one: a local file is read at the offsets the footer names, a remote one whole."""
    if is_local(path):
        with open(local_path(path), "rb") as fh:
            def read_at(offset: int, length: int) -> bytes:
                fh.seek(offset)
                return fh.read(length)
            return page_index.column_pages(read_at, os.fstat(fh.fileno()).st_size, column)
    data = for_path(path, spark).read_bytes(path)
    return page_index.column_pages(lambda o, n: data[o:o + n], len(data), column)


def parquet_file(path: str, spark=None):
    """A ``pyarrow.parquet.ParquetFile`` over a local file, or over the bytes of a remote one."""
    if is_local(path):
        return pq.ParquetFile(local_path(path))
    return pq.ParquetFile(pa.BufferReader(for_path(path, spark).read_bytes(path)))
