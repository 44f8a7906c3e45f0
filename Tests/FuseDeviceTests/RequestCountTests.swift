import CFuseDevice
import Testing

/// The names `appbox status --json` shows for the request counters (counters.c).
@Suite("Request counter names")
struct RequestCountTests {
  @Test(
    "each opcode of the kernel's protocol has its name, in lower case without FUSE_",
    arguments: [
      (UInt32(0), "other"), (1, "lookup"), (2, "forget"), (3, "getattr"), (10, "unlink"), (26, "init"),
      (35, "create"), (36, "interrupt"), (42, "batch_forget"), (44, "readdirplus"), (47, "copy_file_range"),
      (52, "statx"),
    ])
  func names(opcode: UInt32, name: String) throws {
    let text = try #require(cfuse_device_opcode_name(opcode))
    #expect(String(cString: text) == name)
  }

  @Test("numbers the protocol leaves unused, or beyond the table, have no name and no count")
  func unusedNumbers() {
    for opcode: UInt32 in [7, 19, UInt32(CFUSE_DEVICE_OPCODES), 4096] {
      #expect(cfuse_device_opcode_name(opcode) == nil)
    }
    #expect(cfuse_device_request_count(4096) == 0)
  }
}
