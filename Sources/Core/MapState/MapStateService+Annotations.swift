import LocationModel

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

// MARK: Annotations

/// Adding, replacing and removing annotations: the identifier rules (``Annotation/locationID``
/// reserved, ids compared by their code points) and the ``AnnotationLimits`` of the map.
extension MapStateService {
  /// Adds an annotation, or replaces the one with the same identifier in place (same list
  /// position, old values gone).
  ///
  /// - Throws: ``MapStateError/reservedIdentifier(_:)`` for `"location"`,
  ///   ``MapStateError/limitExceeded(count:bytes:)`` when the map would exceed
  ///   ``AnnotationLimits`` (nothing changes), or what ``Annotation/validate()`` throws.
  public func addAnnotation(_ annotation: Annotation) throws(MapStateError) {
    if let change = try put(annotation) { publish([change]) }
  }

  /// Checks `annotation` against the identifier rules and ``AnnotationLimits`` and puts it in
  /// the map (nothing changes when it throws); returns the change, `nil` when it equals the one
  /// there.
  private func put(_ annotation: Annotation) throws(MapStateError) -> MapChange? {
    try annotation.validate()
    guard annotation.id != Annotation.locationID else { throw .reservedIdentifier(annotation.id) }
    let existing = annotationsByID[annotation.id]
    if let existing { try Self.requireSameSpelling(existing.id, annotation.id) }
    let count = annotationOrder.count + (existing == nil ? 1 : 0)
    let bytes = annotationBytes - (existing?.textByteCount ?? 0) + annotation.textByteCount
    guard count <= AnnotationLimits.maxCount, bytes <= AnnotationLimits.maxTotalBytes else {
      throw .limitExceeded(count: count, bytes: bytes)
    }
    let change: MapChange
    if let existing {
      guard existing != annotation else { return nil }
      change = .annotationReplaced(id: annotation.id)
    } else {
      annotationOrder.append(annotation.id)
      change = .annotationAdded(id: annotation.id)
    }
    annotationsByID[annotation.id] = annotation
    annotationBytes = bytes
    return change
  }

  /// Adds or replaces each annotation of `batch` as ``addAnnotation(_:)`` would, as one change of
  /// the map: one event (every change listed) and one save, however many there are. For updates
  /// that arrive many at a time (the fleet view's devices).
  ///
  /// - Returns: the annotations refused, each with its error (validation, the reserved
  ///   identifier, ``AnnotationLimits``); the others are in effect.
  public func addAnnotations(_ batch: [Annotation]) -> [(annotation: Annotation, error: MapStateError)] {
    var refused: [(annotation: Annotation, error: MapStateError)] = []
    var changes: [MapChange] = []
    for annotation in batch {
      do throws(MapStateError) {
        if let change = try put(annotation) { changes.append(change) }
      } catch {
        refused.append((annotation, error))
      }
    }
    publish(changes)
    return refused
  }

  /// Throws when `new` is canonically equivalent to the existing id `existing` (Swift's `==`
  /// on strings) but written with other code points: ids are keys compared literally, as
  /// MapKit's and CoreLocation's identifiers are, so neither silently replaces the other.
  static func requireSameSpelling(_ existing: String, _ new: String) throws(MapStateError) {
    guard !existing.unicodeScalars.elementsEqual(new.unicodeScalars) else { return }
    throw .invalidIdentifier(
      new,
      reason:
        "the same Unicode text as the existing annotation \"\(existing)\" written with other code points (canonically equivalent): use that spelling, or remove it first"
    )
  }

  /// Removes every annotation of `ids` that exists, as one change of the map: one event (every
  /// removal listed) and one save, however many there are (the fleet view clearing the devices
  /// of a previous run). The reserved `"location"` and absent identifiers are skipped.
  ///
  /// - Returns: how many annotations were removed.
  @discardableResult
  public func removeAnnotations(_ ids: [String]) -> Int {
    var changes: [MapChange] = []
    var removedIDs = Set<String>()
    for id in ids where id != Annotation.locationID {
      guard let existing = annotationsByID[id], existing.id.unicodeScalars.elementsEqual(id.unicodeScalars),
        let removed = annotationsByID.removeValue(forKey: id)
      else { continue }
      annotationBytes -= removed.textByteCount
      removedIDs.insert(id)
      changes.append(.annotationRemoved(id: id))
    }
    guard !changes.isEmpty else { return 0 }
    annotationOrder.removeAll { removedIDs.contains($0) }
    publish(changes)
    return changes.count
  }

  /// Removes the annotation with `id`.
  ///
  /// - Throws: ``MapStateError/reservedIdentifier(_:)`` for `"location"`,
  ///   ``MapStateError/noSuchAnnotation(id:)`` when absent.
  public func removeAnnotation(id: String) throws(MapStateError) {
    guard id != Annotation.locationID else { throw .reservedIdentifier(id) }
    guard let existing = annotationsByID[id], existing.id.unicodeScalars.elementsEqual(id.unicodeScalars),
      let removed = annotationsByID.removeValue(forKey: id)
    else {
      throw .noSuchAnnotation(id: id)
    }
    annotationBytes -= removed.textByteCount
    annotationOrder.removeAll { $0 == id }
    publish([.annotationRemoved(id: id)])
  }
}
