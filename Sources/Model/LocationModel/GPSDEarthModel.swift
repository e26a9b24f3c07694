// gpsd 3.22's models for the fields a receiver leaves empty: the geoid separation and the
// magnetic variation, each a 5-degree table with bilinear interpolation.
//
// Tables and interpolation from gpsd 3.22, gpsd/geoid.c (`geoid_delta`, `magvar`, `bilinear`,
// `wgs84_separation`, `mag_var`). Geoid separation code by Oleg Gusev, from data by Peter Dana;
// the geoid table is EGM2008 and the variation table WMM2015, both as GeographicLib gives them
// (gpsd devtools/get_geoid_table.py, get_mag_var_table.py).
//
// This file is Copyright 2010 by the GPSD project
// SPDX-License-Identifier: BSD-2-Clause
//
// Redistribution and use in source and binary forms, with or without modification, are
// permitted provided that the following conditions are met:
//
// 1. Redistributions of source code must retain the above copyright notice, this list of
//    conditions and the following disclaimer.
//
// 2. Redistributions in binary form must reproduce the above copyright notice, this list of
//    conditions and the following disclaimer in the documentation and/or other materials
//    provided with the distribution.
//
// THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS ``AS IS'' AND ANY EXPRESS
// OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE IMPLIED WARRANTIES OF
// MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE ARE DISCLAIMED. IN NO EVENT SHALL THE
// COPYRIGHT HOLDER OR CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL,
// EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF SUBSTITUTE
// GOODS OR SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND
// ON ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT (INCLUDING
// NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE OF THIS SOFTWARE, EVEN IF ADVISED
// OF THE POSSIBILITY OF SUCH DAMAGE.

/// gpsd 3.22's own models of the Earth for fields a receiver leaves empty (gpsd/geoid.c): the
/// geoid separation (EGM2008) and the magnetic variation (WMM2015), both sampled every 5 degrees
/// of latitude and longitude and interpolated bilinearly, so that a fix completed with them
/// carries exactly the `geoidSep`, `altHAE` and `magvar` gpsd reports.
///
/// These are coarse: the geoid separation differs from EGM2008 itself by up to about 12 m (gpsd's
/// own note), the variation ignores secular change since 2015. They are for parity with gpsd,
/// not for surveying; a value the receiver sends always wins over them.
public enum GPSDEarthModel {
  /// The grid spacing, degrees.
  static let span = 5
  /// Rows (latitude -90...90) and columns (longitude -180...180) of each table.
  static let rows = 37
  static let columns = 73

  /// Geoid separation (height of the EGM2008 geoid above the WGS84 ellipsoid) in metres at a
  /// position in WGS84 degrees, as gpsd 3.22's `wgs84_separation()`: bilinear between the four
  /// surrounding 5-degree grid values. Latitude `-90...90`, longitude `-180...180`; gpsd's value
  /// 0 for a non-finite or out-of-range position. Range about -107 m to +86 m.
  public static func geoidSeparation(latitude: Double, longitude: Double) -> Double {
    interpolate(geoidCentimetres, latitude: latitude, longitude: longitude)
  }

  /// Magnetic variation (declination) in degrees, east positive, at a position in WGS84 degrees,
  /// as gpsd 3.22's `mag_var()`: WMM2015 sampled every 5 degrees, interpolated bilinearly.
  /// Latitude `-90...90`, longitude `-180...180`; 0 for a non-finite or out-of-range position, as
  /// gpsd. Range `-180...180`.
  public static func magneticVariation(latitude: Double, longitude: Double) -> Double {
    interpolate(variationHundredths, latitude: latitude, longitude: longitude)
  }

  /// ``geoidSeparation(latitude:longitude:)`` at `coordinate`, metres.
  public static func geoidSeparation(at coordinate: Coordinate) -> Double {
    geoidSeparation(latitude: coordinate.latitude, longitude: coordinate.longitude)
  }

  /// ``magneticVariation(latitude:longitude:)`` at `coordinate`, degrees, east positive.
  public static func magneticVariation(at coordinate: Coordinate) -> Double {
    magneticVariation(latitude: coordinate.latitude, longitude: coordinate.longitude)
  }

  /// gpsd's `wgs84_separation`/`mag_var` body: the grid cell, then `bilinear()`, then / 100.
  static func interpolate(_ table: [Int16], latitude lat: Double, longitude lon: Double) -> Double {
    guard lat.isFinite, lon.isFinite else { return 0 }
    let rowValue = ((90 + lat) / Double(span)).rounded(.down)
    let columnValue = ((180 + lon) / Double(span)).rounded(.down)
    guard rowValue >= 0, rowValue < Double(rows), columnValue >= 0, columnValue < Double(columns)
    else { return 0 }
    let row1 = Int(rowValue)
    let column1 = Int(columnValue)
    let row2 = row1 < rows - 1 ? row1 + 1 : row1
    let column2 = column1 < columns - 1 ? column1 + 1 : column1
    func z(_ row: Int, _ column: Int) -> Double {
      let index = row * columns + column
      return table.indices.contains(index) ? Double(table[index]) : 0
    }
    return bilinear(
      x1: column1 * span - 180, y1: row1 * span - 90, x2: column2 * span - 180,
      y2: row2 * span - 90, x: lon, y: lat, z11: z(row1, column1), z12: z(row1, column2),
      z21: z(row2, column1),
      z22: z(row2, column2)) / 100
  }

  /// gpsd's `bilinear()` with its corner cases (a cell on the last row or column).
  static func bilinear(
    x1: Int, y1: Int, x2: Int, y2: Int, x: Double, y: Double, z11: Double, z12: Double, z21: Double,
    z22: Double
  ) -> Double {
    let xx1 = x - Double(x1)
    let x2x = Double(x2) - x
    let yy1 = y - Double(y1)
    let y2y = Double(y2) - y
    if y1 == y2 {
      if x1 == x2 { return z11 }
      return (z22 * xx1 + z11 * x2x) / Double(x2 - x1)
    } else if x1 == x2 {
      return (z22 * yy1 + z11 * y2y) / Double(y2 - y1)
    }
    let delta = Double((y2 - y1) * (x2 - x1))
    return (z22 * yy1 * xx1 + z12 * y2y * xx1 + z21 * yy1 * x2x + z11 * y2y * x2x) / delta
  }
}
