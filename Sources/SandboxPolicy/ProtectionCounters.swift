/// Counts of Data Protection refusals, by class and by operation.
///
/// A plain value: the daemon keeps one behind its own lock.
public struct ProtectionCounters: Sendable, Hashable {
  /// All refusals counted.
  public private(set) var totalRefusals: Int = 0
  private var byClass: [ProtectionClass: Int] = [:]
  private var byOperation: [ProtectedOperation: Int] = [:]

  /// Creates counters at zero.
  public init() {}

  /// Counts one refusal.
  ///
  /// - Parameters:
  ///   - protectionClass: the refused item's class.
  ///   - operation: the refused operation.
  public mutating func recordRefusal(
    _ protectionClass: ProtectionClass, _ operation: ProtectedOperation
  ) {
    totalRefusals += 1
    byClass[protectionClass, default: 0] += 1
    byOperation[operation, default: 0] += 1
  }

  /// Refusals of items of a class.
  ///
  /// - Parameter protectionClass: the class.
  public func refusals(for protectionClass: ProtectionClass) -> Int {
    byClass[protectionClass, default: 0]
  }

  /// Refusals of an operation.
  ///
  /// - Parameter operation: the operation.
  public func refusals(for operation: ProtectedOperation) -> Int {
    byOperation[operation, default: 0]
  }

  /// The counters as one JSON object, every class and operation listed in declaration
  /// order: `{"total":2,"byClass":{"complete":2,…},"byOperation":{"createNew":0,…}}`.
  public var jsonObject: String {
    let classes = ProtectionClass.allCases.map {
      JSONText.quoted($0.name) + ":" + String(refusals(for: $0))
    }
    let operations = ProtectedOperation.allCases.map {
      JSONText.quoted($0.name) + ":" + String(refusals(for: $0))
    }
    return "{\"total\":" + String(totalRefusals) + ",\"byClass\":{"
      + classes.joined(separator: ",") + "},\"byOperation\":{"
      + operations.joined(separator: ",") + "}}"
  }
}
