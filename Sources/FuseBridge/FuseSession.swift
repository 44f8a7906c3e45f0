import CFuse
import CFuseDevice
import FilesystemInterface
import Posix
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Why a session could not be set up.
public enum FuseSessionError: Error, CustomStringConvertible {
  /// libfuse rejected the options (it printed which on stderr).
  case badOptions([String])
  /// The kernel refused the mount (libfuse printed why on stderr).
  case mountFailed(String)

  public var description: String {
    switch self {
    case .badOptions(let options): "libfuse rejected the mount options \(options.joined(separator: ","))"
    case .mountFailed(let mountpoint): "could not mount on \(mountpoint)"
    }
  }
}

/// How the kernel's INIT went: the mount is up only once the kernel has taken the answer.
public enum FuseInitialization: Equatable, Sendable {
  /// No answer yet (the session ended before INIT came, or it has not come yet).
  case pending
  /// The kernel took the answer: the mount serves requests.
  case done
  /// libfuse refused the kernel's INIT (its reason is on standard error) or the answer
  /// could not be written; the session ends.
  case failed(Errno)
}

/// Watches the INIT reply (CFuseDevice's INIT hook) for a session; retained by it.
private final class InitializationWatch: Sendable {
  /// -1: pending; 0: done; else the errno.
  private let outcome = Atomic<Int32>(-1)
  private let whenDone: @Sendable () -> Void

  init(whenDone: @escaping @Sendable () -> Void) { self.whenDone = whenDone }

  var state: FuseInitialization {
    switch outcome.load(ordering: .acquiring) {
    case -1: .pending
    case 0: .done
    case let error: .failed(Errno(rawValue: error))
    }
  }

  func answered(_ error: Int32) {
    outcome.store(error, ordering: .releasing)
    if error == 0 { whenDone() }
  }
}

/// One FUSE session: mount, serve on a pool of worker threads, unmount.
public final class FuseSession {
  private let session: OpaquePointer
  private let box: Unmanaged<FilesystemBox>
  private var mounted = false
  private var watch: Unmanaged<InitializationWatch>?
  /// False when a thread may still use the session after the loop (see StalePageDrops):
  /// then it is left, not destroyed.
  private var drained = true

  /// Creates a session for `filesystem` with libfuse `-o` options.
  public init(filesystem: any Filesystem, configuration: FuseConfiguration, options: [String])
    throws(FuseSessionError)
  {
    let box = Unmanaged.passRetained(FilesystemBox(filesystem, configuration))
    var argv: [UnsafeMutablePointer<CChar>?] = [strdup("appbox")]
    if !options.isEmpty {
      argv.append(strdup("-o"))
      argv.append(strdup(options.joined(separator: ",")))
    }
    defer { argv.forEach { free($0) } }
    var ops = makeOperations(flush: !configuration.writeCache)
    let created = argv.withUnsafeMutableBufferPointer { buffer -> OpaquePointer? in
      var args = cfuse_args_init(Int32(buffer.count), buffer.baseAddress)
      defer { fuse_opt_free_args(&args) }
      return fuse_session_new(&args, &ops, MemoryLayout<fuse_lowlevel_ops>.size, box.toOpaque())
    }
    guard let created else {
      box.release()
      throw .badOptions(options)
    }
    self.session = created
    self.box = box
  }

  /// Mounts on `mountpoint`.
  public func mount(_ mountpoint: String) throws(FuseSessionError) {
    guard fuse_session_mount(session, mountpoint) == 0 else { throw .mountFailed(mountpoint) }
    mounted = true
    let configuration = box.takeUnretainedValue().configuration
    if configuration.writeCache { WriteCacheState.readDirtyLimit(mountpoint: mountpoint) }
    var wanted = UInt32(CFUSE_DEVICE_KILLPRIV_V2 | CFUSE_DEVICE_DIRECT_IO_MMAP)
    if configuration.passthrough { wanted |= UInt32(CFUSE_DEVICE_PASSTHROUGH) }
    if configuration.transport == .ioUring {
      if let refusal = configuration.ioUringRefusal {
        cfuse_device_refuse_uring(refusal)
      } else {
        wanted |= UInt32(CFUSE_DEVICE_IO_URING)
      }
    }
    guard cfuse_device_install(session, wanted) == 0 else { throw .mountFailed(mountpoint) }
    cfuse_device_set_busy_poll(configuration.busyPollMicroseconds)
    cfuse_device_set_cpu_handoff(configuration.cpuHandoff)
    box.takeUnretainedValue().stalePages.start(notifier: FuseKernelNotifier(session: session))
    box.takeUnretainedValue().filesystem.mounted(notifier: FuseKernelNotifier(session: session))
  }

  /// The descriptor of `/dev/fuse` for this session.
  public var deviceDescriptor: Int32 { fuse_session_fd(session) }

  /// Serves requests until unmounted or signalled (SIGINT, SIGTERM, SIGHUP end the loop).
  /// - Parameter whenInitialized: called once, on a worker thread, when the kernel has
  ///   taken the answer to INIT: from then on the mount serves requests. Not called when
  ///   INIT fails (see ``initialization``).
  /// - Returns: 0 on a clean end, else libfuse's error or signal number.
  public func run(configuration: FuseConfiguration, whenInitialized: @escaping @Sendable () -> Void = {}) -> Int32 {
    let watch = Unmanaged.passRetained(InitializationWatch(whenDone: whenInitialized))
    self.watch = watch
    cfuse_device_on_init(
      { context, error in Unmanaged<InitializationWatch>.fromOpaque(context!).takeUnretainedValue().answered(error) },
      watch.toOpaque())
    guard fuse_set_signal_handlers(session) == 0 else { return -1 }
    defer { fuse_remove_signal_handlers(session) }
    let result = cfuse_session_loop_mt(session, configuration.maxIdleThreads, configuration.maxThreads)
    drained = box.takeUnretainedValue().stalePages.stop()  // before the session and its requests go
    return result
  }

  /// How INIT went (after ``run(configuration:whenInitialized:)``: for good).
  public var initialization: FuseInitialization { watch?.takeUnretainedValue().state ?? .pending }

  /// Asks the loop to end (thread-safe).
  public func exit() { fuse_session_exit(session) }

  /// Unmounts if mounted, and stops the io_uring workers (whose requests end with the
  /// mount).
  public func unmount() {
    if mounted {
      fuse_session_unmount(session)
      mounted = false
      cfuse_device_uninstall()
    }
  }

  deinit {
    unmount()
    guard drained else { return }
    fuse_session_destroy(session)
    box.release()
    // The loop has ended: no worker calls the INIT hook any more.
    cfuse_device_on_init(nil, nil)
    watch?.release()
  }
}
