"""The API a trial script uses: get its parameters, report its metrics.

    import expmgr
    params = expmgr.get_next_parameter()
    expmgr.report_intermediate_result(0.8)
    expmgr.report_final_result({"default": 0.9, "loss": 0.1})

It imports the standard library alone, and little of it, so that ``import
expmgr`` costs a trial next to nothing. Each report is appended to the trial's
``metrics.jsonl`` before it is sent to the manager, so a report the manager
misses is still picked up when the trial ends or the experiment resumes.
Run by hand, outside an experiment, a script gets empty parameters and its
metrics are logged. A process launched as a trial (``NNI_PLATFORM`` set) that cannot
get its parameters raises :class:`TrialConnectionError` instead: never empty ones.

NNI's trial API (``import nni``) reaches trials through ``trial_path/`` (see
docs/nni-migration.md): its ``nni`` answers with this module, or hands over to a real
NNI whose runtime reports here through ``trial_path/expmgr_nni_channel.py``.
"""
from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy takes it as True
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.abc import Loader
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any

# Deliberately no `json`, `socket` or `typing` here: their imports (through `re`
# and `enum`) would more than double what a trial pays to start. The C modules
# behind them are enough for the little JSON and HTTP a trial needs.
# Environment variables set by the training service for each trial attempt.
ENV_EXPERIMENT_ID = "EXPMGR_EXPERIMENT_ID"
ENV_TRIAL_ID = "EXPMGR_TRIAL_ID"
ENV_SEQUENCE_ID = "EXPMGR_TRIAL_SEQUENCE_ID"
ENV_ATTEMPT = "EXPMGR_TRIAL_ATTEMPT"
ENV_TRIAL_DIR = "EXPMGR_TRIAL_DIR"
ENV_MANAGER_HOST = "EXPMGR_MANAGER_HOST"
ENV_MANAGER_PORT = "EXPMGR_MANAGER_PORT"
ENV_MANAGER_URL_PREFIX = "EXPMGR_MANAGER_URL_PREFIX"
ENV_MANAGER_SOCKET = "EXPMGR_MANAGER_SOCKET"
"""The manager's Unix socket for reports (expmgr/server/report_socket.py), set by the local
training service alone: a trial that has it sends its reports there, over HTTP when it cannot."""
ENV_TOKEN = "EXPMGR_TRIAL_TOKEN"
ENV_ACCESS_TOKEN = "EXPMGR_TOKEN"
"""expctl's access token of an experiment's server (server/auth.py), never in a trial's
environment: a trial reports with its own ENV_TOKEN, and its code is not to reach the
server's other routes with the owner's token."""
ENV_TRIAL_RANK = "EXPMGR_TRIAL_RANK"
"""A multi-node Ray trial's rank (``training/ray_group.py``); unset: 0, the only rank."""
ENV_LOG_LEVEL = "EXPMGR_LOG_LEVEL"
ENV_LOG_LIMITS = "EXPMGR_LOG_LIMITS"
"""``logMaxSize:logFilesKept`` in bytes and files, for the trial's own trial.log (expmgr.rotation)."""
# What NNI 3.0's local training service sets for a trial; nni_environment() fills them.
ENV_NNI_PLATFORM = "NNI_PLATFORM"
NNI_PLATFORM = "local"
NNI_TRIAL_COMMAND_CHANNEL = "import://expmgr_nni_channel.ExpmgrTrialCommandChannel"
"""A real NNI's trial runtime builds its channel from this class (NNI 3.0's ``import://``)."""

TOKEN_HEADER = "X-Expmgr-Trial-Token"
METRICS_ROUTE = "/api/v1/expmgr/trials/{trial_id}/metrics"
STANDALONE = "STANDALONE"
_SEND_TIMEOUT = 30.0
MAX_REPORT_BYTES = 64 * 1024
"""The largest report: its line in metrics.jsonl (the JSON record with its MAC), in bytes.
A larger one is refused here, before it is written; the manager skips or refuses it too."""
MAC_FIELD = "mac"
_MAC_SUFFIX_LENGTH = len(', "mac": "') + 64 + len('"}')


