/// Event logs for the report tests, as the daemon writes them.
enum ReportFixtures {
  /// A mount's log: samples, a pressure purge of two Caches files and a tmp file, a
  /// re-fetch (missed lookup, then re-creation), a missed lookup never re-created, a
  /// shrink, a lock with a refusal, ENOSPC counted between samples, and the unmount.
  static let log = """
    {"type":"usage","time":1000.0,"used":8192,"capacity":4194304,"caches":0,"tmp":0,"purges":0,"bytesPurged":0,"noSpace":0,"state":"UNLOCKED","reason":"mount"}
    {"type":"usage","time":1001.0,"used":3145728,"capacity":4194304,"caches":2097152,"tmp":1048576,"purges":0,"bytesPurged":0,"noSpace":0,"state":"UNLOCKED","reason":"interval"}
    {"type":"purge","time":1002.0,"path":"tmp/scratch","bytes":1048576,"domain":"tmp","reason":"pressure","lastUse":1000.5}
    {"type":"purge","time":1002.1,"path":"Library/Caches/a","bytes":1048576,"domain":"caches","reason":"pressure","lastUse":1000.6}
    {"type":"purge","time":1002.2,"path":"Library/Caches/<b>","bytes":524288,"domain":"caches","reason":"pressure","lastUse":1000.7}
    {"type":"missed","time":1003.0,"path":"Library/Caches/a","purgedBytes":1048576,"secondsSincePurge":0.9}
    {"type":"recreated","time":1003.1,"path":"Library/Caches/a","purgedBytes":1048576,"secondsSincePurge":1.0}
    {"type":"missed","time":1003.5,"path":"Library/Caches/<b>","purgedBytes":524288,"secondsSincePurge":1.3}
    {"type":"capacity","time":1004.0,"from":4194304,"to":2097152,"reason":"resize"}
    {"type":"purge","time":1004.0,"path":"Library/Caches/c","bytes":262144,"domain":"caches","reason":"shrink","lastUse":1001.0}
    {"type":"usage","time":1004.0,"used":2000000,"capacity":2097152,"caches":1000000,"tmp":0,"purges":4,"bytesPurged":2883584,"noSpace":0,"state":"UNLOCKED","reason":"capacity"}
    {"type":"state","time":1005.0,"from":"UNLOCKED","to":"GRACE"}
    {"type":"state","time":1006.0,"from":"GRACE","to":"LOCKED"}
    {"type":"refusal","time":1006.5,"path":"Documents/secret","class":"complete","operation":"openExisting","state":"LOCKED"}
    {"type":"usage","time":1007.0,"used":2097152,"capacity":2097152,"caches":1000000,"tmp":0,"purges":4,"bytesPurged":2883584,"noSpace":3,"state":"LOCKED","reason":"interval"}
    {"type":"state","time":1008.0,"from":"LOCKED","to":"UNLOCKED"}
    {"type":"usage","time":1010.0,"used":2097152,"capacity":2097152,"caches":1000000,"tmp":0,"purges":4,"bytesPurged":2883584,"noSpace":5,"state":"UNLOCKED","reason":"unmount"}
    """
}
