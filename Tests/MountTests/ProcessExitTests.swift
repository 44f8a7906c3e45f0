import Posix
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `appbox unmount` and the mount tests wait for a daemon through `Spawn.waitForExit`:
/// a process that has exited counts as gone even before its parent reaps it.
@Suite("Process exit")
struct ProcessExitTests {
  @Test("a zombie has exited; a live process has not; a reaped one is gone")
  func zombieRunningReaped() throws {
    let sleeper = try Spawn.start("/bin/sleep", ["sleep", "30"])
    #expect(Spawn.isRunning(sleeper))
    #expect(!Spawn.waitForExit(sleeper, milliseconds: 50))
    #expect(kill(sleeper, SIGKILL) == 0)
    #expect(Spawn.waitForExit(sleeper, milliseconds: 10_000))
    // Not reaped yet: kill(pid, 0) still finds the zombie, which is what made an unmount
    // wait for init.
    #expect(kill(sleeper, 0) == 0)
    #expect(!Spawn.isRunning(sleeper))
    #expect(Spawn.wait(sleeper) == 128 + SIGKILL)
    #expect(Spawn.waitForExit(sleeper, milliseconds: 0))
  }
}
