import SandboxPolicy
import Testing

@Suite("Allocation blocks")
struct AllocationBlocksTests {
  @Test(
    "rounding to 4 KiB blocks",
    arguments: [
      (-5, 0, 0, 4096), (0, 0, 0, 4096), (1, 4096, 0, 8192), (4095, 4096, 0, 8192), (4096, 4096, 4096, 8192),
      (4097, 8192, 4096, 12288), (3000, 4096, 0, 8192),
    ] as [(Int64, Int64, Int64, Int64)])
  func rounding(bytes: Int64, up: Int64, down: Int64, withMetadata: Int64) {
    #expect(AllocationBlocks.roundUp(bytes) == up)
    #expect(AllocationBlocks.roundDown(bytes) == down)
    #expect(AllocationBlocks.withMetadata(bytes) == withMetadata)
  }
}
