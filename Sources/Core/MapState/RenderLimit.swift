import LocationModel
import Regions

/// A rendering of the map refused before it was built, because its text would be longer than
/// the caller's limit (a reply a client could never receive).
///
/// ``part`` names what makes it large (`regions`, `annotations` or `track`), so the message can
/// say what to remove or ask for instead.
public struct RenderTooLarge: Error, Sendable, Hashable, CustomStringConvertible {
  /// The format asked for: `geojson` or `svg`.
  public var format: String
  /// The least length the rendering would have, bytes of UTF-8 (an estimate that never exceeds
  /// the real length, or the length reached when building stopped).
  public var bytesAtLeast: Int
  /// The limit, bytes of UTF-8.
  public var limit: Int
  /// Regions that would be drawn.
  public var regions: Int
  /// What takes the most room: `regions`, `annotations` or `track`.
  public var part: String

  /// Creates the error; see the members.
  public init(format: String, bytesAtLeast: Int, limit: Int, regions: Int, part: String) {
    self.format = format
    self.bytesAtLeast = bytesAtLeast
    self.limit = limit
    self.regions = regions
    self.part = part
  }

  /// One line saying what is large and what to do, e.g. "the map as geojson would be at least
  /// 58400000 bytes, more than the 1048576 bytes a reply may have; most of it is the 100000
  /// monitored regions: remove regions (locationctl region remove ID), or ask for the map as svg
  /// zoomed in (it draws only the regions in view)".
  public var description: String {
    let advice: String
    switch part {
    case "regions":
      advice =
        "most of it is the \(regions) monitored regions: remove regions (locationctl region remove ID)"
        + (format == "svg"
          ? ", or zoom in (only regions in view are drawn)"
          : ", or ask for the map as svg zoomed in (it draws only the regions in view)")
    case "annotations":
      advice = "most of it is the annotations: remove annotations (locationctl remove ID)"
    default:
      advice = "most of it is the recent track"
    }
    return
      "the map as \(format) would be at least \(bytesAtLeast) bytes, more than the \(limit) bytes a reply may have; \(advice)"
  }
}

/// Cheap lower bounds of rendered lengths, from counts alone (no text is built).
enum RenderEstimate {
  /// Positions a region's drawn geometry has at least: the circle's ``RegionGeoJSON/circlePoints``
  /// plus the closing one; a polygon's vertices plus one closing position per ring (densified
  /// edges only add).
  static func positions(_ shape: RegionShape) -> Int {
    switch shape {
    case .circle: return RegionGeoJSON.circlePoints + 1
    case .polygon(let exterior, let holes):
      return holes.reduce(exterior.count + 1) { $0 + $1.count + 1 }
    }
  }

  /// Least bytes of one region's GeoJSON feature: the fixed members (over 150 bytes), the id
  /// twice, the title, and at least 8 bytes a position (`[1.5,2.5],`).
  static func geoJSONBytes(_ region: Region) -> Int {
    150 + 2 * region.id.utf8.count + (region.title?.utf8.count ?? 0) + 8 * positions(region.shape)
  }

  /// Least bytes of one annotation's GeoJSON feature.
  static func geoJSONBytes(_ annotation: Annotation) -> Int {
    80 + 2 * annotation.id.utf8.count + annotation.title.utf8.count
      + (annotation.subtitle?.utf8.count ?? 0) + (annotation.kind?.utf8.count ?? 0)
  }

  /// Least bytes of one region's SVG group: the fixed markup (over 150 bytes), the id, the
  /// label, and for a polygon at least 12 bytes a vertex (`L 1.00 2.00 `).
  static func svgBytes(_ region: Region) -> Int {
    let vertices: Int
    switch region.shape {
    case .circle: vertices = 0
    case .polygon: vertices = positions(region.shape)
    }
    return 150 + region.id.utf8.count + (region.title?.utf8.count ?? region.id.utf8.count) + 12
      * vertices
  }

  /// The part with the most bytes, for ``RenderTooLarge/part``.
  static func largest(regions: Int, annotations: Int, track: Int) -> String {
    if regions >= annotations && regions >= track { return "regions" }
    return annotations >= track ? "annotations" : "track"
  }
}
