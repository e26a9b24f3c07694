import LocationModel
import Regions

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A picture of the map state as a standalone SVG 1.1 document: no map tiles, just the track,
/// the annotations with labels, the center and a scale bar, projected in Web Mercator
/// (EPSG:3857) for the current viewport (size, zoom, center, rotation).
public enum SVGSnapshot {
  /// A round distance for a scale bar: the 1-2-5 series.
  public struct ScaleBar: Sendable, Hashable {
    /// Distance the bar stands for, metres (1, 2 or 5 times a power of ten).
    public var metres: Double
    /// Length of the bar, points.
    public var length: Double
    /// Label, e.g. `"500 m"`, `"2 km"`.
    public var label: String
  }

  /// The longest 1-2-5 distance whose bar fits in `maxLength` points at `metresPerPoint`.
  ///
  /// `metresPerPoint` and `maxLength` must be finite and positive; otherwise 1 m is returned.
  public static func scaleBar(metresPerPoint: Double, maxLength: Double) -> ScaleBar {
    let maxMetres = metresPerPoint * maxLength
    guard maxMetres.isFinite, maxMetres > 0 else {
      return ScaleBar(
        metres: 1, length: 1 / max(metresPerPoint, .leastNonzeroMagnitude), label: "1 m")
    }
    let exponent = floor(log10(maxMetres))
    let power = pow(10, exponent)
    var metres = power
    for factor in [5.0, 2.0, 1.0] where factor * power <= maxMetres {
      metres = factor * power
      break
    }
    let label: String
    if metres >= 1000 {
      label = TextFormat.fixed(metres / 1000, 0) + " km"
    } else {
      label = TextFormat.fixed(metres, exponent < 0 ? Int(-exponent) : 0) + " m"
    }
    return ScaleBar(metres: metres, length: metres / metresPerPoint, label: label)
  }

  /// The SVG document for `state`: deterministic (fixed element order, 2-decimal point
  /// coordinates), well-formed XML with every text escaped.
  ///
  /// Elements: `<title>`, a background `<rect class="background">`, each monitored region as
  /// `<g class="region" data-id=... data-state=...>` holding a `<circle>` (a circle region, its
  /// radius in points at the region's latitude) or a `<path>` (a polygon: one closed subpath per
  /// ring, holes cut out with `fill-rule="evenodd"`, see ``ringPoints(_:viewport:)``) and a
  /// `<text>` label (title, else or when empty the id); the
  /// fill says the state (inside green, outside grey, unknown amber). Then the track as
  /// `<polyline class="track">` (2 or more points), each annotation as
  /// `<g class="annotation" data-id=...>` with a `<circle>` and a `<text>` label (and a second
  /// `<text class="subtitle">`), the center as `<g class="center">` (two crossing lines), a
  /// north arrow `<g class="north">`, and `<g class="scale-bar" data-metres=...>` with a line and
  /// a `<text>` label. The current location (kind `"location"`) is drawn as a blue dot.
  ///
  /// A region whose drawing lies wholly outside the viewport (its bounding box in points: a
  /// circle's center plus and minus its radius, a polygon's projected vertices) is left out.
  public static func document(for state: MapRenderState) -> String {
    (try? document(for: state, maxBytes: nil)) ?? ""
  }

