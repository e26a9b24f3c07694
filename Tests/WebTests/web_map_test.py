#!/usr/bin/env python3
"""The map page in a real browser: headless Chromium driven by Selenium against locationd --http.

Run by scripts/web-test (after `swift build`). Each backend (a replay of a real NMEA log and the
simulator) gets its own daemon, socket, state directory and port. Waits poll the page; the one
bound on time is the requirement that an annotation appears within 1 s of locationctl annotate.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("LOCATIOND_BIN", os.path.join(ROOT, ".build", "debug"))
ARTIFACTS = os.environ.get("WEB_TEST_ARTIFACTS", os.path.join(ROOT, ".build", "web-test"))
REPLAY = os.path.join(ROOT, "..", "shared", "nmea", "garmin15x.log")
XSS = "<img src=x onerror=alert(1)>"


class Daemon:
    """locationd with --http on a free port, its own socket and state directory."""

    def __init__(self, backend, extra=()):
        self.directory = tempfile.mkdtemp(prefix="locationd-web-")
        self.socket = os.path.join(self.directory, "locationd.sock")
        self.state = os.path.join(self.directory, "state")
        os.mkdir(self.state, 0o700)
        group = subprocess.run(["id", "-gn"], capture_output=True, text=True, check=True).stdout.strip()
        self.log = open(os.path.join(self.directory, "locationd.log"), "w")
        self.process = subprocess.Popen(
            [os.path.join(BIN, "locationd"), "--backend", backend, "--socket", self.socket,
             "--state-dir", self.state, "--group", group, "--http", "127.0.0.1:0", "--http-tiles", "none",
             *extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.url = json.loads(self.ctl("--json", "web"))["url"]
                break
            except (subprocess.CalledProcessError, ValueError, KeyError):
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("locationd did not start: " + open(self.log.name).read())
                time.sleep(0.1)
        self.base = self.url.split("#", 1)[0]
        self.token = self.url.split("#token=", 1)[1]

    def ctl(self, *arguments):
        return subprocess.run(
            [os.path.join(BIN, "locationctl"), "--socket", self.socket, *arguments],
            capture_output=True, text=True, check=True, timeout=30).stdout

    def map_state(self):
        return json.loads(self.ctl("--json", "map"))

    def http(self, method, path, body=None, headers=None, token=True):
        request = urllib.request.Request(self.base.rstrip("/") + path, data=body, method=method)
        if token:
            request.add_header("Authorization", "Bearer " + self.token)
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.directory, ignore_errors=True)


def browser():
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=800,600",
                 "--disable-dev-shm-usage"):
        options.add_argument(flag)
    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    return webdriver.Chrome(service=Service(driver_path), options=options)


class PageTests:
    """The page's behaviour, shared by the replay and the simulator runs."""

    backend = None

    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon(cls.backend)
        cls.driver = browser()
        # Zoomed in far enough that a fix a few metres on moves the marker by pixels.
        cls.daemon.ctl("zoom", "18")
        cls.driver.get(cls.daemon.url)
        cls.wait(lambda d: d.execute_script("return window.locationdMap && window.locationdMap.state.fix !== null"), 30)

    @classmethod
    def tearDownClass(cls):
        try:
            os.makedirs(ARTIFACTS, exist_ok=True)
            cls.driver.save_screenshot(os.path.join(ARTIFACTS, "web-map-%s.png" % cls.__name__))
        finally:
            cls.driver.quit()
            cls.daemon.stop()

    @classmethod
    def wait(cls, condition, seconds=15, message=""):
        return WebDriverWait(cls.driver, seconds, poll_frequency=0.05).until(condition, message)

    def js(self, script, *arguments):
        return self.driver.execute_script(script, *arguments)

    def marker(self):
        return self.js("var p = window.locationdMap.user.getLatLng(); return [p.lat, p.lng];")

    def center(self):
        return self.js("var c = window.locationdMap.map.getCenter(); return [c.lat, c.lng, window.locationdMap.map.getZoom()];")

    def marker_offset(self):
        """Pixels between the user marker and the middle of the map."""
        return self.js(
            "var m = window.locationdMap.map; var p = m.latLngToContainerPoint(window.locationdMap.user.getLatLng());"
            "var s = m.getSize(); return Math.hypot(p.x - s.x / 2, p.y - s.y / 2);")

    def events(self):
        return self.js("return window.locationdMap.state.events;")

    def click_mode(self, mode):
        self.driver.find_element(By.CSS_SELECTOR, "button.mode[data-mode='%s']" % mode).click()
        self.wait(lambda d: self.daemon.map_state()["mode"] == mode, message="mode " + mode)
        self.wait(lambda d: self.js("return window.locationdMap.state.mode;") == mode)

    def wait_for_fixes(self, count):
        """Waits until the marker has moved to `count` new positions."""
        seen = [self.marker()]
        def moved(_):
            position = self.marker()
            if position != seen[-1]:
                seen.append(position)
            return len(seen) > count
        self.wait(moved, 30, "the marker did not move with the fixes")
        return seen

    def test_1_marker_moves_and_follow_keeps_it_centered(self):
        self.click_mode("follow")
        for _ in range(3):
            positions = self.wait_for_fixes(1)
            self.assertNotEqual(positions[0], positions[-1])
            # The MAP event that re-centers follows each TPV: the marker is in the middle again.
            self.wait(lambda d: self.marker_offset() < 2, 5, "follow did not keep the marker centered")
        self.assertEqual(self.daemon.map_state()["mode"], "follow")

    def test_2_user_pan_in_follow_switches_to_none_and_fixes_do_not_move_the_view(self):
        self.click_mode("follow")
        element = self.driver.find_element(By.ID, "map")
        ActionChains(self.driver).move_to_element(element).click_and_hold().move_by_offset(120, 60) \
            .move_by_offset(30, 10).release().perform()
        self.wait(lambda d: self.daemon.map_state()["mode"] == "none", 10, "a pan did not switch follow to none")
        self.wait(lambda d: self.js("return window.locationdMap.state.mode;") == "none")
        view = self.center()
        served = self.daemon.map_state()["center"]
        self.assertAlmostEqual(served["lat"], view[0], places=6)
        self.assertAlmostEqual(served["lon"], view[1], places=6)
        before = self.events()
        offset = self.marker_offset()
        self.wait_for_fixes(3)
        self.assertGreater(self.events(), before)
        self.assertEqual(self.center(), view, "a fix moved the view in mode none")
        # The marker moved on the screen: the view stayed while the location changed.
        self.assertNotAlmostEqual(self.marker_offset(), offset, places=3)

    def test_2b_slow_drag_in_follow_never_jumps_back_to_the_user(self):
        self.click_mode("follow")
        self.wait(lambda d: self.marker_offset() < 2, 5, "follow did not center the marker")
        # Every 20 ms: whether Leaflet's drag is under way (from its dragstart to its dragend),
        # the view's center in projected pixels at the current zoom, the zoom and the page's mode.
        # Fixes keep arriving and move the marker on the screen; what must not happen is the view
        # moving anywhere but where the hand takes it.
        self.js(
            "window.__dragging = false; var m = window.locationdMap.map;"
            " m.on('dragstart', function () { window.__dragging = true; });"
            " m.on('dragend', function () { window.__dragging = false; });"
            " window.__samples = []; window.__sampler = setInterval(function () {"
            " var c = m.project(m.getCenter(), m.getZoom());"
            " window.__samples.push([window.__dragging, c.x, c.y, m.getZoom(), window.locationdMap.state.mode]);"
            "}, 20);")
        before = self.events()
        element = self.driver.find_element(By.ID, "map")
        chain = ActionChains(self.driver).move_to_element(element).click_and_hold()
        for _ in range(12):
            chain = chain.move_by_offset(15, 0).pause(0.3)
        chain.perform()
        mid_drag_mode = self.daemon.map_state()["mode"]
        ActionChains(self.driver).release().perform()
        samples = self.js("clearInterval(window.__sampler); return window.__samples;")
        self.assertGreater(self.events(), before, "no event arrived during the drag")
        during = [sample for sample in samples if sample[0]]
        self.assertGreater(len(during), 20, "too few samples taken during the drag: %r" % samples)
        self.assertEqual({sample[3] for sample in during}, {during[0][3]}, "the zoom changed mid-drag")
        # A drag to the right moves the view west: its center's x only decreases, its y stays.
        steps = [(b[1] - a[1], b[2] - a[2]) for a, b in zip(during, during[1:])]
        self.assertTrue(all(dx <= 0.5 and abs(dy) <= 0.5 for dx, dy in steps),
                        "the view moved against the drag mid-drag: %r" % during)
        self.assertGreater(during[0][1] - during[-1][1], 100, "the view did not follow the hand: %r" % during)
        self.assertEqual({sample[4] for sample in during}, {"none"}, "the page followed again mid-drag: %r" % during)
        self.assertEqual(mid_drag_mode, "none", "following was not turned off at the gesture's start")
        self.assertEqual(samples[-1][4], "none")
        self.wait(lambda d: self.daemon.map_state()["mode"] == "none", 10)

    def test_3_center_on_me_recenters_once(self):
        if self.js("return window.locationdMap.state.mode;") != "none":
            self.click_mode("none")
        # Move the view about a kilometre off the user first, so that a recentre is unmistakable.
        self.js("window.locationdMap.map.panBy([2000, 1500], {animate: false});")
        self.wait(lambda d: self.metres_to_marker(self.center()) > 500, 5, "the view did not move off the user")
        before = self.center()
        self.wait(lambda d: self.daemon_center_is(before), 5, "the daemon did not take the panned view")
        self.driver.find_element(By.ID, "center-on-me").click()
        self.wait(lambda d: self.center() != before, 5, "center on me did not move the view")
        centered = self.center()
        # The view now shows where the user was at the click: the marker moves on at 15 m/s, so
        # allow for the fixes that arrive while the browser is polled, not a pixel tolerance.
        self.assertLess(self.metres_to_marker(centered), 100, "center on me did not center on the user")
        self.assertTrue(self.daemon_center_is(centered), "the view and the daemon disagree on the center")
        self.wait_for_fixes(3)
        self.assertEqual(self.center(), centered, "the view followed after a one-time center")
        self.assertEqual(self.daemon.map_state()["mode"], "none")

    def metres_to_marker(self, center):
        return self.js(
            "return window.locationdMap.map.distance(L.latLng(arguments[0], arguments[1]),"
            " window.locationdMap.user.getLatLng());", center[0], center[1])

    def daemon_center_is(self, center):
        state = self.daemon.map_state()["center"]
        return abs(state["lat"] - center[0]) < 1e-6 and abs(state["lon"] - center[1]) < 1e-6


