import PropertyLists

/// The three property lists of a backup besides `Manifest.db`, as Finder and iTunes write
/// them for a device: `Manifest.plist` (binary; `IsEncrypted` false, the apps), `Info.plist`
/// (XML; the device, the apps) and `Status.plist` (binary; a full, finished backup). AppBox
/// is the device: its name, product and serial number are `AppBox`, its identifier a hash
/// of the backed-up directory.
struct BackupPlists {
  let manifest: PropertyList
  let info: PropertyList
  let status: PropertyList

  /// The key under which an app's entry of `Manifest.plist` lists its App Groups (the
  /// entitlement's name; AppBox's own: a device's backup does not say).
  static let groupsKey = "com.apple.security.application-groups"

  /// The plists of a backup of one app, `bundleID`, from the backing directory `source`,
  /// made at `now` (Unix seconds).
  init(bundleID: String, source: String, now: Double) {
    self.init(apps: [(bundleID, [])], source: source, now: now)
  }

  /// The plists of a backup of `apps` (with their groups) from the backing directory
  /// `source`, made at `now` (Unix seconds).
  init(apps: [(bundleID: String, groups: [String])], source: String, now: Double) {
    let date = PropertyList.date(now - Double(PropertyList.referenceDate))
    let identifier = SHA1.hexDigest(Array("AppBox-\(source)".utf8))
    let name = PropertyList.string("AppBox")
    let lockdown = PropertyList.dictionary([
      ("BuildVersion", .string("21A329")), ("DeviceName", name), ("ProductType", name),
      ("ProductVersion", .string("17.0")), ("SerialNumber", .string("APPBOX")),
      ("UniqueDeviceID", .string(identifier)),
    ])
    let applications = apps.map { app -> (String, PropertyList) in
      var entry: [(String, PropertyList)] = [
        ("CFBundleIdentifier", .string(app.bundleID)), ("CFBundleVersion", .string("1")),
        ("ContainerContentClass", .string("Data/Application")),
        ("Path", .string("/private/var/containers/Bundle/Application/AppBox/\(app.bundleID).app")),
      ]
      if !app.groups.isEmpty { entry.append((Self.groupsKey, .array(app.groups.map { .string($0) }))) }
      return (app.bundleID, .dictionary(entry))
    }
    manifest = .dictionary([
      ("Applications", .dictionary(applications)), ("Date", date), ("IsEncrypted", .boolean(false)),
      ("Lockdown", lockdown), ("SystemDomainsVersion", .string("24.0")), ("Version", .string("10.0")),
      ("WasPasscodeSet", .boolean(false)),
    ])
    info = .dictionary([
      ("Applications", .dictionary(apps.map { ($0.bundleID, .dictionary([])) })), ("Build Version", .string("21A329")),
      ("Device Name", name), ("Display Name", name), ("GUID", .string(String(identifier.prefix(32)).uppercased())),
      ("Installed Applications", .array(apps.map { .string($0.bundleID) })), ("Last Backup Date", date),
      ("Product Type", name),
      ("Product Version", .string("17.0")), ("Serial Number", .string("APPBOX")),
      ("Target Identifier", .string(identifier)), ("Target Type", .string("Device")),
      ("Unique Identifier", .string(identifier.uppercased())),
    ])
    status = .dictionary([
      ("BackupState", .string("new")), ("Date", date), ("IsFullBackup", .boolean(true)),
      ("SnapshotState", .string("finished")), ("UUID", .string(Self.randomUUID())), ("Version", .string("3.3")),
    ])
  }

  /// A random (version 4) UUID in its usual upper-case text.
  static func randomUUID() -> String {
    var bytes = (0..<16).map { _ in UInt8.random(in: 0...255) }
    bytes[6] = bytes[6] & 0x0F | 0x40
    bytes[8] = bytes[8] & 0x3F | 0x80
    let hex = bytes.map { String($0, radix: 16, uppercase: true) }.map { $0.count == 1 ? "0" + $0 : $0 }
    return [0..<4, 4..<6, 6..<8, 8..<10, 10..<16].map { hex[$0].joined() }.joined(separator: "-")
  }

  /// Each app's groups as a backup's `Manifest.plist` lists them (AppBox's backups of a
  /// device; a real device's does not say: no entry).
  static func groups(manifest bytes: [UInt8]) -> [String: [String]] {
    guard let root = try? PropertyList(decoding: bytes), case .dictionary(let apps)? = root["Applications"] else {
      return [:]  // not readable as a dictionary: isEncrypted(manifest:) refuses it first
    }
    var groups: [String: [String]] = [:]
    for (bundleID, entry) in apps {
      if let list = entry[Self.groupsKey]?.arrayValue { groups[bundleID] = list.compactMap(\.stringValue) }
    }
    return groups
  }

  /// Whether a backup's `Manifest.plist` says it is encrypted.
  /// - Throws: ``BackupError`` `.badData` when it is not a property list holding a dictionary.
  static func isEncrypted(manifest bytes: [UInt8]) throws(BackupError) -> Bool {
    let root: PropertyList
    do throws(PropertyListError) { root = try PropertyList(decoding: bytes) } catch {
      throw BackupError(.badData, "\(BackupLayout.manifest) is not a property list (truncated?): \(error)")
    }
    guard case .dictionary = root else {
      throw BackupError(.badData, "\(BackupLayout.manifest) is not a dictionary")
    }
    return root["IsEncrypted"]?.booleanValue == true
  }
}
