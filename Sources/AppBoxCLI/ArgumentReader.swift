/// Walks a subcommand's arguments in order: options, the values they take, and the rest.
struct ArgumentReader {
  private let arguments: [String]
  private var index = -1

  /// Reads `arguments`.
  init(_ arguments: [String]) {
    self.arguments = arguments
  }

  /// The next argument, or nil after the last.
  mutating func next() -> String? {
    index += 1
    return index < arguments.count ? arguments[index] : nil
  }

  /// The value that follows the option just read.
  /// - Throws: a usage error when the option is the last argument.
  mutating func value() throws(CLIError) -> String {
    guard index + 1 < arguments.count else {
      throw CLIError(.usage, "\(arguments[index]) needs a value")
    }
    index += 1
    return arguments[index]
  }
}
