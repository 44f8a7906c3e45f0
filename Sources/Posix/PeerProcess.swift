import CPosixShim

#if canImport(Glibc)
  import Glibc
#endif

/// The process at the other end of a Unix socket connection, held from the moment it is
/// taken (at accept): its credentials (`SO_PEERCRED`) and a pidfd that keeps naming that
/// process, so that what is read about its pid in `/proc` afterwards can be checked to be
/// about it and not about a later process that got the same pid.
///
/// The pidfd is the kernel's own record of the process that connected (`SO_PEERPIDFD`,
/// Linux 6.5), else, on an older kernel, `pidfd_open` of the `SO_PEERCRED` pid at once (the
/// process that has that pid now: the one that connected unless it has exited and its pid
/// was reused in between).
public final class PeerProcess: Sendable {
  /// How the pidfd was taken.
  public enum Binding: Equatable, Sendable {
    /// `SO_PEERPIDFD`: the process that connected.
    case connection
    /// `pidfd_open` of the `SO_PEERCRED` pid (a kernel without `SO_PEERPIDFD`).
    case pid
    /// None could be taken (the process is gone, or this error): nothing read about its
    /// pid can be shown to be about it.
    case none(Errno)
  }

  /// The peer's pid, uid and gid when it connected.
  public let credentials: UnixSocket.PeerCredentials
  /// How ``pidfd`` was taken.
  public let binding: Binding
  private let pidfd: Int32

  private init(credentials: UnixSocket.PeerCredentials, binding: Binding, pidfd: Int32) {
    self.credentials = credentials
    self.binding = binding
    self.pidfd = pidfd
  }

  deinit { if pidfd >= 0 { Sys.close(pidfd) } }

  /// The peer of the connected socket `connection`, with a pidfd of it when one can be
  /// taken (``binding``).
  /// - Throws: when `SO_PEERCRED` fails (not a connected Unix socket).
  public static func of(_ connection: Int32) throws(Errno) -> PeerProcess {
    let credentials = try UnixSocket.peerCredentials(connection)
    let pidfd: Int32
    do throws(Errno) {
      try SyscallFaults.check(.peerPIDFD)
      pidfd = try Sys.check(result: cposix_peer_pidfd(connection))
    } catch  where error.rawValue == ENOPROTOOPT {
      // A kernel older than 6.5: the process that has the pid now.
      do throws(Errno) {
        guard credentials.pid > 0 else { throw Errno.noSuchProcess }
        let opened = try Sys.check(result: cposix_pidfd_open(credentials.pid))
        return PeerProcess(credentials: credentials, binding: .pid, pidfd: opened)
      } catch {
        return PeerProcess(credentials: credentials, binding: .none(error), pidfd: -1)
      }
    } catch {
      return PeerProcess(credentials: credentials, binding: .none(error), pidfd: -1)
    }
    return PeerProcess(credentials: credentials, binding: .connection, pidfd: pidfd)
  }

  /// Whether the process of the pidfd has not yet been reaped, so that its pid still names
  /// it (a pid is reused only once its process is reaped; a zombie keeps it). Read `/proc`
  /// first and ask this after: then what was read is about this process. False without a
  /// pidfd, and when the kernel cannot say (fails closed).
  public var isStillThere: Bool {
    guard pidfd >= 0 else { return false }
    // EPERM: there, but not a process this one may signal (root's, for a user's daemon).
    return cposix_pidfd_send_signal(pidfd, 0) == 0 || errno == EPERM
  }
}

extension Sys {
  /// A C call's non-negative result, or its errno thrown.
  @inlinable
  public static func check(result: Int32) throws(Errno) -> Int32 {
    guard result >= 0 else { throw Errno.current }
    return result
  }
}
