import PropertyLists
import SandboxPolicy

/// A container's `.com.apple.mobile_container_manager.metadata.plist` (docs/reference.md#a-device):
/// what iOS writes into every container to name it, a binary plist with
/// `MCMMetadataIdentifier` (the id), `MCMMetadataContentClass` (2 for an app, 7 for a
/// group), `MCMMetadataSchemaVersion` and `MCMMetadataUUID`. An app's also lists its App
/// Groups, under `MCMMetadataInfo` as `com.apple.security.application-groups` (the
/// entitlement that makes an app a member on iOS).
///
/// These files are the device's record of its apps: a mount reads the set of apps, and
/// which groups each belongs to, from them alone. Read in either of Apple's formats,
/// written as iOS writes it, binary.
public struct ContainerMetadata: Equatable, Sendable {
  /// The container's id.
  public var identifier: ContainerIdentifier
  /// App or group.
  public var kind: ContainerKind
  /// An app's groups (empty for a group).
  public var groups: [ContainerIdentifier]
  /// The container's UUID, as iOS names container directories (kept for readers).
  public var uuid: String

  /// The key of the groups list inside `MCMMetadataInfo`.
  public static let groupsKey = "com.apple.security.application-groups"

  /// A record; see the properties.
  public init(identifier: ContainerIdentifier, kind: ContainerKind, groups: [ContainerIdentifier] = [], uuid: String) {
    self.identifier = identifier
    self.kind = kind
    self.groups = groups.sorted()
    self.uuid = uuid
  }

  /// Why a file is not a container's metadata.
  public enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not a property list AppBox can read.
    case unreadable(String)
    /// No `MCMMetadataIdentifier` string, or not a valid id.
    case badIdentifier
    /// `MCMMetadataContentClass` says another kind of container.
    case wrongKind(Int64?)
    /// The groups list holds something that is not a group id.
    case badGroups

    public var description: String {
      switch self {
      case .unreadable(let reason): "not a property list (\(reason))"
      case .badIdentifier: "no valid MCMMetadataIdentifier"
      case .wrongKind(let value):
        "MCMMetadataContentClass \(value.map(String.init) ?? "missing") is not this kind of container's"
      case .badGroups: "\(groupsKey) is not a list of App Group ids"
      }
    }
  }

  /// The plist's bytes.
  public var encoded: [UInt8] {
    var info: [(String, PropertyList)] = []
    if kind == .app { info.append((Self.groupsKey, .array(groups.map { .string($0.name) }))) }
    return PropertyList.dictionary([
      ("MCMMetadataContentClass", .integer(kind.contentClass)),
      ("MCMMetadataIdentifier", .string(identifier.name)),
      ("MCMMetadataInfo", .dictionary(info)),
      ("MCMMetadataSchemaVersion", .integer(1)),
      ("MCMMetadataUUID", .string(uuid)),
    ]).encoded(as: .binary)
  }

  /// Reads a container's metadata.
  /// - Parameters:
  ///   - bytes: The file's bytes.
  ///   - kind: The kind of container it was found in (its directory says).
  /// - Throws: ``Problem`` when the file does not describe such a container.
  public init(decoding bytes: [UInt8], kind: ContainerKind) throws(Problem) {
    let root: PropertyList
    do throws(PropertyListError) { root = try PropertyList(decoding: bytes) } catch {
      throw .unreadable(error.description)
    }
    guard let text = root["MCMMetadataIdentifier"]?.stringValue, let identifier = ContainerIdentifier(bytes: text.utf8)
    else { throw .badIdentifier }
    let contentClass = root["MCMMetadataContentClass"]?.integerValue
    guard contentClass == kind.contentClass else { throw .wrongKind(contentClass) }
    var groups: [ContainerIdentifier] = []
    if kind == .app, let list = root["MCMMetadataInfo"]?[Self.groupsKey] {
      guard let elements = list.arrayValue else { throw .badGroups }
      for element in elements {
        guard let name = element.stringValue, let group = ContainerIdentifier(bytes: name.utf8) else {
          throw .badGroups
        }
        groups.append(group)
      }
    }
    self.init(
      identifier: identifier, kind: kind, groups: groups, uuid: root["MCMMetadataUUID"]?.stringValue ?? "")
  }
}
