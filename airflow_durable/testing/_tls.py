"""Reach a loopback emulator from clients that hard-code ``https://<name>`` with no port.

Some provider hooks build their URL themselves (Snowflake: ``https://<account>.snowflakecomputing.com``;
dbt Cloud: ``https://{conn.host}/``), so the only seams left are the ones every TLS client goes
through: name resolution and certificate trust. This module provides both, without touching any
hook or client library code path:

* `LoopbackCA` — a throwaway CA and a server certificate for the emulated names (by default
  ``127.0.0.1`` and ``localhost``, for hooks that only force ``https://`` but take a ``host:port``),
  made with ``cryptography``; `server_context` is what the emulator serves with
  (``LoopbackServer(ssl_context=...)``) and `client_env` is what clients trust it by.
* `route` — resolve a domain (and its subdomains) to ``127.0.0.1:<port>``. It wraps
  ``socket.getaddrinfo``, which ``requests``/``urllib3`` and ``aiohttp``'s default resolver both call,
  and returns the emulator's port with the address, so ``https://x.example.com`` (port 443) connects to
  the emulator's ephemeral port. Every other name resolves as before.
* `trust` — make this process's clients trust the test CA: ``requests`` through
  ``REQUESTS_CA_BUNDLE`` (read at every request; set to the test CA alone, so ``requests`` in that
  process trusts nothing else — tests are offline), ``aiohttp`` through ``SSL_CERT_FILE`` (read when
  it builds its default context at import; the default trust store plus the test CA) and the
  already-built default context if it is imported (`LoopbackCA.trust_in_process`).
* `environ` — the same, for *other* processes (a scheduler, a triggerer, ``airflow dags test``):
  environment variables, including a ``PYTHONPATH`` entry whose ``sitecustomize`` applies the routes
  at interpreter start-up (chaining to any other ``sitecustomize``).

This is the ONE loopback-TLS implementation: every emulator whose clients force ``https://`` (Snowflake,
dbt Cloud) uses it. It is test machinery: nothing in ``airflow_durable`` outside ``testing`` imports it.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import socket
import ssl
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "CA_ENV",
    "ROUTES_ENV",
    "LoopbackCA",
    "activate_from_environ",
    "environ",
    "route",
    "routes",
    "trust",
    "unroute",
]

#: JSON ``{"domain": ["127.0.0.1", port], ...}``: the routes a child process applies at start-up.
ROUTES_ENV = "AIRFLOW_DURABLE_TESTING_ROUTES"
#: Path of the test CA certificate a child process trusts.
CA_ENV = "AIRFLOW_DURABLE_TESTING_CA"


# --------------------------------------------------------------------------- certificates
class LoopbackCA:
    """A throwaway CA (``trustme``) and one server certificate for ``hostnames``.

    The keys stay in memory: the server context loads them (``trustme`` passes them through a
    temporary file it removes at once), so no private key is left on disk. Only the public CA is
    written, to ``directory`` (a temporary one by default, removed at process exit or by `cleanup`),
    for clients in other processes. ``ca_file`` is the CA alone; ``bundle_file`` is the CA appended to
    the default trust store (certifi's, where installed), so a process that points ``SSL_CERT_FILE`` at
    it still trusts everything else. ``requests`` re-reads ``REQUESTS_CA_BUNDLE`` on every connection,
    so that one gets the small ``ca_file`` (the full bundle costs ~0.1-0.15 s per request).

    Args:
        hostnames: the names (or IP addresses) the server certificate is valid for; a wildcard
            ``*.example.com`` covers one label. The default suits a hook that calls
            ``https://127.0.0.1:<port>``.
        directory: where the public CA files go (a new temporary directory if omitted).
    """

    def __init__(
        self,
        hostnames: Sequence[str] = ("127.0.0.1", "localhost"),
        directory: str | os.PathLike[str] | None = None,
    ) -> None:
        try:
            import trustme
        except ImportError:  # the testing extra: the HTTPS emulators (Snowflake, dbt Cloud) need it
            raise ImportError(
                "the HTTPS emulators need trustme for their loopback CA: "
                'pip install "airflow-durable[testing]"'
            ) from None

        if not hostnames:
            raise ValueError("a server certificate needs at least one hostname")
        self.hostnames = list(hostnames)
        self.directory = Path(directory or tempfile.mkdtemp(prefix="airflow-durable-tls-"))
        if directory is None:
            # Emulators keep their CA for their whole life (a restart reuses it): gone with the process.
            atexit.register(shutil.rmtree, self.directory, ignore_errors=True)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._ca = trustme.CA(organization_name="airflow-durable test CA")
        self._cert = self._ca.issue_cert(*self.hostnames)
        self.ca_file = self.directory / "ca.pem"
        self.bundle_file = self.directory / "bundle.pem"
        self._ca.cert_pem.write_to_path(str(self.ca_file))
        self.bundle_file.write_bytes(_default_bundle() + b"\n" + self._ca.cert_pem.bytes())

    def server_context(self) -> ssl.SSLContext:
        """The server-side TLS context an emulator serves with."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._cert.configure_cert(context)
        context.set_alpn_protocols(["http/1.1"])
        return context

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts only the test CA (for tests of the emulator itself)."""
        context = ssl.create_default_context()
        context.load_verify_locations(cadata=self._ca.cert_pem.bytes().decode())
        return context

    def client_env(self) -> dict[str, str]:
        """Environment variables that make ``requests`` and ``ssl``/``aiohttp`` trust this CA.

        Set them before a client process starts (or before this one imports ``aiohttp``); for a process
        that already imported it, also call `trust_in_process`.
        """
        return {
            CA_ENV: str(self.ca_file),
            # Only the test CA: requests loads this file on every request, and the full bundle costs
            # ~0.1 s each time. aiohttp reads SSL_CERT_FILE once, at import, so it gets the full bundle.
            "REQUESTS_CA_BUNDLE": str(self.ca_file),
            "SSL_CERT_FILE": str(self.bundle_file),
        }

    def trust_in_process(self) -> None:
        """Add the CA to ``aiohttp``'s already-built default context, if this process imported it."""
        trust(self.ca_file)

    def cleanup(self) -> None:
        """Remove the CA files (a server already serving keeps its loaded context)."""
        shutil.rmtree(self.directory, ignore_errors=True)


def _default_bundle() -> bytes:
    try:
        import certifi

        return Path(certifi.where()).read_bytes()
    except (ImportError, OSError):
        paths = ssl.get_default_verify_paths()
        for candidate in (paths.cafile, paths.openssl_cafile):
            if candidate and os.path.exists(candidate):
                return Path(candidate).read_bytes()
    return b""


# --------------------------------------------------------------------------- name routing
_lock = threading.Lock()
_routes: dict[str, list[tuple[str, int]]] = {}  # domain -> stack of (address, port); the last one wins
_real_getaddrinfo = socket.getaddrinfo


def _lookup(host: Any) -> tuple[str, int] | None:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return None
    name = host.rstrip(".").lower()
    with _lock:
        for domain, stack in _routes.items():
            if stack and (name == domain or name.endswith("." + domain)):
                return stack[-1]
    return None


def _routing_getaddrinfo(
    host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0
) -> list[Any]:
    target = _lookup(host)
    if target is None:
        return _real_getaddrinfo(host, port, family, type, proto, flags)
    address, target_port = target
    # Only TCP is served; answering with the emulator's port is what redirects the implicit 443.
    return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, target_port))]


