import Dispatch
import Foundation
import SandboxPolicy
import Synchronization

/// Follows the device state of an AppBox container and posts UIKit's protected-data
/// notifications on a notification center when it changes: will-become-unavailable when
/// the state leaves UNLOCKED (the lock; class `complete` closes when the grace ends),
/// did-become-available when it reaches UNLOCKED again.
///
/// The changes come from the mount's event log (`APPBOX_EVENTS`, which `appbox run` sets),
/// read as the daemon appends to it (inotify), and are posted one at a time, in the log's
/// order, from a serial queue. An observer added with an `OperationQueue` runs there
/// (Foundation waits for it before the next change is posted; an `OperationQueue` whose
/// `underlyingQueue` is a `DispatchQueue` runs it on that queue); one added without a
/// queue runs on the monitor's queue. Without an event log to follow (a program not
/// started by `appbox run`, inotify out of instances, or a log of a newer format) the
/// monitor reads the root's `user.appbox.device-state` every ``pollInterval`` instead.
public final class ProtectedDataMonitor: Sendable {
  /// The monitor of ``AppBoxContainer/current``, following `APPBOX_EVENTS`.
  public static let shared = ProtectedDataMonitor(
    container: AppBoxContainer.current,
    eventLog: RunEnvironment.path("APPBOX_EVENTS"))
  /// How often the state is read when there is no event log to follow.
  public static let pollInterval: DispatchTimeInterval = .milliseconds(50)

  /// UIKit's `protectedDataWillBecomeUnavailableNotification`.
  public static let willBecomeUnavailable = Notification.Name("UIApplicationProtectedDataWillBecomeUnavailable")
  /// UIKit's `protectedDataDidBecomeAvailableNotification`.
  public static let didBecomeAvailable = Notification.Name("UIApplicationProtectedDataDidBecomeAvailable")

  /// How a monitor learns of changes.
  public enum Source: Sendable, Equatable {
    /// Not started, or nothing to watch (no container).
    case none
    /// The mount's event log, woken by inotify.
    case eventLog
    /// The root's device-state attribute, read every ``ProtectedDataMonitor/pollInterval``.
    case polling
  }

  private let container: AppBoxContainer?
  private let eventLog: String?
  private let center: NotificationCenter
  private let queue = DispatchQueue(label: "appbox.protected-data")
  /// What is running, and the last state polled (leaf lock).
  private let watch = Mutex<Watch>(Watch())

  private struct Watch {
    var follower: EventLogFollower?
    var timer: DispatchSourceTimer?
    var last: DeviceState?
    var source = Source.none
  }

  /// A monitor of `container`'s device state.
  /// - Parameters:
  ///   - container: the container; nil: protected data is always available.
  ///   - eventLog: the mount's event log (`appbox run` names it in `APPBOX_EVENTS`); nil:
  ///     the state is polled.
  ///   - center: where the notifications are posted.
  public init(container: AppBoxContainer?, eventLog: String?, center: NotificationCenter = .default) {
    self.container = container
    self.eventLog = eventLog
    self.center = center
  }

  deinit { stop() }

  /// Whether class `complete` data is accessible now (always outside a mount).
  public var isProtectedDataAvailable: Bool {
    guard let state = container?.deviceState else { return true }
    return state == .unlocked || state == .grace
  }

  /// How this monitor learns of changes (``Source/none`` until started).
  public var source: Source { watch.withLock { $0.source } }

  /// Starts watching (once; nothing to watch outside a mount).
  public func start() {
    guard let container else { return }
    watch.withLock { watch in
      guard watch.source == .none else { return }
      // A log is believed only as the mount owner's (whose daemon writes it); when the
      // owner cannot be found, the state is polled.
      if let eventLog, let owner = container.mountOwner {
        do {
          watch.follower = try EventLogFollower(
            path: eventLog, owner: owner, queue: queue, handle: { [weak self] change in self?.post(change) })
          watch.source = .eventLog
          return
        } catch {
          // No inotify instance or watch left, the log gone or not the owner's regular
          // file, or a newer format: polled.
        }
      }
      watch.last = container.deviceState
      let timer = DispatchSource.makeTimerSource(queue: queue)
      timer.schedule(deadline: .now() + Self.pollInterval, repeating: Self.pollInterval)
      timer.setEventHandler { [weak self] in self?.poll() }
      watch.timer = timer
      watch.source = .polling
      timer.resume()
    }
  }

  /// Stops watching; no notification is posted after the one being posted, if any.
  public func stop() {
    let (follower, timer) = watch.withLock { watch in
      defer { watch = Watch() }
      return (watch.follower, watch.timer)
    }
    follower?.cancel()
    timer?.cancel()
  }

  /// The notification a change calls for, if any.
  public static func notification(for change: DeviceStateChange) -> Notification.Name? {
    if change.from == .unlocked && change.to != .unlocked { return willBecomeUnavailable }
    if change.to == .unlocked && change.from != .unlocked { return didBecomeAvailable }
    return nil
  }

  /// Posts what `change` calls for (on the monitor's queue).
  private func post(_ change: DeviceStateChange) {
    guard let name = Self.notification(for: change) else { return }
    center.post(name: name, object: UIApplication.shared)
  }

  /// Reads the state and posts what changed since the last read.
  private func poll() {
    guard let state = container?.deviceState else { return }
    let previous = watch.withLock { watch in
      defer { watch.last = state }
      return watch.last
    }
    guard let previous, previous != state else { return }
    post(DeviceStateChange(from: previous, to: state))
  }
}
