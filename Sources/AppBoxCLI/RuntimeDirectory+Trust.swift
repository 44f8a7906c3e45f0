import Posix

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Opening a runtime directory only where no one else can have put it

extension RuntimeDirectory {
  /// What ``open(_:for:create:)`` found.
  enum Opening {
    /// A directory of the user's that no one else may write, below directories that only
    /// root and the user can change: opened.
    case opened(RuntimeDirectory)
    /// No such directory (or a directory on its path is missing).
    case missing
    /// Something is there that is not such a directory: what (for messages).
    case unsafe(String)
    /// A directory on its path may be changed by someone else, so whatever is at the path
    /// may have been put there by them: which, and why.
    case unsafeParent(String)
  }

  /// Opens the directory at `path` (absolute) as `uid`'s runtime directory, creating it
  /// (0700) first when `create` is set, as sshd's StrictModes judges a user's files: each
  /// directory from `/` down to it belongs to root or `uid`, and one that others may write
  /// has the sticky bit (so that no one else can rename or remove what root or `uid` put
  /// in it, as in `/tmp`); the directory itself is a real directory (not a symlink) that
  /// `uid` owns and no one else may write. The path is resolved once (`realpath`) and
  /// then walked a component at a time with `openat(O_NOFOLLOW)`, each component checked
  /// through its own descriptor; the last descriptor is kept. One only others may read or
  /// search is made private when `create` is set (the user's own).
  /// - Throws: when a directory on the way cannot be opened or looked at for another
  ///   reason than its absence.
  static func open(_ path: String, for uid: uid_t, create: Bool) throws(CLIError) -> Opening {
    let slash = path.lastIndex(of: "/") ?? path.startIndex
    let name = String(path[path.index(after: slash)...])
    guard path.hasPrefix("/"), !name.isEmpty, name != ".", name != ".." else {
      return .unsafe("not an absolute path to a directory")
    }
    let parentPath = String(path[..<slash])
    let resolved: String
    do { resolved = try Sys.realpath(parentPath.isEmpty ? "/" : parentPath) } catch {
      if error == .noEntry || error == .notDirectory { return .missing }
      throw CLIError(.osError, "cannot resolve \(parentPath): \(error)")
    }
    var parent: Int32
    var parentStatus: stat
    do {
      parent = try Sys.openat(AT_FDCWD, "/", Linux.openPath | O_DIRECTORY | O_CLOEXEC)
      parentStatus = try Sys.fstat(parent)
    } catch {
      throw CLIError(.osError, "cannot open /: \(error)")
    }
    if let why = Self.untrusted(root: parentStatus, for: uid) {
      Sys.close(parent)
      return .unsafeParent("/ \(why)")
    }
    var walked = ""
    for component in resolved.split(separator: "/").map(String.init) {
      walked += "/" + component
      let child: Int32
      let childStatus: stat
      do {
        child = try Sys.openat(parent, component, Linux.openPath | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
      } catch {
        Sys.close(parent)
        // Changed since it was resolved (a symlink, or gone): not a path to rely on.
        if error == .noEntry { return .missing }
        if error == .notDirectory || error == .tooManySymlinks {
          return .unsafeParent("\(walked) changed while checked")
        }
        throw CLIError(.osError, "cannot open \(walked): \(error)")
      }
      do { childStatus = try Sys.fstat(child) } catch {
        Sys.close(child)
        Sys.close(parent)
        throw CLIError(.osError, "cannot look at \(walked): \(error)")
      }
      Sys.close(parent)
      if let why = Self.untrusted(childStatus, in: parentStatus, for: uid) {
        Sys.close(child)
        return .unsafeParent("\(walked) \(why)")
      }
      parent = child
      parentStatus = childStatus
    }
    defer { Sys.close(parent) }
    // The directory itself: not in a directory where others could replace it.
    if let why = Self.openToOthers(parentStatus) {
      return .unsafeParent("\(resolved) \(why)")
    }
    if create {
      do { try Sys.mkdirat(parent, name, 0o700) } catch  where error != .exists {
        if error == .noEntry { return .missing }
        throw CLIError(.osError, "cannot create the runtime directory \(path): \(error)")
      } catch {}
    }
    let fd: Int32
    do { fd = try Sys.openat(parent, name, Linux.openPath | O_NOFOLLOW | O_CLOEXEC) } catch {
      if error == .noEntry { return .missing }
      throw CLIError(.osError, "cannot open the runtime directory \(path): \(error)")
    }
    let st: stat
    do { st = try Sys.fstat(fd) } catch {
      Sys.close(fd)
      throw CLIError(.osError, "cannot read the runtime directory \(path): \(error)")
    }
    if let why = Self.unsafe(st, for: uid) {
      Sys.close(fd)
      return .unsafe(why)
    }
    if create, st.st_mode & 0o077 != 0 {
      do { try Sys.chmod(fd, 0o700) } catch {
        Sys.close(fd)
        throw CLIError(.osError, "cannot make the runtime directory \(path) private: \(error)")
      }
    }
    return .opened(RuntimeDirectory(path: path, fd: fd, owner: uid))
  }

  // MARK: The rules

  /// Why the root directory, with status `root`, may have been changed by someone other
  /// than `uid` and root; nil when it cannot.
  static func untrusted(root: stat, for uid: uid_t) -> String? {
    if root.st_uid != 0 && root.st_uid != uid { return "is owned by uid \(root.st_uid)" }
    if root.st_mode & 0o022 != 0 { return "is writable by others" }
    return nil
  }

  /// Why the directory with status `child`, an entry of the directory with status
  /// `parent`, may have been put or changed there by someone other than `uid` and root;
  /// nil when it cannot: it belongs to root or `uid`, and its parent is writable only by
  /// its owner (already judged), or by others but sticky, so that only root, the parent's
  /// owner and the child's owner can rename or remove it.
  static func untrusted(_ child: stat, in parent: stat, for uid: uid_t) -> String? {
    if child.st_mode & S_IFMT != S_IFDIR { return "is not a directory" }
    if child.st_uid != 0 && child.st_uid != uid { return "is owned by uid \(child.st_uid)" }
    if let why = openToOthers(parent) { return "is in a directory that \(why)" }
    return nil
  }

  /// Why others than its owner may rename or remove entries of the directory with status
  /// `directory`: it is writable by its group or by anyone, without the sticky bit. Nil
  /// when they may not.
  static func openToOthers(_ directory: stat) -> String? {
    guard directory.st_mode & 0o022 != 0, directory.st_mode & S_ISVTX == 0 else { return nil }
    return "others may write (mode \(String(directory.st_mode & 0o7777, radix: 8)), not sticky)"
  }

  /// Why the runtime directory with status `st` is not one `uid` may use; nil when it is:
  /// a real directory that `uid` owns and no one else may write (writable by others once,
  /// what it holds may have been put there by them). Its parent is judged apart
  /// (``openToOthers(_:)``).
  static func unsafe(_ st: stat, for uid: uid_t) -> String? {
    switch st.st_mode & S_IFMT {
    case S_IFDIR: break
    case S_IFLNK: return "a symlink"
    default: return "not a directory"
    }
    if st.st_uid != uid { return "owned by uid \(st.st_uid)" }
    if st.st_mode & 0o022 != 0 { return "writable by others (mode \(String(st.st_mode & 0o7777, radix: 8)))" }
    return nil
  }
}
