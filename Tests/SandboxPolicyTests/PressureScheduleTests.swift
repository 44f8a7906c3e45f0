import SandboxPolicy
import Testing

@Suite("Pressure schedules")
struct PressureScheduleTests {
  let minimum: Int64 = 1 << 20

  @Test("steps with sizes and percentages, comments and blank lines")
  func goodSchedule() throws {
    let text = """
      # shrink, then grow back
      0s     100%

      10s    64M      # another app fills the device
      1m30s  12.5%
      1m30s  2G
      """
    let schedule = try PressureSchedule.parse(text, minimumCapacity: minimum)
    #expect(schedule.steps.map(\.time) == [0, 10, 90, 90])
    #expect(schedule.steps.map(\.line) == [2, 4, 5, 6])
    #expect(schedule.steps[1].capacity == .bytes(64 << 20))
    #expect(
      try schedule.capacities(start: 128 << 20, minimumCapacity: minimum) == [128 << 20, 64 << 20, 16 << 20, 2 << 30])
  }

  @Test(
    "bad lines are refused with their line number",
    arguments: [
      ("0s 10M\n10s\n", "line 2:"),
      ("0s 10M 20M\n", "line 1:"),
      ("\n\nsoon 10M\n", "line 3:"),
      ("0s 10M\n10s 5M\n5s 6M\n", "line 3: time 5s is earlier"),
      ("0s ten\n", "line 1: capacity 'ten'"),
      ("0s 150%\n", "line 1: capacity '150%'"),
      ("# nothing\n0s 512K\n", "line 2: capacity '512K' is below the minimum"),
      ("# only a comment\n\n", "no steps"),
    ])
  func badSchedule(_ text: String, _ message: String) {
    #expect {
      _ = try PressureSchedule.parse(text, minimumCapacity: minimum)
    } throws: { error in
      "\(error)".contains(message)
    }
  }

  @Test("a percentage that comes out below the minimum is refused with its line")
  func percentageTooSmall() throws {
    let schedule = try PressureSchedule.parse("0s 50%\n1s 1%\n", minimumCapacity: minimum)
    #expect(try schedule.capacities(start: 256 << 20, minimumCapacity: minimum) == [128 << 20, (256 << 20) / 100])
    #expect {
      _ = try schedule.capacities(start: 64 << 20, minimumCapacity: minimum)
    } throws: { error in
      "\(error)".contains("line 2: capacity '1%' is below the minimum")
    }
  }
}
