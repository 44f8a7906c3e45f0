/// A name in a directory as the kernel sent it: bytes, never re-encoded, viewed without
/// copying. Valid only during the call it is passed to.
///
/// The bytes are followed by a NUL, so ``cString`` passes the name to C at no cost.
public struct FileName: RandomAccessCollection {
  /// The name as a NUL-terminated C string.
  public let cString: UnsafePointer<CChar>
  /// The number of bytes before the NUL.
  public let endIndex: Int

  /// Views the NUL-terminated `cString`.
  @inlinable
  public init(_ cString: UnsafePointer<CChar>) {
    self.cString = cString
    endIndex = strlen(cString)
  }

  /// The first byte's index: 0.
  @inlinable public var startIndex: Int { 0 }

  /// The byte at `position`.
  @inlinable
  public subscript(position: Int) -> UInt8 {
    UInt8(bitPattern: cString[position])
  }

  /// A copy of the bytes, without the NUL.
  public var bytes: [UInt8] { Array(self) }

  /// Runs `body` with a name viewing `bytes` (which must not contain a NUL): how a driver
  /// that holds names as arrays passes them.
  @discardableResult
  public static func withBytes<R, E: Error>(_ bytes: [UInt8], _ body: (FileName) throws(E) -> R) throws(E) -> R {
    let terminated = bytes + [0]
    return try terminated.withUnsafeBufferPointer { (buffer) throws(E) -> R in
      try buffer.withMemoryRebound(to: CChar.self) { (chars) throws(E) -> R in try body(FileName(chars.baseAddress!)) }
    }
  }
}

#if canImport(Glibc)
  import Glibc
#endif
