import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Real, unmodified programs (sqlite3, git, tar, rsync, python3) working on the mount as
/// they would on a local directory. The sandboxes start UNLOCKED: these tests are about
/// POSIX compatibility, not Data Protection (in BFU the default class refuses everything).
@Suite("Real programs on the mount", .needsFUSE, .timeLimit(.minutes(10)))
struct RealProgramTests {
  // MARK: - sqlite3

  @Test("sqlite3: 10,000 rows in one transaction, integrity_check ok")
  func sqliteBulkInsert() throws {
    let fixture = try MountFixture(arguments: ["--unlocked"])
    let database = fixture.path("Library/Application Support/store.sqlite")
    var sql =
      "PRAGMA journal_mode=DELETE;\nCREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL, payload BLOB);\n"
    sql += "CREATE INDEX items_name ON items(name);\nBEGIN;\n"
    for row in 0..<10_000 {
      sql += "INSERT INTO items(name, payload) VALUES('item-\(row)', randomblob(\(row % 200 + 1)));\n"
    }
    sql += "COMMIT;\nPRAGMA integrity_check;\nSELECT count(*), sum(length(payload)) FROM items;\n"
    let result = try Command.run("sqlite3", ["-batch", "-bail", database], input: Data(sql.utf8))
    #expect(result.status == 0, "sqlite3: \(result.error)")
    // journal_mode, integrity_check, count|sum(payload lengths = 50 × (1+…+200)).
    #expect(result.output.split(separator: "\n") == ["delete", "ok", "10000|1005000"], "\(result.output)")

    // A fresh connection sees the committed data and a clean file (no leftover journal).
    let reread = try Command.run(
      "sqlite3", ["-batch", database, "PRAGMA integrity_check; SELECT count(*) FROM items WHERE name LIKE 'item-99%';"])
    #expect(reread.output.split(separator: "\n") == ["ok", "111"], "\(reread.output) \(reread.error)")
    #expect(!FileManager.default.fileExists(atPath: database + "-journal"))
    try fixture.unmount()
  }

