// The most clients gpsd serves at once, measured.
//
// gpsd 3.22 keeps its clients in a fixed array, `subscribers[MAX_CLIENTS]` (gpsd/gpsd.c), sized by
// the build option `max_clients`, 64 by default (SConscript; Debian keeps the default). When no
// slot is free it accepts the TCP connection and closes it at once, without the VERSION banner
// that every served client gets first ("no subscriber slots available"). So a slot is counted
// when a connection gets `{"class":"VERSION"...`, and the first connection that gets end of file
// instead marks the limit.

import BenchKit
import Glibc

/// gpsd's `max_clients` default in 3.22 (SConscript), for the report.
let gpsdSourceLimit = 64

/// What probing gpsd found: the clients it served and whether it refused the next one.
struct GPSDLimitProbe {
  /// Connections that got gpsd's VERSION banner.
  var served: Int
  /// Whether a connection was refused (accepted and closed without a banner); false when the
  /// probe stopped at `ceiling` first.
  var refused: Bool
}

/// Opens connections to gpsd on `port` until one is refused or `ceiling` are served, then
/// closes them all and waits until gpsd has let every slot go.
func probeGPSDLimit(port: UInt16, ceiling: Int) -> GPSDLimitProbe {
  var open: [Int32] = []
  var refused = false
  while open.count < ceiling {
    guard let fd = connectTCP(port: port) else {
      refused = true
      break
    }
    guard let banner = readFirstLine(fd, timeout: 3), banner.hasPrefix(#"{"class":"VERSION""#)
    else {
      close(fd)
      refused = true
      break
    }
    open.append(fd)
  }
  let served = open.count
  for fd in open { close(fd) }
  // gpsd notices the closed connections on its next select(); give it that moment before the
  // slots are needed again.
  sleepSeconds(0.3)
  return GPSDLimitProbe(served: served, refused: refused)
}