def route(domain: str, port: int, address: str = "127.0.0.1") -> None:
    """Resolve ``domain`` and every subdomain to ``address:port`` in this process.

    Routes stack: the latest one of a domain wins until `unroute` removes it.
    """
    domain = domain.lstrip("*.").rstrip(".").lower()
    with _lock:
        _routes.setdefault(domain, []).append((address, int(port)))
        socket.getaddrinfo = _routing_getaddrinfo  # idempotent; every other name goes to the real one


def unroute(domain: str, port: int | None = None) -> None:
    """Undo the latest `route` of ``domain`` (or the one to ``port``); the previous one applies."""
    domain = domain.lstrip("*.").rstrip(".").lower()
    with _lock:
        stack = _routes.get(domain, [])
        for index in range(len(stack) - 1, -1, -1):
            if port is None or stack[index][1] == port:
                del stack[index]
                break
        if not stack:
            _routes.pop(domain, None)
        if not _routes and socket.getaddrinfo is _routing_getaddrinfo:
            socket.getaddrinfo = _real_getaddrinfo


def routes() -> dict[str, tuple[str, int]]:
    """The routes in effect in this process."""
    with _lock:
        return {domain: stack[-1] for domain, stack in _routes.items() if stack}


# --------------------------------------------------------------------------- trust
def trust(ca_file: str | os.PathLike[str]) -> None:
    """Trust ``ca_file`` in ``aiohttp``'s already-built default context, if ``aiohttp`` is imported.

    ``requests`` and a later ``aiohttp`` import read the environment instead (see `environ`).
    """
    connector = sys.modules.get("aiohttp.connector")
    context = getattr(connector, "_SSL_CONTEXT_VERIFIED", None)
    if isinstance(context, ssl.SSLContext):
        context.load_verify_locations(cafile=str(ca_file))


