import Foundation
import Testing

@testable import AppBoxCLI

/// The documentation of the mount options against their table (``MountOptions``): every
/// option in docs/reference.md#mounting with its default and who may set it, the README's
/// table a part of it, and the manual page's MOUNT OPTIONS.
@Suite("Mount options in the docs")
struct OptionDocsTests {
  /// The repository's root, from this file's place in it.
  static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path

  static func read(_ path: String) throws -> String {
    try String(contentsOfFile: root + "/" + path, encoding: .utf8)
  }

  /// One row of a Markdown table, its cells trimmed (`\|` inside a cell kept as `|`).
  static func cells(_ line: Substring) -> [String] {
    let marker = "\u{1}"
    return line.replacingOccurrences(of: "\\|", with: marker).split(separator: "|", omittingEmptySubsequences: false)
      .dropFirst().dropLast().map {
        $0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: marker, with: "|")
      }
  }

  /// The code spans of a cell: "`--capacity SIZE`, `-o capacity=SIZE`" → both.
  static func spans(_ cell: String) -> [String] {
    cell.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }
      .map { String($0.element) }
  }

  /// A default cell as the table's text: without backticks.
  static func plain(_ cell: String) -> String { cell.replacingOccurrences(of: "`", with: "") }

  /// The rows of the first table after `heading` whose header starts with `| option |`.
  static func optionRows(_ text: String, after heading: String) throws -> [[String]] {
    let start = try #require(text.range(of: heading), "no \(heading)")
    let lines = text[start.upperBound...].split(separator: "\n", omittingEmptySubsequences: false)
    let header = try #require(lines.firstIndex { $0.hasPrefix("| option |") }, "no option table after \(heading)")
    return lines[(header + 2)...].prefix { $0.hasPrefix("|") }.map(cells)
  }

  /// The spellings that name `option` in the docs.
  static func spellings(_ option: MountOption) -> [String] {
    [option.flagForm, option.oForm.map { "-o " + $0 }].compactMap { $0 }
  }

  @Test("docs/reference.md#mounting lists every option once, with the table's default and who may set it")
  func reference() throws {
    let rows = try Self.optionRows(try Self.read("docs/reference.md"), after: "## Mounting")
    #expect(rows.allSatisfy { $0.count == 4 }, "rows: option | default | who | meaning")
    for option in MountOptions.all {
      let matching = rows.filter { !Set(Self.spans($0[0])).isDisjoint(with: Self.spellings(option)) }
      guard let row = matching.first else {
        Issue.record("\(Self.spellings(option)) is not in docs/reference.md#mounting")
        continue
      }
      #expect(matching.count == 1, "\(option.name) in \(matching.count) rows")
      #expect(
        Set(Self.spans(row[0])).isSuperset(of: Self.spellings(option)),
        "\(row[0]) lacks one of \(Self.spellings(option))")
      #expect(Self.plain(row[1]) == option.defaultValue.text ?? "", "\(option.name): default \(row[1])")
      let who: String
      switch option.access {
      case .anyone: who = ""
      case .root: who = "root"
      case .nobody: who = "nobody"
      }
      #expect(row[2] == who, "\(option.name): who \(row[2])")
    }
    let known = Set(MountOptions.all.flatMap(Self.spellings) + MountOptions.all.compactMap(\.shortFlag))
    for row in rows {
      #expect(Set(Self.spans(row[0])).isSubset(of: known), "\(row[0]) is no option of the table")
    }
  }

  @Test("the README's options are the table's, with the same defaults")
  func readme() throws {
    let rows = try Self.optionRows(try Self.read("README.md"), after: "## Using it")
    #expect(rows.count >= 5)
    for row in rows {
      let names = Self.spans(row[0])
      if names == ["-o OPTIONS"] { continue }  // FUSE options in general
      let option = MountOptions.all.first { !Set(Self.spellings($0)).isDisjoint(with: names) }
      guard let option else {
        Issue.record("\(row[0]) in the README is no option of the table")
        continue
      }
      #expect(Self.plain(row[1]) == option.defaultValue.text ?? "", "\(option.name): README default \(row[1])")
    }
  }

  @Test("the manual page's MOUNT OPTIONS has every option with the table's default and who may set it")
  func manualPage() throws {
    let page = try Self.read("docs/appbox.1")
    let start = try #require(page.range(of: ".SH MOUNT OPTIONS\n"))
    let end = try #require(page.range(of: "\n.SH ", range: start.upperBound..<page.endIndex))
    // roff to text: `\-` is a hyphen, `\fB` and the like switch fonts.
    let text = page[start.upperBound..<end.lowerBound].replacingOccurrences(of: "\\-", with: "-")
      .replacingOccurrences(of: #"\\f[BIRP]"#, with: "", options: .regularExpression)
      .replacingOccurrences(of: "\"", with: "")
    let entries = text.components(separatedBy: ".TP\n").dropFirst().map {
      $0.replacingOccurrences(of: #"^\.[BIR]+ "#, with: "", options: [.regularExpression, .anchored])
    }
    for option in MountOptions.all {
      let tag = option.flag ?? "-o \(option.name)"
      let entry = entries.first { entry in
        let head = entry.prefix { $0 != "\n" }
        return head.hasPrefix(tag + " ") || head == tag || head.hasPrefix(tag + ",") || head.hasPrefix(tag + "=")
      }
      guard let entry else {
        Issue.record("\(tag) is not in docs/appbox.1's MOUNT OPTIONS")
        continue
      }
      let body = entry.split(separator: "\n").dropFirst().joined(separator: " ")
      if let text = option.defaultValue.text {
        #expect(body.contains("Default: \(text)."), "\(tag): \(body)")
      } else {
        #expect(!body.contains("Default:"), "\(tag): \(body)")
      }
      if option.access == .root { #expect(body.contains("Root only."), "\(tag): \(body)") }
    }
  }
}
