/// The map page: HTML with no inline script or style, its script and its style sheet.
///
/// The script reads the token from the URL's fragment (`#token=...`, never sent to the server),
/// keeps it in `sessionStorage` and removes it from the address bar. It reads `/events` with
/// `fetch` (an `EventSource` cannot send the `Authorization` header) and reconnects after a
/// second with `Last-Event-ID`. Every text that comes from a user (annotation ids and titles)
/// reaches the page through `textContent`, never `innerHTML`.
enum WebPage {
  static let html = """
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>locationd map</title>
    <link rel="stylesheet" href="/leaflet/leaflet.css">
    <link rel="stylesheet" href="/map.css">
    <script src="/leaflet/leaflet.js" defer></script>
    <script src="/map.js" defer></script>
    </head>
    <body data-tiles="@TILES@" data-attribution="@ATTRIBUTION@">
    <div id="map"></div>
    <div id="panel" aria-label="current fix">
    <dl>
    <dt>Position</dt><dd id="fix-position">no fix</dd>
    <dt>Accuracy</dt><dd id="fix-accuracy">unknown</dd>
    <dt>Altitude</dt><dd id="fix-altitude">unknown</dd>
    <dt>Speed</dt><dd id="fix-speed">unknown</dd>
    <dt>Course</dt><dd id="fix-course">unknown</dd>
    <dt>Fix age</dt><dd id="fix-age">no fix</dd>
    <dt>Backend</dt><dd id="backend-state">unknown</dd>
    </dl>
    </div>
    <div id="controls">
    <button type="button" id="center-on-me">Center on me</button>
    <button type="button" class="mode" data-mode="none">None</button>
    <button type="button" class="mode" data-mode="follow">Follow</button>
    <button type="button" class="mode" data-mode="followWithHeading">Follow with heading</button>
    <span id="status" role="status">connecting</span>
    </div>
    </body>
    </html>

    """

  static let style = """
    html, body { height: 100%; margin: 0; font: 14px system-ui, sans-serif; }
    #map { position: absolute; top: 0; bottom: 40px; left: 0; right: 0; background: #e8e4d8; }
    #controls { position: absolute; bottom: 0; left: 0; right: 0; height: 40px; display: flex;
      align-items: center; gap: 6px; padding: 0 8px; background: #fafafa; border-top: 1px solid #ccc; }
    #controls button.active { background: #2a6fdb; color: #fff; }
    #status { margin-left: auto; color: #555; }
    .user-location { fill: #2a6fdb; fill-opacity: 1; stroke: #fff; stroke-width: 3; }
    .user-accuracy { fill: #2a6fdb; fill-opacity: 0.15; stroke: #2a6fdb; stroke-opacity: 0.4; stroke-width: 1; }
    .user-heading { fill: #2a6fdb; fill-opacity: 0.6; stroke: none; }
    .trail { stroke: #d0343a; stroke-width: 3; stroke-opacity: 0.7; fill: none; }
    .annotation { fill: #f2a900; fill-opacity: 1; stroke: #333; stroke-width: 1; }
    .annotation-title { font-weight: 600; }
    #panel { position: absolute; top: 8px; right: 8px; z-index: 1000; background: rgba(255, 255, 255, 0.92);
      border: 1px solid #bbb; border-radius: 4px; padding: 4px 8px; font-size: 12px; max-width: 46%; }
    #panel dl { display: grid; grid-template-columns: auto auto; gap: 1px 8px; margin: 0; }
    #panel dt { color: #555; }
    #panel dd { margin: 0; font-variant-numeric: tabular-nums; overflow-wrap: anywhere; }
    #backend-state[data-state="connected"] { color: #1b7f3a; }
    #backend-state:not([data-state="connected"]) { color: #b3261e; font-weight: 600; }
    .region { stroke-width: 2; fill-opacity: 0.18; }
    .region-inside { stroke: #1b7f3a; fill: #2fa84f; }
    .region-outside { stroke: #666; fill: #999; stroke-dasharray: 6 4; }
    .region-unknown { stroke: #c98a00; fill: #f2b600; stroke-dasharray: 2 4; }
    .region-title { font-style: italic; }
    .region-title[data-state="inside"] { color: #1b7f3a; }
    .region-title[data-state="outside"] { color: #555; }
    .region-title[data-state="unknown"] { color: #8a5d00; }
    .fleet { stroke: #fff; stroke-width: 2; fill-opacity: 1; }
    .fleet-live { fill: #7b2fbf; }
    .fleet-stale { fill: #b9a3cc; stroke: #7b2fbf; stroke-dasharray: 2 2; }
    .fleet-offline { fill: #9e9e9e; fill-opacity: 0.6; stroke: #555; }
    .fleet-age { font-weight: 400; color: #555; margin-left: 4px; }
    .annotation-title[data-fleet-state="stale"], .annotation-title[data-fleet-state="offline"] { color: #777; }
    .annotation-title[data-fleet-state="offline"] { text-decoration: line-through; }

    """

