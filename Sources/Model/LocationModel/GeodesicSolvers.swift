#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A geodesic given by its start and azimuth there, ready to give points at any distance
/// (Karney 2013, section 3: the direct problem). Internal: ``Geodesic/direct(from:azimuth:distance:)``
/// and ``Gnomonic`` use it.
struct GeodesicLine {
  let lat1: Double, lon1: Double
  let salp0: Double, calp0: Double
  let ssig1: Double, csig1: Double, dn1: Double
  let somg1: Double, comg1: Double
  let k2: Double
  let a1m1: Double, c1: SineSeries, b11: Double, stau1: Double, ctau1: Double
  let c1p: SineSeries
  let a2m1: Double, c2: SineSeries, b21: Double
  let c3: SineSeries, a3c: Double, b31: Double

  /// Position on the line: latitude, longitude (degrees, `[-180, 180]`), forward azimuth (degrees),
  /// reduced length m12 (metres) and geodesic scales M12, M21.
  struct Position {
    var lat2: Double, lon2: Double, azi2: Double, m12: Double, scale12: Double, scale21: Double
  }

  /// A line from (lat1, lon1) in degrees at azimuth azi1 (degrees true, any value).
  init(lat1: Double, lon1: Double, azi1: Double) {
    let azi = Degrees.normalized(azi1)
    // Rounding the azimuth guards against underflow in salp0.
    let (salp1, calp1) = Degrees.sinCos(Degrees.rounded(azi))
    self.init(lat1: lat1, lon1: lon1, salp1: salp1, calp1: calp1)
  }

  init(lat1: Double, lon1: Double, salp1: Double, calp1: Double) {
    self.lat1 = Degrees.latitude(lat1)
    self.lon1 = lon1
    var (sbet1, cbet1) = Degrees.sinCos(Degrees.rounded(self.lat1))
    sbet1 *= WGS84.f1
    normalize(&sbet1, &cbet1)
    cbet1 = max(WGS84.tiny, cbet1)  // cos(beta1) = +epsilon at the poles
    dn1 = (1 + WGS84.ep2 * sbet1 * sbet1).squareRoot()
    // sin(alpha0) = sin(alpha1) cos(beta1) (eq. 5)
    salp0 = salp1 * cbet1
    calp0 = hypot(calp1, salp1 * sbet1)
    // tan(beta1) = tan(sigma1) cos(alpha1); tan(omega1) = sin(alpha0) tan(sigma1) (eqs. 11, 12)
    var ssig = sbet1
    somg1 = salp0 * sbet1
    let c = sbet1 != 0 || calp1 != 0 ? cbet1 * calp1 : 1
    var csig = c
    comg1 = c
    normalize(&ssig, &csig)
    ssig1 = ssig
    csig1 = csig
    k2 = calp0 * calp0 * WGS84.ep2
    let eps = GeodesicSeries.eps(k2: k2)

    a1m1 = GeodesicSeries.a1m1(eps)
    c1 = GeodesicSeries.c1(eps)
    b11 = c1.value(sin: ssig1, cos: csig1)
    let s = sin(b11)
    let cb = cos(b11)
    stau1 = ssig1 * cb + csig1 * s  // tau1 = sigma1 + B11
    ctau1 = csig1 * cb - ssig1 * s
    c1p = GeodesicSeries.c1p(eps)
    a2m1 = GeodesicSeries.a2m1(eps)
    c2 = GeodesicSeries.c2(eps)
    b21 = c2.value(sin: ssig1, cos: csig1)
    c3 = GeodesicSeries.c3(eps)
    a3c = -WGS84.f * salp0 * GeodesicSeries.a3(eps)
    b31 = c3.value(sin: ssig1, cos: csig1)
  }

