/// In what order a purge takes files within a domain and urgency (tmp always comes
/// before Caches, higher urgency before lower), chosen at mount (`--purge-policy`) so
/// that experiments can compare policies.
public enum PurgePolicy: String, Sendable, Hashable, CaseIterable {
  /// Least recently used first (the default: every open and I/O is a use).
  case lru
  /// First in, first out: oldest first by when the file was created (or indexed at
  /// mount); uses do not reorder files.
  case fifo
  /// Largest first (ties: least recently used first); frees the bytes needed with the
  /// fewest files.
  case largest

  /// The policy named `text` (`lru`, `fifo`, `largest`, any case), or nil.
  public init?(parsing text: String) {
    self.init(rawValue: text.lowercased())
  }

  /// The names, for messages: `lru, fifo, largest`.
  public static var names: String { allCases.map(\.rawValue).joined(separator: ", ") }
}

extension PurgeCatalog {
  /// Orders `chosen` (one domain's files, in LRU order) as `policy` takes them: for
  /// `largest`, by urgency and then size, largest first (a stable sort, so ties stay in
  /// LRU order); otherwise as they are.
  static func ordered(_ chosen: [Victim], by policy: PurgePolicy) -> [Victim] {
    guard policy == .largest else { return chosen }
    let rank = Dictionary(uniqueKeysWithValues: PurgeUrgency.purgeOrder.enumerated().map { ($1, $0) })
    return chosen.enumerated().sorted { a, b in
      let (ra, rb) = (rank[a.element.urgency] ?? 0, rank[b.element.urgency] ?? 0)
      if ra != rb { return ra < rb }
      if a.element.bytes != b.element.bytes { return a.element.bytes > b.element.bytes }
      return a.offset < b.offset
    }.map(\.element)
  }
}
