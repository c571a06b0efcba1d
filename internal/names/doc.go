// Package names gives the few names a process sees again and again on
// every connection (its listeners' ids, its nodes' names) one-byte codes,
// so that a record kept per session can hold a code instead of a 16-byte
// string header (issue 23).
//
// The table is one for the process, append-only and bounded: it holds at
// most Max names, the first ones asked for; a name that finds it full has
// no code, and whoever asked keeps the name as it is. Code 0 is the empty
// name. Reads take no lock.
package names
