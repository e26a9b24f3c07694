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

      var state = { mode: 'none', fix: null, trail: [], annotations: new Map(), events: 0, lastEventId: null, view: null };
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

      function showFix(tpv) {
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

      function titleElement(annotation) {
        var label = document.createElement('span');
        label.className = 'annotation-title';
        label.dataset.annotationId = annotation.id;
        label.textContent = annotation.title || annotation.id;
        return label;
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
          var text = annotation.title || annotation.id;
          if (entry) {
            // Only what changed is touched: a MAP event lists every annotation, and moving a
            // marker or writing its label makes Leaflet lay out its tooltip again.
            if (entry.lat !== annotation.lat || entry.lon !== annotation.lon) {
              entry.marker.setLatLng(where);
              entry.lat = annotation.lat;
              entry.lon = annotation.lon;
            }
            if (entry.text !== text) {
              entry.label.textContent = text;
              entry.text = text;
            }
          } else {
            var label = titleElement(annotation);
            var marker = L.circleMarker(where, { radius: 6, className: 'annotation' }).addTo(map);
            marker.bindTooltip(label, { permanent: true, direction: 'right', offset: [8, 0] });
            state.annotations.set(annotation.id, { marker: marker, label: label, lat: annotation.lat, lon: annotation.lon, text: text });
          }
        });
        state.annotations.forEach(function (entry, id) {
          if (!seen.has(id)) { map.removeLayer(entry.marker); state.annotations.delete(id); }
        });
      }

      function showMode(mode) {
        state.mode = mode;
        document.querySelectorAll('button.mode').forEach(function (button) {
          button.classList.toggle('active', button.dataset.mode === mode);
        });
        updateHeading();
      }

      function showMap(event) {
        if (typeof event.mode === 'string') showMode(event.mode);
        if (Array.isArray(event.annotations)) showAnnotations(event.annotations);
        if (event.center && typeof event.zoom === 'number') applyView(event.center, event.zoom);
      }

      function handleEvent(event) {
        state.events += 1;
        switch (event.class) {
          case 'TPV': showFix(event); break;
          case 'MAP': showMap(event); break;
          case 'BACKEND': setStatus('backend ' + event.state); break;
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

      window.locationdMap = { map: map, state: state, user: user, accuracy: accuracy, heading: heading };
      connect();
    })();

    """#
}