  static let script = #"""
    'use strict';
    (function () {
      var body = document.body;
      var fragment = new URLSearchParams(window.location.hash.slice(1));
      var token = fragment.get('token') || window.sessionStorage.getItem('locationd-token') || '';
      if (fragment.get('token')) {
        window.sessionStorage.setItem('locationd-token', token);
        window.history.replaceState(null, '', window.location.pathname);
      }
      var statusText = document.getElementById('status');
      function setStatus(text) { statusText.textContent = text; }

      var map = L.map('map', { zoomControl: true, attributionControl: true, worldCopyJump: true });
      map.setView([0, 0], 2, { animate: false });
      var tiles = body.dataset.tiles;
      if (tiles && tiles !== 'none') {
        var options = { maxZoom: 19 };
        if (body.dataset.attribution === 'openstreetmap') {
          options.attribution = '&copy; <a href="https://www.openstreetmap.org/copyright">OpenStreetMap</a> contributors';
        }
        L.tileLayer(tiles, options).addTo(map);
      }

      var state = { mode: 'none', fix: null, fixTime: null, trail: [], annotations: new Map(), events: 0, lastEventId: null, view: null };
      var trailLine = L.polyline([], { className: 'trail', interactive: false }).addTo(map);
      var accuracy = L.circle([0, 0], { radius: 1, className: 'user-accuracy', interactive: false });
      var heading = L.polygon([[0, 0], [0, 0], [0, 0]], { className: 'user-heading', interactive: false });
      var user = L.circleMarker([0, 0], { radius: 7, className: 'user-location', interactive: false });
      var applying = false;
      var userMoves = 0;
      // A pan or zoom by the user is under way (from its movestart or zoomstart to its moveend).
      var gesture = false;

      // Sets the view the map state asks for; moves made here are not the user's.
      function applyView(center, zoom) {
        state.view = { lat: center.lat, lon: center.lon, zoom: zoom };
        if (userMoves > 0 || gesture) return;
        var current = map.getCenter();
        if (Math.abs(current.lat - center.lat) < 1e-9 && Math.abs(current.lng - center.lon) < 1e-9 && map.getZoom() === zoom) return;
        applying = true;
        try { map.setView([center.lat, center.lon], zoom, { animate: false }); } finally { applying = false; }
      }

      function headingWedge(lat, lon, track, metres) {
        var toRad = Math.PI / 180;
        function offset(bearing, distance) {
          var dLat = distance * Math.cos(bearing * toRad) / 111320;
          var dLon = distance * Math.sin(bearing * toRad) / (111320 * Math.max(Math.cos(lat * toRad), 0.01));
          return [lat + dLat, lon + dLon];
        }
        return [offset(track - 25, metres * 0.6), offset(track, metres), offset(track + 25, metres * 0.6), [lat, lon]];
      }

      // The status panel: the newest fix in figures and the backend's state as the service
      // reports it (any string: connected, noFix, endOfData...). Text only, through textContent.
      var panel = {
        position: document.getElementById('fix-position'),
        accuracy: document.getElementById('fix-accuracy'),
        altitude: document.getElementById('fix-altitude'),
        speed: document.getElementById('fix-speed'),
        course: document.getElementById('fix-course'),
        age: document.getElementById('fix-age'),
        backend: document.getElementById('backend-state')
      };
      function finite(value) { return typeof value === 'number' && isFinite(value); }
      function showPanel(tpv) {
        var hasPosition = finite(tpv.lat) && finite(tpv.lon) && tpv.mode >= 2;
        panel.position.textContent = hasPosition ? tpv.lat.toFixed(6) + ', ' + tpv.lon.toFixed(6) : 'no fix';
        panel.accuracy.textContent = hasPosition && finite(tpv.eph) ? '\u00b1' + tpv.eph.toFixed(1) + ' m (95%)' : 'unknown';
        if (hasPosition && finite(tpv.altMSL)) panel.altitude.textContent = tpv.altMSL.toFixed(1) + ' m MSL';
        else if (hasPosition && finite(tpv.altHAE)) panel.altitude.textContent = tpv.altHAE.toFixed(1) + ' m HAE';
        else panel.altitude.textContent = 'unknown';
        panel.speed.textContent = hasPosition && finite(tpv.speed)
          ? tpv.speed.toFixed(1) + ' m/s (' + (tpv.speed * 3.6).toFixed(1) + ' km/h)' : 'unknown';
        panel.course.textContent = hasPosition && finite(tpv.track) ? tpv.track.toFixed(1) + '\u00b0 true' : 'unknown';
        // A replayed or simulated fix carries the log's or the simulation's time: its age is
        // counted from its arrival. A live fix's age is counted from its time (UTC).
        var time = typeof tpv.time === 'string' ? Date.parse(tpv.time) : NaN;
        state.fixTime = hasPosition ? (tpv.simulated || !isFinite(time) ? Date.now() : Math.min(time, Date.now())) : null;
        showAge();
      }
      function duration(milliseconds) {
        var seconds = Math.max(0, Math.floor(milliseconds / 1000));
        if (seconds < 120) return seconds + ' s';
        if (seconds < 7200) return Math.floor(seconds / 60) + ' min';
        if (seconds < 172800) return Math.floor(seconds / 3600) + ' h';
        return Math.floor(seconds / 86400) + ' d';
      }
      function showAge() {
        panel.age.textContent = state.fixTime === null ? 'no fix' : duration(Date.now() - state.fixTime);
      }
      function showBackend(event) {
        var text = typeof event.state === 'string' ? event.state : 'unknown';
        if (typeof event.detail === 'string' && event.detail) text += ': ' + event.detail;
        panel.backend.textContent = text;
        panel.backend.dataset.state = typeof event.state === 'string' ? event.state : '';
      }

      function showFix(tpv) {
        showPanel(tpv);
        if (typeof tpv.lat !== 'number' || typeof tpv.lon !== 'number') return;
        state.fix = tpv;
        var here = [tpv.lat, tpv.lon];
        user.setLatLng(here);
        if (!map.hasLayer(user)) { accuracy.addTo(map); user.addTo(map); }
        if (typeof tpv.eph === 'number' && tpv.eph > 0) { accuracy.setLatLng(here); accuracy.setRadius(tpv.eph); }
        else { accuracy.setLatLng(here); accuracy.setRadius(0); }
        state.trail.push(here);
        if (state.trail.length > 300) state.trail.shift();
        trailLine.setLatLngs(state.trail);
        updateHeading();
      }

      function updateHeading() {
        var tpv = state.fix;
        if (state.mode === 'followWithHeading' && tpv && typeof tpv.track === 'number') {
          var metres = 156543.03392804097 * Math.cos(tpv.lat * Math.PI / 180) / Math.pow(2, map.getZoom()) * 40;
          heading.setLatLngs(headingWedge(tpv.lat, tpv.lon, tpv.track, metres));
          if (!map.hasLayer(heading)) heading.addTo(map);
        } else if (map.hasLayer(heading)) {
          map.removeLayer(heading);
        }
      }

      // Fleet devices from MQTT (docs/mqtt.md): ids in the fleet's namespace ("fleet:"), whose
      // kind says live, stale or offline and whose subtitle ends with the time of their last
      // report (ISO 8601 UTC).
      var fleetKinds = { 'owntracks': 'live', 'owntracks-stale': 'stale', 'owntracks-offline': 'offline' };
      function fleetState(annotation) {
        if (typeof annotation.id !== 'string' || annotation.id.indexOf('fleet:') !== 0) return null;
        return Object.prototype.hasOwnProperty.call(fleetKinds, annotation.kind) ? fleetKinds[annotation.kind] : null;
      }
      function fleetTime(annotation) {
        var words = typeof annotation.subtitle === 'string' ? annotation.subtitle.split(' ') : [];
        var time = words.length ? Date.parse(words[words.length - 1]) : NaN;
        return isFinite(time) ? time : null;
      }
      function fleetAgeText(entry) {
        return entry.fleet + (entry.reported === null ? '' : ', ' + duration(Date.now() - entry.reported));
      }

      function titleElement(annotation) {
        var label = document.createElement('span');
        label.className = 'annotation-title';
        label.dataset.annotationId = annotation.id;
        // The title is the label's first child, a text node (never markup); a fleet device's
        // age follows it in a span of its own.
        label.appendChild(document.createTextNode(''));
        return label;
      }

      // Writes an entry's label and style from its annotation: the title (else the id) as
      // text, and for a fleet device its state and the age of its last report.
      function describe(entry, annotation) {
        var text = annotation.title || annotation.id;
        if (entry.text !== text) { entry.label.firstChild.textContent = text; entry.text = text; }
        var fleet = fleetState(annotation);
        var reported = fleet ? fleetTime(annotation) : null;
        if (entry.fleet !== fleet || entry.reported !== reported) {
          entry.fleet = fleet;
          entry.reported = reported;
          var path = entry.marker.getElement();
          ['fleet', 'fleet-live', 'fleet-stale', 'fleet-offline'].forEach(function (name) {
            if (path) path.classList.remove(name);
          });
          if (fleet) {
            if (path) { path.classList.add('fleet'); path.classList.add('fleet-' + fleet); }
            entry.label.dataset.fleetState = fleet;
            if (!entry.age) {
              entry.age = document.createElement('span');
              entry.age.className = 'fleet-age';
              entry.label.appendChild(entry.age);
            }
            entry.age.textContent = fleetAgeText(entry);
          } else {
            delete entry.label.dataset.fleetState;
            if (entry.age) { entry.label.removeChild(entry.age); entry.age = null; }
          }
        }
      }

      function showAnnotations(list) {
        var seen = new Set();
        list.forEach(function (annotation) {
          // The map state lists the user's location as an annotation too (the reserved id
          // "location"); the marker shows it. Other annotations of kind "location" are shown.
          if (annotation.id === 'location') return;
          seen.add(annotation.id);
          var entry = state.annotations.get(annotation.id);
          var where = [annotation.lat, annotation.lon];
          if (entry) {
            // Only what changed is touched: a MAP event lists every annotation, and moving a
            // marker or writing its label makes Leaflet lay out its tooltip again.
            if (entry.lat !== annotation.lat || entry.lon !== annotation.lon) {
              entry.marker.setLatLng(where);
              entry.lat = annotation.lat;
              entry.lon = annotation.lon;
            }
          } else {
            var label = titleElement(annotation);
            var marker = L.circleMarker(where, { radius: 6, className: 'annotation' }).addTo(map);
            marker.bindTooltip(label, { permanent: true, direction: 'right', offset: [8, 0] });
            entry = { marker: marker, label: label, lat: annotation.lat, lon: annotation.lon, text: null, fleet: null, reported: null, age: null };
            state.annotations.set(annotation.id, entry);
          }
          describe(entry, annotation);
        });
        state.annotations.forEach(function (entry, id) {
          if (!seen.has(id)) { map.removeLayer(entry.marker); state.annotations.delete(id); }
        });
      }

      // Monitored regions: read from /map.geojson (the features of kind "region") when a stream
      // opens and whenever a MAP event lists the change "regions"; one read at a time.
      var regionLayers = new Map();
      var regionsReading = false;
      var regionsAgain = false;
      function readRegions() {
        if (regionsReading) { regionsAgain = true; return; }
        regionsReading = true;
        regionsAgain = false;
        fetch('/map.geojson', { headers: { 'Authorization': 'Bearer ' + token }, cache: 'no-store' }).then(function (response) {
          return response.ok ? response.json() : null;
        }).then(function (collection) {
          if (collection && Array.isArray(collection.features)) showRegions(collection.features);
        }).catch(function () {}).then(function () {
          regionsReading = false;
          if (regionsAgain) readRegions();
        });
      }
      function latLngRing(ring) { return ring.map(function (position) { return [position[1], position[0]]; }); }
      function showRegions(features) {
        var seen = new Set();
        features.forEach(function (feature) {
          var properties = feature.properties || {};
          if (properties.kind !== 'region' || typeof properties.id !== 'string' || !feature.geometry
            || feature.geometry.type !== 'Polygon') return;
          var regionState = ['inside', 'outside', 'unknown'].indexOf(properties.state) >= 0 ? properties.state : 'unknown';
          var key = JSON.stringify([properties.shape, properties.center, properties.radius, feature.geometry.coordinates]);
          seen.add(properties.id);
          var entry = regionLayers.get(properties.id);
          if (entry && entry.key !== key) { map.removeLayer(entry.layer); entry = null; }
          if (!entry) {
            var layer;
            if (properties.shape === 'circle' && Array.isArray(properties.center) && finite(properties.radius)) {
              layer = L.circle([properties.center[1], properties.center[0]], { radius: properties.radius, className: 'region', interactive: false });
            } else {
              layer = L.polygon(feature.geometry.coordinates.map(latLngRing), { className: 'region', interactive: false });
            }
            var label = document.createElement('span');
            label.className = 'region-title';
            label.dataset.regionId = properties.id;
            layer.addTo(map);
            layer.bindTooltip(label, { permanent: true, direction: 'center', className: 'region-label' });
            entry = { layer: layer, label: label, key: key, state: null };
            regionLayers.set(properties.id, entry);
          }
          entry.label.textContent = properties.title || properties.id;
          if (entry.state !== regionState) {
            var path = entry.layer.getElement();
            if (path) {
              path.classList.remove('region-inside', 'region-outside', 'region-unknown');
              path.classList.add('region-' + regionState);
            }
            entry.label.dataset.state = regionState;
            entry.state = regionState;
          }
        });
        regionLayers.forEach(function (entry, id) {
          if (!seen.has(id)) { map.removeLayer(entry.layer); regionLayers.delete(id); }
        });
      }

      // Ages shown (the fix's, each fleet device's) grow by themselves once a second.
      window.setInterval(function () {
        showAge();
        state.annotations.forEach(function (entry) {
          if (entry.fleet && entry.age) entry.age.textContent = fleetAgeText(entry);
        });
      }, 1000);

      function showMode(mode) {
        state.mode = mode;
        document.querySelectorAll('button.mode').forEach(function (button) {
          button.classList.toggle('active', button.dataset.mode === mode);
        });
        updateHeading();
      }

      function showMap(event) {
        // During the user's own pan or zoom, and until the service has taken its mode change, the
        // page's mode is the user's: an event sent before the service took it (still "follow")
        // does not turn following back on under the hand.
        if (typeof event.mode === 'string' && !gesture && userMoves === 0) showMode(event.mode);
        if (Array.isArray(event.annotations)) showAnnotations(event.annotations);
        // A MAP event that replaced unread ones in the stream's queue ("missed") may hide a
        // "regions" change among theirs: read the regions again then too.
        if ((typeof event.missed === 'number' && event.missed > 0)
          || (Array.isArray(event.changes) && event.changes.some(function (change) { return change && change.what === 'regions'; }))) {
          readRegions();
        }
        if (event.center && typeof event.zoom === 'number') applyView(event.center, event.zoom);
      }

      function handleEvent(event) {
        state.events += 1;
        switch (event.class) {
          case 'TPV': showFix(event); break;
          case 'MAP': showMap(event); break;
          case 'BACKEND': showBackend(event); break;
          case 'SHUTDOWN': setStatus('locationd stopped'); break;
          case 'ERROR': setStatus(event.message || 'error'); break;
          default: break;
        }
      }

      function handleBlock(block) {
        var data = '';
        block.split('\n').forEach(function (line) {
          if (line.indexOf('id: ') === 0) state.lastEventId = line.slice(4);
          else if (line.indexOf('data: ') === 0) data += line.slice(6);
        });
        if (!data) return;
        var event;
        try { event = JSON.parse(data); } catch (error) { return; }
        handleEvent(event);
      }

      // The stream now read; replaced when a new token arrives in the address bar.
      var connection = null;

      function connect() {
        var controller = new AbortController();
        connection = controller;
        var headers = { 'Authorization': 'Bearer ' + token, 'Accept': 'text/event-stream' };
        if (state.lastEventId) headers['Last-Event-ID'] = state.lastEventId;
        fetch('/events', { headers: headers, cache: 'no-store', signal: controller.signal }).then(function (response) {
          if (response.status === 401) {
            setStatus('not authorized: open the URL that locationctl web prints');
            return null;
          }
          if (!response.ok || !response.body) throw new Error('HTTP ' + response.status);
          setStatus('connected');
          readRegions();
          var reader = response.body.getReader();
          var decoder = new TextDecoder();
          var buffer = '';
          function pump() {
            return reader.read().then(function (result) {
              if (result.done) throw new Error('stream ended');
              buffer += decoder.decode(result.value, { stream: true });
              var end;
              while ((end = buffer.indexOf('\n\n')) >= 0) {
                handleBlock(buffer.slice(0, end));
                buffer = buffer.slice(end + 2);
              }
              return pump();
            });
          }
          return pump();
        }).catch(function () {
          if (connection !== controller) return; // replaced by a newer stream
          setStatus('reconnecting');
          window.setTimeout(connect, 1000);
        });
      }

      function post(request) {
        return fetch('/api', {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'Authorization': 'Bearer ' + token },
          body: JSON.stringify(request),
          cache: 'no-store'
        }).then(function (response) {
          return response.json().catch(function () { return null; }).then(function (reply) {
            if (!response.ok) setStatus((reply && reply.message) || ('HTTP ' + response.status));
            return reply;
          });
        });
      }

      // A pan or zoom by the user: the new center and zoom go to the service, which turns
      // following off (as panning a MapKit view does). Map events that arrive meanwhile do
      // not move the view back; the last reply sets it.
      // invalidateSize (a window resize) fires move and moveend but no movestart or zoomstart.
      // From the gesture's start, map events no longer re-centre the view and following is
      // turned off, as the first touch of a MapKit view does.
      map.on('movestart zoomstart dragstart', function () {
        if (applying || gesture) return;
        gesture = true;
        if (state.mode !== 'none') {
          showMode('none');
          userMoves += 1;
          post({ cmd: 'mode', mode: 'none' }).then(function () { userMoves -= 1; }, function () { userMoves -= 1; });
        }
      });
      map.on('moveend', function () {
        if (applying || !gesture) return;
        gesture = false;
        var center = map.getCenter().wrap();
        var zoom = map.getZoom();
        userMoves += 1;
        post({ cmd: 'setCenter', lat: center.lat, lon: center.lng }).then(function () {
          return post({ cmd: 'zoom', zoom: zoom });
        }).then(function (reply) {
          userMoves -= 1;
          if (reply && reply.class === 'MAP') showMap(reply);
        }, function () { userMoves -= 1; });
      });
      map.on('zoomend', updateHeading);

      document.getElementById('center-on-me').addEventListener('click', function () {
        post({ cmd: 'center' }).then(function (reply) { if (reply && reply.class === 'MAP') showMap(reply); });
      });
      document.querySelectorAll('button.mode').forEach(function (button) {
        button.addEventListener('click', function () {
          post({ cmd: 'mode', mode: button.dataset.mode }).then(function (reply) {
            if (reply && reply.class === 'MAP') showMap(reply);
          });
        });
      });

      // A new #token= pasted into the open tab (after a restart): take it, take it out of the
      // address bar and open the stream again with it.
      window.addEventListener('hashchange', function () {
        var next = new URLSearchParams(window.location.hash.slice(1)).get('token');
        if (!next) return;
        token = next;
        window.sessionStorage.setItem('locationd-token', token);
        window.history.replaceState(null, '', window.location.pathname);
        state.lastEventId = null;
        if (connection) connection.abort();
        setStatus('connecting');
        connect();
      });

      window.locationdMap = { map: map, state: state, user: user, accuracy: accuracy, heading: heading, regions: regionLayers, showEvent: handleEvent };
      connect();
    })();

    """#
}
