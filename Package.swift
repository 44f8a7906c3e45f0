// swift-tools-version: 6.0
import PackageDescription

// Layers point one way: appbox → AppBoxCLI → AppBoxFS → (FuseBridge, Posix, SandboxPolicy).
// Only FuseBridge imports libfuse: CFuse (the shim header) and CFuseDevice (the session's
// device I/O, in C). Only Posix makes the filesystem's syscalls (through CPosixShim for what
// Glibc's module does not export). SandboxPolicy is pure Swift. AppBoxKit is a client
// library for programs run in a sandbox: Posix, SandboxPolicy and PlainFoundation, never
// the filesystem. CSQLite (libsqlite3) serves only the CLI's backups (Manifest.db).
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
    .target(name: "CFuseDevice", dependencies: ["CFuse"]),
    .target(name: "CPosixShim"),
    .target(name: "Posix", dependencies: ["CPosixShim"]),
    .target(name: "SandboxPolicy"),
    .target(name: "FuseBridge", dependencies: ["CFuse", "CFuseDevice", "Posix"]),
    .target(name: "AppBoxFS", dependencies: ["FuseBridge", "Posix", "SandboxPolicy"]),
    // AppBoxReport: event logs into summaries and HTML pages (pure Swift, no syscalls).
    .target(name: "AppBoxReport", dependencies: ["SandboxPolicy"]),
    .target(
      name: "AppBoxCLI", dependencies: ["AppBoxFS", "AppBoxReport", "CSQLite", "FuseBridge", "Posix", "SandboxPolicy"]),
    .executableTarget(name: "appbox", dependencies: ["AppBoxCLI"]),
    // AppBoxKit: Apple's storage calls for programs' own Swift code, backed by the mount.
    // PlainFoundation reaches Foundation's members that AppBoxKit declares again.
    .target(name: "PlainFoundation"),
    .target(name: "AppBoxKit", dependencies: ["PlainFoundation", "Posix", "SandboxPolicy"]),
    .executableTarget(name: "appbox-storage-example", dependencies: ["AppBoxKit"], path: "Examples/StorageExample"),
    .executableTarget(
      name: "purge-catalog-bench", dependencies: ["SandboxPolicy"], path: "bench/purge-catalog",
      exclude: ["README.md"]),
    .testTarget(name: "SandboxPolicyTests", dependencies: ["SandboxPolicy"]),
    .testTarget(
      name: "MountTests", dependencies: ["appbox", "appbox-storage-example", "CPosixShim", "Posix", "SandboxPolicy"]),
    .testTarget(name: "AppBoxReportTests", dependencies: ["AppBoxReport", "SandboxPolicy"]),
    .testTarget(name: "FuseDeviceTests", dependencies: ["CFuseDevice"]),
    .testTarget(name: "AppBoxKitTests", dependencies: ["AppBoxKit", "Posix", "appbox"]),
  ]
)