  /// The point at distance s12 metres (negative: backwards) from the start.
  func position(distance s12: Double) -> Position {
    // tau12 = s12 / (b A1) (eq. 7), then sigma12 by the reverted series (eq. 20).
    let tau12 = s12 / (WGS84.b * (1 + a1m1))
    let st = sin(tau12)
    let ct = cos(tau12)
    let b12 = -c1p.value(sin: stau1 * ct + ctau1 * st, cos: ctau1 * ct - stau1 * st)
    let sig12 = tau12 - (b12 - b11)
    let ssig12 = sin(sig12)
    let csig12 = cos(sig12)
    let ssig2 = ssig1 * csig12 + csig1 * ssig12
    var csig2 = csig1 * csig12 - ssig1 * ssig12
    let dn2 = (1 + k2 * ssig2 * ssig2).squareRoot()
    // B1(sigma2) = tau2 - sigma2 = b12: no need to sum the C1 series again.
    let ab1 = (1 + a1m1) * (b12 - b11)
    // sin(beta2) = cos(alpha0) sin(sigma2)
    let sbet2 = calp0 * ssig2
    var cbet2 = hypot(salp0, calp0 * csig2)
    if cbet2 == 0 {
      // salp0 = 0 and csig2 = 0: break the degeneracy.
      cbet2 = WGS84.tiny
      csig2 = WGS84.tiny
    }
    // tan(alpha0) = cos(sigma2) tan(alpha2)
    let salp2 = salp0
    let calp2 = calp0 * csig2
    // tan(omega2) = sin(alpha0) tan(sigma2); omega12 = omega2 - omega1
    let somg2 = salp0 * ssig2
    let comg2 = csig2
    let omg12 = atan2(somg2 * comg1 - comg2 * somg1, comg2 * comg1 + somg2 * somg1)
    let lam12 = omg12 + a3c * (sig12 + (c3.value(sin: ssig2, cos: csig2) - b31))
    let lon12 = lam12 / Degrees.radian
    let lon2 = Degrees.normalized(Degrees.normalized(lon1) + Degrees.normalized(lon12))
    let lat2 = Degrees.atan2d(sbet2, WGS84.f1 * cbet2)
    let azi2 = Degrees.atan2d(salp2, calp2)

    let ab2 = (1 + a2m1) * (c2.value(sin: ssig2, cos: csig2) - b21)
    let j12 = (a1m1 - a2m1) * sig12 + (ab1 - ab2)
    let m12 = WGS84.b * ((dn2 * (csig1 * ssig2) - dn1 * (ssig1 * csig2)) - csig1 * csig2 * j12)
    let t = k2 * (ssig2 - ssig1) * (ssig2 + ssig1) / (dn1 + dn2)
    let scale12 = csig12 + (t * ssig2 - csig2 * j12) * ssig1 / dn1
    let scale21 = csig12 - (t * ssig1 - csig1 * j12) * ssig2 / dn2
    return Position(
      lat2: lat2, lon2: lon2, azi2: azi2, m12: m12, scale12: scale12, scale21: scale21)
  }
}

/// The inverse problem (Karney 2013, section 4), as sines and cosines of the azimuths.
struct InverseSolution {
  var s12 = 0.0
  var salp1 = 0.0, calp1 = 0.0, salp2 = 0.0, calp2 = 0.0
  var m12 = 0.0, scale12 = 0.0, scale21 = 0.0
  /// Arc length on the auxiliary sphere, degrees.
  var a12 = 0.0
  /// Newton iterations used (0 when no iteration was needed).
  var iterations = 0

