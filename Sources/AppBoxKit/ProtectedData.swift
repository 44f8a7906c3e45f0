import Dispatch
import Foundation

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
    return ProtectedDataMonitor.willBecomeUnavailable
  }

  /// Posted after the device unlocks. Naming it starts the monitor.
  public static var protectedDataDidBecomeAvailableNotification: Notification.Name {
    ProtectedDataMonitor.shared.start()
    return ProtectedDataMonitor.didBecomeAvailable
  }
}