def report_mac(token: str, body: bytes) -> str:
    """The keyed digest a report line carries: HMAC-SHA256 of the record (the line up to
    its MAC, closed with ``}``) under the attempt's token. The manager takes a line from
    metrics.jsonl only when it matches, so another process cannot add results to a
    trial it does not hold the token of."""
    try:
        from _hashlib import hmac_digest  # the C function; `hmac` would import `hashlib` and more
    except ImportError:  # a Python built without OpenSSL
        # typeshed types _hashlib's and hmac's digest differently; both take the call below
        from hmac import digest as hmac_digest  # type: ignore[assignment]
    return hmac_digest(token.encode(), body, "sha256").hex()


def signed_line(token: str, record_json: str) -> str:
    """``record_json`` (a JSON object) with its MAC as the last field."""
    return f'{record_json[:-1]}, "{MAC_FIELD}": "{report_mac(token, record_json.encode())}"}}'


def unsigned_record(line: bytes) -> bytes | None:
    """The record a signed line's MAC is over, or None if the line does not end with one."""
    line = line.rstrip(b"\r\n")
    if len(line) < _MAC_SUFFIX_LENGTH or not line.endswith(b'"}') or \
            line[-_MAC_SUFFIX_LENGTH:-66] != b', "mac": "':
        return None
    return line[:-_MAC_SUFFIX_LENGTH] + b"}"


TRIAL_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trial_path")
"""The folder a training service puts first on each trial's PYTHONPATH: ``nni``, ``expmgr``
and NNI's channel to expmgr, importable by any Python 3.8+ (docs/nni-migration.md)."""


def rank_file_name(name: str, rank: int) -> str:
    """A trial's log ``name`` (stdout, stderr, trial.log) as rank ``rank`` of a multi-node trial
    writes it: rank 0's is the trial's own, rank k's ``rank<k>.<name>`` beside it."""
    return name if rank == 0 else f"rank{rank}.{name}"


def trial_pythonpath(user_pythonpath: str | None) -> str:
    """A trial's PYTHONPATH: :data:`TRIAL_PATH`, then the user's own."""
    return os.pathsep.join([TRIAL_PATH, *filter(None, [user_pythonpath])])


def nni_environment(env: dict[str, str], code_directory: str) -> dict[str, str]:
    """The ``NNI_*`` variables NNI 3.0 sets for a local trial, from expmgr's own in ``env``
    (those missing there are left out)."""
    nni_env = {ENV_NNI_PLATFORM: NNI_PLATFORM, "NNI_CODE_DIR": code_directory,
               "NNI_TRIAL_COMMAND_CHANNEL": NNI_TRIAL_COMMAND_CHANNEL}
    for nni_name, name in (("NNI_EXP_ID", ENV_EXPERIMENT_ID), ("NNI_TRIAL_JOB_ID", ENV_TRIAL_ID),
                           ("NNI_SYS_DIR", ENV_TRIAL_DIR), ("NNI_OUTPUT_DIR", ENV_TRIAL_DIR),
                           ("NNI_TRIAL_SEQ_ID", ENV_SEQUENCE_ID)):
        if name in env:
            nni_env[nni_name] = env[name]
    return nni_env


class TrialConnectionError(RuntimeError):
    """A process launched as a trial cannot get its parameters from its experiment."""


class _TrialContext:
    """What the training service told this process, read once from its environment."""

    def __init__(self, env: os._Environ | dict[str, str]) -> None:
        self.trial_id = env.get(ENV_TRIAL_ID)
        self.standalone = self.trial_id is None
        # Set by a training service (ours or NNI's): this process is a trial, not a script run by hand.
        self.platform = env.get(ENV_NNI_PLATFORM) if env.get(ENV_NNI_PLATFORM) != "unittest" else None
        self.experiment_id = env.get(ENV_EXPERIMENT_ID, STANDALONE)
        self.sequence_id = int(env.get(ENV_SEQUENCE_ID, "0"))
        self.attempt = int(env.get(ENV_ATTEMPT, "1"))
        self.trial_dir = env.get(ENV_TRIAL_DIR)
        self.host = env.get(ENV_MANAGER_HOST, "127.0.0.1")
        self.port = int(env.get(ENV_MANAGER_PORT, "0"))
        self.url_prefix = env.get(ENV_MANAGER_URL_PREFIX, "")
        self.report_socket = env.get(ENV_MANAGER_SOCKET)
        self.token = env.get(ENV_TOKEN, "")
        self.rank = int(env.get(ENV_TRIAL_RANK, "0"))
        """Only rank 0 reports (as Ray Train keeps rank 0's); other ranks' reports are dropped."""
        self.warned_rank = False
        self.parameters: dict[str, object] | None = None
        self.next_sequence = 0


