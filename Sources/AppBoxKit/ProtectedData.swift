import Dispatch
import Foundation
import SandboxPolicy
import Synchronization

/// Protected-data availability and its notifications, as UIKit's `UIApplication` gives
/// them, so iOS code that uses them runs with `import AppBoxKit` in place of
/// `import UIKit`. Outside an AppBox mount protected data is always available and no
/// notification is posted.
public final class UIApplication: Sendable {
  /// The one instance, as in UIKit; also the notifications' `object`.
  public static let shared = UIApplication()

  private init() {}

  /// Whether class `complete` files are accessible now: the device is unlocked, or locked
  /// but within its grace period.
  public var isProtectedDataAvailable: Bool { ProtectedDataMonitor.shared.isProtectedDataAvailable }

  /// Posted when the device locks (it enters GRACE, or LOCKED with no grace), before class
  /// `complete` files close. Naming it starts the monitor.
  public static var protectedDataWillBecomeUnavailableNotification: Notification.Name {
    ProtectedDataMonitor.shared.start()
    return Notification.Name("UIApplicationProtectedDataWillBecomeUnavailable")
  }

  /// Posted after the device unlocks. Naming it starts the monitor.
  public static var protectedDataDidBecomeAvailableNotification: Notification.Name {
    ProtectedDataMonitor.shared.start()
    return Notification.Name("UIApplicationProtectedDataDidBecomeAvailable")
  }
}

/// Watches the device state of the container `appbox run` started the program in, and
/// posts UIKit's protected-data notifications on `NotificationCenter.default` when it
/// changes. It reads the root's `user.appbox.device-state` every
/// ``pollInterval`` on a background queue (one `getxattr` each), from the first time a
/// notification name is used or ``start()`` is called.
public final class ProtectedDataMonitor: Sendable {
  /// The monitor of ``AppBoxContainer/current``.
  public static let shared = ProtectedDataMonitor(container: AppBoxContainer.current)
  /// How often the state is read.
  public static let pollInterval: DispatchTimeInterval = .milliseconds(50)

  private let container: AppBoxContainer?
  private let queue = DispatchQueue(label: "appbox.protected-data")
  /// The running timer and the last state seen (leaf lock).
  private let watch = Mutex<(timer: DispatchSourceTimer?, last: DeviceState?)>((nil, nil))

  init(container: AppBoxContainer?) { self.container = container }

  /// Whether class `complete` data is accessible now (always outside a mount).
  public var isProtectedDataAvailable: Bool {
    guard let state = container?.deviceState else { return true }
    return state == .unlocked || state == .grace
  }

  /// Starts watching (once; nothing to watch outside a mount).
  public func start() {
    guard let container else { return }
    watch.withLock { watch in
      guard watch.timer == nil else { return }
      watch.last = container.deviceState
      let timer = DispatchSource.makeTimerSource(queue: queue)
      timer.schedule(deadline: .now() + Self.pollInterval, repeating: Self.pollInterval)
      timer.setEventHandler { [weak self] in self?.poll() }
      watch.timer = timer
      timer.resume()
    }
  }

  /// Reads the state and posts what changed: will-become-unavailable when leaving
  /// UNLOCKED, did-become-available when reaching it.
  private func poll() {
    guard let state = container?.deviceState else { return }
    let previous = watch.withLock { watch in
      defer { watch.last = state }
      return watch.last
    }
    guard let previous, previous != state else { return }
    if previous == .unlocked {
      NotificationCenter.default.post(
        name: UIApplication.protectedDataWillBecomeUnavailableNotification, object: UIApplication.shared)
    } else if state == .unlocked {
      NotificationCenter.default.post(
        name: UIApplication.protectedDataDidBecomeAvailableNotification, object: UIApplication.shared)
    }
  }
}
