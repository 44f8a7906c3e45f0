// The tests spell Data Protection classes themselves (not through SandboxPolicy), so that
// a wrong table in the product cannot make its own test pass.

/// A Data Protection class as the tests name it (its case name, e.g. `CX`, is how a test's
/// arguments show it).
public enum TestClass: String, CaseIterable, Sendable {
  case A, B, C, CX, D

  /// The canonical value of `user.appbox.protection`.
  public var name: String {
    switch self {
    case .A: "complete"
    case .B: "completeUnlessOpen"
    case .C: "completeUntilFirstUserAuthentication"
    case .CX: "completeWhenUserInactive"
    case .D: "none"
    }
  }
}
