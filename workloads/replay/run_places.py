"""Where a replay's warehouses keep their files: beside their stores in the run directory, or, when
the command's warehouse is a Hadoop file system URI, below that URI.

A run directory holds the run's data warehouse (``RUN/warehouse``), one store per strategy
(``RUN/strategies/<S>``) and the warm-up's scratch stores.  With a local warehouse each is a plain
warehouse directory.  With ``--warehouse hdfs://...`` (or ``s3a://``) the run directory stays on the
driver (plan, resume log, run log, report and the SQLite stores), while the files of each of its
warehouses (tables, batches, layouts, net deltas, samples) go to
``<URI>/runs/<run name>-<hash of the run directory>/<same relative place>``: that is where a
cluster's executors read and write them, and the hash keeps two run directories of the same name
apart.  The mapping depends on the URI and the run directory alone, so a resumed run, or a child of
``replay --isolate``, finds the same files."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from advisor.context import Context
from advisor.warehouse import atomic, stored_paths


class RunPlaces:
    """Contexts over the warehouses of one run directory (module docstring); ``remote``: the
    command's warehouse URI, or None for a local warehouse."""

    def __init__(self, spark, run_dir: Path, remote: str | None = None):
        self.spark = spark
        self.run_dir = Path(run_dir)
        self.base = None
        if remote is not None:
            digest = hashlib.sha1(str(self.run_dir.resolve()).encode()).hexdigest()[:8]
            self.base = stored_paths.join(remote, f"runs/{self.run_dir.name}-{digest}")

    @classmethod
    def of(cls, ctx: Context, run_dir: Path) -> "RunPlaces":
        """The places of ``run_dir`` for a command run with context ``ctx``."""
        return cls(ctx.spark, run_dir, ctx.store.root if ctx.store.remote else None)

    def root(self, local: Path) -> str:
        """Where the files of the warehouse whose store is in ``local`` (inside the run directory) live.

        >>> at = RunPlaces(None, Path("/r/run"), "hdfs://nn:8020/w").root(Path("/r/run/warehouse"))
        >>> at.startswith("hdfs://nn:8020/w/runs/run-"), at.endswith("/warehouse")
        (True, True)
        >>> RunPlaces(None, Path("/r/run")).root(Path("/r/run/strategies/NO-PS"))
        '/r/run/strategies/NO-PS'
        """
        if self.base is None:
            return str(Path(local).absolute())
        return stored_paths.join(self.base, Path(local).absolute().relative_to(self.run_dir.absolute()).as_posix())

    def __call__(self, local: Path) -> Context:
        """A context over the warehouse whose store is in ``local``."""
        if self.base is None:
            return Context(warehouse=local, spark=self.spark)
        return Context(warehouse=self.root(local), spark=self.spark, store_dir=local)

    def remove(self, local: Path) -> None:
        """Delete the warehouse of ``local``: its store directory and, for a URI, its files."""
        shutil.rmtree(local, ignore_errors=True)
        if self.base is not None:
            atomic.remove(self.root(local))

    def remove_all(self) -> None:
        """Delete the files every warehouse of the run keeps below the URI (nothing when local)."""
        if self.base is not None:
            atomic.remove(self.base)
