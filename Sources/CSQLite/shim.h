// SQLite for Manifest.db (Debian's libsqlite3-dev), plus what Swift cannot import.
#ifndef APPBOX_CSQLITE_SHIM_H
#define APPBOX_CSQLITE_SHIM_H

#include <sqlite3.h>

/// SQLITE_TRANSIENT (a macro casting -1 to a function pointer): SQLite copies bound values.
static inline sqlite3_destructor_type csqlite_transient(void) { return SQLITE_TRANSIENT; }

#endif
