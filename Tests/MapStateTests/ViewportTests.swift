import MapState
import Testing
import LocationModel

@Suite("Viewport math (Web Mercator)")
struct ViewportTests {
  @Test func metresPerPointAtKnownValues() {
    // OSM wiki "Zoom levels": zoom 15 on the equator is 4.777 m per pixel, at 60 degrees half that.
    let equator = WebMercator.metresPerPoint(latitude: 0, zoom: 15)
    let sixty = WebMercator.metresPerPoint(latitude: 60, zoom: 15)
    #expect(abs(equator - 4.777) < 0.0005)
    #expect(abs(sixty - 2.389) < 0.0005)
    #expect(abs(equator - 156_543.033_928_040_97 / 32_768) < 1e-12)
    #expect(abs(WebMercator.metresPerPoint(latitude: 0, zoom: 0) - 156_543.033_928_040_97) < 1e-9)
    // A 256-point tile at zoom 15 on the equator is 1223 m wide.
    #expect(abs(equator * 256 - 1222.99) < 0.01)
  }

  @Test func zoomZeroTileCoversTheWorld() {
    let viewport = Viewport(
      center: Coordinate(latitude: 0, longitude: 0), zoom: 0,
      size: ViewportSize(width: 256, height: 256))
    let span = viewport.span
    #expect(abs(span.longitudeDelta - 360) < 1e-9)
    #expect(abs(span.latitudeDelta - 2 * WebMercator.maxLatitude) < 1e-6)
  }

  @Test(arguments: [0.0, 1.5, 3, 8.25, 15, 18.5, 21.75])
  func longitudeSpanRoundTrips(zoom: Double) {
    let size = ViewportSize(width: 800, height: 600)
    for latitude in [-60.0, 0, 35.5, 60, 75] {
      let viewport = Viewport(
        center: Coordinate(latitude: latitude, longitude: 10), zoom: zoom, size: size)
      let span = viewport.span
      if span.longitudeDelta < 360 {
        let back = Viewport.zoom(forLongitudeDelta: span.longitudeDelta, width: size.width)
        #expect(abs(back - zoom) < 1e-9, "lon span zoom \(zoom) lat \(latitude) -> \(back)")
      }
      let metric = viewport.metricSpan
      let byWidth = Viewport.zoom(
        forMetres: metric.longitudinalMetres, latitude: latitude, points: size.width)
      let byHeight = Viewport.zoom(
        forMetres: metric.latitudinalMetres, latitude: latitude, points: size.height)
      #expect(abs(byWidth - zoom) < 1e-9)
      #expect(abs(byHeight - zoom) < 1e-9)
    }
  }

  @Test(arguments: [3.0, 8.5, 15, 21.75])
  func latitudeSpanRoundTrips(zoom: Double) {
    let size = ViewportSize(width: 800, height: 600)
    for latitude in [-60.0, 0, 35.5, 60, 75] {
      let viewport = Viewport(
        center: Coordinate(latitude: latitude, longitude: -3), zoom: zoom, size: size)
      let span = viewport.span
      let back = Viewport.zoom(
        forLatitudeDelta: span.latitudeDelta, centerLatitude: latitude, height: size.height)
      #expect(abs(back - zoom) < 1e-9, "lat span zoom \(zoom) lat \(latitude) -> \(back)")
      // A MapKit-style region of that span fits back to the same zoom level.
      let fitted = Viewport.zoom(fitting: viewport.region, size: size)
      #expect(abs(fitted - zoom) < 1e-9)
    }
  }

  @Test func latitudeSpanIsAsymmetricAwayFromEquator() {
    // Same number of points above and below the center: more degrees towards the equator.
    let viewport = Viewport(
      center: Coordinate(latitude: 60, longitude: 0), zoom: 4,
      size: ViewportSize(width: 800, height: 600))
    let bounds = viewport.bounds
    #expect(60 - bounds.south > bounds.north - 60)
    #expect(abs((bounds.north - bounds.south) - viewport.span.latitudeDelta) < 1e-9)
  }

  @Test func regionFitUsesTheTighterSpan() {
    let size = ViewportSize(width: 800, height: 600)
    // 800 points at zoom 10 are 800 * 360 / 262144 degrees of longitude.
    let longitudeDelta = 800 * 360 / (256 * 1024.0)
    let wide = MapRegion(
      center: Coordinate(latitude: 0, longitude: 0),
      span: CoordinateSpan(latitudeDelta: 0.01, longitudeDelta: longitudeDelta))
    #expect(abs(Viewport.zoom(fitting: wide, size: size) - 10) < 1e-9)
    let tall = MapRegion(
      center: Coordinate(latitude: 0, longitude: 0),
      span: CoordinateSpan(latitudeDelta: 2, longitudeDelta: 0.001))
    let latitudeZoom = Viewport.zoom(forLatitudeDelta: 2, centerLatitude: 0, height: 600)
    #expect(abs(Viewport.zoom(fitting: tall, size: size) - latitudeZoom) < 1e-12)
    #expect(latitudeZoom < 10)
  }

