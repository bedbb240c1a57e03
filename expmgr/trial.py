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
metrics are logged.
"""
from __future__ import annotations

import json
import os

# No `typing` import: it alone would double what `import expmgr` costs a trial.
# Environment variables set by the training service for each trial attempt.
ENV_EXPERIMENT_ID = "EXPMGR_EXPERIMENT_ID"
ENV_TRIAL_ID = "EXPMGR_TRIAL_ID"
ENV_SEQUENCE_ID = "EXPMGR_TRIAL_SEQUENCE_ID"
ENV_ATTEMPT = "EXPMGR_TRIAL_ATTEMPT"
ENV_TRIAL_DIR = "EXPMGR_TRIAL_DIR"
ENV_MANAGER_HOST = "EXPMGR_MANAGER_HOST"
ENV_MANAGER_PORT = "EXPMGR_MANAGER_PORT"
ENV_TOKEN = "EXPMGR_TRIAL_TOKEN"
ENV_LOG_LEVEL = "EXPMGR_LOG_LEVEL"

TOKEN_HEADER = "X-Expmgr-Trial-Token"
METRICS_ROUTE = "/api/v1/expmgr/trials/{trial_id}/metrics"
STANDALONE = "STANDALONE"
_SEND_TIMEOUT = 30.0


class _TrialContext:
    """What the training service told this process, read once from its environment."""

    def __init__(self, env: os._Environ | dict[str, str]) -> None:
        self.trial_id = env.get(ENV_TRIAL_ID)
        self.standalone = self.trial_id is None
        self.experiment_id = env.get(ENV_EXPERIMENT_ID, STANDALONE)
        self.sequence_id = int(env.get(ENV_SEQUENCE_ID, "0"))
        self.attempt = int(env.get(ENV_ATTEMPT, "1"))
        self.trial_dir = env.get(ENV_TRIAL_DIR)
        self.host = env.get(ENV_MANAGER_HOST, "127.0.0.1")
        self.port = int(env.get(ENV_MANAGER_PORT, "0"))
        self.token = env.get(ENV_TOKEN, "")
        self.parameters: dict[str, object] | None = None
        self.next_sequence = 0


_context: _TrialContext | None = None


def _ctx() -> _TrialContext:
    global _context
    if _context is None:
        _context = _TrialContext(os.environ)
    return _context


def _standalone_logger():  # noqa: ANN202 - logging is imported only when run by hand
    import logging
    import sys
    logger = logging.getLogger("nni.trial")
    if not logging.getLogger("nni").handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s (%(name)s) %(message)s"))
        logging.getLogger("nni").addHandler(handler)
        logging.getLogger("nni").setLevel(logging.INFO)
        logging.getLogger("nni").propagate = False
    return logger


def get_next_parameter() -> dict[str, object]:
    """This trial's parameters (an empty dict when run outside an experiment)."""
    ctx = _ctx()
    if ctx.standalone:
        _standalone_logger().warning(
            "Running outside an experiment: get_next_parameter() returns {} and metrics are only logged")
        return {}
    if ctx.parameters is None:
        with open(os.path.join(ctx.trial_dir or ".", "parameter.json"), encoding="utf-8") as file:
            ctx.parameters = json.load(file)["parameters"]
    return ctx.parameters


def get_experiment_id() -> str:
    return _ctx().experiment_id


def get_trial_id() -> str:
    return _ctx().trial_id or STANDALONE


def get_sequence_id() -> int:
    return _ctx().sequence_id


def report_intermediate_result(metric: object) -> None:
    """Report a metric during training (a number, or a dict with a ``default`` number)."""
    _report("PERIODICAL", metric)


def report_final_result(metric: object) -> None:
    """Report the trial's result (a number, or a dict with a ``default`` number)."""
    _report("FINAL", metric)


def _check_metric(metric: object) -> None:
    if isinstance(metric, dict):
        value = metric.get("default")
        if "default" not in metric or isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"a metric dict needs a number under 'default', got {metric!r}")
    elif isinstance(metric, bool) or not isinstance(metric, (int, float)):
        raise TypeError(f"a metric is a number or a dict with a 'default' number, got {metric!r}")


def _report(kind: str, metric: object) -> None:
    _check_metric(metric)
    ctx = _ctx()
    if ctx.standalone:
        _standalone_logger().info("%s result: %s", "final" if kind == "FINAL" else "intermediate", metric)
        return
    record = {"attempt": ctx.attempt, "sequence": ctx.next_sequence, "type": kind, "value": metric}
    ctx.next_sequence += 1
    line = json.dumps(record)
    with open(os.path.join(ctx.trial_dir or ".", "metrics.jsonl"), "a", encoding="utf-8") as file:
        file.write(line + "\n")
    _send(ctx, line.encode())


def _send(ctx: _TrialContext, body: bytes) -> None:
    """POST one report to the manager; on failure say so on stderr and go on,
    since the line in metrics.jsonl is picked up later."""
    import socket
    path = METRICS_ROUTE.format(trial_id=ctx.trial_id)
    request = (f"POST {path} HTTP/1.1\r\nHost: {ctx.host}:{ctx.port}\r\n"
               f"Content-Type: application/json\r\n{TOKEN_HEADER}: {ctx.token}\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    try:
        with socket.create_connection((ctx.host, ctx.port), timeout=_SEND_TIMEOUT) as conn:
            conn.sendall(request)
            response = b""
            while b"\r\n" not in response:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                response += chunk
        status = response.split(b" ", 2)[1] if response.count(b" ") >= 2 else b"?"
        if status != b"200":
            _warn(f"the manager refused a metric report (HTTP {status.decode(errors='replace')})")
    except OSError as error:
        _warn(f"could not send a metric report to the manager ({error}); it is kept in metrics.jsonl")


def _warn(message: str) -> None:
    import sys
    print(f"expmgr: warning: {message}", file=sys.stderr, flush=True)