class ReplayPageTests(PageTests, unittest.TestCase):
    backend = "replay:%s?speed=4&loop=true" % REPLAY

    def label(self, identifier):
        return self.driver.find_elements(
            By.CSS_SELECTOR, "span.annotation-title[data-annotation-id='%s']" % identifier)

    def test_4_annotation_appears_within_a_second_and_replaces_in_place(self):
        lat, lon = self.marker()
        self.daemon.ctl("annotate", "cafe", str(lat + 0.0001), str(lon), "Coffee")
        started = time.monotonic()
        self.wait(lambda d: len(self.label("cafe")) == 1 and self.label("cafe")[0].text == "Coffee", 1.0,
                  "the annotation did not appear within 1 s")
        self.assertLess(time.monotonic() - started, 1.5)
        element = self.label("cafe")[0]
        self.daemon.ctl("annotate", "cafe", str(lat - 0.0001), str(lon), "Tea")
        self.wait(lambda d: element.text == "Tea", 1.0, "the annotation was not replaced within 1 s")
        self.assertEqual(len(self.label("cafe")), 1)
        self.assertEqual(element.get_attribute("data-annotation-id"), "cafe")
        self.daemon.ctl("remove", "cafe")
        self.wait(lambda d: len(self.label("cafe")) == 0, 2, "a removed annotation stayed")

    def test_5_markup_in_a_title_is_text_and_runs_nothing(self):
        self.js("window.__alerted = false; window.alert = function () { window.__alerted = true; };")
        lat, lon = self.marker()
        self.daemon.ctl("annotate", "xss", str(lat), str(lon + 0.0001), XSS)
        self.wait(lambda d: len(self.label("xss")) == 1, 2)
        self.assertEqual(self.js("return arguments[0].textContent;", self.label("xss")[0]), XSS)
        self.assertEqual(self.driver.find_elements(By.CSS_SELECTOR, "img[src='x']"), [])
        self.assertEqual(self.js("return arguments[0].children.length;", self.label("xss")[0]), 0)
        time.sleep(0.3)  # give an injected onerror handler its chance to run
        self.assertFalse(self.js("return window.__alerted;"))
        with self.assertRaises(NoAlertPresentException):
            self.driver.switch_to.alert.text
        self.daemon.ctl("remove", "xss")

    def test_6_writes_without_the_token_are_refused(self):
        def annotations():
            return [a for a in self.daemon.map_state()["annotations"] if a.get("kind") != "location"]
        before = annotations()
        # From the page itself, without the Authorization header.
        status = self.driver.execute_async_script(
            "var done = arguments[arguments.length - 1];"
            "fetch('/api', {method: 'POST', headers: {'Content-Type': 'application/json'},"
            " body: JSON.stringify({cmd: 'annotate', annotation: {id: 'x', lat: 1, lon: 2, title: 'x'}})})"
            ".then(function (r) { done(r.status); });")
        self.assertEqual(status, 401)
        body = json.dumps({"cmd": "annotate", "annotation": {"id": "x", "lat": 1, "lon": 2, "title": "x"}}).encode()
        status, _ = self.daemon.http("POST", "/api", body, {"Content-Type": "application/json"}, token=False)
        self.assertEqual(status, 401)
        status, _ = self.daemon.http(
            "POST", "/api", body, {"Content-Type": "application/json", "Authorization": "Bearer " + "0" * 64},
            token=False)
        self.assertEqual(status, 401)
        # The token alone does not let another site's page write (Origin check).
        status, _ = self.daemon.http(
            "POST", "/api", body, {"Content-Type": "application/json", "Origin": "http://evil.example"})
        self.assertEqual(status, 403)
        self.assertEqual(annotations(), before)


    def test_7_annotations_of_kind_location_are_shown(self):
        lat, lon = self.marker()
        body = json.dumps({"cmd": "annotate", "annotation": {
            "id": "home", "lat": lat + 0.0002, "lon": lon, "title": "Home", "kind": "location"}}).encode()
        status, _ = self.daemon.http("POST", "/api", body, {"Content-Type": "application/json"})
        self.assertEqual(status, 200)
        self.wait(lambda d: len(self.label("home")) == 1 and self.label("home")[0].text == "Home", 2,
                  "an annotation of kind location was not shown")
        # The reserved id "location" (the user's own position) still has no label: the marker shows it.
        self.assertEqual(self.label("location"), [])
        self.daemon.ctl("remove", "home")
        self.wait(lambda d: len(self.label("home")) == 0, 2)

    def test_8_a_new_token_pasted_into_the_open_tab_reconnects(self):
        status = lambda: self.js("return document.getElementById('status').textContent;")
        self.js("window.location.hash = 'token=' + '0'.repeat(64);")
        self.wait(lambda d: status().startswith("not authorized"), 10, "a new token in the hash was not taken")
        self.assertEqual(self.js("return window.location.hash;"), "")
        before = self.events()
        self.js("window.location.hash = 'token=' + arguments[0];", self.daemon.token)
        # The stream is open again: events arrive and the status no longer says "not authorized".
        self.wait(lambda d: self.events() > before and not status().startswith("not authorized"), 10,
                  "the stream did not reconnect with the new token")
        self.assertEqual(self.js("return window.location.hash;"), "")


