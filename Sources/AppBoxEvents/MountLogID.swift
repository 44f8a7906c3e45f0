/// A mount's id, which names its event log: `YYYYMMDD-HHMMSS-NNNN`, the mount's start in
/// UTC and a sequence number within that second (four hex digits), so that the ids of a
/// mountpoint's logs sort by start time.
public enum MountLogID {
  /// A new id for a mount starting at `time`, after `newest` (the newest id already
  /// taken, if any): the next sequence number when it is of the same second, else 0000.
  /// - Parameters:
  ///   - time: Seconds since the Unix epoch.
  ///   - newest: The newest id taken so far.
  public static func make(time: Double, after newest: String? = nil) -> String {
    let prefix = secondPrefix(time)
    var sequence = 0
    if let newest, newest.hasPrefix(prefix + "-"), let last = Int(newest.dropFirst(prefix.count + 1), radix: 16) {
      sequence = last + 1
    }
    let hex = String(sequence, radix: 16)
    return prefix + "-" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
  }

  /// `YYYYMMDD-HHMMSS` of `time`, in UTC.
  static func secondPrefix(_ time: Double) -> String {
    let seconds = Int64(EventSeconds.clamped(time).rounded(.down))
    var days = seconds / 86_400
    var rest = seconds % 86_400
    if rest < 0 {
      rest += 86_400
      days -= 1
    }
    let (year, month, day) = civil(days: days)
    func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
    return "\(year)\(two(month))\(two(day))-\(two(rest / 3600))\(two(rest / 60 % 60))\(two(rest % 60))"
  }

  /// Whether `text` may name a log: 1–64 of `0-9A-Za-z-_`, not starting with `-`. Ids of
  /// other shapes are accepted as long as they are safe as file names.
  public static func isValid(_ text: some StringProtocol) -> Bool {
    guard (1...64).contains(text.utf8.count), text.utf8.first != UInt8(ascii: "-") else { return false }
    return text.utf8.allSatisfy { byte in
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
        UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "-"), UInt8(ascii: "_"):
        true
      default: false
      }
    }
  }

  /// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's
  /// `civil_from_days`).
  static func civil(days: Int64) -> (year: Int64, month: Int64, day: Int64) {
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let dayOfEra = z - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let shifted = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * shifted + 2) / 5 + 1
    let month = shifted < 10 ? shifted + 3 : shifted - 9
    return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
  }
}
