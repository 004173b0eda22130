"""HTTP tools against a real local server on 127.0.0.1 (allow_private: true), plus the address checks."""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import given, settings, strategies as st
from json_strategies import ANY_JSON

from thinkflow.config.spec import HttpRequestSpec, ToolRef, ToolSpec
from thinkflow.tools import Toolbox
from thinkflow.tools.http import HttpTool, address_problem, build_request, host_allowed

BIG = 5_000_000


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _send(self, status, body, ctype="application/json", extra=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path == "/bad-gateway":
            self._send(502, b"<html><body><h1>502 Bad Gateway</h1>upstream down</body></html>", "text/html")
        elif url.path == "/truncated":
            self._send(200, b'{"items": [1, 2')
        elif url.path == "/deep":  # {"a": [[[...]]]}, nested ?n= levels deep
            n = int(parse_qs(url.query)["n"][0])
            self._send(200, b'{"a": ' + b"[" * n + b"]" * n + b"}")
        elif url.path == "/nan":
            self._send(200, b'{"items": [{"name": "alpha", "score": NaN}, {"name": "beta", "score": Infinity}]}')
        elif url.path == "/items":
            self._send(200, json.dumps({"items": [{"name": "alpha"}, {"name": "beta"}]}).encode())
        elif url.path == "/big":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(BIG))
            self.end_headers()
            try:
                for _ in range(BIG // 100_000):
                    self.wfile.write(b"x" * 100_000)
            except OSError:
                pass
        elif url.path == "/latin1":
            self._send(200, "café".encode("latin-1"), "text/plain; charset=iso-8859-1")
        elif url.path == "/redirect":
            target = parse_qs(url.query)["to"][0]
            self.send_response(302)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif url.path == "/loop":
            self.send_response(302)
            self.send_header("Location", "/loop")
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._echo()

    def do_POST(self):
        self._echo()

    def _echo(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        self._send(200, json.dumps({"method": self.command, "path": self.path, "body": body,
                                    "auth": self.headers.get("Authorization")}).encode())


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def http_tool(url, *, parameters=None, **kw):
    request = kw.pop("request", None) or HttpRequestSpec(url=url)
    kw.setdefault("allow_private", True)
    return HttpTool(ToolSpec(name="h", description="", kind="http", request=request,
                             parameters=parameters or {"type": "object", "properties": {}}, **kw))


def test_502_html_page_is_an_error_observation(server):
    result = http_tool(server + "/bad-gateway").run({})
    assert result.status == "error"
    assert result.text == "HTTP 502 Bad Gateway\n<html><body><h1>502 Bad Gateway</h1>upstream down</body></html>"
    assert result.data["http_status"] == 502


def test_truncated_json_is_not_valid_json(server):
    result = http_tool(server + "/truncated").run({})
    assert result.status == "error"
    assert result.text.startswith("response is not valid JSON (")
    assert result.text.endswith('): {"items": [1, 2')


@pytest.mark.parametrize("depth", [101, 1500, 5000, 200_000])
@pytest.mark.parametrize("json_path", [None, "a"])
def test_json_nested_thousands_deep_is_a_clear_error(server, depth, json_path):
    """A server's JSON nested thousands of levels deep was a RecursionError observation (from json.loads), with or
    without response_json_path; now the bounded decoder says how deep it may be."""
    result = http_tool(f"{server}/deep?n={depth}", response_json_path=json_path).run({})
    assert (result.status, result.text) == ("error", "response is JSON nested deeper than 100 levels")
    assert result.data["http_status"] == 200


def test_json_nested_thousands_deep_through_the_toolbox(server):
    tool = http_tool(f"{server}/deep?n=5000")
    result = Toolbox({"h": tool}, {"h": ToolRef(name="h")}).call("h", {})
    assert (result.status, result.text) == ("error", "response is JSON nested deeper than 100 levels")


def test_json_nested_within_the_bound_is_read(server):
    result = http_tool(f"{server}/deep?n=99", response_json_path="a").run({})
    assert (result.status, result.text) == ("ok", "[" * 99 + "]" * 99)


def test_nan_a_server_writes_is_read_as_before(server):
    """NaN and Infinity are no JSON, but servers write them (Python's json.dumps): read as Python reads them."""
    result = http_tool(server + "/nan", response_json_path="items[1].name").run({})
    assert (result.status, result.text) == ("ok", "beta")
    whole = http_tool(server + "/nan").run({})
    assert whole.status == "ok" and '"score": NaN' in whole.text


@settings(max_examples=200, deadline=None)
@given(value=ANY_JSON, depth=st.integers(0, 120) | st.integers(0, 5000), nan=st.booleans())
def test_any_json_body_at_any_depth_is_read_or_refused_as_too_deep(value, depth, nan):
    """A body of any JSON value wrapped in any number of lists (with a NaN beside it or not) is read as Python reads
    it when it nests at most 100 levels, else a NestingError; never a RecursionError."""
    from thinkflow.model.json_limits import MAX_DEPTH, NestingError, too_deep
    from thinkflow.tools.http import json_body

    inner = json.dumps(value)
    text = "[" * depth + "[" + ("NaN, " if nan else "") + inner + "]" + "]" * depth
    expected = json.loads(text) if depth < 900 else None
    if depth + 1 > MAX_DEPTH or (expected is not None and too_deep(expected)):
        with pytest.raises(NestingError):
            json_body(text)
    else:
        got = json_body(text)
        assert json.dumps(got) == json.dumps(expected)


def test_json_body_decodes_bounded():
    from thinkflow.model.json_limits import NestingError, NumberError
    from thinkflow.tools.http import json_body

    assert json_body('{"a": [1, NaN]}')["a"][0] == 1
    with pytest.raises(NestingError, match="JSON nested deeper than 100 levels"):
        json_body('{"x": NaN, "a": ' + "[" * 5000 + "]" * 5000 + "}")  # the fallback is bounded too
    with pytest.raises(NestingError):
        json_body('{"x": NaN, "a": ' + "[" * 150 + "]" * 150 + "}")
    with pytest.raises(NumberError, match="an integer of 5000 digits is too long"):
        json_body('{"n": ' + "9" * 5000 + "}")


def test_json_path_selects_part(server):
    result = http_tool(server + "/items", response_json_path="items[1].name").run({})
    assert (result.status, result.text) == ("ok", "beta")
    missing = http_tool(server + "/items", response_json_path="items[5]").run({})
    assert missing.status == "error"
    assert missing.text == "json_path 'items[5]': index 5 out of range at $.items (list has 2 items)"


def test_server_that_never_answers_times_out():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)  # accepts connections in the backlog, never answers
    try:
        port = listener.getsockname()[1]
        result = http_tool(f"http://127.0.0.1:{port}/x", timeout=1).run({})
    finally:
        listener.close()
    assert result.status == "timeout"
    assert result.text == f"timed out after 1 s (no complete reply from http://127.0.0.1:{port}/x)"


def test_5_mb_body_is_cut_at_the_read_limit(server):
    result = http_tool(server + "/big", max_output=2000).run({})
    assert result.status == "ok"
    assert result.data["truncated"] is True
    assert result.data["bytes"] == BIG
    assert result.text == "x" * 1936 + "\n[... 5.0 MB truncated ...]"


def test_declared_charset_is_honoured(server):
    assert http_tool(server + "/latin1").run({}).text == "café"


def test_loopback_is_refused_without_allow_private(server):
    result = http_tool(server + "/items", allow_private=False).run({})
    assert result.status == "denied"
    assert result.text == ("refused: host '127.0.0.1' resolves to a loopback address 127.0.0.1 "
                           "(set allow_private: true to allow it)")
    assert result.data["http_status"] is None


def test_redirect_hops_are_checked_again(server):
    # allowed host redirects to a host outside allow_hosts
    target = server.replace("127.0.0.1", "localhost") + "/items"
    tool = http_tool(f"{server}/redirect?to={target}", allow_hosts=("127.0.0.1",))
    result = tool.run({})
    assert result.status == "denied"
    assert result.text == "refused: host 'localhost' is not in allow_hosts (127.0.0.1)"
    assert result.data["redirects"] == 1
    ok = http_tool(f"{server}/redirect?to=/items").run({})
    assert ok.status == "ok" and ok.data["redirects"] == 1
    looped = http_tool(f"{server}/loop", max_redirects=3).run({})
    assert (looped.status, looped.text) == ("error", "too many redirects (more than 3)")


def test_address_checks():
    assert address_problem("127.0.0.1", 80).startswith("host '127.0.0.1' resolves to a loopback address")
    assert "a private address 10.1.2.3" in address_problem("10.1.2.3", 80)
    assert "a link-local address 169.254.169.254" in address_problem("169.254.169.254", 80)
    assert "a loopback address ::1" in address_problem("::1", 80)
    assert address_problem("8.8.8.8", 80) is None
    assert host_allowed("api.example.com", None, ("*.example.com",))
    assert not host_allowed("example.org", None, ("*.example.com", "example.com"))


def test_templates_encode_url_values_and_keep_json_types():
    params = {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"},
                                               "tags": {"type": "array"}, "opt": {"type": "string"}}}
    request = HttpRequestSpec(method="post", url="https://api.example.com/search/{q}?raw={q}",
                              params={"limit": "{n}", "o": "{opt}"}, headers={"X-Q": "q={q}"},
                              json={"query": "{q}", "n": "{n}", "tags": "{tags}", "text": "find {q}", "o": "{opt}"})
    spec = ToolSpec(name="h", description="", kind="http", parameters=params, request=request)
    built = build_request(spec, {"q": "a/b c&d=1", "n": 5, "tags": ["x", "y"]})
    assert built["method"] == "POST"
    assert built["url"] == "https://api.example.com/search/a%2Fb%20c%26d%3D1?raw=a%2Fb%20c%26d%3D1"
    assert built["params"] == {"limit": "5"}
    assert built["headers"] == {"X-Q": "q=a/b c&d=1"}
    assert built["json"] == {"query": "a/b c&d=1", "n": 5, "tags": ["x", "y"], "text": "find a/b c&d=1"}


