#if canImport(Glibc)
  import Glibc
#endif

/// Clock readings.
public enum Clock {
  /// Seconds since the Unix epoch.
  public static func unix() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
  }

  /// Seconds on a monotonic clock (for durations and timers).
  public static func monotonic() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
  }
}
