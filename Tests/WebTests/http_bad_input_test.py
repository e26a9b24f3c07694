#!/usr/bin/env python3
"""Bad input over HTTP: each gets a clear HTTP error and the daemon keeps serving fixes.

Raw sockets, so that malformed requests reach the server as written. Run by scripts/web-test.
"""
import json
import os
import resource
import select
import socket
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from web_map_test import Daemon, REPLAY, BIN  # noqa: E402


def exchange(port, data, timeout=10):
    """Sends raw bytes and returns (status code or None, whole response)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as connection:
        try:
            connection.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            connection.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server answered and closed before all was sent
        chunks = []
        try:
            while True:
                chunk = connection.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except (ConnectionResetError, socket.timeout):
            pass
    response = b"".join(chunks)
    if not response.startswith(b"HTTP/1."):
        return None, response
    return int(response.split(b" ", 2)[1]), response


def body_of(response):
    return response.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in response else b""


class BadInputTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon("replay:%s?speed=4&loop=true" % REPLAY)
        cls.port = int(cls.daemon.base.rsplit(":", 1)[1].strip("/"))
        cls.token = cls.daemon.token

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def request(self, method, path, body=b"", headers=None, token=True):
        lines = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1:%d" % self.port, "Connection: close"]
        if token:
            lines.append("Authorization: Bearer " + self.token)
        for name, value in (headers or {}).items():
            lines.append("%s: %s" % (name, value))
        if body or method == "POST":
            lines.append("Content-Length: %d" % len(body))
        return exchange(self.port, ("\r\n".join(lines) + "\r\n\r\n").encode() + body)

    def api(self, body, content_type="application/json", **kwargs):
        return self.request("POST", "/api", body, {"Content-Type": content_type}, **kwargs)

    def assertError(self, result, status, code):
        self.assertEqual(result[0], status, result[1][:300])
        reply = json.loads(body_of(result[1]))
        self.assertEqual(reply["class"], "ERROR")
        self.assertEqual(reply["code"], code)
        self.assertTrue(reply["message"])

    def assertStillServing(self):
        """A socket watcher still receives TPVs and the page still loads."""
        watcher = subprocess.Popen(
            [os.path.join(BIN, "locationctl"), "--socket", self.daemon.socket, "--json", "watch"],
            stdout=subprocess.PIPE, text=True)
        try:
            fixes = 0
            deadline = time.monotonic() + 30
            while fixes < 2 and time.monotonic() < deadline:
                line = watcher.stdout.readline()
                if line and json.loads(line).get("class") == "TPV" and "lat" in json.loads(line):
                    fixes += 1
            self.assertEqual(fixes, 2, "the socket watcher got no fixes")
        finally:
            watcher.terminate()
            watcher.wait()
            watcher.stdout.close()

    def test_malformed_json(self):
        for body in (b"{", b"not json", b'{"cmd":"mode","mode":"follow"', b"[]", b"\xff\xfe", b""):
            result = self.api(body)
            self.assertEqual(result[0], 400, body)
            self.assertEqual(json.loads(body_of(result[1]))["class"], "ERROR")
        self.assertError(self.api(b'{"cmd":"mode","mode":"sideways"}'), 400, "invalidArgument")
        fly = self.api(b'{"cmd":"fly"}')
        self.assertError(fly, 400, "unknownCommand")
        # The commands listed are those HTTP takes, not the socket's (request, start... are 403).
        message = json.loads(body_of(fly[1]))["message"]
        self.assertTrue(message.startswith('unknown command "fly": over HTTP use one of '), message)
        self.assertNotIn("request", message.split("use one of ")[1].split(", "))
        self.assertError(self.api(b'{"cmd":"mode","mode":"follow"}', "text/plain"), 415, "unsupportedMediaType")
        self.assertError(self.api(b'{"cmd":"stop"}'), 403, "notAllowed")
        self.assertStillServing()

    def test_huge_bodies(self):
        self.assertError(self.api(b'{"cmd":"map","pad":"' + b"x" * (1 << 20) + b'"}'), 413, "bodyTooLarge")
        self.assertError(self.api(b" " * (16 * 1024 + 1)), 413, "bodyTooLarge")
        self.assertStillServing()

    def test_unknown_paths_methods_and_headers(self):
        self.assertError(self.request("GET", "/nowhere"), 404, "notFound")
        self.assertError(self.request("GET", "/leaflet/../../../etc/passwd"), 404, "notFound")
        self.assertError(self.request("GET", "/leaflet/.hidden"), 404, "notFound")
        self.assertError(self.request("GET", "/leaflet/images/../../../../etc/passwd"), 404, "notFound")
        # A percent-encoded NUL is not decoded (it would end the path early: "/%00" read as "/");
        # other escapes are, so "/%69ndex.html" is the page.
        for path in ("/%00", "/%00index.html", "/map.js%00", "/leaflet/leaflet.js%00.png", "/events%00"):
            self.assertError(self.request("GET", path), 404, "notFound")
        status, _ = self.request("GET", "/%69ndex.html")
        self.assertEqual(status, 200)
        for method in ("PUT", "DELETE", "PATCH", "OPTIONS", "BREW"):
            result = self.request(method, "/api", b"{}")
            self.assertError(result, 405, "methodNotAllowed")
            self.assertIn(b"Allow: POST", result[1])
        self.assertError(self.request("POST", "/", b"x"), 405, "methodNotAllowed")
        # Unknown headers are ignored; a bad Host is refused (DNS rebinding), a bad token too.
        status, _ = self.request("GET", "/", headers={"X-Unknown": "1", "X-Forwarded-For": "1.2.3.4"})
        self.assertEqual(status, 200)
        result = exchange(self.port, b"GET / HTTP/1.1\r\nHost: attacker.example:%d\r\nConnection: close\r\n\r\n" % self.port)
        self.assertError(result, 421, "misdirectedRequest")
        # The Host header is required (RFC 9112 3.2); its port is digits only.
        result = exchange(self.port, b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
        self.assertError(result, 400, "badRequest")
        result = exchange(self.port, b"GET / HTTP/1.1\r\nHost: 127.0.0.1:+%d\r\nConnection: close\r\n\r\n" % self.port)
        self.assertError(result, 421, "misdirectedRequest")
        # The absolute form of the target names the server in place of Host (RFC 9112 3.2.2).
        status, _ = exchange(self.port, b"GET http://127.0.0.1:%d/map.js HTTP/1.1\r\nHost: attacker.example\r\n"
                             b"Connection: close\r\n\r\n" % self.port)
        self.assertEqual(status, 200)
        result = exchange(self.port, b"GET http://attacker.example/map.js HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                          b"Connection: close\r\n\r\n" % self.port)
        self.assertError(result, 421, "misdirectedRequest")
        # The message names what was wrong: the target here, not the (correct) Host header.
        self.assertIn("request target", json.loads(body_of(result[1]))["message"])
        self.assertError(self.request("GET", "/events", headers={"Authorization": "Basic abc"}, token=False),
                         401, "notAuthorized")
        # Headers larger than the connection's memory: libmicrohttpd answers 431 and closes; the
        # close with our unread bytes pending may reset the connection before the answer is read.
        status, _ = self.request("GET", "/", headers={"X-Large": "a" * 100000})
        self.assertIn(status, (None, 400, 413, 431))
        # Not HTTP at all.
        status, _ = exchange(self.port, b"\x00\x01\x02 garbage\r\n\r\n")
        self.assertIn(status, (None, 400, 505))
        self.assertStillServing()

    def test_a_client_that_shuts_down_its_sending_side_is_still_answered(self):
        # exchange() half-closes once the request is sent (legal in HTTP/1.1). Requests answered
        # later (/api, /map.geojson) were closed unanswered when another connection was open: on
        # resuming, libmicrohttpd read the client's end before it wrote the answer.
        idle = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        try:
            time.sleep(0.2)
            for _ in range(10):
                status, response = self.api(b'{"cmd":"map"}')
                self.assertEqual(status, 200, response[:300])
                status, response = self.request("GET", "/map.geojson")
                self.assertEqual(status, 200, response[:300])
        finally:
            idle.close()
        self.assertStillServing()

    def stream_ids(self, headers, count=3):
        """Opens /events with extra header lines and returns the first `count` event ids."""
        lines = ["GET /events HTTP/1.1", "Host: 127.0.0.1:%d" % self.port, "Authorization: Bearer " + self.token]
        lines += ["%s: %s" % pair for pair in headers.items()]
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as connection:
            connection.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
            received = b""
            deadline = time.monotonic() + 30
            while received.count(b"\nid: ") < count and time.monotonic() < deadline:
                chunk = connection.recv(65536)
                if not chunk:
                    break
                received += chunk
        return [line[4:].decode() for line in received.split(b"\n") if line.startswith(b"id: ")][:count]

    def test_last_event_id_near_the_top_is_ignored(self):
        first = self.stream_ids({})
        self.assertEqual(len(first), 3, "no events on a new stream")
        run, number = first[-1].rsplit("-", 1)
        self.assertTrue(int(number) < 100)
        # Resuming the id just written continues after it.
        resumed = self.stream_ids({"Last-Event-ID": first[-1]})
        self.assertEqual(resumed[0], "%s-%d" % (run, int(number) + 1))
        for value in ("0", "18446744073709551615", "18446744073709551614", "18446744073709551613",
                      "9223372036854775808", "9223372036854775807", "-1", "9" * 40, "1e9", ""):
            ids = self.stream_ids({"Last-Event-ID": "%s-%s" % (run, value)})
            self.assertEqual(len(ids), 3, "Last-Event-ID %s-%s ended the stream" % (run, value))
            numbers = [int(i.rsplit("-", 1)[1]) for i in ids]
            self.assertTrue(all(n < 10000 for n in numbers), (value, ids))
        self.assertIsNone(self.daemon.process.poll(), "the daemon stopped")
        self.assertStillServing()

    def test_head_keeps_the_connection_framing(self):
        def pipelined(first):
            request = ("%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n\r\n"
                       "GET /map.css HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n"
                       % (first, self.port, self.token, self.port)).encode()
            return exchange(self.port, request, timeout=10)
        for path in ("/events", "/", "/index.html", "/map.js", "/map.css", "/leaflet/leaflet.js", "/map.geojson",
                     "/map.svg", "/favicon.ico", "/api", "/nowhere"):
            status, response = pipelined("HEAD " + path)
            self.assertIsNotNone(status, path)
            head, _, rest = response.partition(b"\r\n\r\n")
            # No body after a HEAD answer: the next bytes are the second answer.
            self.assertTrue(rest.startswith(b"HTTP/1.1 200"), (path, head[:200], rest[:200]))
            if path == "/events":
                self.assertEqual(status, 405)
                self.assertIn(b"Allow: GET\r\n", head)
            elif path == "/api":
                self.assertEqual(status, 405)
            elif path == "/nowhere":
                self.assertEqual(status, 404)
            else:
                self.assertIn(status, (200, 204), path)

    def test_bearer_scheme_is_case_insensitive_and_favicon_exists(self):
        for scheme in ("Bearer", "bearer", "BEARER", "bEaReR"):
            status, _ = self.request("GET", "/map.geojson", headers={"Authorization": scheme + " " + self.token},
                                     token=False)
            self.assertEqual(status, 200, scheme)
        self.assertError(self.request("GET", "/map.geojson", headers={"Authorization": "Bearer" + self.token},
                                      token=False), 401, "notAuthorized")
        self.assertError(self.request("GET", "/map.geojson", headers={"Authorization": "bearerx " + self.token},
                                      token=False), 401, "notAuthorized")
        status, response = self.request("GET", "/favicon.ico", token=False)
        self.assertEqual(status, 204)
        self.assertEqual(body_of(response), b"")

    def test_a_header_the_server_decides_on_sent_twice_is_refused(self):
        host = "127.0.0.1:%d" % self.port
        auth = "Connection: close\r\nAuthorization: Bearer %s\r\n" % self.token
        body = b'{"cmd":"status"}'
        cases = [
            "GET /map.geojson HTTP/1.1\r\nHost: %s\r\nHost: evil.example\r\n%s\r\n" % (host, auth),
            "GET /map.geojson HTTP/1.1\r\nHost: %s\r\n%sAuthorization: Bearer %s\r\n\r\n" % (host, auth, self.token),
            ("POST /api HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\n"
             "Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (host, auth, len(body), len(body))),
        ]
        for head in cases:
            data = head.encode() + (body if head.startswith("POST") else b"")
            status, response = exchange(self.port, data)
            self.assertIn(status, (400, None), response[:300])
            self.assertNotIn(b'"class":"STATUS"', response)
            self.assertNotIn(b'"type":"FeatureCollection"', response)
        # One of each is answered.
        status, _ = exchange(self.port, ("GET /map.geojson HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (host, auth)).encode())
        self.assertEqual(status, 200)

    def test_content_length_with_transfer_encoding_is_refused_and_the_connection_closed(self):
        # A request hidden in a chunked body that a proxy in front would have measured by its
        # Content-Length (request smuggling): one answer, 400, and the connection is closed.
        hidden = b"GET /map.geojson HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % self.port
        body = b"0\r\n\r\n" + hidden
        data = (b"POST /api HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n"
                b"Content-Type: application/json\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n"
                % (self.port, self.token.encode(), len(body))) + body
        status, response = exchange(self.port, data)
        self.assertEqual(status, 400, response[:300])
        self.assertIn(b"Content-Length and Transfer-Encoding", response)
        self.assertEqual(response.count(b"HTTP/1.1 "), 1, response[:600])
        self.assertStillServing()

    def test_two_lengths_or_a_spaced_header_name_are_refused_and_the_connection_closed(self):
        hidden = b"GET /map.geojson HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n\r\n" % (
            self.port, self.token.encode())
        head = b"POST /api HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n" % (
            self.port, self.token.encode())
        for headers, says in ((b"Content-Length: 0\r\nContent-Length: %d\r\n" % len(hidden), b"more than once"),
                              (b"Content-Length: %d\r\nTransfer-Encoding :chunked\r\n" % len(hidden), b"whitespace")):
            status, response = exchange(self.port, head + headers + b"\r\n" + hidden)
            self.assertEqual(status, 400, response[:300])
            self.assertIn(says, response)
            self.assertEqual(response.count(b"HTTP/1.1 "), 1, response[:600])
        self.assertStillServing()

    def test_finished_token_holders_do_not_keep_others_out(self):
        # A kept-alive client that shut down its sending side after its request can send no other;
        # its connection must not hold one of the address's 64 slots until its timeout.
        body = b'{x'  # answered 400 and kept alive, as any answer to a token holder
        request = (b"POST /api HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n"
                   b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (
                       self.port, self.token.encode(), len(body))) + body
        for _ in range(90):
            with socket.create_connection(("127.0.0.1", self.port), timeout=5) as connection:
                connection.sendall(request)
                connection.shutdown(socket.SHUT_WR)
                self.assertTrue(connection.recv(65536).startswith(b"HTTP/1.1 400"))
        status, response = self.request("GET", "/map.geojson")
        self.assertEqual(status, 200, response[:300])
        self.assertStillServing()

    def test_expect_continue_with_a_large_body_is_refused_before_continue(self):
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as connection:
            connection.sendall(("POST /api HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                                "Expect: 100-continue\r\nContent-Length: 100000000\r\n\r\n" % self.port).encode())
            received = b""
            while b"\r\n\r\n" not in received:
                chunk = connection.recv(65536)
                if not chunk:
                    break
                received += chunk
        self.assertTrue(received.startswith(b"HTTP/1.1 413"), received[:200])

    def test_loopback_addresses_share_the_per_address_limit(self):
        # 64 idle connections from 64 loopback addresses fill the one loopback limit; a 65th from
        # yet another is served, and the oldest idle connection without the token makes room.
        held = []
        try:
            for n in range(64):
                connection = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                connection.bind(("127.0.0.%d" % (2 + n), 0))
                connection.connect(("127.0.0.1", self.port))
                held.append(connection)
            time.sleep(1)  # the server accepts them before the next one
            status, _ = self.request("GET", "/")
            self.assertEqual(status, 200, "a 65th loopback connection was refused instead of an idle one")
            time.sleep(0.5)
            readable, _, _ = select.select(held, [], [], 0)
            closed = []
            for connection in readable:
                try:
                    if connection.recv(100) == b"":
                        closed.append(connection)
                except ConnectionResetError:
                    closed.append(connection)
            self.assertEqual(len(closed), 1, "not exactly one idle connection made room")
            self.assertIs(closed[0], held[0], "the idle connection cut was not the oldest")
        finally:
            for connection in held:
                connection.close()

    def test_a_hog_without_the_token_cannot_lock_out_the_token_holder(self):
        # 64 loopback connections without the token (the whole shared loopback limit), kept busy
        # the cheap way: a request that needs no token (/favicon.ico) or gets 401, resent on the
        # same connection every second, plus connections that stay idle. Meanwhile the token
        # holder's page, map and /events stream still work.
        stop = threading.Event()
        answers = {"kept": 0}

        def hog():
            connections = []
            try:
                for n in range(64):
                    connection = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    connection.bind(("127.0.0.1", 0))
                    connection.connect(("127.0.0.1", self.port))
                    connection.settimeout(2)
                    connections.append(connection)
                while not stop.is_set():
                    for n, connection in enumerate(connections):
                        if n % 4 == 3:
                            continue  # idle
                        path = b"/favicon.ico" if n % 2 == 0 else b"/map.geojson"
                        try:
                            connection.sendall(b"GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (path, self.port))
                            if connection.recv(4096):
                                answers["kept"] += 1
                        except OSError:
                            pass
                    stop.wait(1)
            finally:
                for connection in connections:
                    connection.close()

        thread = threading.Thread(target=hog, daemon=True)
        thread.start()
        try:
            time.sleep(3)  # the hog holds its connections and has sent a round or two
            for _ in range(3):
                # As a browser asks (no half-close of the sending side).
                status, _ = self.daemon.http("GET", "/")
                self.assertEqual(status, 200, "the page did not load beside the hog")
                status, body = self.daemon.http("GET", "/map.geojson")
                self.assertEqual(status, 200, "the token holder's map did not load beside the hog")
                self.assertIn(b'"FeatureCollection"', body)
            self.assertEqual(len(self.stream_ids({}, count=2)), 2, "the token holder's /events stream got no events beside the hog")
            # The hog's connections were closed after their first answer: a second answer on the
            # same connection would mean it keeps its slot for free.
            before = answers["kept"]
            time.sleep(3)
            self.assertLessEqual(answers["kept"] - before, 0, "unauthenticated connections stay alive")
        finally:
            stop.set()
            thread.join(timeout=30)
        self.assertStillServing()

    def test_a_second_daemon_that_cannot_bind_leaves_the_token_file_alone(self):
        token_file = os.path.join(self.daemon.state, "http-token")
        with open(token_file) as f:
            before = f.read()
        def second_daemon(state):
            return subprocess.run(
                [os.path.join(BIN, "locationd"), "--backend", "replay:%s" % REPLAY,
                 "--socket", os.path.join(self.daemon.directory, "second.sock"), "--state-dir", state,
                 "--group", "", "--http", "127.0.0.1:%d" % self.port, "--http-tiles", "none"],
                capture_output=True, text=True, timeout=60)
        # On the same state directory the second daemon is refused before it touches anything.
        same = second_daemon(self.daemon.state)
        self.assertEqual(same.returncode, 73, same.stderr)
        self.assertIn("another locationd uses this state directory", same.stderr)
        # On its own state directory it fails to bind the port in use, and writes no token there.
        other_state = os.path.join(self.daemon.directory, "second-state")
        other = second_daemon(other_state)
        self.assertNotEqual(other.returncode, 0, "a second daemon served on a port in use")
        self.assertIn("cannot listen", other.stderr + other.stdout)
        self.assertFalse(os.path.exists(os.path.join(other_state, "http-token")),
                         "a daemon that could not bind wrote a token")
        with open(token_file) as f:
            self.assertEqual(f.read(), before, "the daemon that failed to start replaced the token file")
        url = json.loads(self.daemon.ctl("--json", "web"))["url"]
        self.assertEqual(url.split("#token=", 1)[1], self.token)
        status, _ = self.request("GET", "/map.geojson")
        self.assertEqual(status, 200)

    def test_a_request_trickled_a_line_at_a_time_is_cut_off(self):
        # One header line every 2 s keeps the idle timeout (30 s) from firing; the request
        # deadline (10 s) ends the connection anyway.
        started = time.monotonic()
        closed = False
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as connection:
            connection.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % self.port)
            while time.monotonic() - started < 28:
                try:
                    connection.sendall(b"X-Slow: %d\r\n" % int(time.monotonic()))
                    connection.settimeout(2)
                    if connection.recv(100) == b"":
                        closed = True
                        break
                except socket.timeout:
                    continue
                except (ConnectionResetError, BrokenPipeError):
                    closed = True
                    break
        self.assertTrue(closed, "a request trickled in for 28 s kept its connection")
        self.assertStillServing()

    def test_stalled_browsers_do_not_hold_up_others(self):
        # Streams whose reader never reads (small receive buffers fill at once), beside one that
        # reads: the reading stream and a socket watcher keep getting fixes.
        stalled = []
        try:
            for _ in range(5):
                connection = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
                connection.connect(("127.0.0.1", self.port))
                connection.sendall(("GET /events HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n\r\n"
                                    % (self.port, self.token)).encode())
                stalled.append(connection)
            reader = socket.create_connection(("127.0.0.1", self.port), timeout=30)
            stalled.append(reader)
            reader.sendall(("GET /events HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n\r\n"
                            % (self.port, self.token)).encode())
            received = b""
            deadline = time.monotonic() + 30
            while received.count(b'data: {"class":"TPV"') < 5 and time.monotonic() < deadline:
                received += reader.recv(65536)
            self.assertGreaterEqual(received.count(b'data: {"class":"TPV"'), 5)
            self.assertIn(b"text/event-stream", received)
            self.assertStillServing()
        finally:
            for connection in stalled:
                connection.close()

    def test_z_a_thousand_idle_connections(self):
        # Last: the server works off the closed connections still queued in its listen backlog.
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < 1200:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
        idle = []
        try:
            for _ in range(1000):
                try:
                    idle.append(socket.create_connection(("127.0.0.1", self.port), timeout=5))
                except OSError:
                    break
            self.assertEqual(len(idle), 1000, "the kernel's backlog refused connections")
            # The socket front-end and the fixes are not held up by the idle HTTP connections.
            self.assertStillServing()
        finally:
            for connection in idle:
                connection.close()
        # Once they are gone the page loads again (the per-address limit frees up as the server
        # works off the closed connections): ten answers in a row.
        deadline = time.monotonic() + 60
        in_a_row = 0
        while time.monotonic() < deadline and in_a_row < 10:
            try:
                status, _ = self.request("GET", "/")
            except OSError:
                status = None
            in_a_row = in_a_row + 1 if status == 200 else 0
            if status != 200:
                time.sleep(0.2)
        self.assertEqual(in_a_row, 10)


if __name__ == "__main__":
    unittest.main(verbosity=2)
