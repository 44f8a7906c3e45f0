import Synchronization

// Errno injection for tests, after swift-system's mocking (`Internals/Mocking.swift`):
// the syscall wrappers in this module ask ``SyscallFaults/check(_:)`` before calling C.
// Off, that costs one relaxed atomic load. On, a scope's table decides whether the call
// fails: the scope of the calling task or thread (``SyscallFaults/inject(_:_:)``), else a
// process-wide one (``SyscallFaults/injectEverywhere(_:_:)``) for calls made on threads the
// test does not own (a server's accept loop, a purge's worker threads).

/// A system call wrapper that tests can make fail.
public enum Syscall: String, Hashable, Sendable, CaseIterable {
  /// `openat` (``Sys/openat(_:_:_:_:)``, and ``Sys/reopen(_:flags:)`` through it).
  case openat
  /// `fstat` / `fstatat` with `AT_EMPTY_PATH` (``Sys/fstat(_:)``).
  case fstat
  /// `fstatat` of a name (``Sys/fstatat(_:_:_:)``).
  case fstatat
  /// `fstatfs` (``Sys/filesystemType(_:)``).
  case fstatfs
  /// `unlinkat` (``Sys/unlinkat(_:_:_:)``).
  case unlinkat
  /// `renameat2` (``Sys/renameat2(_:_:_:_:_:)``).
  case renameat2
  /// `mkdirat` (``Sys/mkdirat(_:_:_:)``).
  case mkdirat
  /// `mknodat` (``Sys/mknodat(_:_:_:_:)``).
  case mknodat
  /// `symlinkat` (``Sys/symlinkat(_:_:_:)``; the name is the new link's).
  case symlinkat
  /// `linkat` (``Sys/link(_:_:_:)``; the name is the new one).
  case linkat
  /// `ftruncate` (``Sys/ftruncate(_:_:)``).
  case ftruncate
  /// `fallocate` (``Sys/fallocate(_:_:_:_:)``).
  case fallocate
  /// `fsetxattr`, or `setxattr` through `/proc/self/fd` (``Xattr``'s setters of a
  /// descriptor's attributes).
  case setxattr
  /// `removexattr` through `/proc/self/fd` (``Xattr/remove(_:_:)``).
  case removexattr
  /// `copy_file_range` (``Sys/copyFileRange(_:_:_:_:_:_:)``).
  case copyFileRange
  /// `getxattr` through `/proc/self/fd` (``Xattr/get(_:_:into:)``, and ``Xattr``'s
  /// readers of a value through it); its name is the attribute's.
  case getxattr
  /// The switch of a thread's filesystem credentials (``ThreadCredentials/with(uid:gid:groups:_:)``:
  /// `setgroups`, `setfsgid`, `setfsuid`).
  case setfsuid
  /// `accept4` (``UnixSocket/accept(_:)``).
  case accept
  /// `getsockopt(SO_PEERPIDFD)` (``PeerProcess/of(_:)``): ENOPROTOOPT makes it take the
  /// path of a kernel older than 6.5.
  case peerPIDFD
  /// `readdir` (``DirectoryStream/next()``).
  case readdir
  /// `sync_file_range` (``Sys/writeBack(_:)``).
  case syncFileRange
}

/// How one injected fault behaves.
public struct SyscallFault: Sendable {
  /// The error the wrapper throws, as if the call had returned it (never retried, EINTR
  /// included).
  public var errno: Errno
  /// Calls that succeed before the first failure.
  public var after: Int
  /// Failures, then calls succeed again (nil: every call from then on).
  public var times: Int?
  /// Only calls on this name (NUL excluded) fail, for the wrappers that take one
  /// (`openat`, `fstatat`, `unlinkat`, `renameat2`, `mkdirat`, `mknodat`: the first name;
  /// `symlinkat`, `linkat`: the new name; `getxattr`: the attribute's); nil: any.
  public var name: [UInt8]?

  /// A fault that makes calls fail with `errno` after `after` successful ones, `times`
  /// times (nil: always), on any name or only on `name`.
  public init(_ errno: Errno, after: Int = 0, times: Int? = nil, name: String? = nil) {
    self.errno = errno
    self.after = after
    self.times = times
    self.name = name.map { Array($0.utf8) }
  }
}

/// A table of injected faults and what the wrappers did under it.
public final class SyscallFaults: Sendable {
  private struct State {
    var faults: [Syscall: SyscallFault]
    var calls: [Syscall: Int] = [:]
    var failures: [Syscall: Int] = [:]
    var matching: [Syscall: Int] = [:]
  }
  private let state: Mutex<State>