  init(lat1: Double, lon1: Double, lat2: Double, lon2: Double) {
    var lat1 = lat1
    var lat2 = lat2
    // Longitude difference, carefully reduced to [-180, 180], made positive.
    var (lon12, lon12s) = Degrees.difference(lon1, lon2)
    var lonsign: Double = lon12.sign == .minus ? -1 : 1
    lon12 *= lonsign
    lon12s *= lonsign
    let lam12 = lon12 * Degrees.radian
    let (slam12, clam12) = Degrees.sinCos(lon12, plus: lon12s)
    lon12s = (180 - lon12) - lon12s  // the supplementary longitude difference

    // Points really close to the equator are on it.
    lat1 = Degrees.rounded(Degrees.latitude(lat1))
    lat2 = Degrees.rounded(Degrees.latitude(lat2))
    // Point 1 has the larger |latitude| (a NaN latitude becomes lat1), and lat1 <= -0.
    let swapp: Double = abs(lat1) < abs(lat2) || lat2.isNaN ? -1 : 1
    if swapp < 0 {
      lonsign *= -1
      swap(&lat1, &lat2)
    }
    let latsign: Double = lat1.sign == .minus ? 1 : -1
    lat1 *= latsign
    lat2 *= latsign
    // Now 0 <= lon12 <= 180, -90 <= lat1 <= -0, lat1 <= lat2 <= -lat1.

    var (sbet1, cbet1) = Degrees.sinCos(lat1)
    sbet1 *= WGS84.f1
    normalize(&sbet1, &cbet1)
    cbet1 = max(WGS84.tiny, cbet1)
    var (sbet2, cbet2) = Degrees.sinCos(lat2)
    sbet2 *= WGS84.f1
    normalize(&sbet2, &cbet2)
    cbet2 = max(WGS84.tiny, cbet2)
    // Force |beta2| = |beta1| exactly when they are equal to round-off.
    if cbet1 < -sbet1 {
      if cbet2 == cbet1 { sbet2 = Double(signOf: sbet2, magnitudeOf: sbet1) }
    } else if abs(sbet2) == -sbet1 {
      cbet2 = cbet1
    }
    let dn1 = (1 + WGS84.ep2 * sbet1 * sbet1).squareRoot()
    let dn2 = (1 + WGS84.ep2 * sbet2 * sbet2).squareRoot()

    var sig12 = 0.0
    var s12x = 0.0
    var m12x = 0.0
    var meridian = lat1 == -90 || slam12 == 0

    if meridian {
      // Both ends on one full meridian: the geodesic may be the meridian.
      calp1 = clam12
      salp1 = slam12  // head to the target longitude
      calp2 = 1
      salp2 = 0  // heading north at the target
      let ssig1 = sbet1
      let csig1 = calp1 * cbet1
      let ssig2 = sbet2
      let csig2 = calp2 * cbet2
      sig12 = atan2(max(0, csig1 * ssig2 - ssig1 * csig2) + 0, csig1 * csig2 + ssig1 * ssig2)
      let lengths = Lengths(
        eps: WGS84.n, sig12: sig12, ssig1: ssig1, csig1: csig1, dn1: dn1, ssig2: ssig2,
        csig2: csig2, dn2: dn2, cbet1: cbet1, cbet2: cbet2)
      s12x = lengths.s12b
      m12x = lengths.m12b
      scale12 = lengths.scale12
      scale21 = lengths.scale21
      // sigma12 > pi/2 on a meridian with m12 < 0 is not a shortest path (but 90 0 90 180 is).
      if sig12 < 1 || m12x >= 0 {
        if sig12 < 3 * WGS84.tiny || (sig12 < WGS84.tol0 && (s12x < 0 || m12x < 0)) {
          sig12 = 0
          m12x = 0
          s12x = 0
        }
        m12x *= WGS84.b
        s12x *= WGS84.b
        a12 = sig12 / Degrees.radian
      } else {
        meridian = false
      }
    }

    if !meridian && sbet1 == 0 && lon12s >= WGS84.f * 180 {
      // Along the equator (for lon12 up to 180 (1 - f)).
      calp1 = 0
      calp2 = 0
      salp1 = 1
      salp2 = 1
      s12x = WGS84.a * lam12
      sig12 = lam12 / WGS84.f1
      m12x = WGS84.b * sin(sig12)
      scale12 = cos(sig12)
      scale21 = scale12
      a12 = lon12 / WGS84.f1
    } else if !meridian {
      var dnm = 0.0
      let start = InverseSolution.start(
        sbet1: sbet1, cbet1: cbet1, sbet2: sbet2, cbet2: cbet2, lam12: lam12, slam12: slam12,
        clam12: clam12)
      sig12 = start.sig12
      salp1 = start.salp1
      calp1 = start.calp1
      dnm = start.dnm
      if sig12 >= 0 {
        // Really short line: the auxiliary sphere with the mean dn is exact.
        salp2 = start.salp2
        calp2 = start.calp2
        s12x = sig12 * WGS84.b * dnm
        m12x = dnm * dnm * WGS84.b * sin(sig12 / dnm)
        scale12 = cos(sig12 / dnm)
        scale21 = scale12
        a12 = sig12 / Degrees.radian
      } else {
        // Newton's method on lambda12(alpha1) - lam12 = 0, keeping a bracket (alpha1a, alpha1b)
        // of the root and bisecting it when a step leaves it or the slope is not positive.
        var ssig1 = 0.0
        var csig1 = 0.0
        var ssig2 = 0.0
        var csig2 = 0.0
        var eps = 0.0
        var salp1a = WGS84.tiny
        var calp1a = 1.0
        var salp1b = WGS84.tiny
        var calp1b = -1.0
        var tripn = false
        var tripb = false
        var numit = 0
        while true {
          let l = InverseSolution.lambda12(
            sbet1: sbet1, cbet1: cbet1, dn1: dn1, sbet2: sbet2, cbet2: cbet2, dn2: dn2,
            salp1: salp1, calp1: calp1, slam120: slam12, clam120: clam12,
            derivative: numit < WGS84.maxit1)
          let v = l.lam12
          salp2 = l.salp2
          calp2 = l.calp2
          sig12 = l.sig12
          ssig1 = l.ssig1
          csig1 = l.csig1
          ssig2 = l.ssig2
          csig2 = l.csig2
          eps = l.eps
          // Reversed test lets NaN out.
          if tripb || !(abs(v) >= (tripn ? 8 : 1) * WGS84.tol0) || numit == WGS84.maxit2 { break }
          if v > 0 && (numit > WGS84.maxit1 || calp1 / salp1 > calp1b / salp1b) {
            salp1b = salp1
            calp1b = calp1
          } else if v < 0 && (numit > WGS84.maxit1 || calp1 / salp1 < calp1a / salp1a) {
            salp1a = salp1
            calp1a = calp1
          }
          numit += 1
          if numit - 1 < WGS84.maxit1 && l.dlam12 > 0 {
            let dalp1 = -v / l.dlam12
            if abs(dalp1) < .pi {
              let sdalp1 = sin(dalp1)
              let cdalp1 = cos(dalp1)
              let nsalp1 = salp1 * cdalp1 + calp1 * sdalp1
              if nsalp1 > 0 {
                calp1 = calp1 * cdalp1 - salp1 * sdalp1
                salp1 = nsalp1
                normalize(&salp1, &calp1)
                // Where the slope tends to zero convergence is not quadratic: test against
                // epsilon rather than its square root.
                tripn = abs(v) <= 16 * WGS84.tol0
                continue
              }
            }
          }
          salp1 = (salp1a + salp1b) / 2
          calp1 = (calp1a + calp1b) / 2
          normalize(&salp1, &calp1)
          tripn = false
          tripb =
            abs(salp1a - salp1) + (calp1a - calp1) < WGS84.tolb
            || abs(salp1 - salp1b) + (calp1 - calp1b) < WGS84.tolb
        }
        iterations = numit
        let lengths = Lengths(
          eps: eps, sig12: sig12, ssig1: ssig1, csig1: csig1, dn1: dn1, ssig2: ssig2,
          csig2: csig2, dn2: dn2, cbet1: cbet1, cbet2: cbet2)
        s12x = lengths.s12b * WGS84.b
        m12x = lengths.m12b * WGS84.b
        scale12 = lengths.scale12
        scale21 = lengths.scale21
        a12 = sig12 / Degrees.radian
      }
    }

    s12 = 0 + s12x  // -0 becomes 0
    m12 = 0 + m12x

    // Undo the canonical ordering.
    if swapp < 0 {
      swap(&salp1, &salp2)
      swap(&calp1, &calp2)
      swap(&scale12, &scale21)
    }
    salp1 *= swapp * lonsign
    calp1 *= swapp * latsign
    salp2 *= swapp * lonsign
    calp2 *= swapp * latsign
  }