_context: _TrialContext | None = None


def _ctx() -> _TrialContext:
    global _context
    if _context is None:
        _context = _TrialContext(os.environ)
    return _context


def _standalone_logger():  # noqa: ANN202 - logging is imported only when run by hand
    from expmgr.log import setup_standalone_trial_logging
    return setup_standalone_trial_logging()


class _ConfigureLoggingAfterImport:
    """A meta-path finder that waits for the script to import ``logging`` and then
    routes ``nni.*`` records to trial.log; a trial that never logs never pays for it."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> ModuleSpec | None:
        if name != "logging":
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            spec = getattr(finder, "find_spec", lambda *_: None)(name, path, target)
            if spec is not None:
                spec.loader = _LoaderThenConfigure(spec.loader)
                return spec
        return None


class _LoaderThenConfigure:
    def __init__(self, loader: Loader) -> None:
        self._loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _configure_trial_logging()

    def __getattr__(self, name: str) -> object:  # get_source, get_filename, ...: the real loader's
        return getattr(self._loader, name)


def _configure_trial_logging() -> None:
    from expmgr.log import setup_trial_logging
    from expmgr.rotation import UNBOUNDED, RotationLimits
    ctx = _ctx()
    setup_trial_logging(os.path.join(ctx.trial_dir or ".", rank_file_name("trial.log", ctx.rank)), os.environ.get(ENV_LOG_LEVEL, "info"),
                        RotationLimits.from_env(os.environ.get(ENV_LOG_LIMITS)) or UNBOUNDED)


def _route_trial_logging() -> None:
    """In a trial process: ``nni.*`` records go to trial.log, from whenever ``logging`` is imported."""
    if ENV_TRIAL_ID not in os.environ:
        return
    if "logging" in sys.modules:
        _configure_trial_logging()
    else:
        sys.meta_path.insert(0, _ConfigureLoggingAfterImport())


def _not_connected(ctx: _TrialContext) -> TrialConnectionError:
    return TrialConnectionError(
        f"this process was launched as a trial ({ENV_NNI_PLATFORM}={ctx.platform}) but has no {ENV_TRIAL_ID} "
        "in its environment, so it cannot reach its experiment's manager and has no parameters. "
        f"Run it through an experiment without clearing its environment, or unset {ENV_NNI_PLATFORM} "
        "to run it by hand (then its parameters are empty and its metrics only logged).")


def get_next_parameter() -> dict[str, object]:
    """This trial's parameters (an empty dict when run by hand, outside an experiment)."""
    ctx = _ctx()
    if ctx.standalone:
        if ctx.platform is not None:
            raise _not_connected(ctx)
        _standalone_logger().warning(
            "Running outside an experiment: get_next_parameter() returns {} and metrics are only logged")
        return {}
    if ctx.parameters is None:
        path = os.path.join(ctx.trial_dir or ".", "parameter.json")
        try:
            with open(path, encoding="utf-8") as file:
                ctx.parameters = _json_loads(file.read())["parameters"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise TrialConnectionError(
                f"trial {ctx.trial_id} cannot read its parameters from {path}: {error!r}") from None
    return ctx.parameters


def get_experiment_id() -> str:
    return _ctx().experiment_id


def get_trial_id() -> str:
    return _ctx().trial_id or STANDALONE


def get_sequence_id() -> int:
    return _ctx().sequence_id


def get_attempt() -> int:
    """This run's attempt number: 1, then 2, ... when the trial is retried or requeued."""
    return _ctx().attempt


PREEMPTING_FILE = "preempting"
CHECKPOINT_DIR = "checkpoint"


def get_checkpoint_dir() -> str:
    """A folder kept across this trial's attempts (retries, preemption, resume): save
    checkpoints here and look for them when starting. Created if missing."""
    ctx = _ctx()
    base = ctx.trial_dir if not ctx.standalone else os.getcwd()
    if base is None:  # a trial without EXPMGR_TRIAL_DIR: the error os.path.join(None, ...) raised
        raise TypeError("expected str, bytes or os.PathLike object, not NoneType")
    path = os.path.join(base, CHECKPOINT_DIR)
    os.makedirs(path, exist_ok=True)
    return path


def mark_preempting() -> None:
    """Declare that this attempt ends because it was preempted: if it then exits non-zero
    (by convention 128+signum), the trial is PREEMPTED and run again with the same
    parameters and checkpoint folder, not counted as a failure."""
    ctx = _ctx()
    if ctx.standalone:
        return
    with open(os.path.join(ctx.trial_dir or ".", PREEMPTING_FILE), "w", encoding="utf-8") as file:
        file.write(str(ctx.attempt))


def install_preemption_handler(save_checkpoint: object = None) -> None:
    """On SIGTERM or SIGUSR1 (a stop, or a cluster's preemption notice): call
    ``save_checkpoint()`` if given, ``mark_preempting()``, and exit with 128+signum."""
    import signal

    def handle(signum: int, frame: object) -> None:
        if callable(save_checkpoint):
            save_checkpoint()
        mark_preempting()
        raise SystemExit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGUSR1):
        signal.signal(signum, handle)