def test_post_body_and_secret_redaction(server):
    params = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
    request = HttpRequestSpec(method="POST", url=server + "/things/{id}", headers={"Authorization": "Bearer tok-123"},
                              json={"id": "{id}"})
    spec = ToolSpec(name="h", description="", kind="http", parameters=params, request=request, allow_private=True,
                    secrets=("tok-123",))
    box = Toolbox({"h": HttpTool(spec)}, {"h": ToolRef(name="h")})
    result = box.call("h", {"id": "a b"})
    assert result.status == "ok"
    echoed = json.loads(result.text.replace("***", "tok-123"))
    assert echoed["path"] == "/things/a%20b"
    assert json.loads(echoed["body"]) == {"id": "a b"}
    assert "tok-123" not in result.text
    assert result.data["request"]["headers"] == {"Authorization": "Bearer ***"}
    assert "tok-123" not in json.dumps(result.data)


class Trickler:
    """A raw TCP server on 127.0.0.1 that answers every connection with ``reply(port)`` sent one byte at a time,
    ``gap`` seconds apart (each read on the client side sees a byte long before any per-read timeout)."""

    def __init__(self, reply, gap=0.05):
        self.reply, self.gap = reply, gap
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port = self.listener.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        import time

        try:
            conn.recv(65536)
            for byte in self.reply(self.port):
                if self.stop.is_set():
                    break
                conn.sendall(bytes([byte]))
                time.sleep(self.gap)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.stop.set()
        self.listener.close()


@pytest.mark.parametrize("what", ["headers", "body", "redirects"])
def test_timeout_bounds_the_whole_request_even_when_every_byte_comes_in_time(what):
    import time

    def reply(port):
        if what == "headers":
            return b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"p" * 400 + b"\r\nContent-Length: 2\r\n\r\nok"
        if what == "body":
            return b"HTTP/1.1 200 OK\r\nContent-Length: 400\r\n\r\n" + b"b" * 400
        # each hop is quick enough alone (about 0.5 s); together they pass the 1 s timeout
        return (b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:%d/again\r\nContent-Length: 0\r\n\r\n" % port)

    server = Trickler(reply, gap=0.05 if what != "redirects" else 0.006)
    try:
        started = time.monotonic()
        result = http_tool(f"http://127.0.0.1:{server.port}/x", timeout=1, max_redirects=50).run({})
        elapsed = time.monotonic() - started
    finally:
        server.close()
    assert result.status == "timeout"
    assert result.text == f"timed out after 1 s (no complete reply from http://127.0.0.1:{server.port}/x)"
    assert elapsed < 3.0  # cut at the deadline; the trickle alone would take 20 s (headers, body) or never end
