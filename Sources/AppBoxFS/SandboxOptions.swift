import AppBoxEvents
import SandboxPolicy

/// How a sandbox behaves: its policies' settings, chosen at mount.
public struct SandboxOptions: Sendable {
  /// A device mount (`--device`): several app and App Group containers on one capacity,
  /// one lock state and one purge order (docs/reference.md#a-device).
  public var device = false
  /// Capacity in bytes (`--capacity`).
  public var capacity: Int64 = 4 << 30
  /// Class of new items whose directory has none (`--default-protection`).
  public var defaultProtection: ProtectionClass = .containerDefault
  /// Start UNLOCKED, as an app in the foreground sees the device (`--bfu`: before the
  /// first unlock instead).
  public var startUnlocked = true
  /// Seconds of GRACE after a lock (`--grace`).
  public var gracePeriod: Double = LockStateMachine.defaultGracePeriod
  /// Seconds locked before class CX becomes inaccessible (`--cx-timeout`).
  public var inactivityTimeout: Double = LockStateMachine.defaultInactivityTimeout
  /// Background purge above/below these fractions of the capacity (`--purge-at`, `--purge-to`).
  public var waterMarks: WaterMarks?
  /// tmp entries unused for longer than this many seconds are purged (`--tmp-max-age`).
  public var tmpMaxAge: Double?
  /// Where events are appended as JSON Lines: the current segment of this mount's log
  /// (nil: not recorded; see ``EventLogLimits``).
  public var eventsPath: String?
  /// The mount's id, in the log's headers and `appbox status` (nil: made from the clock).
  public var eventLogID: String?
  /// The event log's bounds: segment size, refusal coalescing.
  public var eventLogLimits = EventLogLimits()
  /// Seconds between usage samples in the event log, logged only when something changed
  /// (`--usage-interval`; 0: only at mount, capacity changes and unmount).
  public var usageInterval: Double = 1
  /// The order of purge victims within a domain and urgency (`--purge-policy`).
  public var purgePolicy = PurgePolicy.lru
  /// Reads through the mount leave access times alone (`-o noatime`): the daemon opens
  /// backing files and directories with `O_NOATIME`.
  public var noAccessTime = false

  /// How many forgotten files keep valid file handles (``InodeTable``), about 120 bytes
  /// each (measured); 0: a handle is stale once the kernel forgets its inode.
  public var retainedHandles = 1 << 18

  /// The defaults: 4 GiB, class C, UNLOCKED at mount, 10 s grace, 60 s CX timeout.
  public init() {}
}
