// Header-only target: see include/CPosixShim.h.
