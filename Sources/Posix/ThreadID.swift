import CPosixShim

#if canImport(Glibc)
  import Glibc
#endif

extension Sys {
  /// The calling thread's id (`gettid(2)`): its directory in `/proc/self/task`, where
  /// tests read whether a thread sleeps.
  public static var threadID: pid_t { cposix_gettid() }
}
