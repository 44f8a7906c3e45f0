/// The moments of a backup or a restore at which a racing user would strike, where a
/// test acts as one (swaps a directory for a symlink, fills a file's holes): the race
/// made deterministic. None is set outside the tests.
struct EngineHooks {
  /// The staging directory is made and open; its path is given.
  var stagingMade: ((String) -> Void)?
  /// A backup's `Manifest.db` is written and committed, before anything checks it; the
  /// staging directory's path is given.
  var databaseWritten: ((String) -> Void)?
  /// A restore's first pass is done (every record and file checked, the space counted)
  /// and nothing is written yet.
  var checked: (() -> Void)?
}