  @Test func metricRegionMatchesGoogleZoom() {
    // 4.777 m/pt at zoom 15 on the equator: 800 points are 3821.85 m.
    let size = ViewportSize(width: 800, height: 600)
    let origin = Coordinate(latitude: 0, longitude: 0)
    let metres = 800 * 156_543.033_928_040_97 / 32_768
    // The wider of the two distances decides: 1 m north-south fits easily at zoom 15.
    let fitted = Viewport.zoom(
      fitting: MetricSpan(latitudinalMetres: 1, longitudinalMetres: metres), center: origin,
      size: size)
    #expect(abs(fitted - 15) < 1e-9)
    // At 60 degrees a point at the same zoom covers half the ground: the same metres fit one level lower.
    let north = Viewport.zoom(
      fitting: MetricSpan(latitudinalMetres: 1, longitudinalMetres: metres),
      center: Coordinate(latitude: 60, longitude: 0),
      size: size)
    #expect(abs(north - 14) < 1e-9)
    // Centimetres would need more than zoom 22: clamped; a continent needs less than 0: clamped.
    let tiny = Viewport.zoom(
      fitting: MetricSpan(latitudinalMetres: 0.01, longitudinalMetres: 0.01), center: origin,
      size: size)
    #expect(tiny == 22)
    let huge = Viewport.zoom(
      fitting: MetricSpan(latitudinalMetres: 1e9, longitudinalMetres: 1e9), center: origin,
      size: size)
    #expect(huge == 0)
  }

  @Test func spansNearThePolesClamp() {
    let size = ViewportSize(width: 800, height: 600)
    let viewport = Viewport(center: Coordinate(latitude: 84, longitude: 0), zoom: 3, size: size)
    let bounds = viewport.bounds
    #expect(abs(bounds.north - WebMercator.maxLatitude) < 1e-8)
    #expect(viewport.span.latitudeDelta < 90)
    #expect(abs(viewport.span.latitudeDelta - (WebMercator.maxLatitude - bounds.south)) < 1e-9)
    // A center beyond the limit is clamped, and so is the scale.
    let polar = Viewport(center: Coordinate(latitude: 89.9, longitude: 0), zoom: 5, size: size)
    #expect(polar.center.latitude == WebMercator.maxLatitude)
    #expect(
      WebMercator.metresPerPoint(latitude: 89.9, zoom: 5)
        == WebMercator.metresPerPoint(latitude: 85.05112878, zoom: 5))
    let southPole = Viewport(center: Coordinate(latitude: -90, longitude: 0), zoom: 0, size: size)
    #expect(abs(southPole.span.latitudeDelta - 2 * WebMercator.maxLatitude) < 1e-6)
    #expect(WebMercator.latitude(mercatorY: 100) == WebMercator.maxLatitude)
  }

  @Test func boundsWrapAcrossTheAntimeridian() {
    let viewport = Viewport(
      center: Coordinate(latitude: 0, longitude: 179), zoom: 7,
      size: ViewportSize(width: 800, height: 600))
    let bounds = viewport.bounds
    #expect(bounds.crossesAntimeridian)
    #expect(bounds.west > 170 && bounds.west < 179)
    #expect(bounds.east > -180 && bounds.east < -170)
    let world = Viewport(
      center: Coordinate(latitude: 0, longitude: 0), zoom: 0,
      size: ViewportSize(width: 800, height: 600))
    #expect(world.bounds.west == -180 && world.bounds.east == 180)
  }

  @Test func projectionAndRotation() {
    var viewport = Viewport(
      center: Coordinate(latitude: 0, longitude: 0), zoom: 1,
      size: ViewportSize(width: 800, height: 600))
    let center = viewport.point(for: Coordinate(latitude: 0, longitude: 0))
    #expect(center.x == 400 && center.y == 300)
    // At zoom 1 the world is 512 points wide: 90 degrees east is 128 points right.
    let east = viewport.point(for: Coordinate(latitude: 0, longitude: 90))
    #expect(abs(east.x - 528) < 1e-9 && abs(east.y - 300) < 1e-9)
    // Heading 90 (east up): the eastern point is straight above the center.
    viewport.setRotation(90)
    let rotated = viewport.point(for: Coordinate(latitude: 0, longitude: 90))
    #expect(abs(rotated.x - 400) < 1e-9 && abs(rotated.y - 172) < 1e-9)
    viewport.setRotation(-90)
    #expect(viewport.rotation == 270)
    viewport.setRotation(720)
    #expect(viewport.rotation == 0)
  }

  @Test func scaleBarUsesOneTwoFive() {
    let bar = SVGSnapshot.scaleBar(metresPerPoint: 4.777, maxLength: 200)
    #expect(bar.metres == 500)
    #expect(bar.label == "500 m")
    #expect(abs(bar.length - 500 / 4.777) < 1e-9)
    // Zoom 4 on the equator: 200 points are 1.96e6 m.
    let km = SVGSnapshot.scaleBar(metresPerPoint: 156_543.03 / 16, maxLength: 200)
    #expect(km.metres == 1_000_000)
    #expect(km.label == "1000 km")
    #expect(SVGSnapshot.scaleBar(metresPerPoint: 0.03, maxLength: 200).label == "5 m")
    #expect(SVGSnapshot.scaleBar(metresPerPoint: 0.003, maxLength: 200).label == "0.5 m")
    #expect(SVGSnapshot.scaleBar(metresPerPoint: 11, maxLength: 200).metres == 2000)
  }
}
