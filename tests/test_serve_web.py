"""pycore serve --web.config.file (exporter-toolkit's format: TLS, client certificates, bcrypt basic
auth) and OpenMetrics negotiation, with certificates made here by the openssl command, Python's own
TLS client and Debian's Prometheus as the scrapers.

The expected figures come from what the workload of tests/test_serve_script.py did, not from pycore.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager

import pytest

from tests.conftest import require_root, running, stop
from tests.test_serve_script import LATENCY, _free_port, _promql, _samples, _script, _wait, prometheus, workload  # noqa: F401

pytest.importorskip("prometheus_client")
bcrypt = pytest.importorskip("bcrypt")
pytest.importorskip("yaml")

PASSWORD = "s3cret pass"
# the workload under a name of its own (its comm): test_serve_script.py's, run at the same time by
# someone else, does not add to what these scripts count
OURS = "s25web"
SCRIPT = LATENCY.replace('"s25work"', f'"{OURS}"')


@pytest.fixture(scope="module")
def ours(workload, tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("web") / OURS
    shutil.copy(workload, path)
    return str(path)


def _openssl(*args: str, cwd) -> None:  # noqa: ANN001
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA; the server's certificate (localhost, 127.0.0.1) and a scraper's, both signed by it; a
    scraper certificate signed by another CA; a bcrypt hash of PASSWORD."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    d = tmp_path_factory.mktemp("pki")
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
    for ca in ("ca", "other-ca"):
        _openssl("req", "-x509", *ec, "-keyout", f"{ca}.key", "-out", f"{ca}.crt", "-days", "2",
                 "-subj", f"/CN=pycore test {ca}", cwd=d)
    for name, ca, ext in (("server", "ca", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
                          ("renewed", "ca", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
                          ("client", "ca", "subjectAltName=DNS:scraper.example\nextendedKeyUsage=clientAuth\n"),
                          ("rogue", "other-ca", "subjectAltName=DNS:scraper.example\nextendedKeyUsage=clientAuth\n")):
        (d / f"{name}.ext").write_text(ext)
        _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
                 "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=d)
    d.joinpath("hash").write_text(bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(10)).decode())
    return d


def _web_config(pki, tmp_path, auth_type: str = "RequireAndVerifyClientCert", users: bool = True) -> str:  # noqa: ANN001
    """A web config file in tmp_path naming pki's files by relative paths (relative to the file)."""
    rel = os.path.relpath(pki, tmp_path)
    text = (f"tls_server_config:\n  cert_file: {rel}/server.crt\n  key_file: {rel}/server.key\n"
            f"  client_auth_type: {auth_type}\n  client_ca_file: {rel}/ca.crt\n")
    if users:
        text += f"basic_auth_users:\n  prom: '{(pki / 'hash').read_text()}'\n"
    path = tmp_path / "web.yml"
    path.write_text(text)
    return str(path)


@contextmanager
def serving(*args: str):
    """pycore serve ARGS on a free port: (process, port, what it said) once it serves; SIGTERM at the end."""
    require_root()
    port = _free_port()
    with running([sys.executable, "-m", "pycore", "serve", "--listen", f"127.0.0.1:{port}", *args]) as p:
        lines = []
        while True:
            line = p.stderr.readline()
            lines.append(line)
            if not line or line.startswith(("pycore serve: http://", "pycore serve: https://")):
                break
        if not line:
            pytest.fail(f"serve did not start: {''.join(lines)}")
        p.startup = "".join(lines)  # type: ignore[attr-defined]
        yield p, port
        if p.poll() is None:
            out, err = stop(p, signal.SIGTERM)
            p.tail = err  # type: ignore[attr-defined]


def _client(pki, cert: str | None = "client") -> ssl.SSLContext:  # noqa: ANN001
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    if cert:
        ctx.load_cert_chain(str(pki / f"{cert}.crt"), str(pki / f"{cert}.key"))
    return ctx


def _fetch(port: int, ctx: ssl.SSLContext | None, password: str | None = PASSWORD, path: str = "/metrics",
           accept: str | None = None) -> tuple[int, dict[str, str], str]:
    """(status, headers, body) of one GET, over TLS when ``ctx``, as user prom when ``password``."""
    if ctx is None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    else:
        conn = http.client.HTTPSConnection("localhost", port, context=ctx, timeout=10)
    headers = {}
    if password is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(f"prom:{password}".encode()).decode()
    if accept:
        headers["Accept"] = accept
    try:
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read().decode()
    finally:
        conn.close()


