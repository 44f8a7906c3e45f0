// The name arena: every live name is a range of `names`; replaced and removed names
// become garbage until a compaction copies the live names into a fresh arena.

extension PurgeCatalog {
  /// Appends a name to the arena.
  /// - Returns: The name's offset and length.
  func storeName(_ name: [UInt8]) -> (offset: UInt32, length: UInt16) {
    precondition(!name.isEmpty, "PurgeCatalog: empty name")
    precondition(name.count <= Int(UInt16.max), "PurgeCatalog: name longer than 65535 bytes")
    let offset = names.count
    precondition(offset + name.count <= Int(UInt32.max), "PurgeCatalog: name arena above 4 GiB")
    names.append(contentsOf: name)
    return (UInt32(offset), UInt16(name.count))
  }

  /// Marks a name's bytes as garbage.
  func releaseName(length: UInt16) {
    garbageNameBytes += Int(length)
  }

  /// A copy of the name at an arena range.
  func name(offset: UInt32, length: UInt16) -> [UInt8] {
    let start = Int(offset)
    return Array(names[start..<start + Int(length)])
  }

  /// Compacts the arena if its garbage exceeds half its size and the threshold. Called at
  /// the end of public operations, when every live slot's range is valid.
  func compactNamesIfNeeded() {
    guard garbageNameBytes > compactionThreshold, garbageNameBytes * 2 > names.count else {
      return
    }
    var fresh: [UInt8] = []
    fresh.reserveCapacity(names.count - garbageNameBytes)
    names.withUnsafeBufferPointer { old in
      for index in files.indices where files[index].domain != Self.freeMarker {
        let start = Int(files[index].nameOffset)
        let length = Int(files[index].nameLength)
        files[index].nameOffset = UInt32(fresh.count)
        fresh.append(contentsOf: old[start..<start + length])
      }
      for index in directories.indices where directories[index].domain != Self.freeMarker {
        let start = Int(directories[index].nameOffset)
        let length = Int(directories[index].nameLength)
        directories[index].nameOffset = UInt32(fresh.count)
        fresh.append(contentsOf: old[start..<start + length])
      }
    }
    names = fresh
    garbageNameBytes = 0
    nameCompactions += 1
  }
}
