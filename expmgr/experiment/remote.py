"""Talking to a running experiment's REST API from another process (``expctl`` and
``Experiment.connect``), at the host and url prefix of its access file and with its
token::

    access = Access.load(paths.access_file)
    rest_call(8080, "PUT", "experiment?update_type=TRIAL_CONCURRENCY", {"params": {"trialConcurrency": 3}},
              access=access)
"""
from __future__ import annotations

import json
from typing import Any

from expmgr.server.auth import Access


class RestRefused(Exception):
    """The experiment answered with an error (``status`` is the HTTP status), or did not answer (0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def rest_call(port: int, method: str, route: str, body: Any = None, *, access: Access | None = None) -> Any:
    """``method`` on ``<prefix>/api/v1/nni/<route>`` of the experiment on ``port``
    (default access: 127.0.0.1, no prefix, no token); the decoded JSON answer."""
    import urllib.error
    import urllib.request
    access = access or Access()
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{access.base_url(port)}api/v1/nni/{route}", data=data, method=method,
                                     headers={"Content-Type": "application/json", **access.headers()})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        try:
            message = json.loads(error.read())["error"]
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {error.code}"
        raise RestRefused(error.code, message) from None
    except OSError as error:
        raise RestRefused(0, f"no experiment answers on port {port}: {error}") from None
