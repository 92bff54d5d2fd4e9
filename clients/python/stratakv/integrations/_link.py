"""The connectors' link to stratakv: options from an engine's extra config (or the
environment), a Client made lazily and made again after a failure, and calls whose failures
become misses instead of exceptions in the engine's worker threads.

Option keys (the same for SGLang's and LMCache's extra config; each also read from the
environment variable named, upper case, when the config lacks it):

  stratakv_url                 STRATAKV_URL                 unix:///path.sock, redis://h:p,
                                                            redis+cluster://h:p,h:p (required)
  stratakv_password            STRATAKV_PASSWORD            AUTH password
  stratakv_max_connections     STRATAKV_MAX_CONNECTIONS     connections per node (8)
  stratakv_max_staging_bytes   STRATAKV_MAX_STAGING_BYTES   per-connection staging limit: a
                                                            batch of more staged bytes is split
                                                            into several KV.MGET/KV.MPUT (256 MiB)
  stratakv_io_timeout_ms       STRATAKV_IO_TIMEOUT_MS       per send/receive (60000)
  stratakv_transport           STRATAKV_TRANSPORT           auto, shm, verbs, resp (auto)
"""

import logging
import os
import threading
import time

import stratakv

log = logging.getLogger("stratakv.integrations")

_INT_OPTIONS = {
    "max_connections": 8,
    "max_staging_bytes": 256 << 20,
    "io_timeout_ms": 60000,
    "connect_timeout_ms": 5000,
}


def option(config, name, default=None):
    """`stratakv_<name>` from `config` (a dict or None), else env STRATAKV_<NAME>, else default."""
    key = "stratakv_" + name
    if config and config.get(key) is not None:
        return config[key]
    env = os.environ.get(key.upper())
    return env if env not in (None, "") else default


def int_option(config, name, default):
    value = option(config, name, default)
    return None if value is None else int(value)


class RateLimitedLog:
    """Logs a warning of one kind at most once per `interval` seconds (engines call us
    thousands of times a second; a dead server must not flood their logs)."""

    def __init__(self, interval=10.0):
        self.interval = interval
        self.last = {}
        self.lock = threading.Lock()

    def warn(self, kind, msg, *args):
        now = time.monotonic()
        with self.lock:
            if now - self.last.get(kind, -1e9) < self.interval:
                return
            self.last[kind] = now
        log.warning(msg, *args)


class Link:
    """A stratakv.Client made on first use from the options, and made again (at most once per
    `retry_seconds`) when making it failed. `client()` returns it, or None while the server
    cannot be reached. After the Client exists, the SDK itself reconnects broken connections
    on the next call (a server restart costs the calls in flight, which become misses).

    Thread-safe. `on_connect(client)` runs once per Client made (e.g. to register memory)."""

    def __init__(self, config, on_connect=None, retry_seconds=1.0):
        self.url = option(config, "url")
        if not self.url:
            raise ValueError("stratakv: no server URL: set stratakv_url in the engine's extra "
                             "config or the STRATAKV_URL environment variable")
        self.kwargs = {name: int_option(config, name, default)
                       for name, default in _INT_OPTIONS.items()}
        self.explicit = {name for name in _INT_OPTIONS if option(config, name) is not None}
        self.kwargs["transport"] = option(config, "transport", "auto")
        password = option(config, "password")
        if password:
            self.kwargs["password"] = password
        self.on_connect = on_connect
        self.retry_seconds = retry_seconds
        self.log = RateLimitedLog()
        self._client = None
        self._next_try = 0.0
        self._lock = threading.Lock()

    def client(self):
        c = self._client
        if c is not None:
            return c
        with self._lock:
            if self._client is not None:
                return self._client
            if time.monotonic() < self._next_try:
                return None
            try:
                c = stratakv.Client(self.url, **self.kwargs)
                if self.on_connect is not None:
                    self.on_connect(c)
            except Exception as e:  # noqa: BLE001 - any failure: retry later, calls miss
                self._next_try = time.monotonic() + self.retry_seconds
                self.log.warn("connect", "stratakv: cannot reach %s (%s); calls miss until it "
                              "answers", self.url, e)
                return None
            self._client = c
            log.info("stratakv: connected to %s over %s", self.url, c.transport)
            return c

    def set_default(self, name, value):
        """Sets option `name` unless the config gave it; only before the Client is made
        (returns whether it was set)."""
        with self._lock:
            if name in self.explicit or self._client is not None:
                return False
            self.kwargs[name] = value
            return True

    def close(self):
        with self._lock:
            self._client = None

    def call(self, kind, default, fn, *args, **kwargs):
        """fn(client, *args, **kwargs), or `default` when there is no client or the call
        raises (logged, rate-limited, as `kind`)."""
        c = self.client()
        if c is None:
            return default
        try:
            return fn(c, *args, **kwargs)
        except Exception as e:  # noqa: BLE001 - engines expect misses, not exceptions
            self.log.warn(kind, "stratakv: %s failed: %s", kind, e)
            return default

    def batch(self, kind, n, fn, *args, keep_errors=False, **kwargs):
        """A batch call's per-key outcomes: fn's list, where a key that failed (its
        stratakv.Error in e.results) is None (with keep_errors: that Error); all None when
        the call failed as a whole."""
        c = self.client()
        if c is None:
            return [None] * n
        try:
            return fn(c, *args, **kwargs)
        except stratakv.Error as e:
            results = getattr(e, "results", None)
            self.log.warn(kind, "stratakv: %s: %s", kind, e)
            if results is None or len(results) != n:
                return [None] * n
            if keep_errors:
                return list(results)
            return [None if isinstance(r, stratakv.Error) else r for r in results]
        except Exception as e:  # noqa: BLE001
            self.log.warn(kind, "stratakv: %s failed: %s", kind, e)
            return [None] * n


def glob_escape(s):
    """`s` with SCAN MATCH's special characters escaped (* ? [ ] \\)."""
    out = []
    for ch in s:
        if ch in "*?[]\\":
            out.append("\\")
        out.append(ch)
    return "".join(out)