def _refused(port: int, ctx: ssl.SSLContext) -> str:
    """The alert a TLS client gets from a server that refuses its handshake (TLS 1.3: on the first
    read, after it has written its request), never a reset or an EOF in its place (serve lingers);
    or, refused after a handshake that passed (client_allowed_sans), the connection closed cleanly."""
    try:
        status, _, _ = _fetch(port, ctx)
    except ssl.SSLEOFError as e:
        pytest.fail(f"EOF where the alert should be: {e}")
    except (ssl.SSLError, http.client.RemoteDisconnected) as e:
        return str(e)
    pytest.fail(f"a scrape got through: {status}")


def test_tls_client_certificates_and_basic_auth(pki, ours, tmp_path):
    script = _script(tmp_path, "opens.bt", SCRIPT)
    web = _web_config(pki, tmp_path)
    with serving("--script", script, "--web.config.file", web) as (p, port):
        assert p.startup.startswith("pycore serve: https://"), p.startup
        # a client that opens a connection and says nothing: its handshake waits in its own thread
        with socket.create_connection(("127.0.0.1", port)) as silent:
            silent.sendall(b"\x16\x03\x01")      # the first bytes of a ClientHello, and no more
            subprocess.run([ours, "4", "/"], check=True)
            t = time.monotonic()
            status, headers, body = _fetch(port, _client(pki))
            took = time.monotonic() - t
        assert status == 200 and took < 5, (status, took)
        assert _samples(body)['pycore_script_opens_opens_total{comm="s25web",filename="/"}'] == 4
        t = time.monotonic()
        wrong = _fetch(port, _client(pki), password="not it")       # a bcrypt check: ~70 ms at cost 10
        checked = time.monotonic() - t
        t = time.monotonic()
        for _ in range(5):      # then from the cache, refusals too
            assert _fetch(port, _client(pki), path="/-/healthy")[0] == 200
            assert _fetch(port, _client(pki), password="not it")[0] == 401
        cached = (time.monotonic() - t) / 10
        none = _fetch(port, _client(pki), password=None)
        no_cert = _refused(port, _client(pki, cert=None))
        rogue = _refused(port, _client(pki, cert="rogue"))
        assert _fetch(port, _client(pki))[0] == 200        # and the server still serves
    assert p.returncode == 0, p.tail
    for status, headers, _ in (wrong, none):
        assert status == 401 and headers.get("WWW-Authenticate") == "Basic", (status, headers)
    assert cached < checked / 2, (cached, checked)
    assert "TLSV13_ALERT_CERTIFICATE_REQUIRED" in no_cert and "TLSV1_ALERT_UNKNOWN_CA" in rogue, (no_cert, rogue)
    for why in ("PEER_DID_NOT_RETURN_A_CERTIFICATE", "CERTIFICATE_VERIFY_FAILED"):
        assert f"pycore serve: TLS handshake with 127.0.0.1 refused: {why}" in p.tail, p.tail
    assert "Traceback" not in p.tail


def test_refused_clients_read_the_alert_not_a_reset(pki, tmp_path):
    """A TLS 1.3 client writes its request before it reads the server's verdict; a server that
    closed with that request unread sent a reset, which overtook the alert 4 times in 100 here
    (Prometheus then said "connection reset by peer", not "certificate required"). serve reads
    and drops what a refused client sends until it closes: 60 refusals, 60 alerts."""
    script = _script(tmp_path, "x.bt", "BEGIN { @a = 1; }\n")
    with serving("--script", script, "--web.config.file", _web_config(pki, tmp_path, users=False)) as (p, port):
        got = []
        for i in range(60):
            ctx = _client(pki, cert=None if i % 2 else "rogue")
            with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                                 server_hostname="localhost") as s:
                try:
                    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
                    got.append(f"read {s.recv(100)!r}")
                except ssl.SSLEOFError as e:
                    got.append(f"EOF: {e}")
                except ssl.SSLError as e:
                    got.append(e.reason or str(e))
                except OSError as e:
                    got.append(f"{type(e).__name__}: {e}")
    assert got == ["TLSV1_ALERT_UNKNOWN_CA", "TLSV13_ALERT_CERTIFICATE_REQUIRED"] * 30, got