  /// Starting guess for alpha1 (section 4 and 5: the spherical estimate, or the astroid near the
  /// antipode); for really short lines the solution itself (sig12 >= 0 with salp2, calp2, dnm).
  private static func start(
    sbet1: Double, cbet1: Double, sbet2: Double, cbet2: Double, lam12: Double, slam12: Double,
    clam12: Double
  ) -> (sig12: Double, salp1: Double, calp1: Double, salp2: Double, calp2: Double, dnm: Double) {
    var sig12 = -1.0
    var salp2 = 0.0
    var calp2 = 0.0
    var dnm = 0.0
    // beta12 = beta2 - beta1 in [0, pi); beta12a = beta2 + beta1 in (-pi, 0]
    let sbet12 = sbet2 * cbet1 - cbet2 * sbet1
    let cbet12 = cbet2 * cbet1 + sbet2 * sbet1
    let shortline = cbet12 >= 0 && sbet12 < 0.5 && cbet2 * lam12 < 0.5
    let sbet12a = sbet2 * cbet1 + cbet2 * sbet1
    var somg12: Double
    var comg12: Double
    if shortline {
      var sbetm2 = (sbet1 + sbet2) * (sbet1 + sbet2)
      sbetm2 /= sbetm2 + (cbet1 + cbet2) * (cbet1 + cbet2)
      dnm = (1 + WGS84.ep2 * sbetm2).squareRoot()
      let omg12 = lam12 / (WGS84.f1 * dnm)
      somg12 = sin(omg12)
      comg12 = cos(omg12)
    } else {
      somg12 = slam12
      comg12 = clam12
    }
    var salp1 = cbet2 * somg12
    var calp1 =
      comg12 >= 0
      ? sbet12 + cbet2 * sbet1 * somg12 * somg12 / (1 + comg12)
      : sbet12a - cbet2 * sbet1 * somg12 * somg12 / (1 - comg12)
    let ssig12 = hypot(salp1, calp1)
    let csig12 = sbet1 * sbet2 + cbet1 * cbet2 * comg12

    if shortline && ssig12 < WGS84.etol2 {
      salp2 = cbet1 * somg12
      calp2 =
        sbet12 - cbet1 * sbet2 * (comg12 >= 0 ? somg12 * somg12 / (1 + comg12) : 1 - comg12)
      normalize(&salp2, &calp2)
      sig12 = atan2(ssig12, csig12)
    } else if csig12 >= 0 || ssig12 >= 6 * abs(WGS84.n) * .pi * cbet1 * cbet1 {
      // The zeroth-order spherical estimate is good enough.
    } else {
      // Nearly antipodal: scale to the astroid's x, y where the antipode is the origin and the
      // singular point is y = 0, x = -1.
      let lam12x = atan2(-slam12, -clam12)  // lam12 - pi
      let k2 = sbet1 * sbet1 * WGS84.ep2
      let eps = GeodesicSeries.eps(k2: k2)
      let lamscale = WGS84.f * cbet1 * GeodesicSeries.a3(eps) * .pi
      let betscale = lamscale * cbet1
      let x = lam12x / lamscale
      let y = sbet12a / betscale
      if y > -WGS84.tol1 && x > -1 - WGS84.xthresh {
        // Strip near the cut.
        salp1 = min(1, -x)
        calp1 = -(1 - salp1 * salp1).squareRoot()
      } else {
        // omega12 from the astroid, then the spherical formula for alpha1.
        let k = astroid(x, y)
        let omg12a = lamscale * (-x * k / (1 + k))
        somg12 = sin(omg12a)
        comg12 = -cos(omg12a)
        salp1 = cbet2 * somg12
        calp1 = sbet12a - cbet2 * sbet1 * somg12 * somg12 / (1 - comg12)
      }
    }
    // Backwards test lets NaN through.
    if !(salp1 <= 0) {
      normalize(&salp1, &calp1)
    } else {
      salp1 = 1
      calp1 = 0
    }
    return (sig12, salp1, calp1, salp2, calp2, dnm)
  }

