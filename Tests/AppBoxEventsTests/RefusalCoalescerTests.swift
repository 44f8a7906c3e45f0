import AppBoxEvents
import SandboxPolicy
import Testing

@Suite("Refusal coalescing")
struct RefusalCoalescerTests {
  func refusal(_ path: String, at time: Double, _ operation: ProtectedOperation = .openExisting) -> ProtectionEvent {
    ProtectionEvent(
      time: time, pathBytes: Array(path.utf8), protectionClass: .complete, operation: operation, state: .locked)
  }

  @Test("a storm of one refusal: the first at once, the rest as one event with their count, first and last time")
  func storm() {
    var coalescer = RefusalCoalescer(window: 1, capacity: 16)
    var written: [ProtectionEvent] = []
    for index in 0..<50_000 {
      let time = 100 + Double(index) * 1e-5  // 0.5 s of refusals
      written += coalescer.note(refusal("Documents/a", at: time), now: time)
    }
    #expect(written.count == 1 && written[0].count == 1)
    #expect(coalescer.expire(now: 100.9).isEmpty, "the window is still open")
    let closed = coalescer.expire(now: 101.0)
    #expect(closed.count == 1)
    #expect(closed.first?.count == 49_999)
    #expect(closed.first?.time == 100 + 1e-5)
    #expect(closed.first?.last == 100 + 49_999 * 1e-5)
    #expect(written.count + closed.count == 2)
    #expect(coalescer.absorbed == 49_999 && coalescer.openWindows == 0)
  }

  @Test("a sustained storm costs at most two lines a window, and its counts add up exactly")
  func sustained() {
    var coalescer = RefusalCoalescer(window: 1, capacity: 16)
    var lines: [ProtectionEvent] = []
    var now = 0.0
    for _ in 0..<100_000 {
      now += 1e-4  // 10 s
      lines += coalescer.expire(now: now)
      lines += coalescer.note(refusal("Documents/a", at: now), now: now)
    }
    lines += coalescer.drain()
    #expect(lines.reduce(0) { $0 + $1.count } == 100_000)
    #expect(lines.count <= 2 * 11)
  }

  @Test("different paths, operations or states are different keys")
  func keys() {
    var coalescer = RefusalCoalescer(window: 1, capacity: 16)
    var written = coalescer.note(refusal("a", at: 0), now: 0)
    written += coalescer.note(refusal("b", at: 0), now: 0)
    written += coalescer.note(refusal("a", at: 0, .handleIO), now: 0)
    var locked = refusal("a", at: 0)
    locked.state = .bfu
    written += coalescer.note(locked, now: 0)
    written += coalescer.note(refusal("a", at: 0), now: 0)
    #expect(written.count == 4)
    #expect(coalescer.drain().map(\.count) == [1])
  }

  @Test("a refusal after its window closed, before the timer ran, comes after the window's event")
  func lateTimer() {
    var coalescer = RefusalCoalescer(window: 1, capacity: 16)
    _ = coalescer.note(refusal("a", at: 0), now: 0)
    _ = coalescer.note(refusal("a", at: 0.5), now: 0.5)
    _ = coalescer.note(refusal("a", at: 0.6), now: 0.6)
    let written = coalescer.note(refusal("a", at: 2), now: 2)
    #expect(written.map(\.count) == [2, 1])
    #expect(written.map(\.time) == [0.5, 2])
    #expect(coalescer.expire(now: 2.5).isEmpty && coalescer.nextClosing == 3)
  }

  @Test("beyond its windows it writes at once; a zero window coalesces nothing")
  func limits() {
    var full = RefusalCoalescer(window: 1, capacity: 2)
    #expect(full.note(refusal("a", at: 0), now: 0).count == 1)
    #expect(full.note(refusal("b", at: 0), now: 0).count == 1)
    #expect(full.note(refusal("c", at: 0), now: 0).count == 1)
    #expect(full.note(refusal("c", at: 0), now: 0).count == 1, "no window for c")
    #expect(full.note(refusal("a", at: 0), now: 0).isEmpty)
    var off = RefusalCoalescer(window: 0, capacity: 16)
    for _ in 0..<3 { #expect(off.note(refusal("a", at: 0), now: 0).count == 1) }
    #expect(off.drain().isEmpty)
  }
}