def test_verify_client_cert_if_given(pki, tmp_path):
    """VerifyClientCertIfGiven: no certificate is fine, one the CA did not sign is refused; no users:
    no basic auth."""
    script = _script(tmp_path, "x.bt", "BEGIN { @a = 1; }\n")
    web = _web_config(pki, tmp_path, "VerifyClientCertIfGiven", users=False)
    with serving("--script", script, "--web.config.file", web) as (p, port):
        status, _, body = _fetch(port, _client(pki, cert=None), password=None)
        rogue = _refused(port, _client(pki, cert="rogue"))
        plain = None
        try:
            _fetch(port, None, password=None)
        except (ConnectionError, http.client.HTTPException) as e:
            plain = e
    assert status == 200 and _samples(body)["pycore_script_x_a"] == 1
    assert rogue and plain is not None


BAD = [
    ("tls_config:\n  cert_file: a.crt\n", "unknown key 'tls_config'"),     # node_exporter's old name
    ("tls_server_config:\n  certfile: a.crt\n", "unknown key 'certfile'"),
    ("tls_server_config: [\n", "not YAML: line"),
    ("tls_server_config:\n  cert_file: nothere.crt\n  key_file: nothere.key\n", "nothere.crt: No such file"),
    ("tls_server_config:\n  cert_file: garbage.crt\n  key_file: garbage.crt\n", "cannot load the certificate garbage.crt"),
    ("tls_server_config:\n  cert_file: PKI/server.crt\n", "missing one of key or key_file"),
    ("tls_server_config:\n  cert_file: PKI/server.crt\n  key_file: PKI/server.key\n  client_auth_type: Sometimes\n",
     "'Sometimes' is not one of NoClientCert"),
    ("tls_server_config:\n  cert_file: PKI/server.crt\n  key_file: PKI/server.key\n"
     "  client_auth_type: RequireAndVerifyClientCert\n", "needs client_ca_file"),
    ("tls_server_config:\n  cert_file: PKI/server.crt\n  key_file: PKI/server.key\n  client_ca_file: PKI/ca.crt\n",
     "without a client_auth_type"),
    ("tls_server_config:\n  cert_file: PKI/server.crt\n  key_file: PKI/server.key\n  min_version: TLS14\n",
     "min_version: 'TLS14' is not one of"),
    ("tls_server_config:\n  cert_file: PKI/server.crt\n  key_file: PKI/server.key\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
     "cipher_suites: not supported"),
    ("basic_auth_users:\n  prom: s3cret\n", "basic_auth_users.prom: not a bcrypt hash"),
    ("basic_auth_users:\n  prom: HASH\n  prom: HASH\n", "key 'prom' given twice"),
    ("http_server_config:\n  headers:\n    X-Frame-Options: always\n", "'always' is not one of deny, sameorigin"),
    ("rate_limit:\n  interval: soon\n", "not a duration"),
]