  /// lambda12 as a function of alpha1 (eq. 8 with section 4), and its derivative (eq. 46).
  private static func lambda12(
    sbet1: Double, cbet1: Double, dn1: Double, sbet2: Double, cbet2: Double, dn2: Double,
    salp1: Double, calp1: Double, slam120: Double, clam120: Double, derivative: Bool
  ) -> (
    lam12: Double, salp2: Double, calp2: Double, sig12: Double, ssig1: Double, csig1: Double,
    ssig2: Double, csig2: Double, eps: Double, dlam12: Double
  ) {
    // Break the degeneracy of an equatorial line (handled before).
    let calp1 = sbet1 == 0 && calp1 == 0 ? -WGS84.tiny : calp1
    let salp0 = salp1 * cbet1
    let calp0 = hypot(calp1, salp1 * sbet1)
    var ssig1 = sbet1
    let somg1 = salp0 * sbet1
    var csig1 = calp1 * cbet1
    let comg1 = csig1
    normalize(&ssig1, &csig1)
    // Symmetries when |beta2| = -beta1.
    let salp2 = cbet2 != cbet1 ? salp0 / cbet2 : salp1
    let calp2 =
      cbet2 != cbet1 || abs(sbet2) != -sbet1
      ? (calp1 * cbet1 * calp1 * cbet1
        + (cbet1 < -sbet1 ? (cbet2 - cbet1) * (cbet1 + cbet2) : (sbet1 - sbet2) * (sbet1 + sbet2)))
        .squareRoot() / cbet2
      : abs(calp1)
    var ssig2 = sbet2
    let somg2 = salp0 * sbet2
    var csig2 = calp2 * cbet2
    let comg2 = csig2
    normalize(&ssig2, &csig2)
    let sig12 = atan2(max(0, csig1 * ssig2 - ssig1 * csig2) + 0, csig1 * csig2 + ssig1 * ssig2)
    let somg12 = max(0, comg1 * somg2 - somg1 * comg2) + 0
    let comg12 = comg1 * comg2 + somg1 * somg2
    // eta = omega12 - lam120
    let eta = atan2(somg12 * clam120 - comg12 * slam120, comg12 * clam120 + somg12 * slam120)
    let k2 = calp0 * calp0 * WGS84.ep2
    let eps = GeodesicSeries.eps(k2: k2)
    let c3 = GeodesicSeries.c3(eps)
    let b312 = c3.value(sin: ssig2, cos: csig2) - c3.value(sin: ssig1, cos: csig1)
    let domg12 = -WGS84.f * GeodesicSeries.a3(eps) * salp0 * (sig12 + b312)
    let lam12 = eta + domg12
    var dlam12 = 0.0
    if derivative {
      if calp2 == 0 {
        dlam12 = -2 * WGS84.f1 * dn1 / sbet1
      } else {
        dlam12 =
          Lengths.reducedLength(
            eps: eps, sig12: sig12, ssig1: ssig1, csig1: csig1, dn1: dn1, ssig2: ssig2,
            csig2: csig2, dn2: dn2) * WGS84.f1 / (calp2 * cbet2)
      }
    }
    return (lam12, salp2, calp2, sig12, ssig1, csig1, ssig2, csig2, eps, dlam12)
  }
}