class SimulatorPageTests(PageTests, unittest.TestCase):
    backend = "simulate?rate=4&speed=15"

    def test_4_a_full_map_of_annotations_keeps_the_page_responsive(self):
        # Following: every fix brings a MAP event that lists every annotation.
        self.click_mode("follow")
        lat, lon = self.marker()
        count = 990
        connection = socket.socket(socket.AF_UNIX)
        connection.connect(self.daemon.socket)
        stream = connection.makefile("rwb")
        stream.write(b'{"cmd":"request"}\n')
        for index in range(count):
            request = {"cmd": "annotate", "annotation": {
                "id": "a%d" % index, "title": "T%d" % index,
                "lat": lat + (index % 40) * 0.0002, "lon": lon + (index // 40) * 0.0002}}
            stream.write((json.dumps(request) + "\n").encode())
        stream.flush()
        for _ in range(count + 1):
            reply = json.loads(stream.readline())
            self.assertNotEqual(reply.get("class"), "ERROR", reply)
        stream.close()
        connection.close()
        self.wait(lambda d: self.js("return window.locationdMap.state.annotations.size;") == count, 60,
                  "the page did not show every annotation")
        # Fixes keep arriving and the page keeps up: the marker moves on, scripts answer.
        self.wait_for_fixes(8)
        self.assertEqual(self.js("return 1 + 1;"), 2)
        self.click_mode("none")


class ReconnectTests(unittest.TestCase):
    """A dropped /events stream that the page reopens (after its 1 s retry) does not restart
    tracking, so the map is not re-centered on a new initial fix: the user's view stays."""

    def open_stream(self, daemon):
        request = urllib.request.Request(daemon.base.rstrip("/") + "/events")
        request.add_header("Authorization", "Bearer " + daemon.token)
        request.add_header("Accept", "text/event-stream")
        return urllib.request.urlopen(request, timeout=30)

    def read_fixes(self, stream, count):
        fixes = 0
        while fixes < count:
            line = stream.readline()
            self.assertTrue(line, "the stream ended")
            if line.startswith(b"data: ") and json.loads(line[6:]).get("class") == "TPV":
                fixes += 1

    def test_a_reopened_stream_keeps_the_users_view(self):
        daemon = Daemon("simulate?rate=4&speed=15")
        try:
            first = self.open_stream(daemon)
            self.read_fixes(first, 2)
            daemon.ctl("center", "--", "10", "20")  # the user's view; mode none
            first.close()
            time.sleep(1.0)  # the page's retry interval
            second = self.open_stream(daemon)
            self.read_fixes(second, 6)
            state = daemon.map_state()
            second.close()
            self.assertEqual((state["center"]["lat"], state["center"]["lon"]), (10, 20), state)
            self.assertEqual(state["mode"], "none")
        finally:
            daemon.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