  private init(_ faults: [Syscall: SyscallFault]) { state = Mutex(State(faults: faults)) }

  /// Calls of `syscall` that reached a wrapper in this scope (failed ones included).
  public func calls(_ syscall: Syscall) -> Int { state.withLock { $0.calls[syscall, default: 0] } }

  /// Calls of `syscall` that this scope made fail.
  public func failures(_ syscall: Syscall) -> Int { state.withLock { $0.failures[syscall, default: 0] } }

  /// Changes or removes (nil) the fault of `syscall` while the scope runs.
  public func set(_ syscall: Syscall, _ fault: SyscallFault?) { state.withLock { $0.faults[syscall] = fault } }

  // MARK: Scopes

  /// Scopes armed anywhere: the wrappers' fast path reads only this.
  @usableFromInline static let armed = Atomic<Int>(0)
  /// The calling task's (or thread's, outside a task) scope.
  @TaskLocal private static var current: SyscallFaults?
  /// Process-wide scopes.
  private static let everywhere = Mutex<[SyscallFaults]>([])

  /// Runs `body` with `faults` injected into the wrappers it calls on this task or thread
  /// (not on threads it starts or hands work to).
  @discardableResult
  public static func inject<R>(_ faults: [Syscall: SyscallFault], _ body: (SyscallFaults) throws -> R) rethrows -> R {
    let scope = SyscallFaults(faults)
    armed.add(1, ordering: .relaxed)
    defer { armed.subtract(1, ordering: .relaxed) }
    return try $current.withValue(scope) { try body(scope) }
  }

  /// Runs `body` with `faults` injected into the wrappers that any thread of the process
  /// calls. Other code running meanwhile fails too: restrict a fault with
  /// ``SyscallFault/name`` or inject only calls nothing else makes.
  @discardableResult
  public static func injectEverywhere<R>(_ faults: [Syscall: SyscallFault], _ body: (SyscallFaults) throws -> R)
    rethrows -> R
  {
    let scope = SyscallFaults(faults)
    everywhere.withLock { $0.append(scope) }
    armed.add(1, ordering: .relaxed)
    defer {
      armed.subtract(1, ordering: .relaxed)
      everywhere.withLock { $0.removeAll { $0 === scope } }
    }
    return try body(scope)
  }

  // MARK: The wrappers' check

  /// Throws the injected errno when a scope makes this call of `syscall` fail. Called by
  /// the wrappers in this module only, before the C call.
  @inlinable
  @inline(__always)
  public static func check(_ syscall: Syscall) throws(Errno) {
    if armed.load(ordering: .relaxed) != 0 { try slowCheck(syscall, name: nil) }
  }

  /// The errno a scope injects into this call of `syscall`, if any: for wrappers whose
  /// call reports failure in another way than by errno (``ThreadCredentials``).
  @inlinable
  @inline(__always)
  public static func injected(_ syscall: Syscall) -> Errno? {
    guard armed.load(ordering: .relaxed) != 0 else { return nil }
    do throws(Errno) { try slowCheck(syscall, name: nil) } catch { return error }
    return nil
  }

  /// ``check(_:)`` for a wrapper that takes a name.
  @inlinable
  @inline(__always)
  public static func check(_ syscall: Syscall, name: UnsafePointer<CChar>) throws(Errno) {
    if armed.load(ordering: .relaxed) != 0 { try slowCheck(syscall, name: name) }
  }

  @usableFromInline
  @inline(never)
  static func slowCheck(_ syscall: Syscall, name: UnsafePointer<CChar>?) throws(Errno) {
    let scopes = (current.map { [$0] } ?? []) + everywhere.withLock { $0 }
    for scope in scopes {
      if let error = scope.decide(syscall, name: name) { throw error }
    }
  }

  private func decide(_ syscall: Syscall, name: UnsafePointer<CChar>?) -> Errno? {
    state.withLock { state in
      state.calls[syscall, default: 0] += 1
      guard let fault = state.faults[syscall] else { return nil }
      if let wanted = fault.name {
        guard let name, strlen(name) == wanted.count,
          wanted.elementsEqual(
            UnsafeBufferPointer(start: UnsafeRawPointer(name).assumingMemoryBound(to: UInt8.self), count: wanted.count))
        else { return nil }
      }
      let index = state.matching[syscall, default: 0]
      state.matching[syscall] = index + 1
      guard index >= fault.after else { return nil }
      if let times = fault.times, index - fault.after >= times { return nil }
      state.failures[syscall, default: 0] += 1
      return fault.errno
    }
  }
}

#if canImport(Glibc)
  import Glibc
#endif
