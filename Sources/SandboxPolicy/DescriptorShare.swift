/// The daemon holds a descriptor for each inode the kernel holds and for each open
/// handle, and the kernel holds every ancestor of a process's working directory for as
/// long as the process sits there: one user's processes could take every descriptor (a
/// working directory 20,000 levels deep, or files held open), and the mount's owner and
/// root would get `EMFILE`. So a share is kept for them: a request of anyone else may not
/// leave the daemon holding more than seven eighths of its inode budget, nor of its
/// descriptors (docs/architecture.md, "Descriptors").
public enum DescriptorShare {
  /// The most inodes (or descriptors) a request of this caller may leave the daemon holding.
  /// - Parameters:
  ///   - budget: the inodes (or descriptors) the daemon may hold at all.
  ///   - isOwnerOrRoot: whether the caller is root or the mount's owner.
  public static func limit(budget: Int, isOwnerOrRoot: Bool) -> Int {
    isOwnerOrRoot ? budget : budget - budget / 8
  }
}