# --------------------------------------------------------------------------- other processes
_SITECUSTOMIZE = '''"""Written by airflow_durable.testing._tls: apply emulator routes here, then chain."""
import os
import sys

if os.environ.get("{routes_env}"):
    try:
        from airflow_durable.testing._tls import activate_from_environ

        activate_from_environ()
    except Exception as error:  # never break the interpreter; say why the emulator is unreachable
        sys.stderr.write(f"airflow-durable testing: could not route to the emulator: {{error!r}}\\n")

# Run the sitecustomize this file shadows, if there is one further down sys.path.
def _chain():
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_chain()
'''

_site_dir: Path | None = None


def sitecustomize_dir() -> Path:
    """A directory holding the ``sitecustomize.py`` that applies `ROUTES_ENV` at start-up."""
    global _site_dir
    with _lock:
        if _site_dir is None:
            directory = Path(tempfile.mkdtemp(prefix="airflow-durable-site-"))
            atexit.register(shutil.rmtree, directory, ignore_errors=True)
            (directory / "sitecustomize.py").write_text(_SITECUSTOMIZE.format(routes_env=ROUTES_ENV))
            _site_dir = directory
        return _site_dir


def environ(
    domains: Mapping[str, int], certificates: LoopbackCA, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Environment variables that make a child Python process reach the emulator like this one does.

    Args:
        domains: ``{domain: port}`` to route to 127.0.0.1.
        base: the environment the variables are added to (only ``PYTHONPATH`` is read from it).
    """
    base = os.environ if base is None else base
    pythonpath = [str(sitecustomize_dir())]
    if base.get("PYTHONPATH"):
        pythonpath.append(base["PYTHONPATH"])
    return {
        ROUTES_ENV: json.dumps({domain: ["127.0.0.1", port] for domain, port in domains.items()}),
        **certificates.client_env(),
        "PYTHONPATH": os.pathsep.join(pythonpath),
    }


def activate_from_environ(env: Mapping[str, str] | None = None) -> None:
    """Apply the routes and CA named by `ROUTES_ENV` / `CA_ENV` (what ``sitecustomize`` calls)."""
    env = os.environ if env is None else env
    raw = env.get(ROUTES_ENV)
    if not raw:
        return
    for domain, (address, port) in json.loads(raw).items():
        if _lookup(domain) != (address, int(port)):
            route(domain, int(port), address)
    if env.get(CA_ENV):
        trust(env[CA_ENV])
