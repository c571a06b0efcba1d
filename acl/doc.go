// Package acl reads an access control file for application topics in
// mosquitto's acl_file syntax and answers whether a connection may read
// (subscribe to, or receive) or write (publish to) a topic.
//
// The file, line by line (blank lines and lines starting with # are
// ignored, leading and trailing spaces too):
//
//	topic [read|write|readwrite|deny] <topic>    a rule (readwrite if no access is given)
//	user <username>                              the topic lines after it are that user's
//	pattern [read|write|readwrite|deny] <topic>  a rule for every connection: %u is the user, %c the client id
//
// The topic lines before the first user line are the anonymous
// connections'. A topic may hold spaces (it runs to the end of the line)
// (then its access must be given: "topic reed a/b" is an error, not the
// topic "reed a/b") and MQTT's wildcards + and #. A pattern with %u does not apply to an
// anonymous connection, and a pattern whose %u or %c would bring in a + or
// a # applies to nobody.
//
// A topic name is allowed when no deny rule of the connection matches it
// and some rule granting the access does. A subscription filter is allowed
// when no deny rule covers it and some read rule covers it: every topic the
// filter can match must be one the rule matches (so a rule for users/%u/#
// allows users/alice/+ to alice, and not users/+/x). The broker checks
// every delivery again with its topic name.
//
// As in mosquitto, the file grants: what it does not name is refused.
package acl