  @Test("sqlite3: WAL mode with a second connection reading while the first writes")
  func sqliteWAL() throws {
    let fixture = try MountFixture(arguments: ["--unlocked"])
    let directory = fixture.path("Library/Application Support")
    // The second connection is a separate sqlite3 process started by `.system` while the
    // first one holds an open write transaction: WAL lets it read the last committed state
    // (through the shared-memory index, an mmap of store.db-shm on the mount).
    let script = """
      PRAGMA journal_mode=WAL;
      CREATE TABLE t(x INTEGER);
      WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 1000) INSERT INTO t SELECT n FROM c;
      BEGIN;
      INSERT INTO t VALUES (1001);
      .system sqlite3 -batch store.db "SELECT 'reader-during', count(*) FROM t;"
      COMMIT;
      .system sqlite3 -batch store.db "SELECT 'reader-after', count(*), sum(x) FROM t; PRAGMA journal_mode;"
      .system test -s store.db-wal && echo wal-file-present
      PRAGMA wal_checkpoint(TRUNCATE);
      PRAGMA integrity_check;

      """
    let result = try Command.run(
      "sqlite3", ["-batch", "-bail", "store.db"], input: Data(script.utf8), directory: directory)
    #expect(result.status == 0, "sqlite3: \(result.error)")
    #expect(
      result.output.split(separator: "\n") == [
        "wal", "reader-during|1000", "reader-after|1001|501501", "wal", "wal-file-present", "0|0|0", "ok",
      ], "\(result.output)")
    // After the last connection closes, the WAL is checkpointed and removed.
    #expect(!FileManager.default.fileExists(atPath: directory + "/store.db-wal"))
    let check = try Command.run(
      "sqlite3", ["-batch", directory + "/store.db", "PRAGMA integrity_check; SELECT count(*) FROM t;"])
    #expect(check.output.split(separator: "\n") == ["ok", "1001"], "\(check.output) \(check.error)")
    try fixture.unmount()
  }

  // MARK: - git

  @Test("git: init, add, commit, status clean, gc, fsck, log")
  func git() throws {
    let fixture = try MountFixture(arguments: ["--unlocked"])
    let home = fixture.root + "/home"
    try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
    let output = try Command.shell(
      """
      export HOME=\(quoted(home)) GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=Tester GIT_AUTHOR_EMAIL=t@example.com \
        GIT_COMMITTER_NAME=Tester GIT_COMMITTER_EMAIL=t@example.com
      git init -q -b main repo
      cd repo
      mkdir -p src/nested docs
      for i in $(seq 1 200); do printf 'line %s\\n' $(seq 1 $i) > src/file$i.txt; done
      head -c 300000 /dev/urandom > docs/blob.bin
      printf '#!/bin/sh\\necho hello\\n' > run.sh && chmod 755 run.sh
      ln -s src/file1.txt link
      echo nested > src/nested/n.txt
      git add -A
      git commit -q -m "Initial commit on AppBox"
      test -z "$(git status --porcelain)"
      echo more >> src/file2.txt && git mv src/file3.txt src/renamed.txt && git rm -q src/file4.txt
      git commit -q -am "Second commit"
      test -z "$(git status --porcelain)"
      git gc -q --aggressive --prune=now
      git fsck --full --strict --no-progress
      test -z "$(git status --porcelain)"
      git count-objects -v | grep -E '^(count|in-pack|packs):'
      git log --format=%s
      git ls-files | wc -l
      git cat-file -p HEAD:run.sh
      git ls-tree HEAD run.sh link | cut -c1-6
      """, directory: fixture.path("Documents"))
    let lines = output.split(separator: "\n").map(String.init)
    #expect(lines.contains("count: 0"), "all loose objects packed: \(output)")
    #expect(lines.contains("packs: 1"), "\(output)")
    #expect(
      Array(lines.suffix(7)) == [
        "Second commit", "Initial commit on AppBox", "203", "#!/bin/sh", "echo hello", "120000", "100755",
      ], "\(output)")
    // A clone out of the mount is identical.
    let clone = fixture.root + "/clone"
    try Command.shell(
      "export HOME=\(quoted(home)); git clone -q \(quoted(fixture.path("Documents/repo"))) \(quoted(clone)) && cd \(quoted(clone)) && git fsck --full --no-progress"
    )
    #expect(
      try TreeComparison(compareXattrs: false).differences(fixture.path("Documents/repo/src"), clone + "/src").isEmpty)
    try fixture.unmount()
  }

  // MARK: - tar

  @Test("tar: a source tree of thousands of files extracts byte-identical, with symlinks, hard links, modes, xattrs")
  func tarRoundTrip() throws {
    let fixture = try MountFixture(arguments: ["--unlocked"])
    let work = fixture.root + "/work"
    let source = work + "/source"
    // A real tree: python's standard library and /usr/share/doc without its largest files
    // (whichever exist; ~6,000 entries here), plus the cases a copied tree may lack.
    try Command.shell(
      """
      mkdir -p \(quoted(source))
      cd \(quoted(source))
      stdlib=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])' 2>/dev/null || true)
      if [ -n "$stdlib" ] && [ -d "$stdlib" ]; then
        mkdir -p python && (cd "$stdlib" && tar -cf - --exclude=site-packages --exclude=__pycache__ .) | tar -xf - -C python
      fi
      if [ -d /usr/share/doc ]; then rsync -a --max-size=256k /usr/share/doc/ doc/; fi
      mkdir -p special/dir-0700 special/setgid special/sticky special/empty-dir
      chmod 0700 special/dir-0700; chmod 2775 special/setgid; chmod 1777 special/sticky
      echo secret > special/dir-0700/f
      : > special/empty-file
      printf 'ro' > special/readonly && chmod 0444 special/readonly
      printf '#!/bin/sh\\n' > special/exec && chmod 0755 special/exec
      printf 'x' > special/mode-0604 && chmod 0604 special/mode-0604
      truncate -s 5M special/sparse && printf 'end' >> special/sparse
      head -c 3000000 /dev/urandom > special/random.bin
      ln special/random.bin special/random-hardlink
      ln special/exec special/setgid/exec-hardlink
      ln -s ../special/exec special/rel-link
      ln -s /nonexistent/absolute special/abs-link
      ln -s dangling special/dangling-link
      ln -s dir-0700 special/dir-link
      name=$(printf 'n%.0s' $(seq 1 250)); echo long > "special/$name"
      echo latin1 > "special/caf$(printf '\\351')"
      setfattr -n user.origin -v tar-test special/random.bin
      setfattr -n user.dir -v 0x0001ff special/setgid
      touch -d '2001-02-03 04:05:06' special/exec special/setgid
      """)
    let fileCount = try Command.shell("find \(quoted(source)) -type f | wc -l")
    let files = Int(fileCount.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    #expect(files >= 1000, "the source tree should have thousands of files, has \(files)")

    let archive = work + "/tree.tar"
    let onMount = fixture.path("Documents/extracted")
    let local = work + "/extracted-local"
    try Command.shell(
      """
      tar --xattrs --xattrs-include='user.*' -cf \(quoted(archive)) -C \(quoted(source)) .
      mkdir \(quoted(onMount)) \(quoted(local))
      tar --xattrs --xattrs-include='user.*' -xpf \(quoted(archive)) -C \(quoted(onMount))
      tar --xattrs --xattrs-include='user.*' -xpf \(quoted(archive)) -C \(quoted(local))
      test "$(cat \(quoted(onMount))/special/caf$(printf '\\351'))" = latin1
      """)

    // The same archive extracted on the mount and locally: everything tar restores agrees,
    // including owners, mtimes, hard-link groups and user.* attributes.
    // (AppBox's own `user.appbox.` attributes are left to the rsync and differential tests.)
    var strict = TreeComparison(compareOwner: true, compareMtime: true)
    strict.xattrFilter = { $0.starts(with: Array("user.".utf8)) && !XattrNames.isAppBoxInternal($0) }
    let againstLocal = try strict.differences(local, onMount)
    #expect(againstLocal.isEmpty, "mount vs local extraction:\n\(againstLocal.joined(separator: "\n"))")

    // And against the original tree: contents, modes, symlinks, links (tar stores whole
    // seconds, so mtimes are not compared here).
    var loose = TreeComparison()
    loose.xattrFilter = strict.xattrFilter
    let againstSource = try loose.differences(source, onMount)
    #expect(againstSource.isEmpty, "mount vs source:\n\(againstSource.joined(separator: "\n"))")

    // Archiving out of the mount reproduces the tree too (readdir, read, readlink, listxattr).
    let back = work + "/back"
    try Command.shell(
      """
      mkdir \(quoted(back))
      tar --xattrs --xattrs-include='user.*' -cf - -C \(quoted(onMount)) . | tar --xattrs --xattrs-include='user.*' -xpf - -C \(quoted(back))
      """)
    let roundTrip = try strict.differences(local, back)
    #expect(roundTrip.isEmpty, "tar out of the mount:\n\(roundTrip.joined(separator: "\n"))")
    try fixture.unmount()
  }

  // MARK: - rsync

  @Test("rsync -aHAX: local → mount → local keeps contents, hard links, symlinks, xattrs, modes")
  func rsyncThroughMount() throws {
    let fixture = try MountFixture(arguments: ["--unlocked"])
    let source = fixture.root + "/rsync-source"
    let out = fixture.root + "/rsync-out"
    try makeRsyncTree(at: source)
    let onMount = fixture.path("Documents/a")
    try Command.shell(
      """
      rsync -aHAX \(quoted(source))/ \(quoted(onMount))/
      rsync -aHAX \(quoted(onMount))/ \(quoted(out))/
      """)
    var comparison = TreeComparison(compareOwner: true, compareMtime: true)
    comparison.xattrFilter = { $0.starts(with: Array("user.".utf8)) }
    for (label, tree) in [("mount", onMount), ("out", out)] {
      let problems = try comparison.differences(source, tree)
      #expect(problems.isEmpty, "source vs \(label):\n\(problems.joined(separator: "\n"))")
    }
    // The hard-link structure in plain words, as getfattr and ls would see it.
    let snapshot = try comparison.snapshot(out)
    #expect(snapshot[TreePath("one")]?.nlink == 3 && snapshot[TreePath("sub/one-again")]?.linkGroup == "one")
    #expect(snapshot[TreePath("sub/deep/two-b")]?.linkGroup == "sub/deep/two-a")
    #expect(snapshot[TreePath("sub/deep/two-b")]?.xattrs?[Array("user.binary".utf8)] == [0, 1, 2, 0xFF])
    let dump = { (tree: String) throws -> String in
      try Command.shell("cd \(quoted(tree)) && getfattr -h -R -d -m '^user\\.' -e hex . | grep -v '^$' | sort")
    }
    #expect(try dump(source) == dump(out))
    #expect(try dump(source) == dump(onMount))
    // An incremental rerun finds nothing to transfer.
    let rerun = try Command.shell("rsync -aHAXi \(quoted(source))/ \(quoted(onMount))/")
    #expect(rerun.isEmpty, "rsync should see the mount copy as up to date: \(rerun)")
    try fixture.unmount()
  }

  @Test(
    "rsync -aHAX: mount → mount keeps Apple's backup-exclusion attribute names",
    .enabled(if: geteuid() == 0, "rsync copies non-user.* attribute names only as root"))
  func rsyncKeepsAppleNames() throws {
    let fixture = try MountFixture(arguments: ["--unlocked"])
    let a = fixture.path("Documents/a")
    let b = fixture.path("Documents/b")
    try makeRsyncTree(at: a)
    let excludeValue =
      "0x62706c6973743030d101025f10116261636b7570642d6578636c75646564080b1f0000000000000101000000000000000300000000000000000000000000000020"
    try Command.shell(
      """
      cd \(quoted(a))
      setfattr -n com.apple.MobileBackup -v 0x01 one
      setfattr -n com.apple.MobileBackup -v 0x01 sub/deep
      setfattr -n com.apple.metadata:com_apple_backup_excludeItem -v \(excludeValue) sub
      rsync -aHAX \(quoted(a))/ \(quoted(b))/
      """)
    let dump = { (tree: String) throws -> String in
      try Command.shell("cd \(quoted(tree)) && getfattr -h -R -d -m - -e hex . | grep -v '^$' | sort")
    }
    let copied = try dump(b)
    #expect(copied == (try dump(a)))
    #expect(copied.contains("com.apple.MobileBackup=0x01"), "\(copied)")
    #expect(copied.contains("com.apple.metadata:com_apple_backup_excludeItem=\(excludeValue)"), "\(copied)")
    // On the mount the names are Apple's, never the backing encoding.
    #expect(!copied.contains("user.appbox"), "\(copied)")
    let names = try TreeComparison.xattrs(b + "/sub/one-again").keys.map { String(decoding: $0, as: UTF8.self) }
      .sorted()
    #expect(names == ["com.apple.MobileBackup", "user.color"])
    var comparison = TreeComparison(compareMtime: true)
    comparison.compareOwner = true
    let problems = try comparison.differences(a, b)
    #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    try fixture.unmount()
  }

  /// A small tree with hard-link groups, symlinks, user.* attributes and varied modes.
  private func makeRsyncTree(at root: String) throws {
    try Command.shell(
      """
      mkdir -p \(quoted(root))/sub/deep \(quoted(root))/empty
      cd \(quoted(root))
      echo one > one
      ln one sub/one-again
      ln one sub/deep/one-third
      head -c 200000 /dev/urandom > sub/deep/two-a
      ln sub/deep/two-a sub/deep/two-b
      printf 'solo' > solo && chmod 0600 solo
      printf '#!/bin/sh\\n' > tool && chmod 0750 tool
      chmod 0711 sub/deep
      ln -s ../one sub/link-up
      ln -s deep/two-a sub/link-down
      ln -s missing dangling
      setfattr -n user.color -v blue one
      setfattr -n user.binary -v 0x000102ff sub/deep/two-a
      setfattr -n user.dir -v marked sub
      setfattr -n user.empty solo
      touch -h -d '2010-01-01 00:00:00' sub/link-up
      touch -d '1999-12-31 23:59:59' solo
      # rsync skips directory times equal to the second, so give them distinct old ones.
      find . -type d -exec touch -d '2005-05-05 05:05:05.123456789' {} +
      """)
  }

  // MARK: - python3

  @Test("python3: write, read, rename, scandir, tempfile in tmp/, copytree, json")
  func python() throws {
    let fixture = try MountFixture(arguments: ["--unlocked"])
    let script = fixture.root + "/check.py"
    try Data(Self.pythonScript.utf8).write(to: URL(fileURLWithPath: script))
    let result = try Command.run("python3", [script, fixture.mountpoint])
    #expect(result.status == 0, "python3 failed: \(result.error)")
    #expect(result.output == "ok\n", "\(result.output)\(result.error)")
    try fixture.unmount()
  }

  private static let pythonScript = #"""
    import hashlib, json, os, shutil, stat, sys, tempfile

    root = sys.argv[1]
    docs = os.path.join(root, "Documents")
    support = os.path.join(root, "Library", "Application Support")

    # Write, read back, append, seek.
    path = os.path.join(docs, "notes.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("héllo\n" * 1000)
    with open(path, "a", encoding="utf-8") as f:
        f.write("tail\n")
    with open(path, "rb") as f:
        data = f.read()
    assert data == ("héllo\n" * 1000 + "tail\n").encode(), "content"
    with open(path, "r+b") as f:
        f.seek(2)
        f.write(b"XY")
        f.seek(0)
        assert f.read(5) == b"h\xc3XYl", "r+b"
    assert os.path.getsize(path) == len(data)

    # Atomic save: temp file + os.replace over the existing file.
    config = os.path.join(support, "config.json")
    payload = {"name": "AppBox", "items": list(range(500)), "nested": {"ok": True, "pi": 3.25}}
    for round in range(3):
        payload["round"] = round
        fd, tmp = tempfile.mkstemp(dir=support, prefix=".config-", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(payload, f, indent=2)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, config)
    with open(config) as f:
        assert json.load(f) == payload, "json round trip"
    assert not [n for n in os.listdir(support) if n.startswith(".config-")], "temp files left"

    # tempfile in tmp/.
    tmpdir = os.path.join(root, "tmp")
    with tempfile.NamedTemporaryFile(dir=tmpdir) as t:
        t.write(b"x" * 100000)
        t.flush()
        assert os.stat(t.name).st_size == 100000
        name = t.name
    assert not os.path.exists(name)
    with tempfile.TemporaryDirectory(dir=tmpdir) as d:
        for i in range(20):
            with open(os.path.join(d, f"f{i}"), "wb") as f:
                f.write(os.urandom(i * 100))
        assert len(os.listdir(d)) == 20
    assert not os.path.exists(d)

    # A tree, scandir, copytree, rename of a directory, rmtree.
    src = os.path.join(docs, "tree")
    digests = {}
    for i in range(30):
        sub = os.path.join(src, f"d{i % 5}", f"e{i % 3}")
        os.makedirs(sub, exist_ok=True)
        blob = os.urandom(1000 + i * 997)
        p = os.path.join(sub, f"file{i}.bin")
        with open(p, "wb") as f:
            f.write(blob)
        digests[os.path.relpath(p, src)] = hashlib.sha256(blob).hexdigest()
    os.symlink("d0/e0", os.path.join(src, "shortcut"))
    os.chmod(os.path.join(src, "d1"), 0o750)

    with os.scandir(src) as it:
        entries = {e.name: (e.is_dir(follow_symlinks=False), e.is_symlink()) for e in it}
    assert entries == {**{f"d{i}": (True, False) for i in range(5)}, "shortcut": (False, True)}, entries

    dst = os.path.join(docs, "copy")
    shutil.copytree(src, dst, symlinks=True)
    found = {}
    for dirpath, dirnames, filenames in os.walk(dst):
        for n in filenames:
            p = os.path.join(dirpath, n)
            if os.path.islink(p):
                continue
            with open(p, "rb") as f:
                found[os.path.relpath(p, dst)] = hashlib.sha256(f.read()).hexdigest()
    assert found == digests, "copytree contents"
    assert os.readlink(os.path.join(dst, "shortcut")) == "d0/e0"
    assert stat.S_IMODE(os.stat(os.path.join(dst, "d1")).st_mode) == 0o750
    assert sorted(os.listdir(os.path.join(dst, "shortcut"))) == sorted(os.listdir(os.path.join(src, "d0", "e0")))

    # Directory renames within a domain; across domains through shutil.move (one rename,
    # as on a device); a file os.rename across domains.
    renamed = os.path.join(docs, "renamed")
    os.rename(dst, renamed)
    assert not os.path.exists(dst) and os.path.isdir(renamed)
    os.rename(os.path.join(renamed, "d2"), os.path.join(renamed, "d3", "inner"))
    assert os.path.isdir(os.path.join(renamed, "d3", "inner", "e0"))
    moved = os.path.join(support, "moved")
    shutil.move(renamed, moved)
    assert not os.path.exists(renamed) and os.path.isdir(os.path.join(moved, "d3", "inner", "e0"))
    single = os.path.join(moved, "d0", "e0", "file0.bin")
    os.rename(single, os.path.join(docs, "file0.bin"))
    with open(os.path.join(docs, "file0.bin"), "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == digests[os.path.join("d0", "e0", "file0.bin")]
    shutil.rmtree(moved)
    assert not os.path.exists(moved)

    # Renaming into the root of the container is refused (EPERM), like iOS.
    try:
        os.rename(path, os.path.join(root, "escaped.txt"))
        raise AssertionError("rename into the container root succeeded")
    except PermissionError:
        pass
    assert os.path.exists(path)

    print("ok")
    """#
}

/// `value` single-quoted for bash.
func quoted(_ value: String) -> String {
  "'" + value.replacingOccurrences(of: "'", with: "'\\''") + "'"
}
