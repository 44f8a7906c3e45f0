import CFuseDevice

/// Requests are read by one worker thread at a time, which serves the quick ones itself
/// (CFuseDevice's reader.c).
public enum RequestReading {
  /// Lets another worker read requests while this handler waits or works for long: a wait
  /// for something a later request brings (a forget) would otherwise never end.
  public static func handOff() { cfuse_device_hand_off() }
}
