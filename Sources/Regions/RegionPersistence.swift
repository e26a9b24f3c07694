import JSON
import LocationModel

extension RegionMonitor {
  /// The regions and their states as a versioned JSON document.
  public func persisted() -> JSONValue {
    .object([JSONMember("version", .int(1))])
  }

  /// Restores a monitor from ``persisted()``.
  ///
  /// - Throws: ``RegionError/invalidDocument(reason:)``.
  public init(restoring document: JSONValue, configuration: RegionMonitorConfiguration = .default)
    throws(RegionError)
  {
    self.init(configuration: configuration)
    throw .invalidDocument(reason: "not implemented")
  }
}
