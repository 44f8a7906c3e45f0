import Posix

#if canImport(Glibc)
  import Glibc
#endif

/// Copies a regular file's bytes to another at the same offsets, its data only: the holes
/// (found with `SEEK_DATA` and `SEEK_HOLE`) stay holes, so a sparse file stays sparse in a
/// backup and again when restored. Where the filesystem cannot tell holes, the whole file
/// is data.
enum SparseCopy {
  /// What a copy did.
  struct Result: Equatable {
    /// The bytes from the start that the copy holds: the count asked for, or fewer when the
    /// source ended sooner (the copy's size).
    var covered: Int64
    /// The bytes of data copied; the rest of `covered` is holes.
    var data: Int64
    /// The source held more data than `dataLimit` allowed: the copy stopped before the
    /// run of data that would have gone over it, and is incomplete.
    var overLimit = false
  }

  /// `ENXIO`: `SEEK_DATA` found no data at or after the offset.
  private static let noData = Errno(rawValue: ENXIO)

  /// Copies bytes `0..<count` of `source` to `out` (both opened for it; `out` empty or
  /// truncated), data only, and gives `out` the size of what the copy covers.
  /// - Parameters:
  ///   - allocated: the source's allocated bytes (`st_blocks * 512`), when known: a file
  ///     with as many allocated bytes as it has bytes has no hole to look for, and is
  ///     copied without seeking (most small files).
  ///   - dataLimit: the most bytes of data the copy may write (what a restore counted
  ///     before it began): a run of data that would go over it is not copied, and the
  ///     result is ``Result/overLimit`` (a source that grew or had its holes filled
  ///     meanwhile never writes more than was counted).
  static func copy(from source: Int32, to out: Int32, count: Int64, allocated: Int64? = nil, dataLimit: Int64? = nil)
    throws(Errno) -> Result
  {
    if let allocated, allocated >= count, dataLimit.map({ count <= $0 }) ?? true {
      let moved = try copyRange(from: source, to: out, at: 0, count: Int(count))
      return Result(covered: moved, data: moved)
    }
    var result = Result(covered: count, data: 0)
    var offset: Int64 = 0
    while offset < count {
      guard let extent = try nextExtent(source, from: offset, before: count) else { break }
      if let dataLimit, Int64(extent.count) > dataLimit - result.data {
        result.overLimit = true
        result.covered = extent.lowerBound
        break
      }
      let moved = try copyRange(from: source, to: out, at: extent.lowerBound, count: extent.count)
      result.data += moved
      if moved < Int64(extent.count) {  // the file ended sooner
        result.covered = extent.lowerBound + moved
        break
      }
      offset = extent.upperBound
    }
    try Sys.ftruncate(out, off_t(result.covered))
    return result
  }

  /// The bytes of data in the first `count` bytes of `fd` (what a copy writes).
  static func dataBytes(_ fd: Int32, count: Int64) throws(Errno) -> Int64 {
    try measure(fd, count: count, blockSize: 512).data
  }

  /// What a copy of the first `count` bytes of `fd` writes, as a filesystem of
  /// `blockSize` blocks allocates it.
  struct Measure: Equatable {
    /// Bytes of data (holes left out).
    var data: Int64 = 0
    /// The blocks the runs of data take, each run from the block its first byte falls in
    /// to the block its last byte falls in.
    var blocks: Int64 = 0
    /// Extents as ext4 records them: a run of data, cut every 128 MiB (the longest extent).
    var extents: Int64 = 0
  }

  /// The longest extent ext4 records (32,768 blocks of 4 KiB).
  static let longestExtent: Int64 = 128 << 20

  /// Measures the data of the first `count` bytes of `fd` (``Measure``).
  static func measure(_ fd: Int32, count: Int64, blockSize: Int64) throws(Errno) -> Measure {
    var measure = Measure()
    var offset: Int64 = 0
    while offset < count, let extent = try nextExtent(fd, from: offset, before: count) {
      let length = Int64(extent.count)
      measure.data.addSaturating(length)
      let first = extent.lowerBound / blockSize
      let last = (extent.upperBound - 1) / blockSize
      measure.blocks.addSaturating(last - first + 1)
      measure.extents.addSaturating((length - 1) / longestExtent + 1)
      offset = extent.upperBound
    }
    return measure
  }

  /// The next run of data at or after `offset`, cut at `end`; nil when only holes follow.
  private static func nextExtent(_ fd: Int32, from offset: Int64, before end: Int64) throws(Errno) -> Range<Int64>? {
    let start: Int64
    do throws(Errno) {
      start = Int64(try Sys.lseek(fd, off_t(offset), Linux.seekData))
    } catch  where error == noData {
      return nil  // holes to the end of the file (or the file ends here)
    } catch  where error == .invalidArgument || error == .notSupported {
      return offset..<end  // no hole support: all data
    }
    guard start < end else { return nil }
    let stop: Int64
    do throws(Errno) {
      stop = min(Int64(try Sys.lseek(fd, off_t(start), Linux.seekHole)), end)
    } catch  where error == noData {
      return nil  // the file shrank meanwhile
    }
    return start..<max(stop, start + 1)
  }

  /// Copies `count` bytes at `start` to the same offset; fewer when the source ends sooner.
  private static func copyRange(from source: Int32, to out: Int32, at start: Int64, count: Int) throws(Errno) -> Int64 {
    var done: Int64 = 0
    while done < Int64(count) {
      let chunk = Int(min(Int64(count) - done, 1 << 30))
      let moved: Int
      do throws(Errno) {
        moved = try Sys.copyFileRange(source, off_t(start + done), out, off_t(start + done), chunk, 0)
      } catch
        where error == .crossDevice || error == .notImplemented || error == .invalidArgument
        || error == .notSupported
      {
        return try done + readWrite(from: source, to: out, at: start + done, count: Int64(count) - done)
      }
      if moved == 0 { break }
      done += Int64(moved)
    }
    return done
  }

  private static func readWrite(from source: Int32, to out: Int32, at start: Int64, count: Int64) throws(Errno)
    -> Int64
  {
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
    defer { buffer.deallocate() }
    var done: Int64 = 0
    while done < count {
      let read = try Sys.pread(
        source, UnsafeMutableRawBufferPointer(rebasing: buffer[..<Int(min(count - done, 1 << 20))]), off_t(start + done)
      )
      if read == 0 { break }
      var written = 0
      while written < read {
        written += try Sys.pwrite(
          out, UnsafeRawBufferPointer(rebasing: buffer[written..<read]), off_t(start + done) + off_t(written))
      }
      done += Int64(read)
    }
    return done
  }
}
