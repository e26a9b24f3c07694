#!/usr/bin/env python3
"""What the map page tells a person, judged by what is on the page in headless Chromium: the
first fix's street-level zoom, the status panel, the monitored regions, the fleet devices from
MQTT by state, and `locationctl web` right after a start.

Run by scripts/web-test (after `swift build`), beside web_map_test.py, whose daemon and browser
helpers it uses. The fleet test runs its own mosquitto on a free port.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from web_map_test import ARTIFACTS, BIN, REPLAY, Daemon, browser  # noqa: E402

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

MARKUP = "<b>Park</b>"


class BrowserTest(unittest.TestCase):
    """One daemon and one browser per test class; screenshots on the way out."""

    backend = "simulate?rate=4&speed=15"
    extra = ()

    @classmethod
    def setUpClass(cls):
        cls.prepare()
        cls.daemon = Daemon(cls.backend, cls.extra)
        cls.driver = browser()
        cls.driver.get(cls.daemon.url)

    @classmethod
    def prepare(cls):
        pass

    @classmethod
    def tearDownClass(cls):
        try:
            os.makedirs(ARTIFACTS, exist_ok=True)
            cls.driver.save_screenshot(os.path.join(ARTIFACTS, "web-status-%s.png" % cls.__name__))
        finally:
            cls.driver.quit()
            cls.daemon.stop()
            cls.cleanup()

    @classmethod
    def cleanup(cls):
        pass

    def wait(self, condition, seconds=30, message=""):
        return WebDriverWait(self.driver, seconds, poll_frequency=0.05).until(condition, message)

    def js(self, script, *arguments):
        return self.driver.execute_script(script, *arguments)

    def text(self, element_id):
        return self.driver.find_element(By.ID, element_id).text

    def wait_for_fix(self):
        self.wait(lambda d: self.js("return window.locationdMap && window.locationdMap.state.fix !== null"), 30,
                  "no fix reached the page")


class FirstFixAndPanelTests(BrowserTest):
    """A fresh state directory: the view is the default world view until the first fix."""

    def test_1_first_fix_brings_the_default_view_to_street_level(self):
        self.wait_for_fix()
        self.wait(lambda d: self.js("return window.locationdMap.map.getZoom();") == 16, 10,
                  "the first fix left the world view at zoom %r" % self.js("return window.locationdMap.map.getZoom();"))
        self.assertEqual(self.daemon.map_state()["zoom"], 16)
        # The view is on the user: the marker is near the middle of the map.
        offset = self.js(
            "var m = window.locationdMap.map; var p = m.latLngToContainerPoint(window.locationdMap.user.getLatLng());"
            "var s = m.getSize(); return Math.hypot(p.x - s.x / 2, p.y - s.y / 2);")
        self.assertLess(offset, 200)

    def test_2_the_panel_shows_the_fix_in_figures(self):
        self.wait_for_fix()
        # Read the page and the fix it shows in one script, so that both belong to the same fix.
        def consistent(_):
            shown = self.js(
                "var f = window.locationdMap.state.fix; return [f.lat, f.lon, f.eph, f.speed, f.track,"
                " document.getElementById('fix-position').textContent,"
                " document.getElementById('fix-accuracy').textContent,"
                " document.getElementById('fix-speed').textContent,"
                " document.getElementById('fix-course').textContent];")
            return shown if shown[5] == "%.6f, %.6f" % (shown[0], shown[1]) else False
        lat, lon, eph, speed, track, position, accuracy, speed_text, course = self.wait(
            consistent, 10, "the panel does not show the fix's position")
        if eph is not None:
            self.assertEqual(accuracy, "\u00b1%.1f m (95%%)" % eph)
        self.assertEqual(speed_text, "%.1f m/s (%.1f km/h)" % (speed, speed * 3.6))
        self.assertAlmostEqual(speed, 15, delta=0.5)
        self.assertEqual(course, "%.1f\u00b0 true" % track)
        self.assertRegex(self.text("fix-altitude"), r"^-?\d+\.\d m (MSL|HAE)$|^unknown$")
        self.assertRegex(self.text("fix-age"), r"^\d+ s$")
        self.wait(lambda d: self.text("backend-state").split(":")[0] == "connected", 10,
                  "the backend state is not shown: %r" % self.text("backend-state"))
        self.assertEqual(self.driver.find_element(By.ID, "backend-state").get_attribute("data-state"), "connected")

    def test_3_regions_are_drawn_by_state_with_their_titles_as_text(self):
        self.wait_for_fix()
        lat, lon = self.js("var p = window.locationdMap.user.getLatLng(); return [p.lat, p.lng];")
        self.daemon.ctl("region", "add", "near", "circle", str(lat), str(lon), "20000", "--title", "Near")
        self.daemon.ctl("region", "add", "far", "circle", str(lat + 1), str(lon), "500", "--title", "Far")
        ring = [[lon + 0.5, lat - 0.51], [lon + 0.52, lat - 0.51], [lon + 0.52, lat - 0.49],
                [lon + 0.5, lat - 0.49], [lon + 0.5, lat - 0.51]]
        polygon = os.path.join(self.daemon.directory, "park.geojson")
        with open(polygon, "w") as file:
            json.dump({"type": "Polygon", "coordinates": [ring]}, file)
        self.daemon.ctl("region", "add", "park", "polygon", polygon, "--title", MARKUP)

        def region(identifier):
            return self.js(
                "var e = window.locationdMap.regions.get(arguments[0]); if (!e) return null;"
                " var p = e.layer.getElement();"
                " return {state: e.label.dataset.state, text: e.label.textContent, children: e.label.children.length,"
                " classes: p ? p.getAttribute('class') : '', shown: document.body.contains(e.label)};", identifier)

        self.wait(lambda d: (region("near") or {}).get("state") == "inside", 30, "the region around the user is not inside")
        self.wait(lambda d: (region("far") or {}).get("state") == "outside", 30, "the far region is not outside")
        near, far = region("near"), region("far")
        self.assertIn("region-inside", near["classes"])
        self.assertIn("region-outside", far["classes"])
        self.assertEqual((near["text"], far["text"]), ("Near", "Far"))
        self.assertTrue(near["shown"] and far["shown"])
        # A polygon: drawn, its markup title shown as text, never as an element.
        self.wait(lambda d: region("park") is not None, 10, "the polygon was not drawn")
        park = region("park")
        self.assertEqual(park["text"], MARKUP)
        self.assertEqual(park["children"], 0)
        self.assertIn(park["state"], ("inside", "outside", "unknown"))
        self.assertIn("region-" + park["state"], park["classes"])
        self.assertEqual(self.driver.find_elements(By.CSS_SELECTOR, ".leaflet-tooltip b"), [])
        # Live: the far region moved round the user turns inside; a removed region goes.
        self.daemon.ctl("region", "add", "far", "circle", str(lat), str(lon), "30000", "--title", "Far now near")
        self.wait(lambda d: (region("far") or {}).get("state") == "inside", 30, "a replaced region was not redrawn")
        self.assertEqual(region("far")["text"], "Far now near")
        self.daemon.ctl("region", "remove", "near")
        self.wait(lambda d: region("near") is None, 10, "a removed region stayed on the page")


class BackendStateTests(BrowserTest):
    """A replay without loop ends: the panel says so, and the fix's age grows."""

    backend = "replay:%s?speed=20" % REPLAY

    def test_backend_state_and_fix_age(self):
        self.wait(lambda d: self.text("backend-state").startswith("endOfData"), 60,
                  "the end of the log is not shown: %r" % self.text("backend-state"))
        self.assertNotEqual(self.text("fix-position"), "no fix")
        def seconds(_):
            match = re.match(r"^(\d+) s$", self.text("fix-age"))
            return match is not None and int(match.group(1)) >= 2
        self.wait(seconds, 15, "the fix age does not grow: %r" % self.text("fix-age"))
        # Whatever state string the service reports is what the panel shows (text, not markup).
        self.js("window.locationdMap.showEvent({class: 'BACKEND', state: 'noFix', detail: '<i>no fix for 5000 ms</i>'});")
        self.assertEqual(self.text("backend-state"), "noFix: <i>no fix for 5000 ms</i>")
        self.assertEqual(self.driver.find_elements(By.CSS_SELECTOR, "#backend-state i"), [])