  /// ``document(for:)``, refused before it is built when it would be longer than `maxBytes`
  /// bytes of UTF-8: first from a cheap lower bound (the regions in view, counted from their
  /// vertices; the annotations' texts; the track's points), then while building (it stops as
  /// soon as the text reaches `maxBytes`).
  ///
  /// - Throws: ``RenderTooLarge`` (format `svg`) naming the largest part.
  public static func document(for state: MapRenderState, maxBytes: Int?) throws(RenderTooLarge) -> String {
    let viewport = state.viewport
    let visible = state.regions.filter { isInView($0.region.shape, viewport: viewport) }
    let regionBytes = visible.reduce(0) { $0 + RenderEstimate.svgBytes($1.region) }
    let annotationBytes = state.snapshot.annotations.reduce(0) {
      $0 + 150 + $1.id.utf8.count + $1.title.utf8.count + ($1.subtitle?.utf8.count ?? 0)
    }
    let trackBytes = 12 * state.track.count
    let part = RenderEstimate.largest(regions: regionBytes, annotations: annotationBytes, track: trackBytes)
    func tooLarge(_ bytes: Int) -> RenderTooLarge {
      RenderTooLarge(
        format: "svg", bytesAtLeast: bytes, limit: maxBytes ?? 0, regions: visible.count, part: part)
    }
    let estimate = 1000 + regionBytes + annotationBytes + trackBytes
    if let maxBytes, estimate > maxBytes { throw tooLarge(estimate) }
    var used = 0
    let width = viewport.size.width
    let height = viewport.size.height
    let f = { (value: Double) in TextFormat.fixed(value, 2) }
    let snapshot = state.snapshot
    var lines: [String] = []
    lines.append("<?xml version=\"1.0\" encoding=\"UTF-8\"?>")
    lines.append(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"\(f(width))\" height=\"\(f(height))\" "
        + "viewBox=\"0 0 \(f(width)) \(f(height))\" font-family=\"sans-serif\" font-size=\"12\">")
    lines.append(
      "<title>Map: center \(TextFormat.fixed(viewport.center.latitude, 6)), \(TextFormat.fixed(viewport.center.longitude, 6)), "
        + "zoom \(f(viewport.zoom)), rotation \(f(viewport.rotation)), mode \(snapshot.mode.rawValue)</title>"
    )
    lines.append(
      "<rect class=\"background\" x=\"0\" y=\"0\" width=\"\(f(width))\" height=\"\(f(height))\" fill=\"#f4f1ea\"/>"
    )

    for status in visible {
      let element = regionElement(status, viewport: viewport)
      if let maxBytes {
        used += element.utf8.count + 1
        if used > maxBytes { throw tooLarge(used) }
      }
      lines.append(element)
    }

    if state.track.count >= 2 {
      let points = state.track.map { coordinate -> String in
        let p = viewport.point(for: coordinate)
        return "\(f(p.x)),\(f(p.y))"
      }
      lines.append(
        "<polyline class=\"track\" points=\"\(points.joined(separator: " "))\" fill=\"none\" stroke=\"#1f6feb\" "
          + "stroke-width=\"3\" stroke-linejoin=\"round\" stroke-linecap=\"round\"/>")
    }

    for annotation in snapshot.annotations {
      let p = viewport.point(for: annotation.coordinate)
      let isLocation =
        annotation.kind == Annotation.locationID && annotation.id == Annotation.locationID
      let fill = isLocation ? "#1f6feb" : "#d1242f"
      let radius = isLocation ? "7" : "5"
      var group =
        "<g class=\"annotation\" data-id=\"\(TextFormat.xmlEscaped(annotation.id))\">"
        + "<circle cx=\"\(f(p.x))\" cy=\"\(f(p.y))\" r=\"\(radius)\" fill=\"\(fill)\" stroke=\"#ffffff\" stroke-width=\"2\"/>"
        + "<text x=\"\(f(p.x + 9))\" y=\"\(f(p.y + 4))\" fill=\"#1b1f24\">\(TextFormat.xmlEscaped(annotation.title))</text>"
      if let subtitle = annotation.subtitle {
        group +=
          "<text class=\"subtitle\" x=\"\(f(p.x + 9))\" y=\"\(f(p.y + 18))\" fill=\"#57606a\" font-size=\"10\">"
          + "\(TextFormat.xmlEscaped(subtitle))</text>"
      }
      lines.append(group + "</g>")
    }

    let cx = width / 2
    let cy = height / 2
    lines.append(
      "<g class=\"center\" stroke=\"#1b1f24\" stroke-width=\"1.5\">"
        + "<line x1=\"\(f(cx - 10))\" y1=\"\(f(cy))\" x2=\"\(f(cx + 10))\" y2=\"\(f(cy))\"/>"
        + "<line x1=\"\(f(cx))\" y1=\"\(f(cy - 10))\" x2=\"\(f(cx))\" y2=\"\(f(cy + 10))\"/></g>")

    // North arrow in the top-right corner, turned by the map rotation.
    let nx = width - 24
    let ny = 28.0
    lines.append(
      "<g class=\"north\" transform=\"rotate(\(f(-viewport.rotation)) \(f(nx)) \(f(ny)))\">"
        + "<path d=\"M \(f(nx)) \(f(ny - 12)) L \(f(nx + 6)) \(f(ny + 8)) L \(f(nx)) \(f(ny + 4)) "
        + "L \(f(nx - 6)) \(f(ny + 8)) Z\" fill=\"#1b1f24\"/>"
        + "<text x=\"\(f(nx))\" y=\"\(f(ny - 15))\" text-anchor=\"middle\">N</text></g>")

    let bar = scaleBar(metresPerPoint: viewport.metresPerPoint, maxLength: width / 4)
    let x0 = 20.0
    let y0 = height - 20
    let x1 = x0 + bar.length
    lines.append(
      "<g class=\"scale-bar\" data-metres=\"\(TextFormat.fixed(bar.metres, bar.metres < 1 ? 6 : 0))\" stroke=\"#1b1f24\" stroke-width=\"2\">"
        + "<line x1=\"\(f(x0))\" y1=\"\(f(y0))\" x2=\"\(f(x1))\" y2=\"\(f(y0))\"/>"
        + "<line x1=\"\(f(x0))\" y1=\"\(f(y0 - 5))\" x2=\"\(f(x0))\" y2=\"\(f(y0 + 5))\"/>"
        + "<line x1=\"\(f(x1))\" y1=\"\(f(y0 - 5))\" x2=\"\(f(x1))\" y2=\"\(f(y0 + 5))\"/>"
        + "<text x=\"\(f((x0 + x1) / 2))\" y=\"\(f(y0 - 8))\" text-anchor=\"middle\" stroke=\"none\" fill=\"#1b1f24\">"
        + "\(bar.label)</text></g>")
    lines.append("</svg>")
    let text = lines.joined(separator: "\n") + "\n"
    if let maxBytes, text.utf8.count > maxBytes { throw tooLarge(text.utf8.count) }
    return text
  }

