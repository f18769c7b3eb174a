"""Where the Ray engine's store goes: a local folder, or any filesystem pyarrow understands.

A local folder (one machine, or a file system every node mounts at the same path) is written
in place by the local job's own functions of ``explain.batch.format``: ``inspect_folder``
(refusals), ``FolderLock``, ``write_chunk`` (temporary file, then rename), ``verify_chunk``.

A URI (``s3://bucket/prefix``, ``gs://...``, ``hdfs://...``, ``file:///...``) goes through
``pyarrow.fs``, with the user's usual credentials (for S3: the AWS environment variables,
``~/.aws``, or the instance role). The same functions run on a local copy, and the files are
moved in and out:

- checking the folder: its listing and manifest are copied to a local mirror (empty files
  under the same names) and ``inspect_folder`` judges the mirror, so the same folders are
  refused with the same messages (which name the URI);
- one chunk: its two files are downloaded (if there) and verified locally; a chunk to compute
  is written locally, then each file is uploaded under a hidden temporary name
  (``.NAME.XXXX.part``, which Parquet readers skip and a rerun removes) and moved onto its
  final name, the summary first: the part file's arrival is what makes the chunk count;
- there is no lock file on a URI: run one job per output URI at a time.

``pandas.read_parquet("s3://...")`` reads such a store's files directly (one row per customer); the dashboard
(``find_store``, ``read_store``) reads local folders, so copy a store down (``aws s3 sync``)
to use it there.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import uuid
from pathlib import Path

from explain.batch import format as fmt
from explain.core.text import one_line


def is_uri(out) -> bool:
    return isinstance(out, str) and "://" in out


def target(out) -> "LocalTarget | UriTarget":
    return UriTarget(out) if is_uri(out) else LocalTarget(out)


class LocalTarget:
    """A folder written in place (by the driver: manifest, marker; by the actors: chunks)."""

    def __init__(self, out):
        self.folder = fmt.output_folder(out)
        self.display_path = self.folder
        self.spec = str(self.folder.resolve())  # what the actors open

    def refuse_early(self) -> None:
        fmt.inspect_folder(self.folder, None)

    @contextlib.contextmanager
    def open(self, manifest: dict):
        """Check, lock and prepare the folder; yields (manifest in force, temporary files removed)."""
        fmt.inspect_folder(self.folder, manifest)
        self.folder.mkdir(parents=True, exist_ok=True)
        with fmt.FolderLock(self.folder):
            stored, temps = fmt.inspect_folder(self.folder, manifest)
            for temp in temps:
                temp.unlink(missing_ok=True)
            manifest = _start(stored, manifest, self._write_json, self._unlink_success)
            (self.folder / fmt.SUMMARY_DIR).mkdir(exist_ok=True)
            yield manifest, len(temps)
        (self.folder / fmt.LOCK).unlink(missing_ok=True)

    def _write_json(self, manifest: dict) -> None:
        fmt.write_json(self.folder / fmt.MANIFEST, manifest)

    def _unlink_success(self) -> None:
        (self.folder / fmt.SUCCESS).unlink(missing_ok=True)

    @contextlib.contextmanager
    def chunk(self, index: int):
        yield self.folder

    def finish(self, manifest: dict) -> dict:
        fmt.remove_temporary_files(self.folder)  # of actors killed mid-write (their chunks were retried)
        manifest = fmt.completed(manifest, fmt.read_summaries(self.folder, manifest))
        self._write_json(manifest)
        fmt.write_success(self.folder)
        return manifest


def _start(stored: dict | None, manifest: dict, write_json, unlink_success) -> dict:
    """The manifest to run under: a new one written, or the stored one; a finished store being
    rerun is marked unfinished until the actors have verified (and repaired) every chunk."""
    if stored is None:
        write_json(manifest)
        return manifest
    if stored.get("complete"):
        unlink_success()
        stored = {**stored, "complete": False}
        write_json(stored)
    return stored


class UriTarget:
    """A folder on a pyarrow filesystem, written through a local copy (see the module docstring)."""

    def __init__(self, uri: str):
        from pyarrow import fs

        self.uri = uri.rstrip("/")
        self.display_path = self.spec = self.uri
        try:
            self.fs, self.base = fs.FileSystem.from_uri(self.uri)
        except Exception as error:  # ArrowInvalid (unknown scheme), OSError (no credentials)
            raise fmt.StoreError(f"--out {uri}: pyarrow cannot open this location ({one_line(error)}). "
                                   "Use a local folder or a URI such as s3://bucket/prefix, with credentials "
                                   "for it in the usual places.") from None
        self.base = self.base.rstrip("/")

    # -- moving files
    def _remote(self, relative: str) -> str:
        return f"{self.base}/{relative}"

    def _entries(self) -> list:
        from pyarrow import fs

        return self.fs.get_file_info(fs.FileSelector(self.base, recursive=True, allow_not_found=True))

    def _get(self, relative: str, local: Path) -> bool:
        """Download one file; False if it is not there."""
        from pyarrow import fs

        if self.fs.get_file_info(self._remote(relative)).type != fs.FileType.File:
            return False
        local.parent.mkdir(parents=True, exist_ok=True)
        with self.fs.open_input_stream(self._remote(relative)) as source, open(local, "wb") as sink:
            shutil.copyfileobj(source, sink, 1 << 20)
        return True

    def _put(self, local: Path, relative: str) -> None:
        """Upload under a hidden temporary name, then move onto the final name."""
        final = self._remote(relative)
        parent, name = final.rsplit("/", 1)
        temporary = f"{parent}/.{name}.{uuid.uuid4().hex[:8]}.part"
        self.fs.create_dir(parent, recursive=True)
        with open(local, "rb") as source, self.fs.open_output_stream(temporary) as sink:
            shutil.copyfileobj(source, sink, 1 << 20)
        self.fs.move(temporary, final)

    @contextlib.contextmanager
    def _mirror(self):
        """A local folder with the remote listing (empty files) and its manifest."""
        from pyarrow import fs

        with tempfile.TemporaryDirectory(prefix="explain-mirror-") as tmp:
            mirror = Path(tmp) / "store"
            info = self.fs.get_file_info(self.base)
            if info.type == fs.FileType.File:
                mirror.write_bytes(b"")
            elif info.type == fs.FileType.Directory:
                mirror.mkdir()
                for entry in self._entries():
                    relative = entry.path[len(self.base) + 1:]
                    if entry.type == fs.FileType.Directory:
                        (mirror / relative).mkdir(parents=True, exist_ok=True)
                    elif relative == fmt.MANIFEST:
                        self._get(relative, mirror / relative)
                    else:
                        (mirror / relative).parent.mkdir(parents=True, exist_ok=True)
                        (mirror / relative).write_bytes(b"")
            yield mirror

    def _inspect(self, manifest: dict | None):
        with self._mirror() as mirror:
            try:
                stored, temps = fmt.inspect_folder(mirror, manifest)
            except fmt.StoreError as error:
                raise fmt.StoreError(str(error).replace(str(mirror), self.uri)) from None
            return stored, [str(t.relative_to(mirror)) for t in temps]

    # -- the job's steps
    def refuse_early(self) -> None:
        self._inspect(None)

    @contextlib.contextmanager
    def open(self, manifest: dict):
        stored, temps = self._inspect(manifest)
        for temp in temps:
            self.fs.delete_file(self._remote(temp))
        yield _start(stored, manifest, self._write_json, self._unlink_success), len(temps)

    def _write_json(self, manifest: dict) -> None:
        with tempfile.TemporaryDirectory(prefix="explain-manifest-") as tmp:
            fmt.write_json(Path(tmp) / fmt.MANIFEST, manifest)
            self._put(Path(tmp) / fmt.MANIFEST, fmt.MANIFEST)

    def _unlink_success(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_file(self._remote(fmt.SUCCESS))

    @contextlib.contextmanager
    def chunk(self, index: int):
        """A local folder holding this chunk's files as they are now; what the body (re)writes
        there is uploaded, summary first."""
        with tempfile.TemporaryDirectory(prefix="explain-chunk-") as tmp:
            folder = Path(tmp)
            (folder / fmt.SUMMARY_DIR).mkdir()
            files = [p.relative_to(folder).as_posix() for p in fmt.chunk_paths(folder, index)]
            before = {}
            for relative in files:
                if self._get(relative, folder / relative):
                    before[relative] = _stamp(folder / relative)
            yield folder
            for relative in reversed(files):  # (part, summary): the summary first
                path = folder / relative
                if path.exists() and before.get(relative) != _stamp(path):
                    self._put(path, relative)

    def finish(self, manifest: dict) -> dict:
        from pyarrow import fs

        for entry in self._entries():  # temporary files of actors killed mid-upload
            if entry.type == fs.FileType.File and fmt.TEMP_RE.fullmatch(entry.base_name):
                self.fs.delete_file(entry.path)
        with tempfile.TemporaryDirectory(prefix="explain-summaries-") as tmp:  # small: one row per customer
            (Path(tmp) / fmt.SUMMARY_DIR).mkdir()
            for index in range(manifest["n_chunks"]):
                relative = fmt.chunk_paths(Path(tmp), index)[1].relative_to(tmp).as_posix()
                self._get(relative, Path(tmp) / relative)
            manifest = fmt.completed(manifest, fmt.read_summaries(Path(tmp), manifest))
        self._write_json(manifest)
        with tempfile.TemporaryDirectory(prefix="explain-success-") as tmp:
            (Path(tmp) / fmt.SUCCESS).write_text("", encoding="utf-8")
            self._put(Path(tmp) / fmt.SUCCESS, fmt.SUCCESS)
        return manifest


def _stamp(path: Path) -> tuple[int, int]:
    """Changes when a file is rewritten (a rename gives it a new inode)."""
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns
