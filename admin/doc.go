// Package admin is the operators' HTTP API of a presenced node: health,
// readiness, a user's presence (the retained payload, byte for byte), a
// user's sessions with their end reasons, and every counter. An embedding
// program can mount Handler in its own mux, behind a Token and a Site
// (which refuses what only a web page sends: cross-site writes, and a
// foreign Host, DNS rebinding).
package admin