  /// The points of a ring's path in the viewport. Longitudes are unwrapped along the ring (each
  /// vertex the copy nearest the previous one, not the center), so a ring across the antimeridian
  /// stays one piece. A ring that goes once around a pole (its longitudes add up to a full turn,
  /// e.g. a ring along 85 degrees N) is closed through the map's edge at that pole (Web Mercator's
  /// limit, ``WebMercator/maxLatitude``), so that the area it encloses, up to the pole, is filled
  /// instead of a flat line.
  static func ringPoints(_ ring: [Coordinate], viewport: Viewport) -> [(x: Double, y: Double)] {
    guard let first = ring.first else { return [] }
    let world = WebMercator.worldSize(zoom: viewport.zoom)
    let centerX = WebMercator.x(longitude: viewport.center.longitude)
    let centerY = WebMercator.y(latitude: viewport.center.latitude)
    let angle = -viewport.rotation * .pi / 180
    func project(_ xWorld: Double, _ yWorld: Double) -> (x: Double, y: Double) {
      let dx = (xWorld - centerX) * world
      let dy = (yWorld - centerY) * world
      return (
        viewport.size.width / 2 + dx * cos(angle) - dy * sin(angle),
        viewport.size.height / 2 + dx * sin(angle) + dy * cos(angle)
      )
    }
    var x = WebMercator.x(longitude: first.longitude)
    x -= (x - centerX).rounded()  // the copy nearest the center
    var unwrapped: [(x: Double, y: Double)] = [(x, WebMercator.y(latitude: first.latitude))]
    var previous = WebMercator.x(longitude: first.longitude)
    for vertex in ring.dropFirst() + [first] {
      let next = WebMercator.x(longitude: vertex.longitude)
      var step = next - previous
      step -= step.rounded()  // the shorter way: -0.5...0.5 of the world
      x += step
      previous = next
      unwrapped.append((x, WebMercator.y(latitude: vertex.latitude)))
    }
    let closing = unwrapped.removeLast()
    let turn = closing.x - unwrapped[0].x
    guard abs(turn) > 0.5 else { return unwrapped.map { project($0.x, $0.y) } }
    // Around a pole: on to the first vertex's copy a turn away, out to the pole's edge, back
    // along it, and down to the start.
    let north = ring.reduce(0) { $0 + $1.latitude } > 0
    let edge = WebMercator.y(latitude: north ? WebMercator.maxLatitude : -WebMercator.maxLatitude)
    unwrapped += [closing, (closing.x, edge), (unwrapped[0].x, edge)]
    return unwrapped.map { project($0.x, $0.y) }
  }

