import SandboxPolicy
import Testing

@Suite("Descriptor share policy")
struct DescriptorSharePolicyTests {
  @Test("root and the owner may use the whole budget; anyone else seven eighths of it")
  func shares() {
    #expect(DescriptorShare.limit(budget: 320, isOwnerOrRoot: true) == 320)
    #expect(DescriptorShare.limit(budget: 320, isOwnerOrRoot: false) == 280)
    #expect(DescriptorShare.limit(budget: 14_936, isOwnerOrRoot: false) == 13_069)
    #expect(DescriptorShare.limit(budget: 64, isOwnerOrRoot: false) == 56)
  }
}