def free_port():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


class FleetTests(BrowserTest):
    """Devices from MQTT on the page: live, stale and offline look different and show their age."""

    @classmethod
    def prepare(cls):
        if not shutil.which("mosquitto") and not os.path.exists("/usr/sbin/mosquitto"):
            raise unittest.SkipTest("mosquitto is not installed")
        cls.broker_directory = tempfile.mkdtemp(prefix="locationd-web-mqtt-")
        cls.port = free_port()
        config = os.path.join(cls.broker_directory, "mosquitto.conf")
        with open(config, "w") as file:
            file.write("listener %d 127.0.0.1\nallow_anonymous true\npersistence false\n" % cls.port)
        cls.broker_log = open(os.path.join(cls.broker_directory, "mosquitto.log"), "w")
        cls.broker = subprocess.Popen([shutil.which("mosquitto") or "/usr/sbin/mosquitto", "-c", config],
                                      stdout=cls.broker_log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", cls.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or cls.broker.poll() is not None:
                    raise RuntimeError("mosquitto did not start")
                time.sleep(0.05)
        cls.extra = ("--mqtt", "mqtt://127.0.0.1:%d" % cls.port, "--mqtt-topic", "owntracks/me/phone",
                     "--mqtt-subscribe", "owntracks/+/+", "--mqtt-stale", "5")

    @classmethod
    def cleanup(cls):
        cls.broker.terminate()
        cls.broker.wait(timeout=10)
        cls.broker_log.close()
        shutil.rmtree(cls.broker_directory, ignore_errors=True)

    def publish(self, topic, message):
        subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(self.port), "-t", topic, "-q", "1",
                        "-m", json.dumps(message)], check=True, timeout=30)

    def device(self, topic):
        return self.js(
            "var e = window.locationdMap.state.annotations.get(arguments[0]); if (!e) return null;"
            " var p = e.marker.getElement();"
            " return {state: e.label.dataset.fleetState || null, age: e.age ? e.age.textContent : null,"
            " name: e.label.firstChild.textContent, classes: p ? p.getAttribute('class') : ''};", topic)

    def test_devices_are_styled_by_state_with_their_age(self):
        self.wait_for_fix()
        now = int(time.time())
        self.publish("owntracks/ann/phone", {"_type": "location", "lat": 52.52, "lon": 13.40, "tst": now, "tid": "AN"})
        self.publish("owntracks/bob/car", {"_type": "location", "lat": 52.53, "lon": 13.41, "tst": now - 3600, "tid": "BO"})
        self.publish("owntracks/cy/bike", {"_type": "location", "lat": 52.54, "lon": 13.42, "tst": now, "tid": "CY"})
        self.publish("owntracks/cy/bike", {"_type": "lwt", "tst": now})
        ids = {"ann": "fleet:owntracks/ann/phone", "bob": "fleet:owntracks/bob/car", "cy": "fleet:owntracks/cy/bike"}
        self.wait(lambda d: all(self.device(i) for i in ids.values()), 30, "the fleet did not reach the page")
        self.wait(lambda d: (self.device(ids["cy"]) or {}).get("state") == "offline", 30, "the Last Will was not shown")
        ann, bob, cy = (self.device(ids[name]) for name in ("ann", "bob", "cy"))
        self.assertEqual((ann["name"], bob["name"], cy["name"]), ("AN", "BO", "CY"))
        self.assertEqual(bob["state"], "stale")
        self.assertIn("fleet-stale", bob["classes"])
        self.assertRegex(bob["age"], r"^stale, (59|60|61) min$")
        self.assertIn("fleet-offline", cy["classes"])
        self.assertRegex(cy["age"], r"^offline, \d+ s$")
        if ann["state"] == "live":
            self.assertIn("fleet-live", ann["classes"])
            self.assertRegex(ann["age"], r"^live, \d+ s$")
        # The live device goes silent: after mqtt-stale (5 s) it turns stale on the page.
        self.wait(lambda d: (self.device(ids["ann"]) or {}).get("state") == "stale", 30, "a silent device stayed live")
        self.assertIn("fleet-stale", self.device(ids["ann"])["classes"])
        self.assertNotIn("fleet-live", self.device(ids["ann"])["classes"])
        # The user's own annotation with a device's topic as its id is its own: the fleet never replaces it.
        lat, lon = self.js("var p = window.locationdMap.user.getLatLng(); return [p.lat, p.lng];")
        self.daemon.ctl("annotate", "owntracks/ann/phone", str(lat), str(lon), "Mine")
        self.publish("owntracks/ann/phone", {"_type": "location", "lat": 52.6, "lon": 13.5, "tst": int(time.time()), "tid": "AN"})
        self.wait(lambda d: (self.device(ids["ann"]) or {}).get("state") == "live", 30, "a new report did not make the device live")
        mine = self.device("owntracks/ann/phone")
        self.assertEqual((mine["name"], mine["state"]), ("Mine", None))