@pytest.mark.parametrize("text,says", BAD + [(None, "No such file or directory")], ids=lambda v: str(v)[:30])
def test_bad_web_config_files(pki, tmp_path, text, says):
    """Each a one-line error naming the file, exit 2, before anything is loaded."""
    require_root()
    script = _script(tmp_path, "x.bt", "BEGIN { @a = 1; }\n")
    (tmp_path / "garbage.crt").write_text("-----BEGIN CERTIFICATE-----\nnot one\n-----END CERTIFICATE-----\n")
    path = tmp_path / "web.yml"
    if text is not None:
        path.write_text(text.replace("PKI", os.path.relpath(pki, tmp_path))
                        .replace("HASH", f"'{(pki / 'hash').read_text()}'"))
    r = subprocess.run([sys.executable, "-m", "pycore", "serve", "--listen", f"127.0.0.1:{_free_port()}",
                        "--script", script, "--web.config.file", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith(f"pycore serve: --web.config.file {path}: "), r.stderr
    assert says in r.stderr, r.stderr


PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                     "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
HIST = r"""
// @opens: help="files \"opened\", by command"
tracepoint:syscalls:sys_enter_openat /comm == "s25web"/ { @opens[comm, str(args.filename)] = count(); }
tracepoint:syscalls:sys_enter_read /comm == "s25web"/ {
  @sizes = hist(args.count); @linear[comm] = lhist(args.count, 0, 1000, 100); @mean = avg(args.count);
  @biggest = max(args.count); @name[pid] = comm;
  @opens_created = max(args.count);    // OpenMetrics' name for @opens's creation time: left out
}
"""


def test_openmetrics_negotiated(ours, tmp_path):
    """Prometheus's Accept header gets OpenMetrics 1.0 that prometheus_client's OpenMetrics parser takes,
    with the values of the text format; no Accept gets the text format."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
    from prometheus_client.parser import text_string_to_metric_families as text

    script = _script(tmp_path, "om.bt", HIST)
    sizes = [1, 3, 100, 999, 1000, 5000]
    with serving("--script", script) as (p, port):
        subprocess.run([ours, "7", "/", *map(str, sizes)], check=True)
        status, headers, om = _fetch(port, None, password=None, accept=PROMETHEUS_ACCEPT)
        _, plain_headers, plain = _fetch(port, None, password=None)
    assert status == 200 and headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
    assert plain_headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert om.endswith("# EOF\n") and om.count("# EOF") == 1
    assert "# TYPE pycore_script_om_opens counter\n" in om and '# HELP pycore_script_om_opens files \\"opened\\"' in om

    def values(families) -> dict:  # noqa: ANN001
        return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples
                if s.name.startswith("pycore_script_om_")}

    assert "@opens_created: not exported: its pycore_script_om_opens_created is another metric's name" in p.startup + p.tail
    got, want = values(openmetrics(om)), values(text(plain))
    assert got == want and len(got) > 20
    assert got[("pycore_script_om_opens_total", (("comm", "s25web"), ("filename", "/")))] == 7
    assert got[("pycore_script_om_sizes_bucket", (("le", "+Inf"),))] == len(sizes)
    assert got[("pycore_script_om_mean_sum", ())] == sum(sizes)
    if shutil.which("promtool"):
        r = subprocess.run(["promtool", "check", "metrics"], input=plain, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr


def _targets(pport: int) -> dict[str, dict]:
    body = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{pport}/api/v1/targets", timeout=10).read())
    return {t["labels"]["job"]: t for t in body["data"]["activeTargets"]}


@pytest.mark.slow
def test_real_prometheus_over_tls_with_basic_auth(pki, ours, tmp_path):
    """Debian's Prometheus scrapes over TLS with a client certificate and basic auth: PromQL sees what
    the workload did; a job with the wrong password is down with a 401, one without a client
    certificate is down with the handshake refused, and neither keeps the first from being scraped."""
    script = _script(tmp_path, "lat.bt", SCRIPT)
    web = _web_config(pki, tmp_path)
    opens, sleeps, sleep_ms = 25, 9, 20     # 20 ms: bucket [16384, 32768) us, 12 ms of slack above
    with serving("--script", script, "--web.config.file", web) as (p, port):
        def job(name: str, password: str, cert: bool) -> str:
            tls = f"ca_file: {pki}/ca.crt" + (f", cert_file: {pki}/client.crt, key_file: {pki}/client.key" if cert else "")
            return (f"  - job_name: {name}\n    scheme: https\n    tls_config: {{{tls}}}\n"
                    f"    basic_auth: {{username: prom, password: '{password}'}}\n"
                    f"    static_configs: [{{targets: ['localhost:{port}']}}]\n")

        with prometheus(tmp_path, job("pycore", PASSWORD, True) + job("wrong-password", "not it", True)
                        + job("no-cert", PASSWORD, False)) as pport:
            series = f'pycore_script_lat_opens_total{{comm="{OURS}",filename="/",job="pycore"}}'
            subprocess.run([ours, "1", "/"], check=True)
            _wait("the first scrape of the series", lambda: _promql(pport, series))
            time.sleep(2.5)
            t0 = time.time()
            subprocess.run([ours, str(opens), "/"], check=True, env={**os.environ, "SLEEPS": str(sleeps),
                                                                       "SLEEP_MS": str(sleep_ms)})
            _wait("the run scraped", lambda: [r for r in _promql(pport, series) if float(r["value"][1]) == 1 + opens])
            span = 10
            time.sleep(max(0.0, t0 + span - 1 - time.time()))
            t1 = time.time()
            exact = _promql(pport, f"{series} - {series} offset {span}s", at=t1)
            q = _promql(pport, 'histogram_quantile(0.5, pycore_script_lat_lat_us_bucket{job="pycore"})', at=t1)
            targets = _wait("the other jobs scraped", lambda: (lambda t: t if all(t[j]["lastError"] for j in
                            ("wrong-password", "no-cert")) else None)(_targets(pport)))
            # OpenMetrics was negotiated: Prometheus keeps a counter's metadata under its family name
            meta = json.loads(urllib.request.urlopen(
                f"http://127.0.0.1:{pport}/api/v1/metadata?metric=pycore_script_lat_opens", timeout=10).read())
    print({j: (t["health"], t["lastError"]) for j, t in targets.items()})
    assert float(exact[0]["value"][1]) == opens
    assert 2 ** 14 - 1 < float(q[0]["value"][1]) <= 2 ** 15 - 1
    assert targets["pycore"]["health"] == "up" and not targets["pycore"]["lastError"]
    assert targets["wrong-password"]["health"] == "down" and "401" in targets["wrong-password"]["lastError"]
    assert targets["no-cert"]["health"] == "down" and "certificate" in targets["no-cert"]["lastError"]
    assert meta["data"]["pycore_script_lat_opens"][0]["type"] == "counter", meta
    assert p.returncode == 0, p.tail


def test_headers_rate_limit_and_the_file_read_again(pki, tmp_path):
    """Plain HTTP with users, headers and a rate limit; the file changed while serving is read again
    (a new password works, the old one no longer), and a broken one keeps the last good one."""
    script = _script(tmp_path, "x.bt", "BEGIN { @a = 1; }\n")
    web = tmp_path / "web.yml"
    hashed = (pki / "hash").read_text()
    web.write_text(f"basic_auth_users:\n  prom: '{hashed}'\nhttp_server_config:\n  headers:\n"
                   f"    X-Frame-Options: deny\n    X-Content-Type-Options: nosniff\n"
                   f"rate_limit:\n  interval: 10s\n  burst: 2\n")
    with serving("--script", script, "--web.config.file", str(web)) as (p, port):
        assert p.startup.startswith("pycore serve: http://"), p.startup
        first = [_fetch(port, None) for _ in range(3)]      # a burst of 2, then one every 10 s
        other = bcrypt.hashpw(b"other", bcrypt.gensalt(4)).decode()
        web.write_text(f"basic_auth_users:\n  prom: '{other}'\n")
        time.sleep(1.2)             # read again at most once a second
        old, new = _fetch(port, None), _fetch(port, None, password="other")
        web.write_text("basic_auth_users:\n  prom: not-a-hash\n")
        time.sleep(1.2)
        kept = _fetch(port, None, password="other")
    assert [s for s, _, _ in first] == [200, 200, 429]
    assert all(h.get("X-Frame-Options") == "deny" and h.get("X-Content-Type-Options") == "nosniff"
               for _, h, _ in first)
    assert _samples(first[0][2])["pycore_script_x_a"] == 1
    assert old[0] == 401 and new[0] == 200 and kept[0] == 200, (old[0], new[0], kept[0])
    assert "X-Frame-Options" not in new[1]
    assert f"pycore serve: --web.config.file {web}: read again" in p.tail, p.tail
    assert "basic_auth_users.prom: not a bcrypt hash" in p.tail and "still serving with the file as it was" in p.tail


@pytest.mark.parametrize("allowed,served", [("scraper.example", True), ("other.example", False)])
def test_client_allowed_sans(pki, tmp_path, allowed, served):
    """client_allowed_sans: a verified certificate must also name one of these (its SAN: DNS:scraper.example)."""
    script = _script(tmp_path, "x.bt", "BEGIN { @a = 1; }\n")
    web = _web_config(pki, tmp_path, users=False)
    with open(web, "a") as f:
        f.write(f"  client_allowed_sans: [{allowed}, 192.0.2.1]\n")
    with serving("--script", script, "--web.config.file", web) as (p, port):
        if served:
            assert _fetch(port, _client(pki), password=None)[0] == 200
        else:
            assert _refused(port, _client(pki))
    assert p.returncode == 0, p.tail
    said = "no subject alternative name of the client certificate (scraper.example) is in client_allowed_sans"
    assert (said in p.tail) != served, p.tail


def test_renewed_certificate_taken_while_serving(pki, tmp_path):
    """The server's certificate and key replaced on disk: new connections get the new one, no restart."""
    script = _script(tmp_path, "x.bt", "BEGIN { @a = 1; }\n")
    for f in ("server.crt", "server.key"):
        shutil.copy(pki / f, tmp_path / f)
    web = tmp_path / "web.yml"
    web.write_text("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n")

    def subject(port: int) -> str:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with _client(pki, cert=None).wrap_socket(raw, server_hostname="localhost") as conn:
                return dict(x[0] for x in conn.getpeercert()["subject"])["commonName"]

    with serving("--script", script, "--web.config.file", str(web)) as (p, port):
        before = subject(port)
        shutil.copy(pki / "renewed.key", tmp_path / "server.key")
        shutil.copy(pki / "renewed.crt", tmp_path / "server.crt")
        time.sleep(1.2)
        after = subject(port)
        status = _fetch(port, _client(pki, cert=None), password=None)[0]
    assert (before, after, status) == ("server", "renewed", 200)
    assert p.returncode == 0, p.tail