  /// Whether any of the shape's drawing can fall inside the viewport: its bounding box in points
  /// (a circle's center plus and minus its radius in points, the points of a polygon's exterior
  /// path, ``ringPoints(_:viewport:)``: the path is drawn straight between them) meets
  /// `0...width` and `0...height`.
  static func isInView(_ shape: RegionShape, viewport: Viewport) -> Bool {
    let width = viewport.size.width
    let height = viewport.size.height
    switch shape {
    case .circle(let center, let radius):
      let p = viewport.point(for: center)
      let metresPerPoint = WebMercator.metresPerPoint(latitude: center.latitude, zoom: viewport.zoom)
      let r = metresPerPoint > 0 ? radius / metresPerPoint : 0
      guard p.x.isFinite, p.y.isFinite, r.isFinite else { return true }
      return p.x + r >= 0 && p.x - r <= width && p.y + r >= 0 && p.y - r <= height
    case .polygon(let exterior, _):
      var minX = Double.infinity
      var maxX = -Double.infinity
      var minY = Double.infinity
      var maxY = -Double.infinity
      for p in ringPoints(exterior, viewport: viewport) {
        guard p.x.isFinite, p.y.isFinite else { return true }
        minX = min(minX, p.x)
        maxX = max(maxX, p.x)
        minY = min(minY, p.y)
        maxY = max(maxY, p.y)
      }
      return maxX >= 0 && minX <= width && maxY >= 0 && minY <= height
    }
  }

  /// One region's `<g class="region">` (see ``document(for:)``).
  static func regionElement(_ status: RegionStatus, viewport: Viewport) -> String {
    let f = { (value: Double) in TextFormat.fixed(value, 2) }
    let region = status.region
    let colour: String
    switch status.state {
    case .inside: colour = "#2da44e"
    case .outside: colour = "#6e7781"
    case .unknown: colour = "#bf8700"
    }
    let paint = "fill=\"\(colour)\" fill-opacity=\"0.2\" stroke=\"\(colour)\" stroke-width=\"2\""
    var group =
      "<g class=\"region\" data-id=\"\(TextFormat.xmlEscaped(region.id))\" data-state=\"\(status.state.rawValue)\">"
    let label: (x: Double, y: Double)
    switch region.shape {
    case .circle(let center, let radius):
      let p = viewport.point(for: center)
      let metresPerPoint = WebMercator.metresPerPoint(latitude: center.latitude, zoom: viewport.zoom)
      let r = metresPerPoint > 0 ? radius / metresPerPoint : 0
      group += "<circle cx=\"\(f(p.x))\" cy=\"\(f(p.y))\" r=\"\(f(r))\" \(paint)/>"
      label = (p.x, p.y - r - 4)
    case .polygon(let exterior, let holes):
      var d: [String] = []
      for ring in [exterior] + holes {
        let points = ringPoints(ring, viewport: viewport)
        guard let first = points.first else { continue }
        d.append(
          "M \(f(first.x)) \(f(first.y)) " + points.dropFirst().map { "L \(f($0.x)) \(f($0.y))" }.joined(separator: " ")
            + " Z")
      }
      group += "<path d=\"\(d.joined(separator: " "))\" fill-rule=\"evenodd\" \(paint)/>"
      let points = exterior.map { viewport.point(for: $0) }
      let top = points.min { $0.y < $1.y } ?? (0, 0)
      label = (top.x, top.y - 4)
    }
    // An empty title is no label: the id stands in, as for no title.
    let title = region.title.flatMap { $0.isEmpty ? nil : $0 } ?? region.id
    group +=
      "<text x=\"\(f(label.x))\" y=\"\(f(label.y))\" text-anchor=\"middle\" fill=\"#1b1f24\">"
      + "\(TextFormat.xmlEscaped(title))</text></g>"
    return group
  }
}