class StartTests(unittest.TestCase):
    """The socket answers only once every front-end is up: a status asked the moment the
    socket file appears already names the page."""

    def test_status_at_once_after_start_names_the_page(self):
        group = subprocess.run(["id", "-gn"], capture_output=True, text=True, check=True).stdout.strip()
        for run in range(10):
            directory = tempfile.mkdtemp(prefix="locationd-web-start-")
            path = os.path.join(directory, "locationd.sock")
            state = os.path.join(directory, "state")
            os.mkdir(state, 0o700)
            log = open(os.path.join(directory, "locationd.log"), "w")
            process = subprocess.Popen(
                [os.path.join(BIN, "locationd"), "--backend", "simulate", "--socket", path, "--state-dir", state,
                 "--group", group, "--http", "127.0.0.1:0", "--http-tiles", "none"],
                stdout=log, stderr=subprocess.STDOUT)
            try:
                deadline = time.monotonic() + 30
                connection = socket.socket(socket.AF_UNIX)
                while True:
                    try:
                        connection.connect(path)
                        break
                    except OSError:
                        if time.monotonic() > deadline or process.poll() is not None:
                            self.fail("locationd did not start: " + open(log.name).read())
                        time.sleep(0.001)
                connection.settimeout(60)
                connection.sendall(b'{"cmd":"status"}\n')
                reply = json.loads(connection.makefile("rb").readline())
                connection.close()
                self.assertEqual(reply.get("class"), "STATUS", reply)
                self.assertIn("http", reply, "run %d: status answered before the page was served: %r" % (run, reply))
                web = subprocess.run([os.path.join(BIN, "locationctl"), "--socket", path, "--json", "web"],
                                     capture_output=True, text=True, timeout=60)
                self.assertEqual(web.returncode, 0, web.stderr)
                self.assertIn("#token=", json.loads(web.stdout)["url"])
            finally:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                log.close()
                shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