def report_intermediate_result(metric: object) -> None:
    """Report a metric during training (a number, or a dict with a ``default`` number)."""
    _report("PERIODICAL", metric)


def report_final_result(metric: object) -> None:
    """Report the trial's result (a number, or a dict with a ``default`` number)."""
    _report("FINAL", metric)


def overwrite_intermediate_seq(value: int) -> None:
    """NNI's ``nni.trial.overwrite_intermediate_seq``: number the next report ``value`` (a trial
    that continues from a checkpoint goes on counting from there). Forward only: a report's
    number is how the manager recognises one sent twice, so a number already used is not
    given again (a smaller ``value`` changes nothing)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"overwrite_intermediate_seq: expected a non-negative integer, got {value!r}")
    ctx = _ctx()
    ctx.next_sequence = max(ctx.next_sequence, value)


def _is_scalar_number(value: object) -> bool:
    """Whether a dict's value is meant as a number (and so is made a plain one, or refused)."""
    return not isinstance(value, (bool, str, bytes)) and value is not None and (
        hasattr(value, "__float__") or hasattr(value, "__array__") or hasattr(value, "item"))


def _not_a_number(value: object, what: str) -> TypeError:
    return TypeError(f"{what} is {_shown(value)}, not a number; a metric is a number or a dict with a "
                     "'default' number")


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _plain_number(value: object, what: str) -> int | float:
    """A number as a plain int or float: numpy and torch scalars, 0-d arrays and one-element
    tensors (``item()``), ``Decimal`` and ``Fraction`` as the value they hold. Anything else,
    a multi-element array among them, is a TypeError naming ``what``: never stored as something
    else (``int(tensor(0.97))`` is 0)."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, bytes)):
        raise _not_a_number(value, what)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    element = _single_element(value, what)
    if element is not value:
        return _plain_number(element, what)
    index = getattr(value, "__index__", None)
    if index is not None:  # an integer type of another library
        try:
            return int(index())
        except TypeError:
            pass
    try:
        return float(value)  # type: ignore[arg-type]  # Decimal, Fraction, a library's own scalar
    except (TypeError, ValueError, OverflowError) as error:
        raise _not_a_number(value, what) from error


def _single_element(value: object, what: str) -> object:
    """The Python number an array or tensor of one element holds (``item()``, or
    ``__array__()`` first for types without it); ``value`` itself when it is neither.
    An array of more or fewer elements is a TypeError naming its size."""
    item = getattr(value, "item", None)
    if not callable(item) and hasattr(value, "__array__"):
        try:
            value = value.__array__()  # type: ignore[attr-defined]  # e.g. a TensorFlow tensor
        except Exception as error:  # noqa: BLE001 - whatever a library raises, the report is refused
            raise _not_a_number(value, what) from error
        item = getattr(value, "item", None)
    if not callable(item) or not (hasattr(value, "__array__") or hasattr(value, "shape")
                                  or hasattr(value, "dtype")):
        return value
    size = _element_count(value)
    if size is not None and size != 1:
        raise TypeError(f"{what} is an array of {size} elements (shape {tuple(getattr(value, 'shape', ()))}), "
                        f"not a number: report one number, e.g. x.mean().item() or float(x[0]); got {_shown(value)}")
    try:
        return item()
    except Exception as error:  # noqa: BLE001 - numpy's ValueError, torch's RuntimeError, ...
        raise _not_a_number(value, what) from error


def _element_count(value: object) -> int | None:
    numel = getattr(value, "numel", None)  # torch: size is a method
    if callable(numel):
        try:
            return int(numel())
        except Exception:  # noqa: BLE001
            return None
    size = getattr(value, "size", None)
    return size if isinstance(size, int) else None


def _plain_metric(metric: object, call: str = "the report") -> object:
    if isinstance(metric, dict):
        if "default" not in metric:
            raise ValueError(f"{call}: a metric dict needs a number under 'default', got {_shown(metric)}")
        # Every number becomes a plain one (other metrics of a multi-objective result too),
        # so numpy and torch values reach the store and the tuner as JSON numbers.
        plain = {str(key): _plain_number(value, f"{call}: its {key!r}") if _is_scalar_number(value) else value
                 for key, value in metric.items()}
        plain["default"] = _plain_number(metric["default"], f"{call}: its 'default'")
        return plain
    return _plain_number(metric, f"{call}: the metric")


def _report(kind: str, metric: object) -> None:
    metric = _plain_metric(metric, "report_final_result()" if kind == "FINAL" else "report_intermediate_result()")
    ctx = _ctx()
    if ctx.standalone:
        if ctx.platform is not None:
            raise _not_connected(ctx)
        _standalone_logger().info("%s result: %s", "final" if kind == "FINAL" else "intermediate", metric)
        return
    if ctx.rank != 0:  # one stream of results per trial: rank 0's (Ray Train keeps rank 0's too)
        if not ctx.warned_rank:
            ctx.warned_rank = True
            _warn(f"rank {ctx.rank}'s metric reports are not stored: a multi-node trial's results are rank 0's")
        return
    record = {"attempt": ctx.attempt, "sequence": ctx.next_sequence, "type": kind, "value": metric}
    line = signed_line(ctx.token, _json_dumps(record))
    if len(line) + 1 > MAX_REPORT_BYTES:  # ASCII: _json_dumps escapes the rest
        raise ValueError(f"a report is at most {MAX_REPORT_BYTES} bytes of JSON; this one is {len(line) + 1}; "
                         "report fewer or smaller values")
    ctx.next_sequence += 1
    with open(os.path.join(ctx.trial_dir or ".", "metrics.jsonl"), "a", encoding="utf-8") as file:
        file.write(line + "\n")
    _send(ctx, line.encode())


def _send(ctx: _TrialContext, body: bytes) -> None:
    """Send one report to the manager, over its Unix socket when there is one and it can be
    reached, else over HTTP; on failure say so on stderr and go on, since the line in
    metrics.jsonl is picked up later."""
    if ctx.report_socket and _send_over_socket(ctx.report_socket, ctx, body):
        return
    _send_over_http(ctx, body)


def _send_over_socket(path: str, ctx: _TrialContext, body: bytes) -> bool:
    """Send one report over the manager's report socket at ``path`` (``<trial id> <token> <length>``, the
    body, then ``<status> <JSON>`` back; expmgr/server/report_socket.py). False when it was
    not answered (no socket, refused, closed unread): the caller sends it over HTTP, which
    is harmless even if it was stored, since reports are idempotent."""
    import _socket
    answer = b""
    try:
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            conn.settimeout(_SEND_TIMEOUT)
            conn.connect(path)
            conn.sendall(f"{ctx.trial_id} {ctx.token} {len(body)}\n".encode() + body)
            while not answer.endswith(b"\n") and len(answer) < 65536:  # one short line
                chunk = conn.recv(4096)
                if not chunk:
                    break
                answer += chunk
        finally:
            conn.close()
    except _socket.timeout as error:  # the manager is there but slow: HTTP would wait as long
        _warn(f"could not send a metric report to the manager ({error}); it is kept in metrics.jsonl")
        return True
    except OSError:
        pass  # not reached, or reset: answered only if a status came first
    if not answer:
        return False
    status, _, reason = answer.rstrip(b"\n").partition(b" ")
    _answered(status, reason)
    return True


def _send_over_http(ctx: _TrialContext, body: bytes) -> None:
    """POST one report to the manager; on failure say so on stderr and go on."""
    path = ctx.url_prefix + METRICS_ROUTE.format(trial_id=ctx.trial_id)
    host = f"[{ctx.host}]" if ":" in ctx.host else ctx.host  # an IPv6 address in a Host header
    request = (f"POST {path} HTTP/1.1\r\nHost: {host}:{ctx.port}\r\n"
               f"Content-Type: application/json\r\n{TOKEN_HEADER}: {ctx.token}\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    try:
        import _socket
        # A bytes host: a str one would import the idna codec, and with it `re`.
        family, kind, proto, _, address = _socket.getaddrinfo(
            ctx.host.encode("idna" if not ctx.host.isascii() else "ascii"), ctx.port, 0, _socket.SOCK_STREAM)[0]
        conn = _socket.socket(family, kind, proto)
        try:
            conn.settimeout(_SEND_TIMEOUT)
            conn.connect(address)
            conn.sendall(request)
            response = b""
            while len(response) < 65536:  # the whole (short) answer: its status and error
                chunk = conn.recv(4096)
                if not chunk:
                    break
                response += chunk
        finally:
            conn.close()
        status = response.split(b" ", 2)[1] if response.count(b" ") >= 2 else b"?"
        _answered(status, response.partition(b"\r\n\r\n")[2])
    except OSError as error:  # _socket.error and timeouts are OSErrors
        _warn(f"could not send a metric report to the manager ({error}); it is kept in metrics.jsonl")


def _answered(status: bytes, reason: bytes) -> None:
    """Say on stderr why the manager did not take a report (its status and JSON error)."""
    if status == b"503":  # the manager's store is busy or unwritable for now
        _warn("the manager could not store a metric report yet; it is kept in metrics.jsonl "
              "and picked up when the trial ends")
    elif status != b"200":
        _warn(f"the manager refused a metric report (HTTP {status.decode(errors='replace')}): "
              f"{reason[:500].decode(errors='replace')}")


def _warn(message: str) -> None:
    print(f"expmgr: warning: {message}", file=sys.stderr, flush=True)


def _json_loads(text: str) -> Any:
    """``json.loads`` without importing ``json``: the C scanner behind it, given a
    document that starts with its value (as ours do); ``json`` where it is missing."""
    try:
        from _json import make_scanner
    except ImportError:
        import json
        return json.loads(text)
    # typeshed wants a make_scanner as the context; any object with its attributes works
    value, end = make_scanner(_ScannerContext)(text, 0)  # type: ignore[arg-type]
    if text[end:].strip():
        raise ValueError(f"extra data after the JSON value at offset {end}")
    return value


class _ScannerContext:
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo: dict = {}

    @staticmethod
    def parse_constant(name: str) -> float:
        return float(name.lower().replace("infinity", "inf"))


def _json_dumps(value: object) -> str:
    """``json.dumps`` for the plain values a report holds, without importing ``json``."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return repr(int(value))
    if isinstance(value, float):
        text = repr(float(value))
        return {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}.get(text, text)
    if isinstance(value, str):
        from _json import encode_basestring_ascii
        return encode_basestring_ascii(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_json_dumps(str(k))}: {_json_dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_json_dumps(item) for item in value) + "]"
    if _is_scalar_number(value):  # numpy or torch values inside a dict's other values
        return _json_dumps(_plain_number(value, "a value in the report"))
    raise TypeError(f"a report can hold numbers, strings, lists and dicts, not {type(value).__name__}")


_route_trial_logging()
