// swift-tools-version: 6.0
import PackageDescription

// Layers point one way: appbox → AppBoxCLI → (AppBoxBackup, AppBoxFS, FuseBridge); AppBoxFS →
// (FilesystemInterface, Posix, PropertyLists, SandboxPolicy); FuseBridge → (FilesystemInterface, CFuse…).
// FilesystemInterface holds the filesystem protocol and its value types, free of FUSE
// types: AppBoxFS implements it, FuseBridge drives it on a mount, AppBoxFSTests in memory.
// Only FuseBridge imports libfuse: CFuse (the shim header) and CFuseDevice (the session's
// device I/O, in C). Only Posix makes the filesystem's syscalls (through CPosixShim for what
// Glibc's module does not export). SandboxPolicy is pure Swift. AppBoxEvents (pure Swift,
// over SandboxPolicy) is the event log's one schema: the Codable event types, their JSON
// Lines encoder and decoder, the log's header and version, refusal coalescing and the
// log's bounds; the daemon (AppBoxFS) writes it, AppBoxReport, the CLI and AppBoxKit read
// it. AppBoxKit is a client library for programs run in a sandbox: Posix, SandboxPolicy,
// AppBoxEvents and PlainFoundation, never the filesystem. AppBoxBackup is the backup
// engine and its formats (Manifest.db through CSQLite, libsqlite3; MBFile records):
// AppBoxFS (the backing's class attributes), Posix, PropertyLists, SandboxPolicy (what a
// backup holds), no FUSE, no CLI. PropertyLists is the one property-list codec (pure
// Swift), for a backup's plists and a device's container metadata.
// Example programs, one small executable each (Examples/DIRECTORY/main.swift), written as
// for iOS with `import AppBoxKit`; MountTests runs them under `appbox run`.
let examples: [(directory: String, name: String)] = [
  ("DocumentStore", "appbox-example-document-store"), ("ImageCache", "appbox-example-image-cache"),
  ("CacheCleaner", "appbox-example-cache-cleaner"), ("Downloads", "appbox-example-downloads"),
  ("CapacityCheck", "appbox-example-capacity-check"), ("ProtectedSecret", "appbox-example-protected-secret"),
  ("TimelineApp", "appbox-example-timeline-app"), ("TimelineWidget", "appbox-example-timeline-widget"),
]

// AppBoxReport (pure Swift) turns event logs into the reports and experiment pages.
let package = Package(
  name: "AppBox",
  products: [
    .executable(name: "appbox", targets: ["appbox"]),
    .library(name: "AppBoxKit", targets: ["AppBoxKit"]),
  ],
  targets: [
    .systemLibrary(
      name: "CFuse",
      pkgConfig: "fuse3",
      providers: [.apt(["libfuse3-dev"])]
    ),
    .systemLibrary(
      name: "CSQLite",
      pkgConfig: "sqlite3",
      providers: [.apt(["libsqlite3-dev"])]
    ),
    // CFuseDevice links liburing (Debian's liburing-dev) for FUSE over io_uring.
    .target(name: "CFuseDevice", dependencies: ["CFuse"], linkerSettings: [.linkedLibrary("uring")]),
    .target(name: "CPosixShim"),
    .target(name: "Posix", dependencies: ["CPosixShim"]),
    .target(name: "SandboxPolicy"),
    .target(name: "AppBoxEvents", dependencies: ["SandboxPolicy"]),
    .target(name: "FilesystemInterface", dependencies: ["Posix"]),
    .target(name: "FuseBridge", dependencies: ["CFuse", "CFuseDevice", "FilesystemInterface", "Posix"]),
    .target(name: "PropertyLists"),
    .target(
      name: "AppBoxFS", dependencies: ["AppBoxEvents", "FilesystemInterface", "Posix", "PropertyLists", "SandboxPolicy"]),
    .target(name: "AppBoxBackup", dependencies: ["AppBoxFS", "CSQLite", "Posix", "PropertyLists", "SandboxPolicy"]),
    // AppBoxReport: event logs into summaries and HTML pages (pure Swift, no syscalls).
    .target(name: "AppBoxReport", dependencies: ["AppBoxEvents", "SandboxPolicy"]),
    .target(
      name: "AppBoxCLI",
      dependencies: ["AppBoxBackup", "AppBoxEvents", "AppBoxFS", "AppBoxReport", "FuseBridge", "Posix", "SandboxPolicy"]),
    .executableTarget(name: "appbox", dependencies: ["AppBoxCLI"]),
    // AppBoxKit: Apple's storage calls for programs' own Swift code, backed by the mount.
    // PlainFoundation reaches Foundation's members that AppBoxKit declares again.
    .target(name: "PlainFoundation"),
    .target(name: "AppBoxKit", dependencies: ["AppBoxEvents", "PlainFoundation", "Posix", "SandboxPolicy"]),
    // TestSupport: what several test targets (and the purge-catalog bench) share: a seeded
    // generator, a byte pattern, the tests' own names of the protection classes.
    .target(name: "TestSupport", path: "Tests/TestSupport"),
    .executableTarget(
      name: "purge-catalog-bench", dependencies: ["SandboxPolicy", "TestSupport"], path: "bench/purge-catalog",
      exclude: ["README.md"]),
    .executableTarget(
      name: "event-encoding-bench", dependencies: ["AppBoxEvents", "SandboxPolicy"], path: "bench/event-encoding"),
    .testTarget(name: "SandboxPolicyTests", dependencies: ["SandboxPolicy", "TestSupport"]),
    .testTarget(name: "AppBoxEventsTests", dependencies: ["AppBoxEvents", "SandboxPolicy", "TestSupport"]),
    .testTarget(name: "PosixTests", dependencies: ["Posix"]),
    .testTarget(
      name: "MountTests",
      dependencies: ["appbox", "AppBoxEvents", "CPosixShim", "Posix", "SandboxPolicy", "TestSupport"] + examples.map { .target(name: $0.name) }),
    .testTarget(
      name: "AppBoxReportTests", dependencies: ["AppBoxEvents", "AppBoxReport", "SandboxPolicy", "TestSupport"]),
    .testTarget(name: "FuseDeviceTests", dependencies: ["CFuseDevice"]),
    // The filesystem driven through its protocol in memory: no kernel, no /dev/fuse.
    .testTarget(
      name: "AppBoxFSTests",
      dependencies: [
        "AppBoxEvents", "AppBoxFS", "FilesystemInterface", "Posix", "PropertyLists", "SandboxPolicy", "TestSupport",
      ]),
    .testTarget(name: "AppBoxCLITests", dependencies: ["AppBoxCLI", "AppBoxFS", "FilesystemInterface", "Posix"]),
    // Backups without a CLI or a mount: the codecs, the database, restore plans, the engine on temporary directories.
    .testTarget(
      name: "AppBoxBackupTests",
      dependencies: ["AppBoxBackup", "AppBoxFS", "Posix", "PropertyLists", "SandboxPolicy", "TestSupport"]),
    .testTarget(
      name: "AppBoxKitTests", dependencies: ["AppBoxEvents", "AppBoxFS", "AppBoxKit", "Posix", "SandboxPolicy", "appbox"]),
  ]
    + examples.map { .executableTarget(name: $0.name, dependencies: ["AppBoxKit"], path: "Examples/\($0.directory)") }
)
